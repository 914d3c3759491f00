"""TaskInfo: one pod as the scheduler sees it (plain data, mutable only inside a session)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from koordqueue.domain.resources import ZERO, Resources


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
    """Expressions that must all hold (terms are ORed)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeAffinity:
    """Required node affinity: the node must satisfy at least one term."""

    required: tuple[NodeSelectorTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class HostPort:
    """A host port a container asks for; a node can give each (ip, protocol, port) once."""

    port: int
    protocol: str = "TCP"
    host_ip: str = ""


PlacementKey = tuple[object, ...]


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
            self._key = (
                self.request,
                tuple(sorted(self.node_selector.items())),
                self.tolerations,
                self.affinity,
                self.host_ports,
            )
        return self._key

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
        )

    def __repr__(self) -> str:
        return f"TaskInfo({self.namespace}/{self.name}, {self.status.value}, node={self.node_name})"
