"""API objects (dicts) to the framework's plain data: TaskInfo, JobInfo, NodeInfo, QueueInfo.

Why separate from the cache: conversion is pure, so it is unit-tested without a cluster and
the cache stays a thin, locked object store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from koordqueue.domain.job_extension import InvalidJobError, pod_requests
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.resources import Resources
from koordqueue.kube.scheduler import names
from koordqueue.kube.scheduler.devices import device_annotations, node_devices, pod_devices
from koordqueue.kube.scheduler.hypernodes import network_topology, preemptable
from koordqueue.kube.scheduler.numa import numa_policy, task_numa
from koordqueue.kube.scheduler.vc_fields import (
    job_annotations,
    node_group_affinity,
    node_group_limits,
    scheduled_at,
    strategy_fit,
    task_role,
    task_vc,
)
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
from koordqueue.scheduler.api.job_info import standalone_phase
from koordqueue.scheduler.api.names import (
    HIERARCHY_ANNOTATION,
    HIERARCHY_WEIGHTS_ANNOTATION,
    PREEMPT_NEVER,
    QUEUE_STATE_OPEN,
)
from koordqueue.scheduler.api.pdb import PodDisruptionBudget
from koordqueue.scheduler.api.selectors import LabelSelector, LabelSelectorRequirement
from koordqueue.scheduler.api.task_info import (
    DO_NOT_SCHEDULE,
    NO_LABELS,
    POLICY_HONOR,
    POLICY_IGNORE,
    PodAffinity,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
)

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
        devices=node_devices(node),
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


def _node_selector_requirements(raw: object) -> tuple[NodeSelectorRequirement, ...]:
    return tuple(
        NodeSelectorRequirement(
            str(e.get("key", "")),
            str(e.get("operator", "In")),
            tuple(str(v) for v in e.get("values") or ()),
        )
        for e in (raw if isinstance(raw, list) else ())
        if isinstance(e, Mapping)
    )


def _node_selector_term(term: Mapping[str, Any]) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        _node_selector_requirements(term.get("matchExpressions")),
        _node_selector_requirements(term.get("matchFields")),
    )


def _affinity(spec: Mapping[str, Any]) -> NodeAffinity | None:
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = tuple(_node_selector_term(t) for t in required.get("nodeSelectorTerms") or [])
    preferred = tuple(
        PreferredSchedulingTerm(int(p.get("weight") or 0), _node_selector_term(p["preference"]))
        for p in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        if isinstance(p, Mapping) and isinstance(p.get("preference"), Mapping)
    )
    return NodeAffinity(terms, preferred) if terms or preferred else None


def label_selector(raw: object) -> LabelSelector | None:
    """A metav1.LabelSelector; None for a missing one (which selects nothing)."""
    if not isinstance(raw, Mapping):
        return None
    labels = raw.get("matchLabels") or {}
    return LabelSelector(
        tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        tuple(
            LabelSelectorRequirement(
                str(e.get("key", "")),
                str(e.get("operator", "")),
                tuple(str(v) for v in e.get("values") or ()),
            )
            for e in raw.get("matchExpressions") or []
        ),
    )


def _pod_affinity_term(raw: Mapping[str, Any], namespace: str, weight: int) -> PodAffinityTerm:
    namespaces = frozenset(str(n) for n in raw.get("namespaces") or ())
    ns_selector = label_selector(raw.get("namespaceSelector"))
    if not namespaces and ns_selector is None:
        namespaces = frozenset({namespace})
    return PodAffinityTerm(
        str(raw.get("topologyKey", "")),
        label_selector(raw.get("labelSelector")),
        namespaces,
        ns_selector,
        weight,
    )


def _pod_affinity_terms(
    block: Mapping[str, Any], namespace: str
) -> tuple[tuple[PodAffinityTerm, ...], tuple[PodAffinityTerm, ...]]:
    required = tuple(
        _pod_affinity_term(t, namespace, 0)
        for t in block.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        if isinstance(t, Mapping)
    )
    preferred = tuple(
        _pod_affinity_term(p["podAffinityTerm"], namespace, int(p.get("weight") or 0))
        for p in block.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        if isinstance(p, Mapping) and isinstance(p.get("podAffinityTerm"), Mapping)
    )
    return required, preferred


def pod_affinity(spec: Mapping[str, Any], namespace: str) -> PodAffinity | None:
    """spec.affinity.podAffinity and podAntiAffinity (matchLabelKeys are already merged
    into the selectors by the API server)."""
    affinity = spec.get("affinity") or {}
    required, preferred = _pod_affinity_terms(affinity.get("podAffinity") or {}, namespace)
    anti_required, anti_preferred = _pod_affinity_terms(
        affinity.get("podAntiAffinity") or {}, namespace
    )
    if not (required or preferred or anti_required or anti_preferred):
        return None
    return PodAffinity(required, preferred, anti_required, anti_preferred)


def spread_constraints(
    spec: Mapping[str, Any], labels: Mapping[str, str]
) -> tuple[TopologySpreadConstraint, ...]:
    """spec.topologySpreadConstraints with kube-scheduler's defaults; matchLabelKeys are
    merged into the selector from the pod's own labels."""
    out = []
    for raw in spec.get("topologySpreadConstraints") or []:
        if not isinstance(raw, Mapping):
            continue
        selector = label_selector(raw.get("labelSelector"))
        keys = raw.get("matchLabelKeys") or ()
        extra = {str(k): labels[str(k)] for k in keys if str(k) in labels}
        if extra:
            selector = (selector or LabelSelector()).merged(extra)
        out.append(
            TopologySpreadConstraint(
                int(raw.get("maxSkew") or 0),
                str(raw.get("topologyKey", "")),
                str(raw.get("whenUnsatisfiable") or DO_NOT_SCHEDULE),
                selector,
                int(raw.get("minDomains") or 1),
                str(raw.get("nodeAffinityPolicy") or POLICY_HONOR),
                str(raw.get("nodeTaintsPolicy") or POLICY_IGNORE),
            )
        )
    return tuple(out)


