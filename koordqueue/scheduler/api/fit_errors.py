"""Why a task could not be placed: reasons per node, rendered as a Kubernetes-style histogram."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from koordqueue.scheduler.api import names


class FitErrors:
    """Reasons per node for one task; `message()` gives "0/3 nodes are available: ...".

    Each node contributes its reasons once; the histogram is ordered by count (descending)
    and then by reason, so the most common obstacle comes first.
    """

    __slots__ = ("_counts", "node_reasons", "total_nodes")

    def __init__(
        self, total_nodes: int, node_reasons: Mapping[str, tuple[str, ...]] | None = None
    ) -> None:
        self.total_nodes = total_nodes
        self.node_reasons: dict[str, tuple[str, ...]] = dict(node_reasons or {})
        self._counts: Counter[str] | None = None

    @classmethod
    def all_nodes(cls, node_names: Iterable[str], reason: str) -> FitErrors:
        """The same reason on every node (a pre-predicate failure)."""
        nodes = list(node_names)
        return cls(len(nodes), {n: (reason,) for n in nodes})

    def histogram(self) -> Counter[str]:
        """Reason -> number of nodes that gave it."""
        if self._counts is None:
            counts: Counter[str] = Counter()
            for reasons in self.node_reasons.values():
                counts.update(set(reasons))
            self._counts = counts
        return self._counts

    def message(self) -> str:
        """The aggregated message the adapter puts into the pod's PodScheduled condition."""
        if self.total_nodes == 0:
            return names.NO_NODES_AVAILABLE
        items = sorted(self.histogram().items(), key=lambda kv: (-kv[1], kv[0]))
        reasons = ", ".join(f"{count} {reason}" for reason, count in items)
        return names.ALL_NODES_UNAVAILABLE.format(total=self.total_nodes, reasons=reasons)

    def __str__(self) -> str:
        return self.message()

    def __repr__(self) -> str:
        return f"FitErrors({self.message()!r})"
