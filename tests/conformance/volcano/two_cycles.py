"""Two scheduling cycles on the live scheduler cache, for Volcano's
TestNoDoubleCountingForInqueueJobWithBindingTasks (proportion and capacity).

Why the cache: the case is about the state one cycle leaves for the next (a PodGroup still
Inqueue whose tasks are Binding), which Volcano's test builds by running allocate on its
mock cache and waiting for the binds. Here cycle 1 runs allocate on a snapshot of the
SchedulerCache and its binds are assumed as the scheduler assumes them; cycle 2 runs on the
next snapshot, so the Binding state is the one the cache really produces.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from koordqueue.kube.scheduler import names
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler import SchedulerConfig, run_session
from koordqueue.scheduler.api import TaskStatus

NAMESPACE = "ns1"
SCHEDULER = names.DEFAULT_SCHEDULER_NAME


def _pod(name: str, group: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "annotations": {names.GROUP_NAME_ANNOTATION: group},
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        },
        "status": {"phase": "Pending"},
    }


def _group(name: str, min_member: int, phase: str, min_cpu: str, min_memory: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
        },
        "spec": {
            "minMember": min_member,
            "queue": "q1",
            "minResources": {"cpu": min_cpu, "memory": min_memory},
        },
        "status": {"phase": phase},
    }


def no_double_counting(config: SchedulerConfig) -> tuple[dict[str, str], set[str], dict[str, str]]:
    """Run the case's two cycles: cycle 1 allocate for pgA (Inqueue, minResources 3 cpu,
    three 1-cpu pods) on a 4-cpu node in a queue of capability 4 cpu / 8Gi; cycle 2, with
    pgA's binds assumed and pgB (Pending, minResources 1 cpu, one pod) added, enqueue and
    allocate. Returns cycle 1's binds, the statuses of pgA's tasks as cycle 2 sees them, and
    cycle 2's binds (pod name -> node)."""
    cache = SchedulerCache(SCHEDULER)
    cache.on_event(
        CachedKind.NODE,
        "ADDED",
        {
            "metadata": {"name": "n1", "resourceVersion": "1"},
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )
    cache.on_event(
        CachedKind.QUEUE,
        "ADDED",
        {
            "metadata": {"name": "q1", "resourceVersion": "1"},
            "spec": {"weight": 1, "capability": {"cpu": "4", "memory": "8Gi"}},
            "status": {"state": "Open"},
        },
    )
    cache.on_event(CachedKind.POD_GROUP, "ADDED", _group("pgA", 3, "Inqueue", "3", "3Gi"))
    for name in ("pA1", "pA2", "pA3"):
        cache.on_event(CachedKind.POD, "ADDED", _pod(name, "pgA"))
    first = run_session(cache.build().snapshot, dataclasses.replace(config, actions=("allocate",)))
    for bind in first.binds:
        cache.assume(bind.task, bind.node)
    cache.on_event(CachedKind.POD_GROUP, "ADDED", _group("pgB", 1, "Pending", "1", "1Gi"))
    cache.on_event(CachedKind.POD, "ADDED", _pod("pB1", "pgB"))
    snapshot = cache.build().snapshot
    statuses = {
        task.status.value
        for job in snapshot.jobs
        if job.name == "pgA"
        for task in job.tasks.values()
    }
    second = run_session(snapshot, dataclasses.replace(config, actions=("enqueue", "allocate")))
    return (
        {b.name: b.node for b in first.binds},
        statuses,
        {b.name: b.node for b in second.binds},
    )


BINDING = {TaskStatus.BINDING.value}
