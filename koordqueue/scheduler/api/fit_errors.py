"""Why a task could not be placed: reasons per node, rendered as kube-scheduler renders them.

The message is kube-scheduler's `FitError.Error()` (pkg/scheduler/framework/types.go), so
`kubectl describe pod` reads the same under koordqueue as under the default scheduler:
"0/N nodes are available: " then either the pre-filter message (a reason that rejects the pod
before any node is tried) or the per-node histogram, "<count> <reason>" strings sorted as
strings and joined by ", ", then "."; then, when preemption was tried and found nothing, a
space and "preemption: " with the same form over the preemption attempt's per-node answers.
Which reason a node gives follows Volcano's allocate (insufficient resources first, then the
predicates); only the rendering is kube-scheduler's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping

from koordqueue.scheduler.api import names


class FitErrors:
    """Reasons per node for one task; `message()` gives "0/3 nodes are available: ...".

    `pre_filter`: the pod was rejected before any node was tried (kube-scheduler's PreFilter
    message; every node then carries it as its reason). `post_filter`: what a preemption
    attempt answered, already rendered ("preemption: ..."). Immutable once built (a new
    object carries a preemption answer), so one object may be shared by identical tasks.
    """

    __slots__ = ("_counts", "node_reasons", "post_filter", "pre_filter", "total_nodes")

    def __init__(
        self,
        total_nodes: int,
        node_reasons: Mapping[str, tuple[str, ...]] | None = None,
        *,
        pre_filter: str | None = None,
        post_filter: str | None = None,
    ) -> None:
        self.total_nodes = total_nodes
        self.node_reasons: dict[str, tuple[str, ...]] = dict(node_reasons or {})
        self.pre_filter = pre_filter
        self.post_filter = post_filter
        self._counts: Counter[str] | None = None

    @classmethod
    def all_nodes(cls, node_names: Iterable[str], reason: str) -> FitErrors:
        """A pre-predicate failure: the pod is rejected before any node is tried, so the
        message names the reason once (every node still carries it, for per-node views)."""
        nodes = list(node_names)
        return cls(len(nodes), {n: (reason,) for n in nodes}, pre_filter=reason)

    def with_preemption(self, answer: str) -> FitErrors:
        """These errors plus a preemption attempt's answer (`preemption_answer`)."""
        return FitErrors(self.total_nodes, self.node_reasons, pre_filter=self.pre_filter,
                         post_filter=names.PREEMPTION_PREFIX + answer)

    def histogram(self) -> Counter[str]:
        """Reason -> number of nodes that gave it (each node counts a reason once)."""
        if self._counts is None:
            counts: Counter[str] = Counter()
            for reasons in self.node_reasons.values():
                counts.update(set(reasons))
            self._counts = counts
        return self._counts

    def message(self) -> str:
        """The message the adapter writes into the pod's PodScheduled condition, its
        FailedScheduling event and the PodGroup's condition (and explain prints)."""
        if self.total_nodes == 0:
            return names.NO_NODES_AVAILABLE
        text = names.NODES_AVAILABLE.format(total=self.total_nodes)
        if self.pre_filter:
            text += f" {self.pre_filter}."
        else:
            text += histogram_text(self.histogram())
        if self.post_filter:
            text += f" {self.post_filter}"
        return text

    def __str__(self) -> str:
        return self.message()

    def __repr__(self) -> str:
        return f"FitErrors({self.message()!r})"


def histogram_text(counts: Mapping[str, int]) -> str:
    """" <count> <reason>, ... ." with the strings sorted as kube-scheduler sorts them (as
    strings: "10 x" before "2 y"), or "" when there is nothing to count."""
    items = sorted(f"{count} {reason}" for reason, count in counts.items())
    return f" {', '.join(items)}." if items else ""


def preemption_answer(
    node_names: Iterable[str], candidates: Collection[str], *, never: bool = False
) -> str:
    """What kube-scheduler's DefaultPreemption says when it finds no victims, over the
    session's nodes: "0/N nodes are available: <a> Preemption is not helpful for scheduling,
    <b> No preemption victims found for incoming pod." (`candidates`: the nodes where
    evictions could have helped), or its "not eligible" answer for preemptionPolicy Never."""
    if never:
        return names.PREEMPTION_NEVER
    counts: Counter[str] = Counter()
    total = 0
    for name in node_names:
        total += 1
        counts[names.NO_VICTIMS if name in candidates else names.NOT_HELPFUL] += 1
    return names.NODES_AVAILABLE.format(total=total) + histogram_text(counts)
