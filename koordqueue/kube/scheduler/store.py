"""The scheduler cache's object store: the last seen objects of each kind, indexed.

Raw API objects only (no conversion): the snapshot builder (`snapshot.py`) reads them and the
marks left here (which keys changed since its last build). Not thread-safe by itself:
`SchedulerCache` holds the lock around every call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from koordqueue.kube.scheduler import convert


class CachedKind(StrEnum):
    """The kinds of object the scheduler cache keeps (its stores), not a REST resource:
    `kube.api.Kind` is the group/version/plural of an API resource."""

    POD = "pod"
    NODE = "node"
    POD_GROUP = "podgroup"
    QUEUE = "queue"
    NAMESPACE = "namespace"
    """Only their labels are kept: pod affinity terms' namespaceSelector reads them."""
    PDB = "poddisruptionbudget"
    """policy/v1 PodDisruptionBudgets, for the opt-in pdb plugin."""
    PRIORITY_CLASS = "priorityclass"
    """scheduling.k8s.io/v1 PriorityClasses: a PodGroup job's priority is its class's."""
    HYPER_NODE = "hypernode"
    """topology.volcano.sh/v1alpha1 HyperNodes, for network-topology-aware."""
    RESOURCE_QUOTA = "resourcequota"
    """v1 ResourceQuotas (their status), for the resourcequota plugin."""
    NUMATOPOLOGY = "numatopology"
    """nodeinfo.volcano.sh/v1alpha1 Numatopologies, for numa-aware."""


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


