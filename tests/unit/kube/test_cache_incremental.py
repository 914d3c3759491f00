"""The scheduler cache's incremental snapshot equals a snapshot converted from scratch.

Issue 19 (parts 1 and 5): `SchedulerCache.build` redoes only the nodes, jobs and queues that
changed since the last build; after any stream of pod / node / PodGroup / queue events
(adds, updates, deletes, relists, binds assumed and failed binds forgotten) its snapshot must
be the one a full conversion gives, and a session must decide the same on both.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler.api import TaskStatus

from .cache_replay import (
    SCHED,
    canonical,
    decisions,
    make_node,
    make_pod,
    make_queue,
    ops,
    replay,
)


def _checked(cache: SchedulerCache) -> None:
    assert canonical(cache.build()) == canonical(cache.rebuild())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_the_incremental_snapshot_equals_a_full_rebuild(stream: list[tuple[Any, ...]]) -> None:
    cache = replay(stream, _checked)
    for gates in (False, True):
        assert canonical(cache.build(gates_enabled=gates)) == canonical(
            cache.rebuild(gates_enabled=gates)
        )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_a_session_decides_the_same_on_the_incremental_snapshot(
    stream: list[tuple[Any, ...]],
) -> None:
    cache = replay(stream, _checked)
    assert decisions(cache.build()) == decisions(cache.rebuild())


def test_a_build_with_nothing_changed_hands_out_the_same_snapshot() -> None:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.NODE, "ADDED", make_node("n0", 1, True, 4))
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("default", 1, 1))
    first = cache.build()
    assert cache.build() is first
    cache.on_event(CachedKind.POD, "ADDED", make_pod("p0", 2, True, None, None, "Pending", 1,
                                                   "default"))
    second = cache.build()
    assert second is not first and second.generation > first.generation
    assert [j.name for j in second.snapshot.jobs] == ["p0"]


def test_an_unchanged_job_is_shared_between_snapshots_and_a_changed_one_is_updated_in_place(
) -> None:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.NODE, "ADDED", make_node("n0", 1, True, 4))
    for uid in ("p0", "p1"):
        cache.on_event(CachedKind.POD, "ADDED", make_pod(uid, 2, True, None, None, "Pending", 1,
                                                       "default"))
    before = {j.name: j for j in cache.build().snapshot.jobs}
    kept = before["p0"].tasks["p0"]
    cache.on_event(CachedKind.POD, "MODIFIED", make_pod("p1", 3, True, None, "n0", "Running", 1,
                                                      "default"))
    after = {j.name: j for j in cache.build().snapshot.jobs}
    assert after["p0"] is before["p0"] and after["p0"].tasks["p0"] is kept
    assert after["p1"] is before["p1"]  # the same job, its task swapped in place
    assert [(t.status, t.node_name) for t in after["p1"].tasks.values()] == [
        (TaskStatus.RUNNING, "n0")
    ]
    assert canonical(cache.build()) == canonical(cache.rebuild())
