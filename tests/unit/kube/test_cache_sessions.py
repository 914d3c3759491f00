"""Sessions in a row on the scheduler cache's indexed snapshot (issue 19, part 1).

The cache keeps, across sessions, a node tensor refreshed only for the nodes it replaced (and
lent to one session at a time, the columns it wrote refreshed after) and a memo of quiet jobs'
verdicts refilled only for the jobs it remade. After any random stream
of pod / node / PodGroup / queue events, with sessions run at every build and their binds
assumed as the scheduler does, each session must decide exactly like a session on a snapshot
converted from scratch (fresh index, tensor and memo).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.kube.scheduler.cache import SchedulerCache
from koordqueue.scheduler import default_config, run_session
from koordqueue.scheduler.framework import open_session, run_actions

from .cache_replay import (
    NODES,
    assumes,
    builds,
    decisions,
    edits,
    forgets,
    groups,
    ops,
    pod_deletes,
    pods,
    replay,
)

SETUP: list[tuple[Any, ...]] = [
    ("queue", "default", 1), ("queue", "q1", 2),
    *(("node", name, True, 4) for name in NODES),
]
steady = st.lists(
    st.one_of(pods, pods, pods, edits, edits, assumes, assumes, forgets, pod_deletes, groups,
              builds, builds),
    min_size=10, max_size=60,
)
"""Nodes that stay (only their pods change): the kept tensor is refreshed, not rebuilt."""


def _replay_with_sessions(stream: list[tuple[Any, ...]]) -> int:
    sessions = 0

    def session(cache: SchedulerCache) -> None:
        nonlocal sessions
        built = cache.build()
        rebuilt = cache.rebuild()
        assert dict(built.pending) == rebuilt.pending
        assert built.group_jobs == rebuilt.group_jobs
        expected = decisions(rebuilt)
        assert decisions(built) == expected  # lends the kept tensor, gives it back
        held = open_session(built.snapshot, default_config())
        run_actions(held)  # writes the lent tensor and is never closed
        assert decisions(built) == expected  # a copy, with `held`'s columns refreshed
        sessions += 1
        for bind in run_session(built.snapshot, default_config()).binds:
            cache.assume(bind.task, bind.node)  # as the scheduler does after a session

    replay(stream, session)
    return sessions


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_sessions_in_a_row_decide_like_sessions_on_a_full_rebuild(
    stream: list[tuple[Any, ...]],
) -> None:
    _replay_with_sessions(stream)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steady)
def test_sessions_on_steady_nodes_decide_like_sessions_on_a_full_rebuild(
    stream: list[tuple[Any, ...]],
) -> None:
    _replay_with_sessions([*SETUP, *stream])


def test_a_replayed_stream_runs_sessions() -> None:
    stream: list[tuple[Any, ...]] = [
        ("queue", "default", 1), ("node", "n0", True, 4),
        ("pod", "p0", True, None, None, "Pending", 1, "default", None), ("build",),
        ("pod", "p1", True, None, None, "Pending", 1, "default", None), ("build",), ("build",),
    ]
    assert _replay_with_sessions(stream) == 3