REQUESTS_MEMO_SIZE = 4096
"""Distinct pod resource specs whose effective request is kept (cleared when full)."""
_requests_memo: dict[tuple[object, ...], Resources] = {}


def _amounts_key(values: object) -> tuple[object, ...] | None:
    """A resource list as a hashable key; None when it is not a plain mapping."""
    if not values:
        return ()
    if not isinstance(values, Mapping):
        return None
    return tuple(sorted(values.items()))


def _resources_key(container: Mapping[str, Any]) -> tuple[object, ...] | None:
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        return None
    limits = _amounts_key(resources.get("limits"))
    requests = _amounts_key(resources.get("requests"))
    if limits is None or requests is None:
        return None
    return (limits, requests)


def requests_key(spec: Mapping[str, Any]) -> tuple[object, ...] | None:
    """Everything `pod_requests` reads of a pod spec, as a hashable key (None: not keyable).

    The containers' limits and requests, the init containers' with their restartPolicy
    (sidecars are summed), and the overhead.
    """
    parts: list[object] = []
    for container in spec.get("containers") or ():
        key = _resources_key(container) if isinstance(container, Mapping) else None
        if key is None:
            return None
        parts.append(key)
    inits = spec.get("initContainers")
    if inits:
        parts.append("init")
        for container in inits:
            key = _resources_key(container) if isinstance(container, Mapping) else None
            if key is None:
                return None
            parts.append((container.get("restartPolicy"), key))
    overhead = _amounts_key(spec.get("overhead"))
    if overhead is None:
        return None
    parts.append(("overhead", overhead))
    return tuple(parts)


def effective_requests(spec: Mapping[str, Any], key: str) -> Resources:
    """`pod_requests(spec)`, parsed once per distinct resource spec: the pods of a workload
    share one, and parsing the quantities was most of converting a new pod. Resources are
    immutable, so the tasks share the result. Errors are not kept (raised each time)."""
    try:
        memo_key = requests_key(spec)
        found = _requests_memo.get(memo_key) if memo_key is not None else None
    except TypeError:  # an unhashable amount: parse it as it is
        memo_key = found = None
    if found is not None:
        return found
    request = pod_requests(spec, key)
    if memo_key is not None:
        if len(_requests_memo) >= REQUESTS_MEMO_SIZE:
            _requests_memo.clear()
        _requests_memo[memo_key] = request
    return request


