"""nodeorder plugin: cases of volcano-sh/volcano pkg/scheduler/plugins/nodeorder/nodeorder_test.go,
TestNodeOrderPlugin (action allocate; one tier: gang with job ready, nodeorder with node order
and every weight the case does not name set to 0).

Each case is run twice, the second time with the nodes renamed so that their order is
reversed: Volcano breaks a tie at random and koordqueue takes the first node by name, so a
case passing both ways is decided by its score alone: with the case's weight at 0 every node
ties and one of the two runs fails (`test_each_case_fails_with_its_weight_at_zero`).
TestInitPlugin inspects which kube-scheduler plugin objects Volcano builds
(an implementation detail koordqueue does not have) and is not transcribed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from koordqueue.scheduler.api import NodeInfo, PodGroupPhase, Taint

from .harness import Pod, build, node, pg, pod, queue, rl, run, tiers

PODS = {"pods": "10"}
WEIGHTS = (
    "leastrequested.weight",
    "mostrequested.weight",
    "balancedresource.weight",
    "nodeaffinity.weight",
    "tainttoleration.weight",
    "podaffinity.weight",
    "podtopologyspread.weight",
    "imagelocality.weight",
)


_weights_off = False
"""Set by the switch-off test: every case then runs with all weights 0."""


def _bind(nodes: Sequence[NodeInfo], pods: list[Pod], weights: Mapping[str, int]) -> dict[str, str]:
    if _weights_off:
        weights = {}
    arguments = {name: weights.get(name, 0) for name in WEIGHTS}
    config = tiers(
        ("gang", {"JobReady"}), ("nodeorder", {"NodeOrder"}), arguments={"nodeorder": arguments}
    )
    snapshot = build(
        list(nodes), pods, [pg("pg1", "c1", 0, PodGroupPhase.INQUEUE)], [queue("c1")], "c1"
    )
    return run(snapshot, config, "allocate").binds


def _both_orders(
    nodes: Sequence[NodeInfo], pods: list[Pod], weights: Mapping[str, int]
) -> list[dict[str, str]]:
    """The binds as written, and with the nodes renamed so that their order (by name) is
    reversed, mapped back to the case's names."""
    names = sorted(n.name for n in nodes)
    renamed = {name: f"{chr(ord('z') - i)}-{name}" for i, name in enumerate(names)}
    back = {new: old for old, new in renamed.items()}
    mirrored_nodes = [
        NodeInfo(renamed[n.name], n.allocatable, labels=n.labels, taints=n.taints) for n in nodes
    ]
    mirrored_pods = [dataclasses.replace(p, node=renamed.get(p.node, p.node)) for p in pods]
    mirrored = _bind(mirrored_nodes, mirrored_pods, weights)
    return [_bind(nodes, pods, weights), {k: back[v] for k, v in mirrored.items()}]


def _affinity(kind: str, preferred: list[dict[str, Any]]) -> dict[str, Any]:
    return {"affinity": {kind: {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}}


def test_least_allocated_prefers_the_emptier_node() -> None:
    """TestNodeOrderPlugin, "leastAllocated strategy"."""
    nodes = [node("n1", rl("2", "4Gi", PODS)), node("n2", rl("4", "8Gi", PODS))]
    pods = [pod("p1", "", False, rl("1", "1G"), "pg1")]
    for binds in _both_orders(nodes, pods, {"leastrequested.weight": 1}):
        assert binds == {"c1/p1": "n2"}


def test_most_allocated_prefers_the_fuller_node() -> None:
    """TestNodeOrderPlugin, "mostAllocated strategy"."""
    nodes = [node("n1", rl("2", "4Gi", PODS)), node("n2", rl("4", "8Gi", PODS))]
    pods = [pod("p1", "", False, rl("1", "1G"), "pg1")]
    for binds in _both_orders(nodes, pods, {"mostrequested.weight": 1}):
        assert binds == {"c1/p1": "n1"}


def test_balanced_allocation_prefers_the_node_it_keeps_balanced() -> None:
    """TestNodeOrderPlugin, "balanced allocation prefers balanced node" (n1 2 cpu / 2Gi
    scores 75, n2 4 cpu / 2Gi 68)."""
    nodes = [node("n1", rl("2", "2Gi", PODS)), node("n2", rl("4", "2Gi", PODS))]
    pods = [pod("p1", "", False, rl("1", "1Gi"), "pg1")]
    for binds in _both_orders(nodes, pods, {"balancedresource.weight": 10}):
        assert binds == {"c1/p1": "n1"}


def test_node_affinity_prefers_the_labeled_node() -> None:
    """TestNodeOrderPlugin, "node affinity prefers labeled node"."""
    nodes = [
        node("n1", rl("2", "4Gi", PODS), {"zone": "zone1"}),
        node("n2", rl("2", "4Gi", PODS), {"zone": "zone2"}),
    ]
    preferred = [
        {
            "weight": 100,
            "preference": {
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["zone1"]}]
            },
        }
    ]
    pods = [pod("p1", "", False, rl("1", "1G"), "pg1", spec=_affinity("nodeAffinity", preferred))]
    for binds in _both_orders(nodes, pods, {"nodeaffinity.weight": 10}):
        assert binds == {"c1/p1": "n1"}


