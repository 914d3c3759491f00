"""HyperNode vocabulary of Volcano's tests (api.BuildHyperNode, api.MemberConfig,
util.BuildPodGroupWithNetWorkTopologies, uthelper's HyperNodes fields) over koordqueue.

Volcano's tests may give a session its HyperNode sets and tiers directly (uthelper's
`HyperNodes` / `HyperNodesSetByTier`) without the HyperNode objects; koordqueue builds the
tree from HyperNode objects only, so a case given as sets is written here as the HyperNodes
that make those sets (each set's nodes as exact Node members, each parent's children as
exact HyperNode members). The sets and tiers are the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from koordqueue.scheduler import ClusterSnapshot
from koordqueue.scheduler.api.hypernode import (
    MEMBER_HYPERNODE,
    MEMBER_NODE,
    HyperNode,
    HyperNodeMember,
    MemberSelector,
    NetworkTopology,
)
from koordqueue.scheduler.api.selectors import LabelSelector, LabelSelectorRequirement

EXACT = "exact"
REGEX = "regex"
LABEL = "label"


def member(
    name: str,
    kind: str = MEMBER_NODE,
    selector: str = EXACT,
    labels: LabelSelector | None = None,
) -> HyperNodeMember:
    """api.MemberConfig{Name, Type, Selector, LabelMatch}: the name is an exact name or a
    pattern; a label member carries its selector."""
    if selector == EXACT:
        return HyperNodeMember(kind, MemberSelector(exact_match=name))
    if selector == REGEX:
        return HyperNodeMember(kind, MemberSelector(regex_match=name))
    return HyperNodeMember(kind, MemberSelector(label_match=labels))


def hypernode(name: str, tier: int, *members: HyperNodeMember, tier_name: str = "") -> HyperNode:
    """api.BuildHyperNode(name, tier, members)."""
    return HyperNode(name, tier, tuple(members), tier_name)


def nodes_of(name: str, tier: int, *nodes: str, tier_name: str = "") -> HyperNode:
    """A HyperNode of exact Node members."""
    return hypernode(name, tier, *(member(n) for n in nodes), tier_name=tier_name)


def parent_of(name: str, tier: int, *children: str, tier_name: str = "") -> HyperNode:
    """A HyperNode of exact HyperNode members."""
    return hypernode(
        name, tier, *(member(c, MEMBER_HYPERNODE) for c in children), tier_name=tier_name
    )


def match_labels(**labels: str) -> LabelSelector:
    return LabelSelector(tuple(sorted(labels.items())))


def match_expression(key: str, operator: str, *values: str) -> LabelSelector:
    return LabelSelector((), (LabelSelectorRequirement(key, operator, tuple(values)),))


def hard(tier: int) -> NetworkTopology:
    """networkTopology {mode: hard, highestTierAllowed: tier}."""
    return NetworkTopology("hard", tier)


def soft(tier: int = 0) -> NetworkTopology:
    """networkTopology {mode: soft, highestTierAllowed: tier} (the tier is not read)."""
    return NetworkTopology("soft", tier)


def with_topology(
    snapshot: ClusterSnapshot,
    hypernodes: Sequence[HyperNode],
    topologies: Mapping[str, NetworkTopology] | None = None,
) -> ClusterSnapshot:
    """The snapshot with its HyperNodes, and each named PodGroup's networkTopology
    (util.BuildPodGroupWithNetWorkTopologies)."""
    for job in snapshot.jobs:
        topology = (topologies or {}).get(job.name)
        if topology is not None:
            job.network_topology = topology
    return dataclasses.replace(snapshot, hypernodes=tuple(hypernodes))
