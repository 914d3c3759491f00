"""TaskInfo: one pod as the scheduler sees it (plain data, mutable only inside a session)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from koordqueue.domain.resources import ZERO, Resources
from koordqueue.scheduler.api.devices import PodDevices
from koordqueue.scheduler.api.numa import TaskNuma
from koordqueue.scheduler.api.selectors import LabelSelector, selector_matches


class TaskStatus(StrEnum):
    """Volcano's task lifecycle; the session moves tasks between these.

    A StrEnum because status lookups are on the hot path and Enum hashing is pure Python.
    """

    PENDING = "Pending"
    ALLOCATED = "Allocated"
    PIPELINED = "Pipelined"
    BINDING = "Binding"
    BOUND = "Bound"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


ALLOCATED_STATUSES: Final = frozenset(
    {TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED}
)
"""Statuses whose resources are taken on a node and count toward the queue's allocation."""
READY_STATUSES: Final = ALLOCATED_STATUSES | {TaskStatus.SUCCEEDED}
"""Statuses counted by the job ready count (SPEC 3.6)."""
VALID_STATUSES: Final = READY_STATUSES | {TaskStatus.PIPELINED, TaskStatus.PENDING}
TERMINATED_STATUSES: Final = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration; operator "Equal" (default) or "Exists"; empty effect matches all."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint; only NoSchedule and NoExecute block placement."""

    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One match expression: In, NotIn, Exists, DoesNotExist, Gt, Lt."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Expressions (node labels) and fields (only `metadata.name`) that must all hold;
    terms are ORed."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    """A preferred node affinity term: its weight counts on nodes matching it."""

    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """Node affinity: required (the node must satisfy at least one term) and preferred."""

    required: tuple[NodeSelectorTerm, ...] = ()
    preferred: tuple[PreferredSchedulingTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A pod (anti-)affinity term with its namespaces resolved at parse time.

    `namespaces` is the term's list, or the owner pod's namespace when both the list and
    the namespace selector are absent (Kubernetes' rule). `selector` None selects nothing
    (a missing labelSelector); `namespace_selector` None selects no namespace, an empty one
    every namespace. `weight` is the preferred term's weight (0 for required terms).
    """

    topology_key: str
    selector: LabelSelector | None = None
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None
    weight: int = 0

    def matches(
        self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]
    ) -> bool:
        """Does a pod (its namespace, labels, and its namespace's labels) match the term."""
        if namespace not in self.namespaces and not selector_matches(
            self.namespace_selector, namespace_labels
        ):
            return False
        return selector_matches(self.selector, labels)


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """A pod's inter-pod affinity and anti-affinity, required and preferred."""

    required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[PodAffinityTerm, ...] = ()
    anti_required: tuple[PodAffinityTerm, ...] = ()
    anti_preferred: tuple[PodAffinityTerm, ...] = ()

    def terms(self) -> tuple[PodAffinityTerm, ...]:
        """Every term, in all four lists."""
        return self.required + self.preferred + self.anti_required + self.anti_preferred


DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
POLICY_HONOR: Final = "Honor"
POLICY_IGNORE: Final = "Ignore"


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    """A topology spread constraint, defaults applied and matchLabelKeys merged into the
    selector at parse time (minDomains 1, nodeAffinityPolicy Honor, nodeTaintsPolicy
    Ignore, as kube-scheduler defaults them)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str = DO_NOT_SCHEDULE
    selector: LabelSelector | None = None
    min_domains: int = 1
    node_affinity_policy: str = POLICY_HONOR
    node_taints_policy: str = POLICY_IGNORE

    @property
    def hard(self) -> bool:
        """A filter (DoNotSchedule) rather than a score (ScheduleAnyway)."""
        return self.when_unsatisfiable == DO_NOT_SCHEDULE


@dataclass(frozen=True, slots=True)
class HostPort:
    """A host port a container asks for; a node can give each (ip, protocol, port) once."""

    port: int
    protocol: str = "TCP"
    host_ip: str = ""


PlacementKey = tuple[object, ...]
NO_LABELS: Final[Mapping[str, str]] = MappingProxyType({})

_KEYS: dict[PlacementKey, PlacementKey] = {}
_KEYS_MAX: Final = 4096
_PLAIN_KEYS: dict[int, tuple[Resources, PlacementKey]] = {}
"""Per request object (by id, the object kept) the key of a pod without node constraints;
bounded like `_KEYS`."""


def _interned(key: PlacementKey) -> PlacementKey:
    """One object per distinct placement key.

    Why: caches look a key up for every pod placed; pods converted from the API each carry
    their own (equal) request objects, and comparing those is a slow path, while identical
    keys compare by identity. Bounded: past `_KEYS_MAX` distinct keys the table starts
    over (equal keys then just stop being identical; nothing depends on it).
    """
    found = _KEYS.get(key)
    if found is None:
        if len(_KEYS) >= _KEYS_MAX:
            _KEYS.clear()
        found = _KEYS[key] = key
    return found


@dataclass(slots=True, eq=False)
class TaskInfo:
    """A pod: its request, placement constraints and scheduling status.

    `init_resreq` is what must fit on a node (the init-container max rule); `resreq` is what
    the pod holds once running. Both default to the same list.
    """

    uid: str
    name: str
    namespace: str = "default"
    job: str = ""
    resreq: Resources = ZERO
    init_resreq: Resources | None = None
    priority: int = 0
    status: TaskStatus = TaskStatus.PENDING
    node_name: str | None = None
    role: str = ""
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    affinity: NodeAffinity | None = None
    host_ports: tuple[HostPort, ...] = ()
    scheduling_gated: bool = False
    preemptable: bool = True
    priority_class_name: str = ""
    creation: float = 0.0
    preempt_never: bool = False
    """`spec.preemptionPolicy: Never`: the pod may not evict others (preempt or reclaim)."""
    _key: PlacementKey | None = field(default=None, repr=False)
    labels: Mapping[str, str] = field(default_factory=lambda: NO_LABELS, repr=False)
    """The pod's labels (shared, never written): what other pods' terms select."""
    pod_affinity: PodAffinity | None = None
    spread: tuple[TopologySpreadConstraint, ...] = ()
    """Topology spread constraints (hard and soft)."""
    _static_key: PlacementKey | None = field(default=None, repr=False)
    devices: PodDevices | None = None
    """Volcano's shared-device request (deviceshare), None for a pod that names no device."""
    vc: Mapping[str, str] = field(default_factory=lambda: NO_LABELS, repr=False)
    """The pod labels / annotations Volcano's plugins read (cdp's cooldown time:
    `vc_names.TASK_ANNOTATIONS`), labels first; shared, never written."""
    scheduled_at: float | None = None
    """When the pod's PodScheduled condition turned True (epoch seconds), or None (cdp)."""
    numa: TaskNuma | None = None
    """A Guaranteed pod's NUMA policy and per-container cpus (numa-aware), else None."""
    strategy_fit: tuple[str, str] | None = None
    """The pod's `volcano.sh/resource-strategy-scoring-type` and `-weight` annotations
    (resource-strategy-fit), None without the first."""

    def __post_init__(self) -> None:
        if self.init_resreq is None:
            self.init_resreq = self.resreq

    @property
    def request(self) -> Resources:
        """What must fit on the node (never None after construction)."""
        assert self.init_resreq is not None
        return self.init_resreq

    @property
    def best_effort(self) -> bool:
        """A pod with an empty request: placed only by backfill (SPEC 3.4)."""
        return self.request.is_zero()

    def placement_key(self) -> PlacementKey:
        """Everything node filtering and scoring may depend on; equal keys share one cache.

        Why: gang jobs have many identical pods, so per-key caching of predicate and score
        vectors turns a per-pod O(nodes) scan into O(changed nodes).
        """
        if self._key is None:
            request = self.request
            if (
                not self.node_selector
                and self.tolerations == ()
                and self.affinity is None
                and self.host_ports == ()
            ):
                # No node constraint (most pods): the key is the request's, found by the
                # request object's identity (pods of one template share it; kept with it).
                hit = _PLAIN_KEYS.get(id(request))
                if hit is not None and hit[0] is request:
                    static = hit[1]
                else:
                    static = _interned((request, (), (), None, ()))
                    if len(_PLAIN_KEYS) >= _KEYS_MAX:
                        _PLAIN_KEYS.clear()
                    _PLAIN_KEYS[id(request)] = (request, static)
            else:
                static = _interned(
                    (
                        request,
                        tuple(sorted(self.node_selector.items())),
                        self.tolerations,
                        self.affinity,
                        self.host_ports,
                    )
                )
            self._static_key = self._key = static
            if self.pod_affinity is not None or self.spread:
                # Self-matching terms make the pod's own namespace and labels matter.
                self._key = _interned(
                    (
                        *static,
                        self.pod_affinity,
                        self.spread,
                        self.namespace,
                        tuple(sorted(self.labels.items())),
                    )
                )
            if self.numa is not None:
                # numa-aware judges the policy and per-container cpus: pods differing only
                # there must not share an allocate verdict.
                self._key = _interned((*self._key, self.numa))
        return self._key

    def static_key(self) -> PlacementKey:
        """The part of the placement key cached filters and scores may depend on: request,
        node selector, tolerations, node affinity, host ports (not the inter-pod terms,
        spread constraints and labels, which only query-time filters read)."""
        key = self._static_key
        if key is None:
            self.placement_key()
            key = self._static_key
            assert key is not None
        return key

    def clone(self) -> TaskInfo:
        """A copy whose status and node can change without touching the snapshot."""
        return TaskInfo(
            self.uid,
            self.name,
            self.namespace,
            self.job,
            self.resreq,
            self.init_resreq,
            self.priority,
            self.status,
            self.node_name,
            self.role,
            self.node_selector,
            self.tolerations,
            self.affinity,
            self.host_ports,
            self.scheduling_gated,
            self.preemptable,
            self.priority_class_name,
            self.creation,
            self.preempt_never,
            self._key,
            self.labels,
            self.pod_affinity,
            self.spread,
            self._static_key,
            self.devices,
            self.vc,
            self.scheduled_at,
            self.numa,
            self.strategy_fit,
        )

    def __repr__(self) -> str:
        return f"TaskInfo({self.namespace}/{self.name}, {self.status.value}, node={self.node_name})"
