"""HyperNode tree: cases of volcano-sh/volcano v1.14.1 pkg/scheduler/api/hyper_node_info_test.go
(every test function), run against `build_tree` and `HyperNodeTree`.

Volcano's cache folds HyperNodes in one by one (`UpdateHyperNode`); koordqueue builds the
tree whole from the objects a snapshot holds. A case that updates a list in order is run as
the tree of that list; "then corrected" is the tree of the corrected list.

Switched off and run (each fails then): the union of a HyperNode member's nodes into its
parent (Normal, WithCycle and MultipleParents fail: s2's nodes miss its children's); the
cycle check (WithCycle: the tree reads ready); the two-parents check (MultipleParents:
ready); pattern/label leaves answering every leaf (RegexSelectorLeaf: s0 comes in);
`leaves` answering the HyperNode itself (GetLeafNodes); the label branch of `node_matches`
(NodeRegexOrLabelMatch: node-5/s4 and node-6/s6 no longer match; the not-matching cases
hold either way); `ancestors` answering the HyperNode alone (GetAncestors: leaf and
intermediate; GetLCA: sibling and ancestor; the root's ancestors, two HyperNodes with no
common ancestor and a HyperNode with itself have the trivial answer, so those cases hold
either way); the label selection of `get_members` (GetMembers: the five selecting label
cases; the others select nothing either way); the pattern selection (the exact-and-regex
case); an unknown HyperNode answered False (its KeyError case).
"""

from __future__ import annotations

import pytest

from koordqueue.scheduler.api.hypernode import (
    MEMBER_HYPERNODE,
    HyperNode,
    HyperNodeTree,
    MemberSelector,
    build_tree,
    get_members,
)
from koordqueue.scheduler.api.selectors import LabelSelector

from .topology import (
    LABEL,
    REGEX,
    hypernode,
    match_expression,
    match_labels,
    member,
    nodes_of,
    parent_of,
)

NO_NODES: list[tuple[str, dict[str, str]]] = []


def _info(tree: HyperNodeTree) -> dict[str, str]:
    """HyperNodesInfo(): "Name: s0, Tier: 1, TierName: , Parent: s2" per HyperNode."""
    return {
        name: f"Name: {name}, Tier: {i.tier}, TierName: {i.tier_name}, Parent: {i.parent}"
        for name, i in tree.infos.items()
    }


def _real(tree: HyperNodeTree) -> dict[str, set[str]]:
    return {name: set(nodes) for name, nodes in tree.real_nodes.items()}


def _by_tier(tree: HyperNodeTree) -> dict[int, set[str]]:
    return {tier: set(names) for tier, names in tree.by_tier.items()}


def test_update_hypernode_normal() -> None:
    """TestHyperNodesInfo_UpdateHyperNode_Normal, "update successfully"."""
    s0 = nodes_of("s0", 1, "node-0", "node-1")
    s1 = nodes_of("s1", 1, "node-2", "node-3")
    s2 = parent_of("s2", 2, "s1", "s0")
    tree = build_tree([s2, s0, s1], NO_NODES)
    assert _info(tree) == {
        "s0": "Name: s0, Tier: 1, TierName: , Parent: s2",
        "s1": "Name: s1, Tier: 1, TierName: , Parent: s2",
        "s2": "Name: s2, Tier: 2, TierName: , Parent: ",
    }
    assert _real(tree) == {
        "s0": {"node-0", "node-1"},
        "s1": {"node-2", "node-3"},
        "s2": {"node-0", "node-1", "node-2", "node-3"},
    }
    assert _by_tier(tree) == {1: {"s0", "s1"}, 2: {"s2"}}
    assert tree.ready


def test_update_hypernode_with_cycle() -> None:
    """TestHyperNodesInfo_UpdateHyperNode_WithCycle, "cycle dependency and finally corrected":
    s1 holds s0 and s3, s2 holds s1, s3 holds s2 (a cycle: not ready); s1 corrected to hold
    s0 alone: ready, one chain s0 < s1 < s2 < s3."""
    s0 = nodes_of("s0", 1, "node-0", "node-1")
    s1 = parent_of("s1", 2, "s0", "s3")
    s11 = parent_of("s1", 2, "s0")
    s2 = parent_of("s2", 3, "s1")
    s3 = parent_of("s3", 4, "s2")
    cyclic = build_tree([s2, s0, s1, s3], NO_NODES)
    assert not cyclic.ready
    assert cyclic.errors
    fixed = build_tree([s2, s0, s11, s3], NO_NODES)
    assert fixed.ready
    assert _info(fixed) == {
        "s0": "Name: s0, Tier: 1, TierName: , Parent: s1",
        "s1": "Name: s1, Tier: 2, TierName: , Parent: s2",
        "s2": "Name: s2, Tier: 3, TierName: , Parent: s3",
        "s3": "Name: s3, Tier: 4, TierName: , Parent: ",
    }
    assert _real(fixed) == {name: {"node-0", "node-1"} for name in ("s0", "s1", "s2", "s3")}