def task_info(pod: Obj) -> TaskInfo:
    """A pod as a task; an unparsable request counts as empty (and is logged)."""
    spec = pod.get("spec") or {}
    m = meta(pod)
    try:
        request = effective_requests(spec, pod_key(pod))
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
    namespace = str(m.get("namespace", "default"))
    raw_labels = m.get("labels")
    labels = (
        {str(k): str(v) for k, v in raw_labels.items()}
        if isinstance(raw_labels, Mapping) and raw_labels
        else NO_LABELS
    )
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
        preemptable=preemptable(pod),
        labels=labels,
        pod_affinity=pod_affinity(spec, namespace),
        spread=spread_constraints(spec, labels),
        devices=pod_devices(pod, request),
        vc=task_vc(m),
        role=task_role(m),
        scheduled_at=scheduled_at(pod),
        numa=task_numa(pod),
        strategy_fit=strategy_fit(m),
    )


_TASK_METADATA = ("uid", "name", "namespace", "labels", "creationTimestamp")
"""The metadata fields `task_info` reads (besides deletionTimestamp, through the status,
and the annotations `_ANNOTATION_READERS` read, compared on their own)."""
_ANNOTATION_READERS: tuple[Callable[[Mapping[str, Any]], object], ...] = (
    device_annotations, task_vc, task_role, numa_policy, strategy_fit,
)
"""What `task_info` reads from a pod's labels and annotations (devices, Volcano's plugins)."""
_NODE_NAME = "nodeName"


def same_but_placement(old: Obj, new: Obj) -> bool:
    """Whether `task_info` of `new` can differ from that of `old` only in status and node:
    the same metadata it reads and the same spec but for `nodeName`. Why: a bind coming
    back, a kubelet's status update, a finished pod each move the resourceVersion, and
    parsing the requests again dominated a cache build."""
    old_meta, new_meta = meta(old), meta(new)
    for name in _TASK_METADATA:
        if old_meta.get(name) != new_meta.get(name):
            return False
    if any(read(old_meta) != read(new_meta) for read in _ANNOTATION_READERS):
        return False
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if len(old_spec) - (_NODE_NAME in old_spec) != len(new_spec) - (_NODE_NAME in new_spec):
        return False
    missing = object()
    return all(
        name == _NODE_NAME or new_spec.get(name, missing) == value
        for name, value in old_spec.items()
    )


def placed_again(previous: TaskInfo, pod: Obj) -> TaskInfo:
    """`task_info(pod)` for a pod that differs from the one `previous` was converted from
    only in placement (`same_but_placement`): its status and node taken from `pod`."""
    task = previous.clone()
    task.status = pod_status(pod)
    task.node_name = (pod.get("spec") or {}).get(_NODE_NAME) or None
    task.scheduled_at = scheduled_at(pod)
    return task


def group_name(pod: Obj) -> str | None:
    """The PodGroup a pod joins (annotation), or None for a standalone pod."""
    value = (meta(pod).get("annotations") or {}).get(names.GROUP_NAME_ANNOTATION)
    return str(value) if value else None


STANDALONE_KEY = "pod:"
"""Prefix of a standalone pod's job key in the scheduler cache (the pod's uid follows)."""


def pod_uid(pod: Obj) -> str:
    """A pod's key in the scheduler cache: its uid (namespace/name when it has none)."""
    return str(meta(pod).get("uid") or pod_key(pod))


def job_key(key: str, pod: Obj) -> str:
    """The cache's key of the job a pod (stored under `key`) feeds: "<ns>/<group>" for a
    PodGroup member, STANDALONE_KEY + `key` for a pod of its own."""
    group = group_name(pod)
    if group is None:
        return STANDALONE_KEY + key
    return f"{meta(pod).get('namespace', 'default')}/{group}"


def pod_queue(pod: Obj) -> object:
    """The queue annotation of a pod (a standalone pod's queue), or None."""
    return (meta(pod).get("annotations") or {}).get(names.QUEUE_NAME_ANNOTATION)


def gate_names(pod: Obj) -> list[str]:
    """The names of a pod's scheduling gates, in their order."""
    return [
        str(g.get("name", ""))
        for g in (pod.get("spec") or {}).get("schedulingGates") or []
        if isinstance(g, Mapping)
    ]


