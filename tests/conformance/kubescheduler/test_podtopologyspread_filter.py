"""PodTopologySpread filter cases, transcribed from kubernetes/kubernetes
pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go (TestSingleConstraint).
As there, only this plugin's filter is asked (node affinity is not applied on its own)."""

from __future__ import annotations

from tests.conformance.kubescheduler.harness import (
    exists,
    make_node,
    make_pod,
    spread,
    spread_filter,
)

FOO = exists("foo")


def four_nodes() -> list:  # type: ignore[type-arg]
    return [
        make_node("node-a", {"zone": "zone1", "node": "node-a"}),
        make_node("node-b", {"zone": "zone1", "node": "node-b"}),
        make_node("node-x", {"zone": "zone2", "node": "node-x"}),
        make_node("node-y", {"zone": "zone2", "node": "node-y"}),
    ]


def pods_2_1_0_3() -> list:  # type: ignore[type-arg]
    placement = [("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b")]
    placement += [("p-y1", "node-y"), ("p-y2", "node-y"), ("p-y3", "node-y")]
    return [make_pod(name, labels={"foo": ""}, node=node) for name, node in placement]


def test_spread_2_1_0_3_only_empty_node_fits() -> None:
    """TestSingleConstraint: "pods spread across nodes as 2/1/0/3, only node-x fits"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[spread(1, "node", "DoNotSchedule", FOO)])
    assert spread_filter(four_nodes(), pods_2_1_0_3(), pod) == {
        "node-a": False,
        "node-b": False,
        "node-x": True,
        "node-y": False,
    }


def test_spread_max_skew_two() -> None:
    """TestSingleConstraint: "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x
    fit"."""
    pod = make_pod(labels={"foo": ""}, spread_constraints=[spread(2, "node", "DoNotSchedule", FOO)])
    assert spread_filter(four_nodes(), pods_2_1_0_3(), pod) == {
        "node-a": False,
        "node-b": True,
        "node-x": True,
        "node-y": False,
    }


def test_spread_pod_not_matching_itself() -> None:
    """TestSingleConstraint: "pods spread across nodes as 2/1/0/3, but pod doesn't match itself"."""
    pod = make_pod(labels={"bar": ""}, spread_constraints=[spread(1, "node", "DoNotSchedule", FOO)])
    assert spread_filter(four_nodes(), pods_2_1_0_3(), pod) == {
        "node-a": False,
        "node-b": True,
        "node-x": True,
        "node-y": False,
    }


def test_spread_counts_only_nodes_matching_node_affinity() -> None:
    """TestSingleConstraint: "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence
    node-a fits"."""
    pod = make_pod(
        labels={"foo": ""},
        node_affinity_in=("node", ["node-a", "node-y"]),
        spread_constraints=[spread(1, "node", "DoNotSchedule", FOO)],
    )
    assert spread_filter(four_nodes(), pods_2_1_0_3(), pod) == {
        "node-a": True,
        "node-b": True,
        "node-x": True,
        "node-y": False,
    }


def test_spread_excludes_terminating_pods() -> None:
    """TestSingleConstraint: "terminating Pods should be excluded"."""
    nodes = [make_node("node-a", {"node": "node-a"}), make_node("node-b", {"node": "node-b"})]
    existing = [
        make_pod("p-a", labels={"foo": ""}, node="node-a", terminating=True),
        make_pod("p-b", labels={"foo": ""}, node="node-b"),
    ]
    pod = make_pod(labels={"foo": ""}, spread_constraints=[spread(1, "node", "DoNotSchedule", FOO)])
    assert spread_filter(nodes, existing, pod) == {"node-a": True, "node-b": False}


def test_spread_zone_with_node_affinity_not_in() -> None:
    """TestSingleConstraint: "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence
    node-a fits"."""
    existing = [
        make_pod("p-b1", labels={"foo": ""}, node="node-b"),
        make_pod("p-b2", labels={"foo": ""}, node="node-b"),
        make_pod("p-y1", labels={"foo": ""}, node="node-y"),
    ]
    pod = make_pod(
        labels={"foo": ""},
        node_affinity_not_in=("node", ["node-b"]),
        spread_constraints=[spread(1, "zone", "DoNotSchedule", FOO)],
    )
    assert spread_filter(four_nodes(), existing, pod) == {
        "node-a": True,
        "node-b": True,
        "node-x": False,
        "node-y": False,
    }


