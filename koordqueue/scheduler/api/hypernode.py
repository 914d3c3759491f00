"""HyperNodes (Volcano's `topology.volcano.sh/v1alpha1`) and a job's networkTopology, as data,
and the hypernode tree built from them (Volcano's `api/hyper_node_info.go`).

A HyperNode groups nodes (members of type Node, chosen by exact name, a regular expression on
the name, or a label selector) or other HyperNodes (members of type HyperNode, by exact name)
into one network domain of a tier: tier 1 is the closest (one switch), higher tiers are wider.
Volcano's cache builds the tree incrementally, event by event; here it is built whole from the
objects a snapshot holds (`build_tree`), so the answer never depends on the order the objects
arrived in. A tree with a cycle or a HyperNode claimed by two parents is not *ready*: as in
Volcano, jobs with a networkTopology then wait (allocate skips them) until it is corrected.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import structlog

from koordqueue.scheduler.api.selectors import LabelSelector

_log = structlog.get_logger(__name__)

MEMBER_NODE: Final = "Node"
MEMBER_HYPERNODE: Final = "HyperNode"
MODE_HARD: Final = "hard"
"""networkTopology.mode: the job's pods must all fit in one HyperNode of a tier at most
`highestTierAllowed` (the PodGroup CRD's default mode)."""
MODE_SOFT: Final = "soft"
"""networkTopology.mode: the job may spread; nodes close to its placed pods score higher."""
CLUSTER_TOP: Final = "<cluster-top-hypernode>"
"""The virtual HyperNode a session adds above every root HyperNode (Volcano's
ClusterTopHyperNode): one tier above the highest, holding every node of the session."""
ALLOCATED_HYPERNODE_ANNOTATION: Final = "volcano.sh/job-allocated-hypernode"
"""PodGroup annotation Volcano's test builders set; its scheduler does not read it (the job's
HyperNode is recovered from where its pods run), nor does koordqueue."""

CYCLE_ERROR: Final = "cyclic dependency detected: HyperNode {name} is its own ancestor"
MULTIPLE_PARENTS_ERROR: Final = (
    "HyperNode {member} already has a parent {parent}, and cannot set another parent {other}"
)
BAD_REGEX_WARNING: Final = "HyperNode {name}: member pattern {pattern!r} does not compile: {error}"


@dataclass(frozen=True, slots=True)
class MemberSelector:
    """One member's selector: exactly one of the three is set (the CRD's CEL rule)."""

    exact_match: str | None = None
    regex_match: str | None = None
    label_match: LabelSelector | None = None


@dataclass(frozen=True, slots=True)
class HyperNodeMember:
    """`spec.members[]`: a Node or a HyperNode member and how it is selected."""

    type: str
    selector: MemberSelector


@dataclass(frozen=True, slots=True)
class HyperNode:
    """A `topology.volcano.sh/v1alpha1` HyperNode."""

    name: str
    tier: int
    members: tuple[HyperNodeMember, ...] = ()
    tier_name: str = ""


@dataclass(frozen=True, slots=True)
class NetworkTopology:
    """A PodGroup's `spec.networkTopology` (a vcjob's is copied there by Volcano's job
    controller). `highest_tier_name` stands for a tier by its `tierName` and is resolved
    against the HyperNodes when allocate takes the job (Volcano's updateJobTier)."""

    mode: str = MODE_HARD
    highest_tier_allowed: int | None = None
    highest_tier_name: str = ""

    def hard_tier(self, tier_names: Mapping[str, int]) -> int | None:
        """The highest tier a hard-mode job may cross, or None when the job is not hard
        (soft mode, or no tier given or resolvable: Volcano's IsHardTopologyMode)."""
        if self.mode != MODE_HARD:
            return None
        if self.highest_tier_allowed is not None:
            return self.highest_tier_allowed
        if self.highest_tier_name:
            return tier_names.get(self.highest_tier_name)
        return None

    @property
    def soft(self) -> bool:
        """Soft mode (Volcano's IsSoftTopologyMode)."""
        return self.mode == MODE_SOFT


NodeLabels = tuple[str, Mapping[str, str]]
"""A node as member selection sees it: its name and its labels."""


def get_members(
    selector: MemberSelector, nodes: Sequence[NodeLabels], *, owner: str = ""
) -> set[str]:
    """The node names a Node member's selector picks (Volcano's GetMembers).

    An exact name is taken as written, existing or not (the session keeps only nodes it
    has); a pattern matches anywhere in the name (Go's MatchString); a label selector with no
    requirement selects nothing; a pattern that does not compile selects nothing (logged).
    """
    members: set[str] = set()
    if selector.exact_match is not None:
        if not selector.exact_match:
            return members
        members.add(selector.exact_match)
    if selector.regex_match is not None:
        try:
            pattern = re.compile(selector.regex_match)
        except re.error as exc:
            _log.warning(
                BAD_REGEX_WARNING.format(name=owner, pattern=selector.regex_match, error=exc)
            )
            return set()
        members.update(name for name, _labels in nodes if pattern.search(name))
    label = selector.label_match
    if label is not None:
        if label.empty:
            return members
        if label.invalid() is not None:
            return set()
        members.update(name for name, labels in nodes if label.matches(labels))
    return members


@dataclass(slots=True)
class TreeNode:
    """One HyperNode in the tree: its tier, tier name, parent and children."""

    name: str
    tier: int
    tier_name: str = ""
    parent: str = ""
    children: list[str] = field(default_factory=list)
    hypernode: HyperNode | None = None


@dataclass(slots=True)
class HyperNodeTree:
    """The HyperNodes as a tree (Volcano's HyperNodesInfo): parent and children, the real
    nodes under each, the names per tier, and whether it is ready to schedule by."""

    infos: dict[str, TreeNode] = field(default_factory=dict)
    real_nodes: dict[str, frozenset[str]] = field(default_factory=dict)
    """HyperNode -> every node under it (through its HyperNode members too)."""
    by_tier: dict[int, list[str]] = field(default_factory=dict)
    """Tier -> its HyperNodes' names, sorted."""
    errors: list[str] = field(default_factory=list)
    """Why the tree is not ready (a cycle, a HyperNode with two parents)."""

    @property
    def ready(self) -> bool:
        """No cycle and no HyperNode with two parents (Volcano's HyperNodesInfo.Ready)."""
        return not self.errors

    def tier(self, name: str) -> int:
        info = self.infos.get(name)
        return info.tier if info is not None else 0

    def tier_names(self) -> dict[str, int]:
        """tierName -> tier (Volcano's HyperNodeTierNameMap; on a conflict the last read,
        in name order, wins)."""
        out: dict[str, int] = {}
        for name in sorted(self.infos):
            info = self.infos[name]
            if info.tier_name:
                out[info.tier_name] = info.tier
        return out

    def ancestors(self, name: str) -> list[str]:
        """`name` and its ancestors, closest first (Volcano's GetAncestors)."""
        out = [name]
        current = name
        while True:
            info = self.infos.get(current)
            parent = info.parent if info is not None else ""
            if not parent or parent in out:
                return out
            out.append(parent)
            current = parent

    def lca(self, left: str, right: str) -> str:
        """The lowest common ancestor of two HyperNodes ("" when they share none; one of
        them when the other is empty: Volcano's GetLCAHyperNode)."""
        if not left:
            return right
        if not right:
            return left
        mine = set(self.ancestors(left))
        for ancestor in self.ancestors(right):
            if ancestor in mine:
                return ancestor
        return ""

    def leaves(self, name: str) -> set[str]:
        """The leaf HyperNodes under `name` (itself when it has no HyperNode member)."""
        out: set[str] = set()
        seen: set[str] = set()

        def walk(current: str) -> None:
            info = self.infos.get(current)
            if info is None or current in seen:
                return
            seen.add(current)
            hypernode = info.hypernode
            children = [
                m.selector.exact_match
                for m in (hypernode.members if hypernode is not None else ())
                if m.type == MEMBER_HYPERNODE and m.selector.exact_match
            ]
            if not children:
                out.add(current)
            for child in children:
                walk(child)
            seen.discard(current)

        walk(name)
        return out

    def regex_or_label_leaves(self) -> set[str]:
        """Leaf HyperNodes with a member chosen by pattern or labels (Volcano's
        GetRegexOrLabelMatchLeafHyperNodes): a new node may join them."""
        out: set[str] = set()
        for name, info in self.infos.items():
            members = info.hypernode.members if info.hypernode is not None else ()
            if any(m.type == MEMBER_HYPERNODE for m in members):
                continue
            if any(
                m.selector.regex_match is not None or m.selector.label_match is not None
                for m in members
            ):
                out.add(name)
        return out

    def node_matches(self, node: str, labels: Mapping[str, str], hypernode: str) -> bool:
        """Does a node match a pattern or label member of `hypernode` (an exact member does
        not count: Volcano's NodeRegexOrLabelMatchLeafHyperNode)? KeyError when unknown."""
        info = self.infos[hypernode]
        for member in info.hypernode.members if info.hypernode is not None else ():
            if member.type != MEMBER_NODE:
                continue
            sel = member.selector
            if sel.regex_match is not None:
                try:
                    if re.search(sel.regex_match, node) is not None:
                        return True
                except re.error:
                    pass
                continue
            label = sel.label_match
            if (
                label is not None
                and not label.empty
                and label.invalid() is None
                and label.matches(labels)
            ):
                return True
        return False


def build_tree(hypernodes: Iterable[HyperNode], nodes: Sequence[NodeLabels]) -> HyperNodeTree:
    """The tree of `hypernodes` over `nodes` (names and labels), built whole.

    HyperNodes are read in name order, so when two claim the same child the first by name
    keeps it (the tree is then not ready, as Volcano's is until the conflict is fixed).
    """
    tree = HyperNodeTree()
    ordered = sorted(hypernodes, key=lambda h: h.name)
    for hn in ordered:
        tree.infos[hn.name] = TreeNode(hn.name, hn.tier, hn.tier_name, hypernode=hn)
        tree.by_tier.setdefault(hn.tier, []).append(hn.name)
    for hn in ordered:
        for member in hn.members:
            child = member.selector.exact_match
            if member.type != MEMBER_HYPERNODE or not child:
                continue
            info = tree.infos.get(child)
            if info is None:
                continue  # not created (yet): Volcano waits for it too
            if info.parent and info.parent != hn.name:
                tree.errors.append(
                    MULTIPLE_PARENTS_ERROR.format(member=child, parent=info.parent, other=hn.name)
                )
                continue
            if not info.parent:
                info.parent = hn.name
                tree.infos[hn.name].children.append(child)
    for name in list(tree.infos):
        if _in_cycle(tree, name):
            tree.errors.append(CYCLE_ERROR.format(name=name))
    direct: dict[str, set[str]] = {}
    for hn in ordered:
        found: set[str] = set()
        for member in hn.members:
            if member.type == MEMBER_NODE:
                found |= get_members(member.selector, nodes, owner=hn.name)
        direct[hn.name] = found
    for hn in ordered:
        tree.real_nodes[hn.name] = frozenset(_under(tree, direct, hn.name, set()))
    for names in tree.by_tier.values():
        names.sort()
    return tree


def _in_cycle(tree: HyperNodeTree, name: str) -> bool:
    seen = {name}
    current = tree.infos[name].parent
    while current:
        if current == name:
            return True
        if current in seen:
            return False
        seen.add(current)
        info = tree.infos.get(current)
        current = info.parent if info is not None else ""
    return False


def _under(
    tree: HyperNodeTree, direct: dict[str, set[str]], name: str, chain: set[str]
) -> set[str]:
    if name in chain:
        return set()
    chain.add(name)
    out = set(direct.get(name, ()))
    for child in tree.infos[name].children:
        out |= _under(tree, direct, child, chain)
    chain.discard(name)
    return out


__all__ = [
    "CLUSTER_TOP",
    "MEMBER_HYPERNODE",
    "MEMBER_NODE",
    "MODE_HARD",
    "MODE_SOFT",
    "HyperNode",
    "HyperNodeMember",
    "HyperNodeTree",
    "MemberSelector",
    "NetworkTopology",
    "TreeNode",
    "build_tree",
    "get_members",
]