def standalone_job(pod: Obj, task: TaskInfo) -> JobInfo:
    """A pod without PodGroup is its own job of minAvailable 1, Inqueue from the start and
    Running once its pod is placed (`standalone_phase`: what session close makes of it)."""
    queue = pod_queue(pod)
    return JobInfo(
        names.STANDALONE_JOB_PREFIX + task.uid,
        task.name,
        namespace=task.namespace,
        queue=str(queue or names.DEFAULT_QUEUE),
        priority=task.priority,
        min_available=1,
        phase=standalone_phase(task),
        creation=task.creation,
    )


# --- pod groups and queues -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PriorityClasses:
    """PriorityClass values by name, and the value of the one marked globalDefault (0 when
    none is: the API server's admission lets at most one class be the default)."""

    values: Mapping[str, int] = field(default_factory=dict)
    default: int = 0

    def job_priority(self, class_name: str) -> int:
        """A PodGroup job's priority, as Volcano's cache sets it at each snapshot
        (cache.go, cloneJob): the value of the class `spec.priorityClassName` names, else
        the default class's value, else 0. (Pods' own priorities order the tasks within the
        job; a pod without PodGroup is a job of its own whose priority is the pod's, as the
        PodGroup Volcano's controller makes for it names the pod's class.)"""
        value = self.values.get(class_name) if class_name else None
        return self.default if value is None else value


_NO_CLASSES = PriorityClasses()


def priority_classes(objs: Iterable[Obj]) -> PriorityClasses:
    values: dict[str, int] = {}
    default = 0
    for pc in objs:
        name = str(meta(pc).get("name", ""))
        try:
            value = int(pc.get("value") or 0)
        except (TypeError, ValueError):
            log.warning("ignoring a PriorityClass without an integer value", name=name)
            continue
        values[name] = value
        if pc.get("globalDefault"):
            default = value
    return PriorityClasses(values, default)


def job_info(group: Obj, priorities: PriorityClasses | None = None) -> JobInfo:
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
        priority=(priorities or _NO_CLASSES).job_priority(str(spec.get("priorityClassName") or "")),
        min_available=int(spec.get("minMember") or 1),
        task_min_available=roles or None,
        min_resources=_resources(spec.get("minResources"), "spec.minResources"),
        phase=phase,
        creation=timestamp(m.get("creationTimestamp")),
        network_topology=network_topology(group),
        preemptable=preemptable(group),
        annotations=job_annotations(m),
    )


def queue_info(queue: Obj) -> QueueInfo:
    spec = queue.get("spec") or {}
    m = meta(queue)
    guarantee = _resources((spec.get("guarantee") or {}).get("resource"), "spec.guarantee")
    reclaimable = spec.get("reclaimable")
    # No state yet means Open: Volcano's queue controller opens every new queue, and
    # koordqueue runs no queue controller that would write it.
    state = str((queue.get("status") or {}).get("state") or QUEUE_STATE_OPEN)
    annotations = m.get("annotations") or {}
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
        hierarchy=str(annotations.get(HIERARCHY_ANNOTATION) or ""),
        hierarchy_weights=str(annotations.get(HIERARCHY_WEIGHTS_ANNOTATION) or ""),
        node_group_affinity=node_group_affinity(spec),
        node_group_limits=node_group_limits(annotations),
    )


def pod_disruption_budget(pdb: Obj) -> PodDisruptionBudget:
    """A policy/v1 PodDisruptionBudget: what the `pdb` plugin reads (namespace, selector,
    status.disruptionsAllowed and the names in status.disruptedPods). A budget the
    disruption controller has not yet given a status allows no disruption, as its zero
    value does in Volcano's and kube-scheduler's listers."""
    m = meta(pdb)
    status = pdb.get("status") or {}
    try:
        allowed = int(status.get("disruptionsAllowed") or 0)
    except (TypeError, ValueError):
        allowed = 0
    disrupted = status.get("disruptedPods") or {}
    return PodDisruptionBudget(
        str(m.get("namespace", "")),
        str(m.get("name", "")),
        label_selector((pdb.get("spec") or {}).get("selector")),
        allowed,
        frozenset(str(n) for n in disrupted) if isinstance(disrupted, Mapping) else frozenset(),
    )
