"""Sessions in a row on the scheduler cache's indexed snapshot (issue 19, part 1).

The cache keeps, across sessions, a node tensor refreshed only for the nodes it replaced and
a memo of quiet jobs' verdicts refilled only for the jobs it remade. After any random stream
of pod / node / PodGroup / queue events, with sessions run at every build and their binds
assumed as the scheduler does, each session must decide exactly like a session on a snapshot
converted from scratch (fresh index, tensor and memo).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler import default_config, run_session

from .test_cache_incremental import (
    NODES,
    PODS,
    SCHED,
    Clock,
    _group,
    _node,
    _pod,
    _queue,
    assumes,
    builds,
    decisions,
    forgets,
    groups,
    ops,
    pods,
)

SETUP: list[tuple[Any, ...]] = [
    ("queue", "default", 1), ("queue", "q1", 2),
    *(("node", name, True, 4) for name in NODES),
]
pod_deletes = st.tuples(st.just("delete"), st.just(CachedKind.POD), st.sampled_from(PODS))
steady = st.lists(
    st.one_of(pods, pods, pods, assumes, assumes, forgets, pod_deletes, groups, builds, builds),
    min_size=10, max_size=60,
)
"""Nodes that stay (only their pods change): the kept tensor is refreshed, not rebuilt."""


def _replay_with_sessions(stream: list[tuple[Any, ...]]) -> int:
    clock = Clock()
    cache = SchedulerCache(SCHED, clock=clock)
    live: dict[CachedKind, dict[str, dict[str, Any]]] = {k: {} for k in CachedKind}
    kind_of = {"pod": CachedKind.POD, "node": CachedKind.NODE,
               "group": CachedKind.POD_GROUP, "queue": CachedKind.QUEUE}
    make = {"pod": _pod, "node": _node, "group": _group, "queue": _queue}
    sessions = 0
    for version, op in enumerate(stream, start=1):
        if op[0] in kind_of:
            kind = kind_of[op[0]]
            obj = make[op[0]](op[1], version, *op[2:])
            key = f"ns/{op[1]}" if kind is CachedKind.POD_GROUP else op[1]
            event = "MODIFIED" if key in live[kind] else "ADDED"
            live[kind][key] = obj
            cache.on_event(kind, event, obj)
        elif op[0] == "delete":
            kind, name = op[1], op[2]
            key = f"ns/{name}" if kind is CachedKind.POD_GROUP else name
            gone = live[kind].pop(key, None)
            if gone is not None:
                cache.on_event(kind, "DELETED", gone)
        elif op[0] == "assume":
            cache.assume(op[1], op[2])
        elif op[0] == "forget":
            cache.forget(op[1])
        elif op[0] == "relist":
            cache.replace(op[1], list(live[op[1]].values()))
        elif op[0] == "tick":
            clock.now += op[1]
        else:
            built = cache.build()
            rebuilt = cache.rebuild()
            assert dict(built.pending) == rebuilt.pending
            assert built.group_jobs == rebuilt.group_jobs
            assert decisions(built) == decisions(rebuilt)
            sessions += 1
            for bind in run_session(built.snapshot, default_config()).binds:
                cache.assume(bind.task, bind.node)  # as the scheduler does after a session
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
        ("pod", "p0", True, None, None, "Pending", 1, "default"), ("build",),
        ("pod", "p1", True, None, None, "Pending", 1, "default"), ("build",), ("build",),
    ]
    assert _replay_with_sessions(stream) == 3