def test_update_hypernode_multiple_parents() -> None:
    """TestHyperNodesInfo_UpdateHyperNode_MultipleParents, "multi parents": s1 and s2 both
    hold s0 (not ready); s2 corrected to hold s1: ready."""
    s0 = nodes_of("s0", 1, "node-0", "node-1")
    s1 = parent_of("s1", 2, "s0")
    s2 = parent_of("s2", 3, "s0")
    s22 = parent_of("s2", 3, "s1")
    twice = build_tree([s0, s1, s2], NO_NODES)
    assert not twice.ready
    fixed = build_tree([s0, s1, s22], NO_NODES)
    assert fixed.ready
    assert _real(fixed) == {name: {"node-0", "node-1"} for name in ("s0", "s1", "s2")}
    assert _info(fixed) == {
        "s0": "Name: s0, Tier: 1, TierName: , Parent: s1",
        "s1": "Name: s1, Tier: 2, TierName: , Parent: s2",
        "s2": "Name: s2, Tier: 3, TierName: , Parent: ",
    }


def test_regex_or_label_leaf_hypernodes() -> None:
    """TestHyperNodesInfo_GetRegexSelectorLeafHyperNodes, "get all leaf hyperNodes
    correctly": leaves with a pattern member are s1 and s3 (s0 is exact only, s2 has a
    HyperNode member)."""
    s0 = hypernode("s0", 1, member("node-1"), member("node-1"))
    s1 = hypernode("s1", 1, member("node-2", selector=REGEX), member("node-3", selector=REGEX))
    s2 = hypernode(
        "s2", 1, member("node-4", selector=REGEX), member("node-5", MEMBER_HYPERNODE)
    )
    s3 = hypernode("s3", 1, member("node-6", selector=REGEX), member("node-7"))
    s4 = parent_of("s4", 2, "s0", "s1")
    s5 = hypernode("s5", 2, member("s2", MEMBER_HYPERNODE, REGEX), member("s3", MEMBER_HYPERNODE))
    s6 = parent_of("s6", 3, "s4", "s5")
    tree = build_tree([s0, s1, s2, s3, s4, s5, s6], NO_NODES)
    assert tree.regex_or_label_leaves() == {"s1", "s3"}


def test_leaf_nodes() -> None:
    """TestHyperNodesInfo_GetLeafNodes, "Get correct leaf hyperNodes": under s3, s0 and s1."""
    s0 = nodes_of("s0", 1, "node-0", "node-1")
    s1 = nodes_of("s1", 1, "node-2", "node-3")
    s2 = parent_of("s2", 2, "s1", "s0")
    s3 = parent_of("s3", 3, "s2")
    tree = build_tree([s2, s3, s0, s1], NO_NODES)
    assert tree.leaves("s3") == {"s0", "s1"}


_MATCH_TREE = [
    hypernode("s2", 1, member("^not-match-prefix", MEMBER_HYPERNODE, REGEX),
              member("node-3", selector=REGEX)),
    hypernode("s3", 1, member("node-4", MEMBER_HYPERNODE, REGEX)),
    nodes_of("s0", 1, "node-0", "node-1"),
    hypernode("s1", 1, member("^prefix", selector=REGEX), member("node-2", selector=REGEX)),
    hypernode("s4", 1, member("node-5", selector=LABEL, labels=match_labels(role="worker"))),
    hypernode("s5", 1, member("node-5", selector=LABEL, labels=match_labels(role="invalid-role"))),
    hypernode("s6", 1, member("node-6", selector=LABEL,
                              labels=match_expression("role", "In", "master"))),
]  # fmt: skip
_NODE_LABELS = {"node-5": {"role": "worker"}, "node-6": {"role": "master"}}


@pytest.mark.parametrize(
    ("node", "hypernode_name", "expected"),
    [
        ("node-5", "s4", True),
        ("node-0", "s0", False),
        ("node-1", "s0", False),
        ("prefix-1", "s1", True),
        ("node-2", "s1", True),
        ("not-match-prefix", "s2", False),
        ("node-4", "s3", False),
        ("node-5", "s5", False),
        ("node-6", "s6", True),
    ],
)
def test_node_regex_or_label_match(node: str, hypernode_name: str, expected: bool) -> None:
    """TestHyperNodesInfo_NodeRegexOrLabelMatchHyperNode, its nine cases: exact members do
    not count, a pattern or label member of type Node does."""
    tree = build_tree(_MATCH_TREE, [(n, labels) for n, labels in _NODE_LABELS.items()])
    assert tree.node_matches(node, _NODE_LABELS.get(node, {}), hypernode_name) is expected


