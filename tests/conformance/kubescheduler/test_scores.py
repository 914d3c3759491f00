"""Score cases: InterPodAffinity from kubernetes/kubernetes
pkg/scheduler/framework/plugins/interpodaffinity/scoring_test.go (TestPreferredAffinity), and
TaintToleration from pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go
(TestTaintTolerationScore). Scores are the normalised 0..100 values before any weight."""

from __future__ import annotations

from typing import Any

from koordqueue.scheduler.api import Taint
from tests.conformance.kubescheduler.harness import (
    interpod_scores,
    make_node,
    make_pod,
    taint_scores,
    term,
    weighted,
)

S1 = {"security": "S1"}
S2 = {"security": "S2"}
CHINA = {"region": "China"}
INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
CHINA_AZ1 = {"region": "China", "az": "az1"}


def security_in(*values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": "security", "operator": "In", "values": list(values)}]}


STAY_WITH_S1_IN_REGION = [weighted(5, term(security_in("S1"), "region"))]
STAY_WITH_S2_IN_REGION = [weighted(6, term(security_in("S2"), "region"))]
AWAY_FROM_S1_IN_AZ = [weighted(5, term(security_in("S1"), "az"))]
AWAY_FROM_S2_IN_AZ = [weighted(5, term(security_in("S2"), "az"))]
HARD_AFFINITY = [
    term(security_in("S1", "value2"), "region"),
    term(
        {
            "matchExpressions": [
                {"key": "security", "operator": "Exists"},
                {"key": "wrongkey", "operator": "DoesNotExist"},
            ]
        },
        "region",
    ),
]


def test_affinity_matching_topology_and_pods_scores_highest() -> None:
    """TestPreferredAffinity: "Affinity: pod that matches topology key & pods in nodes will get
    high score comparing to otherswhich doesn't match either pods in nodes or in topology
    key"."""
    pod = make_pod(labels=S1, preferred_affinity=STAY_WITH_S1_IN_REGION)
    existing = [
        make_pod(labels=S1, node="node1"),
        make_pod(labels=S2, node="node2"),
        make_pod(labels=S1, node="node3"),
    ]
    nodes = [make_node("node1", CHINA), make_node("node2", INDIA), make_node("node3", AZ1)]
    assert interpod_scores(nodes, existing, pod) == {"node1": 100, "node2": 0, "node3": 0}


def test_affinity_whole_domain_scores_the_same() -> None:
    """TestPreferredAffinity: "All the nodes that have the same topology key & label value with
    one of them has an existing pod that match the affinity rules, have the same score"."""
    pod = make_pod(preferred_affinity=STAY_WITH_S1_IN_REGION)
    existing = [make_pod(labels=S1, node="node1")]
    nodes = [make_node("node1", CHINA), make_node("node2", CHINA_AZ1), make_node("node3", INDIA)]
    assert interpod_scores(nodes, existing, pod) == {"node1": 100, "node2": 100, "node3": 0}


def test_affinity_region_with_more_matches_scores_higher() -> None:
    """TestPreferredAffinity: "Affinity: nodes in one region has more matching pods comparing to
    other region, so the region which has more matches will get high score"."""
    pod = make_pod(labels=S1, preferred_affinity=STAY_WITH_S2_IN_REGION)
    existing = [
        make_pod(labels=S2, node=n) for n in ("node1", "node1", "node2", "node3", "node4", "node5")
    ]
    nodes = [
        make_node("node1", CHINA),
        make_node("node2", INDIA),
        make_node("node3", CHINA),
        make_node("node4", CHINA),
        make_node("node5", INDIA),
    ]
    assert interpod_scores(nodes, existing, pod) == {
        "node1": 100,
        "node2": 0,
        "node3": 100,
        "node4": 100,
        "node5": 0,
    }


def test_affinity_mixed_operators_and_weights() -> None:
    """TestPreferredAffinity: "Affinity: different Label operators and values for pod affinity
    scheduling preference, including some match failures "."""
    affinity3 = [
        weighted(
            8,
            term(
                {
                    "matchExpressions": [
                        {"key": "security", "operator": "NotIn", "values": ["S1"]},
                        {"key": "security", "operator": "In", "values": ["S2"]},
                    ]
                },
                "region",
            ),
        ),
        weighted(
            2,
            term(
                {
                    "matchExpressions": [
                        {"key": "security", "operator": "Exists"},
                        {"key": "wrongkey", "operator": "DoesNotExist"},
                    ]
                },
                "region",
            ),
        ),
    ]
    pod = make_pod(labels=S1, preferred_affinity=affinity3)
    existing = [
        make_pod(labels=S1, node="node1"),
        make_pod(labels=S2, node="node2"),
        make_pod(labels=S1, node="node3"),
    ]
    nodes = [make_node("node1", CHINA), make_node("node2", INDIA), make_node("node3", AZ1)]
    assert interpod_scores(nodes, existing, pod) == {"node1": 20, "node2": 100, "node3": 0}


def test_existing_pods_preferred_affinity_symmetry() -> None:
    """TestPreferredAffinity: "Affinity symmetry: considered only the
    preferredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry"."""
    pod = make_pod(labels=S2)
    existing = [
        make_pod(labels=S1, node="node1", preferred_affinity=STAY_WITH_S1_IN_REGION),
        make_pod(labels=S2, node="node2", preferred_affinity=STAY_WITH_S2_IN_REGION),
    ]
    nodes = [make_node("node1", CHINA), make_node("node2", INDIA), make_node("node3", AZ1)]
    assert interpod_scores(nodes, existing, pod) == {"node1": 0, "node2": 100, "node3": 0}


def test_existing_pods_required_affinity_symmetry() -> None:
    """TestPreferredAffinity: "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuring
    Execution in pod affinity symmetry" (hardPodAffinityWeight 1)."""
    pod = make_pod(labels=S1)
    existing = [
        make_pod(labels=S1, node="node1", affinity=HARD_AFFINITY),
        make_pod(labels=S2, node="node2", affinity=HARD_AFFINITY),
    ]
    nodes = [make_node("node1", CHINA), make_node("node2", INDIA), make_node("node3", AZ1)]
    assert interpod_scores(nodes, existing, pod) == {"node1": 100, "node2": 100, "node3": 0}


def test_anti_affinity_node_with_more_matches_scores_lowest() -> None:
    """TestPreferredAffinity: "Anti Affinity: one node has more matching pods comparing to other
    node, so the node which has more unmatches will get high score"."""
    pod = make_pod(labels=S1, preferred_anti_affinity=AWAY_FROM_S1_IN_AZ)
    existing = [
        make_pod(labels=S1, node="node1"),
        make_pod(labels=S1, node="node1"),
        make_pod(labels=S2, node="node2"),
    ]
    nodes = [make_node("node1", AZ1), make_node("node2", INDIA)]
    assert interpod_scores(nodes, existing, pod) == {"node1": 0, "node2": 100}


def test_existing_pods_anti_affinity_symmetry() -> None:
    """TestPreferredAffinity: "Anti Affinity symmetry: the existing pods in node which has anti
    affinity match will get high score"."""
    pod = make_pod(labels=S2)
    existing = [
        make_pod(labels=S1, node="node1", preferred_anti_affinity=AWAY_FROM_S2_IN_AZ),
        make_pod(labels=S2, node="node2", preferred_anti_affinity=AWAY_FROM_S1_IN_AZ),
    ]
    nodes = [make_node("node1", AZ1), make_node("node2", AZ2)]
    assert interpod_scores(nodes, existing, pod) == {"node1": 0, "node2": 100}


def test_affinity_anti_affinity_and_symmetry_together() -> None:
    """TestPreferredAffinity: "Affinity and Anti Affinity and symmetry: considered only
    preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity &
    symmetry"."""
    both: dict[str, Any] = {
        "preferred_affinity": [weighted(8, term(security_in("S1"), "region"))],
        "preferred_anti_affinity": AWAY_FROM_S2_IN_AZ,
    }
    pod = make_pod(labels=S1, **both)
    existing = [
        make_pod(labels=S1, node="node1"),
        make_pod(labels=S2, node="node2"),
        make_pod(node="node3", **both),
        make_pod(node="node4", preferred_anti_affinity=AWAY_FROM_S1_IN_AZ),
    ]
    nodes = [
        make_node("node1", CHINA),
        make_node("node2", AZ1),
        make_node("node3", INDIA),
        make_node("node4", AZ2),
    ]
    assert interpod_scores(nodes, existing, pod) == {
        "node1": 100,
        "node2": 0,
        "node3": 100,
        "node4": 0,
    }


def _prefer(key: str, value: str) -> Taint:
    return Taint(key, value, "PreferNoSchedule")


def test_taint_tolerated_scores_higher() -> None:
    """TestTaintTolerationScore: "node with taints tolerated by the pod, gets a higher score than
    those node with intolerable taints"."""
    pod = make_pod(
        tolerations=[
            {"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}
        ]
    )
    nodes = [
        make_node("nodeA", taints=[_prefer("foo", "bar")]),
        make_node("nodeB", taints=[_prefer("foo", "blah")]),
    ]
    assert taint_scores(nodes, pod) == {"nodeA": 100, "nodeB": 0}


def test_taint_all_tolerated_score_the_same() -> None:
    """TestTaintTolerationScore: "the nodes that all of their taints are tolerated by the pod, get
    the same score, no matter how many tolerable taints a node has"."""
    pod = make_pod(
        tolerations=[
            {
                "key": "cpu-type",
                "operator": "Equal",
                "value": "arm64",
                "effect": "PreferNoSchedule",
            },
            {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": "PreferNoSchedule"},
        ]
    )
    nodes = [
        make_node("nodeA"),
        make_node("nodeB", taints=[_prefer("cpu-type", "arm64")]),
        make_node("nodeC", taints=[_prefer("cpu-type", "arm64"), _prefer("disk-type", "ssd")]),
    ]
    assert taint_scores(nodes, pod) == {"nodeA": 100, "nodeB": 100, "nodeC": 100}


def test_taint_more_intolerable_taints_score_lower() -> None:
    """TestTaintTolerationScore: "the more intolerable taints a node has, the lower score it
    gets."."""
    pod = make_pod(
        tolerations=[
            {"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}
        ]
    )
    nodes = [
        make_node("nodeA"),
        make_node("nodeB", taints=[_prefer("cpu-type", "arm64")]),
        make_node("nodeC", taints=[_prefer("cpu-type", "arm64"), _prefer("disk-type", "ssd")]),
    ]
    assert taint_scores(nodes, pod) == {"nodeA": 100, "nodeB": 50, "nodeC": 0}


def test_taint_score_only_looks_at_prefer_no_schedule() -> None:
    """TestTaintTolerationScore: "only taints and tolerations that have effect PreferNoSchedule
    are checked by taints-tolerations priority function"."""
    pod = make_pod(
        tolerations=[
            {"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"},
            {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": "NoSchedule"},
        ]
    )
    nodes = [
        make_node("nodeA"),
        make_node("nodeB", taints=[Taint("cpu-type", "arm64", "NoSchedule")]),
        make_node("nodeC", taints=[_prefer("cpu-type", "arm64"), _prefer("disk-type", "ssd")]),
    ]
    assert taint_scores(nodes, pod) == {"nodeA": 100, "nodeB": 100, "nodeC": 0}


def test_taint_default_prefers_untainted_node() -> None:
    """TestTaintTolerationScore: "Default behaviour No taints and tolerations, lands on node with
    no taints"."""
    pod = make_pod()
    nodes = [make_node("nodeA"), make_node("nodeB", taints=[_prefer("cpu-type", "arm64")])]
    assert taint_scores(nodes, pod) == {"nodeA": 100, "nodeB": 0}
