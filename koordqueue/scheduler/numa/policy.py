"""The kubelet topology manager's policies as Volcano's numa-aware runs them per container:
every provider's hints are merged (bitwise AND of one hint per resource, over every
permutation) into the best hint, which the policy admits or not.

A hint is (mask, preferred); mask None means "any NUMA node". Providers answer per resource:
None for the resource = no preference, an empty list = no possible placement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import product

from koordqueue.scheduler.api import numa_names as nn
from koordqueue.scheduler.api.numa import mask_count, mask_of


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """A NUMA affinity (None: any node) and whether it is a preferred (minimal) one."""

    mask: int | None = None
    preferred: bool = False


ProviderHints = Mapping[str, Sequence[TopologyHint] | None] | None
"""One provider's answer: resource -> hints (None: no preference); None: no preference at all."""


def filter_providers_hints(providers: Sequence[ProviderHints]) -> list[list[TopologyHint]]:
    """One list of hints per resource of every provider (filterProvidersHints)."""
    out: list[list[TopologyHint]] = []
    for hints in providers:
        if not hints:
            out.append([TopologyHint(None, True)])
            continue
        for resource_hints in hints.values():
            if resource_hints is None:
                out.append([TopologyHint(None, True)])
            elif len(resource_hints) == 0:
                out.append([TopologyHint(None, False)])
            else:
                out.append(list(resource_hints))
    return out


def _narrower(a: int, b: int) -> bool:
    """The kubelet's IsNarrowerThan: fewer NUMA nodes, or as many and lower-numbered."""
    ca, cb = mask_count(a), mask_count(b)
    return a < b if ca == cb else ca < cb


def merge_permutation(
    numa_nodes: Sequence[int], permutation: Sequence[TopologyHint]
) -> TopologyHint:
    """AND of the permutation's masks (None = every node); preferred if all are."""
    merged = mask_of(numa_nodes)
    preferred = True
    for hint in permutation:
        merged &= merged if hint.mask is None else hint.mask
        preferred = preferred and hint.preferred
    return TopologyHint(merged, preferred)


def merge_filtered_hints(
    numa_nodes: Sequence[int], filtered: Sequence[Sequence[TopologyHint]]
) -> TopologyHint:
    """The best merged hint: preferred over not, then the narrowest (mergeFilteredHints);
    {all nodes, not preferred} when no permutation leaves a node."""
    best_mask, best_preferred = mask_of(numa_nodes), False
    for permutation in product(*filtered):
        merged = merge_permutation(numa_nodes, permutation)
        mask = merged.mask or 0
        if mask == 0:
            continue
        if merged.preferred and not best_preferred:
            best_mask, best_preferred = mask, True
            continue
        if not merged.preferred and best_preferred:
            continue
        if _narrower(mask, best_mask):
            best_mask, best_preferred = mask, merged.preferred
    return TopologyHint(best_mask, best_preferred)


def _single_numa_hints(filtered: Sequence[Sequence[TopologyHint]]) -> list[list[TopologyHint]]:
    """Only preferred hints of one NUMA node (or any node) survive (filterSingleNumaHints)."""
    return [
        [h for h in hints if h.preferred and (h.mask is None or mask_count(h.mask) == 1)]
        for hints in filtered
    ]


Policy = Callable[[Sequence[ProviderHints]], tuple[TopologyHint, bool]]
"""providers' hints -> (best hint, admitted)."""


def policy_for(name: str, numa_nodes: Sequence[int]) -> Policy:
    """The node's TopologyManagerPolicy as a function (GetPolicy; unknown names act as none)."""
    nodes = list(numa_nodes)

    def none(_hints: Sequence[ProviderHints]) -> tuple[TopologyHint, bool]:
        return TopologyHint(), True

    def best_effort(hints: Sequence[ProviderHints]) -> tuple[TopologyHint, bool]:
        return merge_filtered_hints(nodes, filter_providers_hints(hints)), True

    def restricted(hints: Sequence[ProviderHints]) -> tuple[TopologyHint, bool]:
        best = merge_filtered_hints(nodes, filter_providers_hints(hints))
        return best, best.preferred

    def single_numa_node(hints: Sequence[ProviderHints]) -> tuple[TopologyHint, bool]:
        single = _single_numa_hints(filter_providers_hints(hints))
        best = merge_filtered_hints(nodes, single)
        return best, best.preferred

    return {
        nn.POLICY_BEST_EFFORT: best_effort,
        nn.POLICY_RESTRICTED: restricted,
        nn.POLICY_SINGLE_NUMA_NODE: single_numa_node,
    }.get(name, none)


__all__ = [
    "Policy",
    "ProviderHints",
    "TopologyHint",
    "filter_providers_hints",
    "merge_filtered_hints",
    "merge_permutation",
    "policy_for",
]