def three_nodes_2_2_1() -> tuple[list, list]:  # type: ignore[type-arg]
    nodes = [make_node(n, {"node": n}) for n in ("node-a", "node-b", "node-c")]
    placement = [("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b")]
    placement += [("p-b2", "node-b"), ("p-c1", "node-c")]
    return nodes, [make_pod(name, labels={"foo": ""}, node=node) for name, node in placement]


def test_spread_fewer_domains_than_min_domains() -> None:
    """TestSingleConstraint: "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of
    domains < minDomains, then the third node fits"."""
    nodes, existing = three_nodes_2_2_1()
    pod = make_pod(
        labels={"foo": ""},
        spread_constraints=[spread(2, "node", "DoNotSchedule", FOO, min_domains=4)],
    )
    assert spread_filter(nodes, existing, pod) == {
        "node-a": False,
        "node-b": False,
        "node-c": True,
    }


def test_spread_more_domains_than_min_domains() -> None:
    """TestSingleConstraint: "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of
    domains > minDomains, then the all nodes fit"."""
    nodes, existing = three_nodes_2_2_1()
    pod = make_pod(
        labels={"foo": ""},
        spread_constraints=[spread(2, "node", "DoNotSchedule", FOO, min_domains=2)],
    )
    assert spread_filter(nodes, existing, pod) == {
        "node-a": True,
        "node-b": True,
        "node-c": True,
    }


def zone_pods_2_1() -> list:  # type: ignore[type-arg]
    placement = [("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y")]
    return [make_pod(name, labels={"foo": ""}, node=node) for name, node in placement]


def test_spread_zones_fewer_than_min_domains() -> None:
    """TestSingleConstraint: "pods spread across zone as 2/1, maxSkew is 2 and the number of
    domains < minDomains, then the third and fourth nodes fit"."""
    pod = make_pod(
        labels={"foo": ""},
        spread_constraints=[spread(2, "zone", "DoNotSchedule", FOO, min_domains=3)],
    )
    assert spread_filter(four_nodes(), zone_pods_2_1(), pod) == {
        "node-a": False,
        "node-b": False,
        "node-x": True,
        "node-y": True,
    }


def test_spread_zones_more_than_min_domains() -> None:
    """TestSingleConstraint: "pods spread across zone as 2/1, maxSkew is 2 and the number of
    domains > minDomains, then the all nodes fit"."""
    pod = make_pod(
        labels={"foo": ""},
        spread_constraints=[spread(2, "zone", "DoNotSchedule", FOO, min_domains=1)],
    )
    assert spread_filter(four_nodes(), zone_pods_2_1(), pod) == {
        "node-a": True,
        "node-b": True,
        "node-x": True,
        "node-y": True,
    }


def foo_labelled_nodes() -> list:  # type: ignore[type-arg]
    return [
        make_node("node-a", {"node": "node-a", "foo": ""}),
        make_node("node-b", {"node": "node-b", "foo": ""}),
        make_node("node-x", {"node": "node-x", "foo": ""}),
        make_node("node-y", {"node": "node-y"}),
    ]


def test_node_affinity_policy_honored_with_node_selector() -> None:
    """TestSingleConstraint: "NodeAffinityPolicy honored with labelSelectors"."""
    pod = make_pod(
        labels={"foo": ""},
        node_selector={"foo": ""},
        spread_constraints=[spread(1, "node", "DoNotSchedule", FOO)],
    )
    assert spread_filter(foo_labelled_nodes(), zone_pods_2_1(), pod) == {
        "node-a": False,
        "node-b": False,
        "node-x": True,
        "node-y": True,
    }


def test_node_affinity_policy_ignored_with_node_selector() -> None:
    """TestSingleConstraint: "NodeAffinityPolicy ignored with labelSelectors"."""
    pod = make_pod(
        labels={"foo": ""},
        node_selector={"foo": ""},
        spread_constraints=[spread(1, "node", "DoNotSchedule", FOO, node_affinity_policy="Ignore")],
    )
    assert spread_filter(foo_labelled_nodes(), zone_pods_2_1(), pod) == {
        "node-a": False,
        "node-b": False,
        "node-x": True,
        "node-y": False,
    }


def test_node_affinity_policy_honored_with_node_affinity() -> None:
    """TestSingleConstraint: "NodeAffinityPolicy honored with nodeAffinity"."""
    pod = make_pod(
        labels={"foo": ""},
        node_affinity_in=("foo", [""]),
        spread_constraints=[spread(1, "node", "DoNotSchedule", FOO)],
    )
    assert spread_filter(foo_labelled_nodes(), zone_pods_2_1(), pod) == {
        "node-a": False,
        "node-b": False,
        "node-x": True,
        "node-y": True,
    }