def test_node_regex_or_label_match_unknown_hypernode() -> None:
    """The same function's error for a HyperNode the cache does not hold (Volcano returns
    an error; here a KeyError)."""
    tree = build_tree(_MATCH_TREE, [])
    with pytest.raises(KeyError):
        tree.node_matches("node-0", {}, "s9")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("s0", ["s0", "s2", "s3", "s4"]),
        ("s2", ["s2", "s3", "s4"]),
        ("s4", ["s4"]),
    ],
)
def test_ancestors(name: str, expected: list[str]) -> None:
    """TestHyperNodesInfo_GetAncestors: leaf, intermediate and root HyperNode."""
    tree = build_tree(
        [
            nodes_of("s0", 1, "node-0", "node-1"),
            parent_of("s4", 4, "s3"),
            nodes_of("s1", 1, "node-0", "node-1"),
            parent_of("s2", 2, "s0", "s1"),
            parent_of("s3", 3, "s2"),
        ],
        NO_NODES,
    )
    assert tree.ancestors(name) == expected


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ("s0", "s1", "s4"),
        ("s0", "s-orphan", ""),
        ("s4", "s0", "s4"),
        ("node6", "node6", "node6"),
    ],
    ids=["sibling", "no common ancestor", "one is the other's ancestor", "same"],
)
def test_lowest_common_ancestor(left: str, right: str, expected: str) -> None:
    """TestGetLCAHyperNode: s0, s1 under s4; s2, s3 under s5; s4, s5 under s6; an orphan."""
    hypernodes: list[HyperNode] = [
        nodes_of("s0", 1, "node-0", "node-1"),
        nodes_of("s1", 1, "node-2", "node-3"),
        nodes_of("s2", 1, "node-4", "node-5"),
        nodes_of("s3", 1, "node-6", "node-7"),
        parent_of("s4", 2, "s0", "s1"),
        parent_of("s5", 2, "s2", "s3"),
        parent_of("s6", 3, "s4", "s5"),
        nodes_of("s-orphan", 1, "node-8", "node-9"),
    ]
    tree = build_tree(hypernodes, NO_NODES)
    assert tree.lca(left, right) == expected


_TWO = [("node1", {"role": "worker"}), ("node2", {"role": "master"})]
_ONE_LABELLED = [("node1", {"role": "worker"}), ("node2", {})]


@pytest.mark.parametrize(
    ("selector", "nodes", "expected"),
    [
        (MemberSelector(label_match=match_labels(role="worker")), _TWO, {"node1"}),
        (MemberSelector(label_match=match_labels(role="invalid-role")), _TWO, set()),
        (MemberSelector(label_match=None), _TWO, set()),
        (MemberSelector(label_match=LabelSelector()), _TWO, set()),
        (MemberSelector(label_match=match_expression("role", "In", "worker")), _TWO, {"node1"}),
        (MemberSelector(label_match=match_expression("role", "In", "invalid-role")), _TWO, set()),
        (MemberSelector(label_match=match_expression("role", "NotIn", "master")), _TWO,
         {"node1"}),
        (MemberSelector(label_match=match_expression("role", "Exists")), _ONE_LABELLED,
         {"node1"}),
        (MemberSelector(label_match=match_expression("role", "DoesNotExist")), _ONE_LABELLED,
         {"node2"}),
    ],
    ids=[
        "MatchLabels match", "MatchLabels no match", "label selector nil",
        "label selector empty", "In match", "In no match", "NotIn match", "Exists match",
        "DoesNotExist match",
    ],
)  # fmt: skip
def test_get_members(
    selector: MemberSelector, nodes: list[tuple[str, dict[str, str]]], expected: set[str]
) -> None:
    """TestGetMembers, its nine cases (a nil or empty label selector selects nothing)."""
    assert get_members(selector, nodes) == expected


def test_get_members_exact_and_regex() -> None:
    """GetMembers' other two selectors (no case of their own in TestGetMembers): an exact
    name is taken as written, a pattern matches anywhere in the name, an empty exact name
    and a pattern that does not compile select nothing."""
    nodes = [("rack-a-1", {}), ("rack-b-1", {}), ("x-rack-a-2", {})]
    assert get_members(MemberSelector(exact_match="node-x"), nodes) == {"node-x"}
    assert get_members(MemberSelector(exact_match=""), nodes) == set()
    assert get_members(MemberSelector(regex_match="rack-a"), nodes) == {"rack-a-1", "x-rack-a-2"}
    assert get_members(MemberSelector(regex_match="^rack-a"), nodes) == {"rack-a-1"}
    assert get_members(MemberSelector(regex_match="["), nodes) == set()

