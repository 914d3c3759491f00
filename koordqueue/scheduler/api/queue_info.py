"""QueueInfo: a scheduler queue (SPEC 1, `scheduling.volcano.sh` Queue)."""

from __future__ import annotations

from dataclasses import dataclass, field

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api.names import QUEUE_STATE_OPEN


@dataclass(frozen=True, slots=True)
class NodeGroupAffinity:
    """A Queue's `spec.affinity` (nodegroup plugin): node groups required / preferred, and
    refused (anti-affinity) required / preferred; preferred keeps its list order."""

    required: frozenset[str] = frozenset()
    preferred: tuple[str, ...] = ()
    anti_required: frozenset[str] = frozenset()
    anti_preferred: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """Weight and limits of a queue.

    capability None = unlimited; deserved None = derived by the plugin (proportion) or
    nothing guaranteed beyond `guarantee` (capacity); `parent` links hierarchical queues.
    `priority` (spec.priority) orders queues before their share; `state` (status.state) other
    than Open stops new work in capacity and proportion (what runs stays). `hierarchy` and
    `hierarchy_weights` are the `volcano.sh/hierarchy` and `volcano.sh/hierarchy-weights`
    annotations, read by drf with `enableHierarchy` ("" when absent).
    """

    name: str
    weight: int = 1
    capability: Resources | None = None
    deserved: Resources | None = None
    guarantee: Resources = field(default_factory=Resources)
    parent: str | None = None
    reclaimable: bool = True
    priority: int = 0
    creation: float = 0.0
    state: str = QUEUE_STATE_OPEN
    hierarchy: str = ""
    hierarchy_weights: str = ""
    node_group_affinity: NodeGroupAffinity | None = None
    """`spec.affinity` (nodegroup), None when the queue has none."""
    node_group_limits: str | None = None
    """The raw `volcano.sh/nodegroup-resource-limits` annotation (nodegroup), None if absent."""

    @property
    def is_open(self) -> bool:
        """Only an Open queue takes new work (enqueue, allocate, reclaim)."""
        return self.state == QUEUE_STATE_OPEN

    @property
    def uid(self) -> str:
        """Queues are cluster-scoped: the name is the identity."""
        return self.name
