"""PodTopologySpread score cases, transcribed from kubernetes/kubernetes
pkg/scheduler/framework/plugins/podtopologyspread/scoring_test.go (TestPodTopologySpreadScore).
`failedNodes` there are nodes of the cluster that are not candidates here."""

from __future__ import annotations

from tests.conformance.kubescheduler.harness import (
    exists,
    make_node,
    make_pod,
    spread,
    spread_scores,
)

HOST = "kubernetes.io/hostname"
FOO = exists("foo")


def hosts(*names: str) -> list:  # type: ignore[type-arg]
    return [make_node(n, {HOST: n}) for n in names]


def foo_pods(**per_node: int) -> list:  # type: ignore[type-arg]
    return [
        make_pod(f"p-{node}{i}", labels={"foo": ""}, node=node.replace("_", "-"))
        for node, count in per_node.items()
        for i in range(count)
    ]


def soft(max_skew: int = 1, key: str = HOST, sel: object = FOO) -> dict:  # type: ignore[type-arg]
    return spread(max_skew, key, "ScheduleAnyway", sel)  # type: ignore[arg-type]


def test_no_existing_pods_scores_all_the_same() -> None:
    """TestPodTopologySpreadScore: "one constraint on node, no existing pods"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[soft()])
    assert spread_scores(hosts("node-a", "node-b"), [], pod) == {"node-a": 100, "node-b": 100}


def test_single_candidate_scores_100() -> None:
    """TestPodTopologySpreadScore: "one constraint on node, only one node is candidate"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[soft()])
    existing = foo_pods(node_a=2, node_b=1)
    assert spread_scores(hosts("node-a", "node-b"), existing, pod, ["node-a"]) == {"node-a": 100}


def test_equal_counts_score_the_same() -> None:
    """TestPodTopologySpreadScore: "one constraint on node, all nodes have the same number of
    matching pods"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[soft()])
    existing = foo_pods(node_a=1, node_b=1)
    assert spread_scores(hosts("node-a", "node-b"), existing, pod) == {
        "node-a": 100,
        "node-b": 100,
    }


def test_four_candidates_2_1_0_3() -> None:
    """TestPodTopologySpreadScore: "one constraint on node, all 4 nodes are candidates"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[soft()])
    existing = foo_pods(node_a=2, node_b=1, node_d=3)
    assert spread_scores(hosts("node-a", "node-b", "node-c", "node-d"), existing, pod) == {
        "node-a": 20,
        "node-b": 60,
        "node-c": 100,
        "node-d": 0,
    }


def test_null_selector_counts_nothing() -> None:
    """TestPodTopologySpreadScore: "one constraint on node, null selector"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[soft(sel=None)])
    existing = foo_pods(node_a=2, node_b=1, node_d=3)
    assert spread_scores(hosts("node-a", "node-b", "node-c", "node-d"), existing, pod) == {
        "node-a": 100,
        "node-b": 100,
        "node-c": 100,
        "node-d": 100,
    }


def test_max_skew_two_waters_down_differences() -> None:
    """TestPodTopologySpreadScore: "one constraint on node, all 4 nodes are candidates,
    maxSkew=2"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[soft(max_skew=2)])
    existing = foo_pods(node_a=2, node_b=1, node_d=3)
    assert spread_scores(hosts("node-a", "node-b", "node-c", "node-d"), existing, pod) == {
        "node-a": 33,
        "node-b": 66,
        "node-c": 100,
        "node-d": 16,
    }


def test_max_skew_three_4_3_2_1() -> None:
    """TestPodTopologySpreadScore: "one constraint on node, all 4 nodes are candidates,
    maxSkew=3"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[soft(max_skew=3)])
    existing = foo_pods(node_a=4, node_b=3, node_c=2, node_d=1)
    assert spread_scores(hosts("node-a", "node-b", "node-c", "node-d"), existing, pod) == {
        "node-a": 44,
        "node-b": 66,
        "node-c": 77,
        "node-d": 100,
    }


def test_three_of_four_candidates() -> None:
    """TestPodTopologySpreadScore: "one constraint on node, 3 out of 4 nodes are candidates"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[soft()])
    existing = foo_pods(node_a=4, node_b=2, node_x=1, node_y=3)
    nodes = hosts("node-a", "node-b", "node-x", "node-y")
    assert spread_scores(nodes, existing, pod, ["node-a", "node-b", "node-x"]) == {
        "node-a": 33,
        "node-b": 83,
        "node-x": 100,
    }


def test_candidate_without_topology_key_scores_zero() -> None:
    """TestPodTopologySpreadScore: "one constraint on node, 3 out of 4 nodes are candidates, one
    node doesn't match topology key"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[soft()])
    existing = foo_pods(node_a=4, node_b=2, node_x=1, node_y=3)
    nodes = [
        make_node("node-a", {HOST: "node-a"}),
        make_node("node-b", {"n": "node-b"}),
        make_node("node-x", {HOST: "node-x"}),
        make_node("node-y", {HOST: "node-y"}),
    ]
    assert spread_scores(nodes, existing, pod, ["node-a", "node-b", "node-x"]) == {
        "node-a": 16,
        "node-b": 0,
        "node-x": 100,
    }


def test_zone_constraint_three_of_four_candidates() -> None:
    """TestPodTopologySpreadScore: "one constraint on zone, 3 out of 4 nodes are candidates"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[soft(key="zone")])
    existing = foo_pods(node_a=4, node_b=2, node_x=1, node_y=3)
    nodes = [
        make_node("node-a", {"zone": "zone1", HOST: "node-a"}),
        make_node("node-b", {"zone": "zone1", HOST: "node-b"}),
        make_node("node-x", {"zone": "zone2", HOST: "node-x"}),
        make_node("node-y", {"zone": "zone2", HOST: "node-y"}),
    ]
    assert spread_scores(nodes, existing, pod, ["node-a", "node-b", "node-x"]) == {
        "node-a": 75,
        "node-b": 75,
        "node-x": 100,
    }