class ObjectStore:
    """Objects by kind and key, the binds assumed, and what changed since the last build.

    Besides the objects it indexes other schedulers' pods by node and our pods by PodGroup,
    so that a pod's change marks exactly the node or job it feeds (`dirty`).
    """

    __slots__ = (
        "assumed", "dirty", "foreign", "generation", "gone", "members", "objs",
        "scheduler_name", "touched",
    )

    def __init__(self, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self.objs: dict[CachedKind, dict[str, dict[str, Any]]] = {k: {} for k in CachedKind}
        self.assumed: dict[str, tuple[str, float]] = {}
        """Pod uid -> (node, expiry) of a bind sent but not yet seen come back."""
        self.foreign: dict[str, dict[str, None]] = {}
        """Node name -> uids of other schedulers' pods on it."""
        self.members: dict[str, dict[str, None]] = {}
        """PodGroup key -> uids of our pods that name it."""
        self.dirty: dict[CachedKind, set[str]] = {k: set() for k in CachedKind}
        """Keys whose conversion is to be redone: pods as the job key they feed."""
        self.touched: set[str] = set()
        """uids of the pods changed, assumed or forgotten since the last build: the members
        a job updated in place must redo."""
        self.gone: set[str] = set()
        """uids of the pods dropped since the last build (their conversions go)."""
        self.generation = 0
        """Moves with every change a snapshot could see."""

    def key(self, kind: CachedKind, obj: Mapping[str, Any]) -> str:
        if kind is CachedKind.POD:
            return convert.pod_uid(obj)
        m = convert.meta(obj)
        if kind in (CachedKind.POD_GROUP, CachedKind.PDB):
            return f"{m.get('namespace', 'default')}/{m.get('name', '')}"
        return str(m.get("name", ""))

    def relevant(self, kind: CachedKind, obj: Mapping[str, Any]) -> bool:
        if kind is not CachedKind.POD:
            return True
        spec = obj.get("spec") or {}
        if spec.get("schedulerName") == self.scheduler_name:
            return True
        # other schedulers' pods matter only while they hold node resources
        phase = (obj.get("status") or {}).get("phase")
        return bool(spec.get("nodeName")) and phase not in ("Succeeded", "Failed")

    def ours(self, pod: Mapping[str, Any]) -> bool:
        return (pod.get("spec") or {}).get("schedulerName") == self.scheduler_name

    def _index(self, key: str, pod: Mapping[str, Any] | None, sign: int) -> None:
        """Add (sign 1) or drop (-1) a pod in the node/group indexes and mark what it feeds
        as changed."""
        if pod is None:
            return
        if self.ours(pod):
            group = convert.group_name(pod)
            if group is not None:
                gkey = f"{convert.meta(pod).get('namespace', 'default')}/{group}"
                members = self.members.setdefault(gkey, {})
                if sign > 0:
                    members[key] = None
                else:
                    members.pop(key, None)
                    if not members:
                        del self.members[gkey]
            self.dirty[CachedKind.POD].add(convert.job_key(key, pod))
        else:
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            on = self.foreign.setdefault(node, {})
            if sign > 0:
                on[key] = None
            else:
                on.pop(key, None)
                if not on:
                    del self.foreign[node]
            self.dirty[CachedKind.NODE].add(node)

    def put(self, kind: CachedKind, key: str, obj: dict[str, Any] | None) -> None:
        """Replace (or drop, None) one object and mark what it feeds."""
        store = self.objs[kind]
        old = store.pop(key, None) if obj is None else store.get(key)
        if obj is not None:
            store[key] = obj
        self.generation += 1
        if kind is CachedKind.POD:
            self.touched.add(key)
            self._index(key, old, -1)
            self._index(key, obj, 1)
            if obj is None:
                self.gone.add(key)
        else:
            self.dirty[kind].add(key)
            if kind is CachedKind.PRIORITY_CLASS:  # any class may be some job's, or the default
                self.dirty[CachedKind.POD_GROUP].update(self.objs[CachedKind.POD_GROUP])

    def fold(
        self, kind: CachedKind, event_type: str | None, obj: Mapping[str, Any]
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Fold one watch event in; (the object before, the object after)."""
        key = self.key(kind, obj)
        store = self.objs[kind]
        old = store.get(key)
        if event_type == "DELETED" or not self.relevant(kind, obj):
            new = None
            if old is not None:
                self.put(kind, key, None)
            if kind is CachedKind.POD:
                self.assumed.pop(key, None)
        else:
            new = dict(obj)
            self.put(kind, key, new)
            if kind is CachedKind.POD and (obj.get("spec") or {}).get("nodeName"):
                self.assumed.pop(key, None)
        return old, new

    def is_work(
        self, kind: CachedKind, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> bool:
        """Could this change let a session place a pod it could not place before?"""
        if kind is CachedKind.NODE:
            return old is None or new is None or _node_shape(old) != _node_shape(new)
        if kind is CachedKind.PDB:  # only preempt/reclaim read them: they run every period
            return False
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
        """A full listing of `kind` replaces what the store had (only the differences are
        marked as changed)."""
        fresh = {self.key(kind, o): dict(o) for o in objs if self.relevant(kind, o)}
        store = self.objs[kind]
        for key in [k for k in store if k not in fresh]:
            self.put(kind, key, None)
        for key, obj in fresh.items():
            if store.get(key) != obj:
                self.put(kind, key, obj)
        self.objs[kind] = {k: store[k] for k in fresh}  # the listing's order
        if kind is CachedKind.POD:
            for uid in list(self.assumed):
                pod = fresh.get(uid)
                if pod is None or (pod.get("spec") or {}).get("nodeName"):
                    self.drop_assumed(uid)

    def _mark_assumed(self, uid: str) -> None:
        self.generation += 1
        self.touched.add(uid)
        pod = self.objs[CachedKind.POD].get(uid)
        if pod is not None and self.ours(pod):
            self.dirty[CachedKind.POD].add(convert.job_key(uid, pod))

    def drop_assumed(self, uid: str) -> None:
        """Forget an assumption and mark its job changed."""
        if self.assumed.pop(uid, None) is not None:
            self._mark_assumed(uid)

    def assume(self, uid: str, node: str, expiry: float) -> None:
        """A bind was sent: the pod is Binding on `node` until its update or `expiry`."""
        self.assumed[uid] = (node, expiry)
        self._mark_assumed(uid)

    def expire(self, now: float) -> None:
        """Forget the assumptions whose time is up."""
        for uid in [u for u, (_n, expiry) in self.assumed.items() if expiry < now]:
            self.drop_assumed(uid)

    def consumed(self) -> None:
        """A build redid every marked key: clear the marks."""
        for kind in CachedKind:
            self.dirty[kind] = set()
        self.touched = set()
        self.gone = set()