def test_taint_toleration_prefers_the_untainted_node() -> None:
    """TestNodeOrderPlugin, "taint toleration prefers non-tainted node"."""
    nodes = [
        node("n1", rl("2", "4Gi", PODS)),
        node("n2", rl("2", "4Gi", PODS), taints=[Taint("key1", "value1", "PreferNoSchedule")]),
    ]
    pods = [pod("p1", "", False, rl("1", "1G"), "pg1", spec={})]
    for binds in _both_orders(nodes, pods, {"tainttoleration.weight": 10}):
        assert binds == {"c1/p1": "n1"}


def test_inter_pod_affinity_prefers_the_node_with_the_matching_pod() -> None:
    """TestNodeOrderPlugin, "inter-pod affinity prefers node with matching pod"."""
    host = "kubernetes.io/hostname"
    nodes = [node(n, rl("2", "4Gi", PODS), {host: n}) for n in ("n1", "n2", "n3")]
    term = {"labelSelector": {"matchLabels": {"service": "s1"}}, "topologyKey": host}
    pods = [
        pod("p1", "n1", True, rl("1", "1G"), "pg1", labels={"service": "s1"}),
        pod("p-noise", "n3", True, rl("1", "1G"), "pg1", labels={"service": "s2"}),
        pod(
            "p2",
            "",
            False,
            rl("1", "1G"),
            "pg1",
            spec=_affinity("podAffinity", [{"weight": 100, "podAffinityTerm": term}]),
        ),
    ]
    for binds in _both_orders(nodes, pods, {"podaffinity.weight": 10}):
        assert binds == {"c1/p2": "n1"}


def test_topology_spread_prefers_the_emptiest_zone() -> None:
    """TestNodeOrderPlugin, "pod topology spread prefers node to reduce skew"."""
    nodes = [node(f"n{i}", rl("4", "4Gi", PODS), {"zone": f"zone{i}"}) for i in (1, 2, 3)]
    foo = {"app": "foo"}
    constraint = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": foo},
    }
    pods = [
        pod("p1", "n1", True, rl("1", "1G"), "pg1", labels=foo),
        pod("p2", "n1", True, rl("1", "1G"), "pg1", labels=foo),
        pod("p3", "n2", True, rl("1", "1G"), "pg1", labels=foo),
        pod(
            "p4",
            "",
            False,
            rl("1", "1G"),
            "pg1",
            labels=foo,
            spec={"topologySpreadConstraints": [constraint]},
        ),
    ]
    for binds in _both_orders(nodes, pods, {"podtopologyspread.weight": 10}):
        assert binds == {"c1/p4": "n3"}


@pytest.mark.parametrize(
    "case",
    [
        test_least_allocated_prefers_the_emptier_node,
        test_most_allocated_prefers_the_fuller_node,
        test_balanced_allocation_prefers_the_node_it_keeps_balanced,
        test_node_affinity_prefers_the_labeled_node,
        test_taint_toleration_prefers_the_untainted_node,
        test_inter_pod_affinity_prefers_the_node_with_the_matching_pod,
        test_topology_spread_prefers_the_emptiest_zone,
    ],
)
def test_each_case_fails_with_its_weight_at_zero(
    case: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The switch-off check, kept as a test: with every weight 0 the nodes tie, and one of
    the two node orders binds elsewhere."""
    monkeypatch.setattr(__name__ + "._weights_off", True)
    with pytest.raises(AssertionError):
        case()
