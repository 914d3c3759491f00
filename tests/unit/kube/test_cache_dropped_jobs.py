"""Placed pods of jobs a session does not schedule still hold their nodes.

A pod of ours naming a PodGroup that does not exist has no job, and the job of a PodGroup
whose queue does not exist is dropped by the session (SPEC 3.1). Neither is scheduled, but
their bound and running pods take room: Volcano's cache adds every placed pod to its node
whatever its job, and its snapshot only leaves such jobs out. Before, the cache left the
first kind off its nodes and the session took the second off, so a 1-cpu pod was bound onto
a node with 900m free (found by tests/unit/gates/test_adapter_robustness.py). Both tests fail
without the fix (snapshot.py `_place_orphans` / full_build's orphans; session.py).
"""

from __future__ import annotations

from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler import run_session

from .cache_replay import SCHED, canonical, make_group, make_node, make_pod, make_queue


def _cache() -> SchedulerCache:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("default", 1, 1))
    cache.on_event(CachedKind.NODE, "ADDED", make_node("n0", 1, True, 2))
    newcomer = make_pod("new", 2, True, None, None, "Pending", 2, "default")
    cache.on_event(CachedKind.POD, "ADDED", newcomer)
    return cache


def _idle_cpu(cache: SchedulerCache) -> tuple[int, int]:
    """The node's free cpu in the incremental snapshot and in one converted from scratch."""
    built, rebuilt = cache.build(), cache.rebuild()
    assert canonical(built) == canonical(rebuilt)
    return built.snapshot.nodes[0].idle.milli("cpu"), rebuilt.snapshot.nodes[0].idle.milli("cpu")


def _binds(cache: SchedulerCache) -> list[str]:
    return [b.task for b in run_session(cache.build().snapshot).binds]


def test_a_bound_pod_of_a_missing_pod_group_holds_its_node_through_its_groups_life() -> None:
    cache = _cache()
    held = make_pod("held", 3, True, "g0", "n0", "Running", 1, "default")
    cache.on_event(CachedKind.POD, "ADDED", held)
    assert _idle_cpu(cache) == (1000, 1000)
    assert _binds(cache) == []  # the 2-cpu newcomer does not fit in what is left
    cache.on_event(CachedKind.POD_GROUP, "ADDED", make_group("g0", 4, 1, "default"))
    assert _idle_cpu(cache) == (1000, 1000)  # now its job's task: counted once
    cache.on_event(CachedKind.POD_GROUP, "DELETED", make_group("g0", 4, 1, "default"))
    assert _idle_cpu(cache) == (1000, 1000)
    done = make_pod("held", 5, True, "g0", "n0", "Succeeded", 1, "default")
    cache.on_event(CachedKind.POD, "MODIFIED", done)
    assert _idle_cpu(cache) == (2000, 2000)
    assert _binds(cache) == ["new"]


def test_a_bound_pod_of_a_missing_queue_holds_its_node_and_its_job_is_not_scheduled() -> None:
    cache = _cache()
    cache.on_event(CachedKind.POD_GROUP, "ADDED", make_group("g0", 3, 1, "gone"))
    cache.on_event(CachedKind.POD, "ADDED", make_pod("held", 4, True, "g0", "n0", "Running", 1,
                                                     "default"))
    cache.on_event(CachedKind.POD, "ADDED", make_pod("waits", 5, True, "g0", None, "Pending", 1,
                                                     "default"))
    assert _idle_cpu(cache) == (1000, 1000)
    result = run_session(cache.build().snapshot)
    assert result.binds == ()  # neither the newcomer (no room) nor the dropped job's pod
    assert result.warnings == ("job uid-g0 dropped: queue gone does not exist",)
    cache.on_event(CachedKind.POD, "DELETED", make_pod("new", 2, True, None, None, "Pending",
                                                       2, "default"))
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("gone", 6, 1))
    assert _binds(cache) == ["waits"]  # its queue came: scheduled into the room left
