"""SchedulerCache: the last seen Pods, Nodes, PodGroups and Queues, and snapshots of them.

Level-triggered: watch events replace whole objects and a periodic relist replaces whole
kinds, so a missed event is repaired by the next relist. Binds the scheduler has sent but not
yet seen come back are "assumed" (Volcano's binding state) so the next session does not give
their room away.

`work` is set by every event that may let a session place something it could not place before
(a new pending pod, freed room, a node or queue change, a failed bind), so the loop runs a
session then instead of at the next period. Our own binds coming back do not set it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import Any, TypeVar

import structlog

from koordqueue.kube.scheduler import convert, names
from koordqueue.scheduler import ClusterSnapshot
from koordqueue.scheduler.api import JobInfo, NodeInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.gates import GateState, GateView, classify_gates, opted_in

log = structlog.get_logger(__name__)
ASSUME_TTL = 30.0
"""Seconds a sent bind is assumed before the cache gives up waiting for the pod update."""


class CachedKind(StrEnum):
    """The kinds of object the scheduler cache keeps (its stores), not a REST resource:
    `kube.api.Kind` is the group/version/plural of an API resource."""

    POD = "pod"
    NODE = "node"
    POD_GROUP = "podgroup"
    QUEUE = "queue"


def gate_names(pod: Mapping[str, Any]) -> list[str]:
    return [
        str(g.get("name", ""))
        for g in (pod.get("spec") or {}).get("schedulingGates") or []
        if isinstance(g, Mapping)
    ]


@dataclass(slots=True)
class Built:
    """A snapshot plus what the applier needs to map decisions back to objects."""

    snapshot: ClusterSnapshot
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Task uid -> pod object (only our scheduler's pods)."""
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Job uid -> PodGroup object (standalone pods have none)."""
    view: GateView = field(default_factory=GateView)
    gate_without_opt_in: list[str] = field(default_factory=list)
    """Pod keys with our gate but no opt-in annotation (to warn about)."""


P = TypeVar("P")


def _node_shape(node: Mapping[str, Any]) -> tuple[object, ...]:
    """What of a node placement reads (not heartbeats or images, which change constantly)."""
    status = node.get("status") or {}
    metadata = node.get("metadata") or {}
    return (
        convert.node_ready(node), status.get("allocatable"), node.get("spec"),
        metadata.get("labels"),
    )


def _finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _pod_shape(pod: Mapping[str, Any]) -> tuple[object, ...]:
    """What of a pending pod placement reads (not its conditions, which we write ourselves)."""
    metadata = pod.get("metadata") or {}
    return (pod.get("spec"), metadata.get("labels"), metadata.get("annotations"))


def _reuse(
    previous: Mapping[str, tuple[str, P]], key: str, version: str, make: Callable[[], P]
) -> P:
    """The earlier conversion of an object while its resourceVersion has not moved."""
    cached = previous.get(key)
    if cached is not None and version and cached[0] == version:
        return cached[1]
    return make()


class SchedulerCache:
    """Thread-safe object store fed by watch events and relists."""

    def __init__(
        self, scheduler_name: str = names.DEFAULT_SCHEDULER_NAME,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.scheduler_name = scheduler_name
        self._clock = clock
        self._lock = threading.Lock()
        self._objs: dict[CachedKind, dict[str, dict[str, Any]]] = {k: {} for k in CachedKind}
        self._assumed: dict[str, tuple[str, float]] = {}
        self._converted: dict[str, tuple[str, TaskInfo]] = {}
        self._nodes: dict[str, tuple[str, NodeInfo]] = {}
        """uid -> (resourceVersion, converted task): parsing requests dominates a build, and
        most pods do not change between sessions."""
        self.work = threading.Event()
        """Set when something may be placeable that was not; the session loop clears it."""

    # --- feeding -------------------------------------------------------------------------
    def _key(self, kind: CachedKind, obj: Mapping[str, Any]) -> str:
        m = convert.meta(obj)
        if kind is CachedKind.POD:
            return str(m.get("uid") or convert.pod_key(obj))
        if kind is CachedKind.POD_GROUP:
            return f"{m.get('namespace', 'default')}/{m.get('name', '')}"
        return str(m.get("name", ""))

    def _relevant(self, kind: CachedKind, obj: Mapping[str, Any]) -> bool:
        if kind is not CachedKind.POD:
            return True
        spec = obj.get("spec") or {}
        if spec.get("schedulerName") == self.scheduler_name:
            return True
        # other schedulers' pods matter only while they hold node resources
        phase = (obj.get("status") or {}).get("phase")
        return bool(spec.get("nodeName")) and phase not in ("Succeeded", "Failed")

    def on_event(self, kind: CachedKind, event_type: str | None, obj: Mapping[str, Any]) -> None:
        """Fold one watch event (ADDED/MODIFIED/DELETED, or None for a listing) in."""
        key = self._key(kind, obj)
        with self._lock:
            store = self._objs[kind]
            if event_type == "DELETED" or not self._relevant(kind, obj):
                old = store.pop(key, None)
                new = None
                if kind is CachedKind.POD:
                    self._assumed.pop(key, None)
            else:
                old = store.get(key)
                new = store[key] = dict(obj)
                if kind is CachedKind.POD and (obj.get("spec") or {}).get("nodeName"):
                    self._assumed.pop(key, None)
        if self._is_work(kind, old, new):
            self.work.set()

    def _is_work(
        self, kind: CachedKind, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> bool:
        """Could this change let a session place a pod it could not place before?"""
        if kind is CachedKind.NODE:
            return old is None or new is None or _node_shape(old) != _node_shape(new)
        if kind is not CachedKind.POD:
            return old != new  # PodGroups and Queues: few, and any change may matter
        if new is None:  # deleted or finished: it held room only if it had a node
            return old is not None and bool((old.get("spec") or {}).get("nodeName"))
        spec = new.get("spec") or {}
        if spec.get("nodeName"):  # a bind coming back takes room; a pod finishing frees it
            return _finished(new) and (old is None or not _finished(old))
        return spec.get("schedulerName") == self.scheduler_name and (
            old is None or _pod_shape(old) != _pod_shape(new)
        )

    def replace(self, kind: CachedKind, objs: Iterable[Mapping[str, Any]]) -> None:
        """A full listing of `kind` replaces what the cache had."""
        fresh = {self._key(kind, o): dict(o) for o in objs if self._relevant(kind, o)}
        with self._lock:
            self._objs[kind] = fresh
            if kind is CachedKind.POD:
                for uid in list(self._assumed):
                    pod = fresh.get(uid)
                    if pod is None or (pod.get("spec") or {}).get("nodeName"):
                        self._assumed.pop(uid, None)

    def assume(self, uid: str, node: str) -> None:
        """A bind was sent: treat the pod as Binding on `node` until the update arrives."""
        with self._lock:
            self._assumed[uid] = (node, self._clock() + ASSUME_TTL)

    def forget(self, uid: str) -> None:
        """A bind failed: the pod is pending again."""
        with self._lock:
            self._assumed.pop(uid, None)
        self.work.set()

    def get(self, kind: CachedKind, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._objs[kind].get(key)

    def count(self, kind: CachedKind) -> int:
        with self._lock:
            return len(self._objs[kind])

    # --- snapshot --------------------------------------------------------------------------
    def build(self, *, gates_enabled: bool = False) -> Built:
        """A ClusterSnapshot of ready nodes, queues and our pods grouped into jobs."""
        with self._lock:
            pods = list(self._objs[CachedKind.POD].values())
            nodes_raw = list(self._objs[CachedKind.NODE].values())
            groups_raw = list(self._objs[CachedKind.POD_GROUP].values())
            queues_raw = list(self._objs[CachedKind.QUEUE].values())
            now = self._clock()
            for uid, (_node, expiry) in list(self._assumed.items()):
                if expiry < now:
                    del self._assumed[uid]
            assumed = dict(self._assumed)

        nodes: dict[str, NodeInfo] = {}
        node_protos: dict[str, tuple[str, NodeInfo]] = {}
        for raw in nodes_raw:
            if convert.node_ready(raw):
                m = convert.meta(raw)
                name, version = str(m.get("name", "")), str(m.get("resourceVersion", ""))
                proto = _reuse(self._nodes, name, version, partial(convert.node_info, raw))
                node_protos[name] = (version, proto)
                nodes[name] = proto.clone()
        self._nodes = node_protos
        jobs: dict[str, JobInfo] = {}
        groups: dict[str, dict[str, Any]] = {}
        by_key: dict[str, JobInfo] = {}
        for raw in groups_raw:
            job = convert.job_info(raw)
            jobs[job.uid] = job
            groups[job.uid] = raw
            by_key[f"{job.namespace}/{job.name}"] = job
        built = Built(ClusterSnapshot(), groups=groups)
        converted: dict[str, tuple[str, TaskInfo]] = {}
        candidates: set[str] = set()
        reserved: set[str] = set()
        for pod in pods:
            ours = (pod.get("spec") or {}).get("schedulerName") == self.scheduler_name
            task = self._task(pod, converted)
            if not ours:
                host = nodes.get(task.node_name or "")
                if host is not None and task.uid not in host.tasks:
                    task.status = TaskStatus.RUNNING
                    host.add_task(task)
                continue
            if task.status is TaskStatus.PENDING and task.uid in assumed:
                task.status = TaskStatus.BINDING
                task.node_name = assumed[task.uid][0]
            group = convert.group_name(pod)
            if group is None:
                job = convert.standalone_job(pod, task)
                jobs[job.uid] = job
            else:
                found = by_key.get(f"{task.namespace}/{group}")
                if found is None:
                    continue  # its PodGroup is not there (yet): nothing to schedule it in
                job = found
            job.add_task(task)
            built.pods[task.uid] = pod
            if gates_enabled and task.status is TaskStatus.PENDING:
                state = classify_gates(gate_names(pod))
                opt = opted_in(convert.meta(pod).get("annotations"))
                if state in (GateState.OURS_ONLY, GateState.OURS_AND_OTHERS) and not opt:
                    built.gate_without_opt_in.append(convert.pod_key(pod))
                elif state is GateState.OURS_ONLY:
                    candidates.add(task.uid)
                elif state is GateState.NONE and opt:
                    reserved.add(task.uid)
        built.snapshot = ClusterSnapshot(
            nodes=list(nodes.values()),
            jobs=list(jobs.values()),
            queues=[convert.queue_info(q) for q in queues_raw],
        )
        built.view = GateView(frozenset(candidates), frozenset(reserved))
        self._converted = converted
        return built

    def _task(self, pod: Mapping[str, Any], converted: dict[str, tuple[str, TaskInfo]]) -> TaskInfo:
        """A fresh TaskInfo for the pod, converted again only when its resourceVersion moved."""
        m = convert.meta(pod)
        uid, version = str(m.get("uid", "")), str(m.get("resourceVersion", ""))
        proto = _reuse(self._converted, uid, version, partial(convert.task_info, pod))
        converted[uid] = (version, proto)
        return proto.clone()
