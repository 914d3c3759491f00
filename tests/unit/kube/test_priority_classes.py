"""PodGroup jobs take their priority from their PriorityClass (issue 24, part 2).

Volcano's rule (pkg/scheduler/cache/cache.go, the snapshot's cloneJob): the value of the class
`spec.priorityClassName` names, else the globalDefault class's value, else 0. Before, every
PodGroup job had priority 0, so with room for one gang the one created first won:
`test_the_higher_class_wins_the_room_though_created_last` fails with the classes not watched
(the cache without PriorityClasses: `watched=False`), which is what the old scheduler saw.
"""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.kube.scheduler import convert
from koordqueue.kube.scheduler.cache import SchedulerCache
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.scheduler.store import CachedKind
from tests.unit.kube.memory_api import MemoryApi


def pclass(name: str, value: int, default: bool = False) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name, "resourceVersion": str(value)}, "value": value,
            "globalDefault": default}


def group(name: str, class_name: str | None = None, created: str = "2026-01-01T00:00:00Z",
          min_member: int = 2) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "default"}
    if class_name:
        spec["priorityClassName"] = class_name
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "resourceVersion": "1", "creationTimestamp": created},
            "spec": spec}


def test_the_named_class_then_the_default_then_zero() -> None:
    classes = convert.priority_classes([pclass("high", 1000), pclass("base", 10, default=True)])
    assert classes.job_priority("high") == 1000
    assert classes.job_priority("") == 10
    assert classes.job_priority("no-such-class") == 10  # as Volcano: the default, not an error
    assert convert.priority_classes([pclass("high", 1000)]).job_priority("") == 0
    assert convert.job_info(group("g", "high"), classes).priority == 1000
    assert convert.job_info(group("g", "high")).priority == 0  # no classes known


def job_priorities(cache: SchedulerCache) -> dict[str, int]:
    return {job.name: job.priority for job in cache.build().snapshot.jobs}


def test_a_class_change_reaches_the_jobs_and_equals_a_rebuild() -> None:
    cache = SchedulerCache()
    cache.on_event(CachedKind.POD_GROUP, "ADDED", group("a", "high"))
    cache.on_event(CachedKind.POD_GROUP, "ADDED", group("b"))
    assert job_priorities(cache) == {"a": 0, "b": 0}
    cache.on_event(CachedKind.PRIORITY_CLASS, "ADDED", pclass("high", 1000))
    assert job_priorities(cache) == {"a": 1000, "b": 0}
    cache.on_event(CachedKind.PRIORITY_CLASS, "ADDED", pclass("base", 5, default=True))
    assert job_priorities(cache) == {"a": 1000, "b": 5}
    cache.on_event(CachedKind.PRIORITY_CLASS, "DELETED", pclass("high", 1000))
    assert job_priorities(cache) == {"a": 5, "b": 5}
    assert {j.name: j.priority for j in cache.rebuild().snapshot.jobs} == {"a": 5, "b": 5}


def test_a_class_change_wakes_the_loop() -> None:
    cache = SchedulerCache()
    cache.work.clear()
    cache.on_event(CachedKind.PRIORITY_CLASS, "ADDED", pclass("high", 1000))
    assert cache.work.is_set()


NODE = {"metadata": {"name": "n1", "resourceVersion": "1"},
        "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}


class Api(MemoryApi):
    def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        return {}


def pod(name: str, group_name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "resourceVersion": "1",
                         "annotations": {"scheduling.k8s.io/group-name": group_name}},
            "spec": {"schedulerName": "volcano",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Pending"}}


@pytest.mark.parametrize("watched", [True, False])
def test_the_higher_class_wins_the_room_though_created_last(watched: bool) -> None:
    """Room for one gang of two: `low` was created first, `high` names a higher class."""
    scheduler = Scheduler(Api())  # type: ignore[arg-type]
    cache = scheduler.cache
    try:
        cache.on_event(CachedKind.NODE, "ADDED", NODE)
        cache.on_event(CachedKind.QUEUE, "ADDED", {"metadata": {"name": "default"},
                                                    "spec": {"weight": 1}})
        if watched:
            cache.on_event(CachedKind.PRIORITY_CLASS, "ADDED", pclass("high", 1000))
            cache.on_event(CachedKind.PRIORITY_CLASS, "ADDED", pclass("low", 10))
        cache.on_event(CachedKind.POD_GROUP, "ADDED",
                       group("low", "low", created="2026-01-01T00:00:00Z"))
        cache.on_event(CachedKind.POD_GROUP, "ADDED",
                       group("high", "high", created="2026-01-01T00:05:00Z"))
        for name in ("l0", "l1"):
            cache.on_event(CachedKind.POD, "ADDED", pod(name, "low"))
        for name in ("h0", "h1"):
            cache.on_event(CachedKind.POD, "ADDED", pod(name, "high"))
        outcome = scheduler.run_once()
        outcome.wait_for_binds(10)
        bound = sorted(b.name for b in outcome.result.binds)
        assert bound == (["h0", "h1"] if watched else ["l0", "l1"])
    finally:
        scheduler.close()
