"""What the extender plugin sends: tasks, nodes, jobs and queues as JSON objects named as
Volcano's Go structs encode them (api.TaskInfo, NodeInfo, JobInfo, QueueInfo: no json tags,
so the Go field names), with resources as Volcano's Resource (MilliCPU, Memory in bytes,
ScalarResources in milli-units).

Only the fields an extender decides on are sent: identity, requests, node, status, priority
and labels; never whole pods. An extender written for Volcano reads these by the same names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo

NANO = 1_000_000_000
MILLI = 1_000_000


def resource(res: Resources | None) -> dict[str, Any]:
    """Volcano's api.Resource: cpu in millicores, memory in bytes, the rest in milli-units."""
    res = res if res is not None else Resources()
    scalars = {name: res.get_nanos(name) // MILLI for name in res
               if name not in ("cpu", "memory")}
    return {"MilliCPU": float(res.get_nanos("cpu") // MILLI),
            "Memory": float(res.get_nanos("memory") // NANO),
            "ScalarResources": scalars or None}


def task(t: TaskInfo) -> dict[str, Any]:
    return {
        "UID": t.uid, "Job": t.job, "Name": t.name, "Namespace": t.namespace,
        "TaskRole": t.role, "Resreq": resource(t.resreq),
        "InitResreq": resource(t.init_resreq if t.init_resreq is not None else t.resreq),
        "NodeName": t.node_name or "", "Status": t.status.value,
        "Priority": t.priority, "Preemptable": t.preemptable,
    }


def node(n: NodeInfo) -> dict[str, Any]:
    return {
        "Name": n.name, "Labels": dict(n.labels or {}),
        "Allocatable": resource(n.allocatable), "Idle": resource(n.idle),
        "Used": resource(n.used), "Releasing": resource(n.releasing),
        "Tasks": sorted(n.tasks),
    }


def job(j: JobInfo) -> dict[str, Any]:
    return {
        "UID": j.uid, "Name": j.name, "Namespace": j.namespace, "Queue": j.queue,
        "Priority": j.priority, "MinAvailable": j.min_available,
        "TaskMinAvailable": dict(j.task_min_available), "PodGroupPhase": j.phase.value,
        "Tasks": sorted(j.tasks), "Annotations": dict(j.annotations),
    }


def queue(q: QueueInfo) -> dict[str, Any]:
    return {
        "UID": q.name, "Name": q.name, "Weight": q.weight, "Parent": q.parent or "",
        "Capability": resource(q.capability) if q.capability is not None else None,
        "Deserved": resource(q.deserved) if q.deserved is not None else None,
        "Guarantee": resource(q.guarantee), "State": q.state, "Reclaimable": q.reclaimable,
    }


def session_open(jobs: Mapping[str, JobInfo], nodes: Iterable[NodeInfo],
                 queues: Mapping[str, QueueInfo]) -> dict[str, Any]:
    """OnSessionOpenRequest: jobs, nodes and queues by id, and the node names in order."""
    node_list = list(nodes)
    return {
        "Jobs": {uid: job(j) for uid, j in jobs.items()},
        "Nodes": {n.name: node(n) for n in node_list},
        "Queues": {name: queue(q) for name, q in queues.items()},
        "NamespaceInfo": {}, "RevocableNodes": {},
        "NodeList": [n.name for n in node_list],
    }
