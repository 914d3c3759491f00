"""API objects (dicts) to the framework's plain data: TaskInfo, JobInfo, NodeInfo, QueueInfo.

Why separate from the cache: conversion is pure, so it is unit-tested without a cluster and
the cache stays a thin, locked object store.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import structlog

from koordqueue.domain.job_extension import InvalidJobError, pod_requests
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.resources import Resources
from koordqueue.kube.scheduler import names
from koordqueue.scheduler.api import (
    HostPort,
    JobInfo,
    NodeAffinity,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodGroupPhase,
    QueueInfo,
    Taint,
    TaskInfo,
    TaskStatus,
    Toleration,
)
from koordqueue.scheduler.api.names import PREEMPT_NEVER, QUEUE_STATE_OPEN

log = structlog.get_logger(__name__)
Obj = Mapping[str, Any]


def meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def timestamp(value: object) -> float:
    """RFC 3339 creationTimestamp to epoch seconds (0 when absent or malformed)."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _resources(raw: object, field: str) -> Resources | None:
    if raw is None:
        return None
    try:
        return Resources.parse(raw, field)
    except InvalidQuantityError as exc:
        log.warning("ignoring invalid resource list", field=field, error=str(exc))
        return None


# --- nodes ----------------------------------------------------------------------------------
def node_ready(node: Obj) -> bool:
    """The Ready condition is True."""
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def node_info(node: Obj) -> NodeInfo:
    status = node.get("status") or {}
    spec = node.get("spec") or {}
    allocatable = _resources(status.get("allocatable") or status.get("capacity") or {}, "alloc")
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "NoSchedule")))
        for t in spec.get("taints") or []
    )
    return NodeInfo(
        str(meta(node).get("name", "")),
        allocatable or Resources(),
        labels=dict(meta(node).get("labels") or {}),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        ready=node_ready(node),
    )


# --- pods -----------------------------------------------------------------------------------
def pod_key(pod: Obj) -> str:
    m = meta(pod)
    return f"{m.get('namespace', 'default')}/{m.get('name', '')}"


def pod_status(pod: Obj) -> TaskStatus:
    """Volcano's mapping of pod phase (and deletion, and binding) to a task status."""
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    node = (pod.get("spec") or {}).get("nodeName")
    if meta(pod).get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        return TaskStatus.RELEASING
    if phase == "Running":
        return TaskStatus.RUNNING
    if phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.BOUND if node else TaskStatus.PENDING


def _affinity(spec: Mapping[str, Any]) -> NodeAffinity | None:
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    )
    terms = tuple(
        NodeSelectorTerm(
            tuple(
                NodeSelectorRequirement(
                    str(e.get("key", "")),
                    str(e.get("operator", "In")),
                    tuple(str(v) for v in e.get("values") or ()),
                )
                for e in term.get("matchExpressions") or []
            )
        )
        for term in required.get("nodeSelectorTerms") or []
    )
    return NodeAffinity(terms) if terms else None


def task_info(pod: Obj) -> TaskInfo:
    """A pod as a task; an unparsable request counts as empty (and is logged)."""
    spec = pod.get("spec") or {}
    m = meta(pod)
    try:
        request = pod_requests(spec, pod_key(pod))
    except InvalidJobError as exc:
        log.warning("pod has an invalid resource request", pod=pod_key(pod), error=str(exc))
        request = Resources()
    ports = tuple(
        HostPort(int(p["hostPort"]), str(p.get("protocol", "TCP")), str(p.get("hostIP", "")))
        for c in spec.get("containers") or []
        for p in c.get("ports") or []
        if p.get("hostPort")
    )
    tolerations = tuple(
        Toleration(
            str(t.get("key", "")),
            str(t.get("operator", "Equal")),
            str(t.get("value", "")),
            str(t.get("effect", "")),
        )
        for t in spec.get("tolerations") or []
    )
    status = pod_status(pod)
    return TaskInfo(
        str(m.get("uid", "")),
        str(m.get("name", "")),
        str(m.get("namespace", "default")),
        resreq=request,
        priority=int(spec.get("priority") or 0),
        status=status,
        node_name=spec.get("nodeName") or None,
        node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
        tolerations=tolerations,
        affinity=_affinity(spec),
        host_ports=ports,
        scheduling_gated=bool(spec.get("schedulingGates")),
        priority_class_name=str(spec.get("priorityClassName") or ""),
        creation=timestamp(m.get("creationTimestamp")),
        preempt_never=spec.get("preemptionPolicy") == PREEMPT_NEVER,
    )


def group_name(pod: Obj) -> str | None:
    """The PodGroup a pod joins (annotation), or None for a standalone pod."""
    value = (meta(pod).get("annotations") or {}).get(names.GROUP_NAME_ANNOTATION)
    return str(value) if value else None


def standalone_job(pod: Obj, task: TaskInfo) -> JobInfo:
    """A pod without PodGroup is its own job of minAvailable 1."""
    queue = (meta(pod).get("annotations") or {}).get(names.QUEUE_NAME_ANNOTATION)
    return JobInfo(
        names.STANDALONE_JOB_PREFIX + task.uid,
        task.name,
        namespace=task.namespace,
        queue=str(queue or names.DEFAULT_QUEUE),
        priority=task.priority,
        min_available=1,
        phase=PodGroupPhase.INQUEUE,
        creation=task.creation,
    )


# --- pod groups and queues -----------------------------------------------------------------
def job_info(group: Obj) -> JobInfo:
    spec = group.get("spec") or {}
    m = meta(group)
    raw_phase = (group.get("status") or {}).get("phase") or PodGroupPhase.PENDING.value
    try:
        phase = PodGroupPhase(raw_phase)
    except ValueError:
        phase = PodGroupPhase.PENDING
    roles = {str(k): int(v) for k, v in (spec.get("minTaskMember") or {}).items()}
    return JobInfo(
        str(m.get("uid", "")),
        str(m.get("name", "")),
        namespace=str(m.get("namespace", "default")),
        queue=str(spec.get("queue") or names.DEFAULT_QUEUE),
        min_available=int(spec.get("minMember") or 1),
        task_min_available=roles or None,
        min_resources=_resources(spec.get("minResources"), "spec.minResources"),
        phase=phase,
        creation=timestamp(m.get("creationTimestamp")),
    )


def queue_info(queue: Obj) -> QueueInfo:
    spec = queue.get("spec") or {}
    m = meta(queue)
    guarantee = _resources((spec.get("guarantee") or {}).get("resource"), "spec.guarantee")
    reclaimable = spec.get("reclaimable")
    # No state yet means Open: Volcano's queue controller opens every new queue, and
    # koordqueue runs no queue controller that would write it.
    state = str((queue.get("status") or {}).get("state") or QUEUE_STATE_OPEN)
    return QueueInfo(
        str(m.get("name", "")),
        weight=int(spec.get("weight") or 1),
        capability=_resources(spec.get("capability"), "spec.capability"),
        deserved=_resources(spec.get("deserved"), "spec.deserved"),
        guarantee=guarantee or Resources(),
        parent=spec.get("parent") or None,
        reclaimable=True if reclaimable is None else bool(reclaimable),
        priority=int(spec.get("priority") or 0),
        creation=timestamp(m.get("creationTimestamp")),
        state=state,
    )
