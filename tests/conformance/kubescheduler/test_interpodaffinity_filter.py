"""InterPodAffinity filter cases, transcribed from kubernetes/kubernetes
pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go (TestRequiredAffinitySingleNode,
TestRequiredAffinityMultipleNodes). Each test names its case; `defaultNamespace` there is one
namespace, "default" here."""

from __future__ import annotations

from koordqueue.scheduler.interpod import (
    ERR_AFFINITY_RULES,
    ERR_ANTI_AFFINITY_RULES,
    ERR_EXISTING_ANTI_AFFINITY,
)
from tests.conformance.kubescheduler.harness import (
    exists_term,
    in_term,
    interpod_filter,
    make_node,
    make_pod,
    not_in_term,
    term,
)

POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
LABELS1 = {"region": "r1", "zone": "z11"}


def node1() -> list:  # type: ignore[type-arg]
    return [make_node("node1", LABELS1)]


def existing_securityscan() -> list:  # type: ignore[type-arg]
    return [make_pod("p0", labels=POD_LABEL, node="node1")]


def test_affinity_in_matching_existing_pod_passes() -> None:
    """TestRequiredAffinitySingleNode: "satisfies with
    requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that
    matches the existing pod"."""
    pod = make_pod(
        labels=POD_LABEL2, affinity=[in_term("service", "region", ["securityscan", "value2"])]
    )
    assert interpod_filter(node1(), existing_securityscan(), pod) == {"node1": None}


def test_affinity_not_in_matching_existing_pod_passes() -> None:
    """TestRequiredAffinitySingleNode: "satisfies the pod with
    requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in
    labelSelector that matches the existing pod"."""
    pod = make_pod(
        labels=POD_LABEL2, affinity=[not_in_term("service", "region", ["securityscan3", "value3"])]
    )
    assert interpod_filter(node1(), existing_securityscan(), pod) == {"node1": None}


def test_affinity_other_namespace_does_not_match() -> None:
    """TestRequiredAffinitySingleNode: "Does not satisfy the PodAffinity with labelSelector because
    of diff Namespace"."""
    pod = make_pod(
        labels=POD_LABEL2,
        affinity=[
            term(
                {
                    "matchExpressions": [
                        {"key": "service", "operator": "In", "values": ["securityscan", "value2"]}
                    ]
                },
                "",
                namespaces=["DiffNameSpace"],
            )
        ],
    )
    existing = [make_pod("p0", namespace="ns", labels=POD_LABEL, node="node1")]
    assert interpod_filter(node1(), existing, pod) == {"node1": ERR_AFFINITY_RULES}


def test_affinity_unmatching_selector_fails() -> None:
    """TestRequiredAffinitySingleNode: "Doesn't satisfy the PodAffinity because of unmatching
    labelSelector with the existing pod"."""
    pod = make_pod(labels=POD_LABEL, affinity=[in_term("service", "", ["antivirusscan", "value2"])])
    assert interpod_filter(node1(), existing_securityscan(), pod) == {"node1": ERR_AFFINITY_RULES}


def test_affinity_requirements_are_anded() -> None:
    """TestRequiredAffinitySingleNode: "The labelSelector requirements(items of matchExpressions)
    are ANDed, the pod cannot schedule onto the node because one of the matchExpression item
    don't match."."""
    pod = make_pod(
        labels=POD_LABEL2,
        affinity=[
            term(
                {
                    "matchExpressions": [
                        {"key": "service", "operator": "Exists"},
                        {"key": "wrongkey", "operator": "DoesNotExist"},
                    ]
                },
                "region",
            ),
            term(
                {
                    "matchExpressions": [
                        {"key": "service", "operator": "In", "values": ["securityscan2"]},
                        {"key": "service", "operator": "NotIn", "values": ["WrongValue"]},
                    ]
                },
                "region",
            ),
        ],
    )
    assert interpod_filter(node1(), existing_securityscan(), pod) == {"node1": ERR_AFFINITY_RULES}


def test_affinity_and_anti_affinity_both_satisfied() -> None:
    """TestRequiredAffinitySingleNode: "satisfies the PodAffinity and PodAntiAffinity and
    PodAntiAffinity symmetry with the existing pod"."""
    pod = make_pod(
        labels=POD_LABEL2,
        affinity=[in_term("service", "region", ["securityscan", "value2"])],
        anti_affinity=[in_term("service", "node", ["antivirusscan", "value2"])],
    )
    existing = [
        make_pod(
            "p0",
            labels=POD_LABEL,
            node="node1",
            anti_affinity=[in_term("service", "node", ["antivirusscan", "value2"])],
        )
    ]
    assert interpod_filter(node1(), existing, pod) == {"node1": None}


def test_anti_affinity_with_existing_pod_fails() -> None:
    """TestRequiredAffinitySingleNode: "satisfies the PodAffinity but doesn't satisfy the
    PodAntiAffinity with the existing pod"."""
    pod = make_pod(
        labels=POD_LABEL2,
        affinity=[in_term("service", "region", ["securityscan", "value2"])],
        anti_affinity=[in_term("service", "zone", ["securityscan", "value2"])],
    )
    assert interpod_filter(node1(), existing_securityscan(), pod) == {
        "node1": ERR_ANTI_AFFINITY_RULES
    }


def test_existing_pod_anti_affinity_symmetry_fails() -> None:
    """TestRequiredAffinitySingleNode: "satisfies the PodAffinity and PodAntiAffinity but doesn't
    satisfy PodAntiAffinity symmetry with the existing pod"."""
    pod = make_pod(
        labels=POD_LABEL,
        affinity=[in_term("service", "region", ["securityscan", "value2"])],
        anti_affinity=[in_term("service", "node", ["antivirusscan", "value2"])],
    )
    existing = [
        make_pod(
            "p0",
            labels=POD_LABEL,
            node="node1",
            anti_affinity=[in_term("service", "zone", ["securityscan", "value2"])],
        )
    ]
    assert interpod_filter(node1(), existing, pod) == {"node1": ERR_EXISTING_ANTI_AFFINITY}


def test_own_label_match_does_not_help_when_other_pods_match() -> None:
    """TestRequiredAffinitySingleNode: "pod matches its own Label in PodAffinity and that matches
    the existing pod Labels" (the existing pod's node is not in the snapshot)."""
    pod = make_pod(
        labels=POD_LABEL, affinity=[not_in_term("service", "region", ["securityscan", "value2"])]
    )
    nodes = [*node1(), make_node("node2")]
    existing = [make_pod("p0", labels={"service": "securityscan"}, node="node2")]
    result = interpod_filter(nodes, existing, pod)
    assert result["node1"] == ERR_AFFINITY_RULES


def test_existing_anti_affinity_applies_to_pod_without_constraints() -> None:
    """TestRequiredAffinitySingleNode: "verify that PodAntiAffinity from existing pod is respected
    when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the
    existing pod"."""
    pod = make_pod(labels=POD_LABEL)
    existing = [
        make_pod(
            "p0",
            labels=POD_LABEL,
            node="node1",
            anti_affinity=[in_term("service", "zone", ["securityscan", "value2"])],
        )
    ]
    assert interpod_filter(node1(), existing, pod) == {"node1": ERR_EXISTING_ANTI_AFFINITY}


def test_existing_anti_affinity_not_matching_passes() -> None:
    """TestRequiredAffinitySingleNode: "verify that PodAntiAffinity from existing pod is respected
    when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing
    pod"."""
    pod = make_pod(labels=POD_LABEL)
    existing = [
        make_pod(
            "p0",
            labels=POD_LABEL,
            node="node1",
            anti_affinity=[not_in_term("service", "zone", ["securityscan", "value2"])],
        )
    ]
    assert interpod_filter(node1(), existing, pod) == {"node1": None}


def test_symmetry_a1_incoming_anti_affinity_fails() -> None:
    """TestRequiredAffinitySingleNode: "PodAntiAffinity symmetry check a1: incoming pod and existing
    pod partially match each other on AffinityTerms"."""
    pod = make_pod(
        labels=POD_LABEL,
        anti_affinity=[exists_term("service", "zone"), exists_term("security", "zone")],
    )
    existing = [
        make_pod(
            "p0", labels=POD_LABEL2, node="node1", anti_affinity=[exists_term("security", "zone")]
        )
    ]
    assert interpod_filter(node1(), existing, pod) == {"node1": ERR_ANTI_AFFINITY_RULES}


def test_symmetry_a2_existing_anti_affinity_fails() -> None:
    """TestRequiredAffinitySingleNode: "PodAntiAffinity symmetry check a2: incoming pod and existing
    pod partially match each other on AffinityTerms"."""
    pod = make_pod(labels=POD_LABEL2, anti_affinity=[exists_term("security", "zone")])
    existing = [
        make_pod(
            "p0",
            labels=POD_LABEL,
            node="node1",
            anti_affinity=[exists_term("service", "zone"), exists_term("security", "zone")],
        )
    ]
    assert interpod_filter(node1(), existing, pod) == {"node1": ERR_EXISTING_ANTI_AFFINITY}


def test_affinity_namespace_selector_matches() -> None:
    """TestRequiredAffinitySingleNode: "affinity with NamespaceSelector" (namespace
    subteam1.team1 is labelled team=team1, as in the test's informer objects)."""
    pod = make_pod(
        labels=POD_LABEL2,
        affinity=[
            term(
                {
                    "matchExpressions": [
                        {"key": "service", "operator": "In", "values": ["securityscan", "value2"]}
                    ]
                },
                "region",
                namespace_selector={
                    "matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]
                },
            )
        ],
    )
    existing = [make_pod("p0", namespace="subteam1.team1", labels=POD_LABEL, node="node1")]
    namespaces = {"subteam1.team1": {"team": "team1"}, "subteam1.team2": {"team": "team2"}}
    assert interpod_filter(node1(), existing, pod, namespaces) == {"node1": None}


def test_affinity_namespace_selector_not_matching_fails() -> None:
    """TestRequiredAffinitySingleNode: "affinity with non-matching NamespaceSelector"."""
    pod = make_pod(
        labels=POD_LABEL2,
        affinity=[
            term(
                {
                    "matchExpressions": [
                        {"key": "service", "operator": "In", "values": ["securityscan", "value2"]}
                    ]
                },
                "region",
                namespace_selector={
                    "matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]
                },
            )
        ],
    )
    existing = [make_pod("p0", namespace="subteam1.team2", labels=POD_LABEL, node="node1")]
    namespaces = {"subteam1.team1": {"team": "team1"}, "subteam1.team2": {"team": "team2"}}
    assert interpod_filter(node1(), existing, pod, namespaces) == {"node1": ERR_AFFINITY_RULES}


def test_anti_affinity_empty_namespace_selector_matches_all_namespaces() -> None:
    """TestRequiredAffinitySingleNode: "anti-affinity with matching all NamespaceSelector"."""
    pod = make_pod(
        namespace="subteam1.team1",
        labels=POD_LABEL2,
        anti_affinity=[
            term(
                {
                    "matchExpressions": [
                        {"key": "service", "operator": "In", "values": ["securityscan", "value2"]}
                    ]
                },
                "zone",
                namespace_selector={},
            )
        ],
    )
    existing = [make_pod("p0", namespace="subteam2.team1", labels=POD_LABEL, node="node1")]
    assert interpod_filter(node1(), existing, pod) == {"node1": ERR_ANTI_AFFINITY_RULES}


def test_anti_affinity_namespace_selector_not_matching_passes() -> None:
    """TestRequiredAffinitySingleNode: "anti-affinity with non-matching NamespaceSelector"."""
    pod = make_pod(
        namespace="subteam1.team1",
        labels=POD_LABEL2,
        anti_affinity=[
            term(
                {
                    "matchExpressions": [
                        {"key": "service", "operator": "In", "values": ["securityscan", "value2"]}
                    ]
                },
                "zone",
                namespace_selector={
                    "matchExpressions": [{"key": "team", "operator": "In", "values": ["team1"]}]
                },
            )
        ],
    )
    existing = [make_pod("p0", namespace="subteam1.team2", labels=POD_LABEL, node="node1")]
    namespaces = {"subteam1.team1": {"team": "team1"}, "subteam1.team2": {"team": "team2"}}
    assert interpod_filter(node1(), existing, pod, namespaces) == {"node1": None}


CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}


def test_affinity_spans_the_topology_domain() -> None:
    """TestRequiredAffinityMultipleNodes: "A pod can be scheduled onto all the nodes that have the
    same topology key & label value with one of them has an existing pod that matches the
    affinity rules"."""
    pod = make_pod(affinity=[in_term("foo", "region", ["bar"])])
    nodes = [make_node("node1", CHINA), make_node("node2", CHINA_AZ1), make_node("node3", INDIA)]
    existing = [make_pod("p1", labels={"foo": "bar"}, node="node1")]
    assert interpod_filter(nodes, existing, pod) == {
        "node1": None,
        "node2": None,
        "node3": ERR_AFFINITY_RULES,
    }


def test_first_pod_of_self_affine_collection_is_not_blocked() -> None:
    """TestRequiredAffinityMultipleNodes: "The affinity rule is to schedule all of the pods of this
    collection to the same zone. The first pod of the collection should not be blocked from
    being scheduled onto any node, even there's no existing pod that matches the rule
    anywhere."."""
    pod = make_pod(
        labels={"foo": "bar", "service": "securityscan"},
        affinity=[in_term("foo", "zone", ["bar"]), in_term("service", "zone", ["securityscan"])],
    )
    nodes = [
        make_node("nodeA", {"zone": "az1", "hostname": "h1"}),
        make_node("nodeB", {"zone": "az2", "hostname": "h2"}),
    ]
    existing = [make_pod("p1", labels={"foo": "bar"}, node="nodeA")]
    assert interpod_filter(nodes, existing, pod) == {"nodeA": None, "nodeB": None}


def test_first_pod_needs_the_topology_keys() -> None:
    """TestRequiredAffinityMultipleNodes: "The first pod of the collection can only be scheduled on
    nodes labelled with the requested topology keys"."""
    pod = make_pod(
        labels={"foo": "bar", "service": "securityscan"},
        affinity=[in_term("foo", "zone", ["bar"]), in_term("service", "zone", ["securityscan"])],
    )
    nodes = [
        make_node("nodeA", {"zoneLabel": "az1", "hostname": "h1"}),
        make_node("nodeB", {"zoneLabel": "az2", "hostname": "h2"}),
    ]
    existing = [make_pod("p1", labels={"foo": "bar"}, node="nodeA")]
    assert interpod_filter(nodes, existing, pod) == {
        "nodeA": ERR_AFFINITY_RULES,
        "nodeB": ERR_AFFINITY_RULES,
    }


def test_anti_affinity_blocks_whole_domain() -> None:
    """TestRequiredAffinityMultipleNodes: "NodeA and nodeB have same topologyKey and label value.
    NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be
    scheduled onto nodeA and nodeB but can be scheduled onto nodeC"."""
    pod = make_pod(anti_affinity=[in_term("foo", "region", ["abc"])])
    nodes = [make_node("nodeA", CHINA), make_node("nodeB", CHINA_AZ1), make_node("nodeC", INDIA)]
    existing = [make_pod("p1", labels={"foo": "abc"}, node="nodeA")]
    assert interpod_filter(nodes, existing, pod) == {
        "nodeA": ERR_ANTI_AFFINITY_RULES,
        "nodeB": ERR_ANTI_AFFINITY_RULES,
        "nodeC": None,
    }


def test_any_anti_affinity_term_matching_blocks() -> None:
    """TestRequiredAffinityMultipleNodes: "This test ensures that anti-affinity matches a pod when
    any term of the anti-affinity rule matches a pod."."""
    pod = make_pod(
        anti_affinity=[
            in_term("foo", "region", ["abc"]),
            in_term("service", "zone", ["securityscan"]),
        ]
    )
    nodes = [
        make_node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
        make_node("nodeB", {"region": "r1", "zone": "z2", "hostname": "nodeB"}),
    ]
    existing = [make_pod("p1", labels={"foo": "abc", "service": "securityscan"}, node="nodeA")]
    assert interpod_filter(nodes, existing, pod) == {
        "nodeA": ERR_ANTI_AFFINITY_RULES,
        "nodeB": ERR_ANTI_AFFINITY_RULES,
    }


def test_existing_anti_affinity_in_other_namespace_does_not_match() -> None:
    """TestRequiredAffinityMultipleNodes: "... The pod can not be scheduled onto nodeA, nodeB, but
    can be scheduled onto nodeC (NodeC has an existing pod that match the inter pod affinity
    rule but in different namespace)"."""
    pod = make_pod(
        namespace="NS1", labels={"foo": "123"}, anti_affinity=[in_term("foo", "region", ["bar"])]
    )
    nodes = [make_node("nodeA", CHINA), make_node("nodeB", CHINA_AZ1), make_node("nodeC", INDIA)]
    existing = [
        make_pod("p1", namespace="NS1", labels={"foo": "bar"}, node="nodeA"),
        make_pod(
            "p2", namespace="NS2", node="nodeC", anti_affinity=[in_term("foo", "region", ["123"])]
        ),
    ]
    assert interpod_filter(nodes, existing, pod) == {
        "nodeA": ERR_ANTI_AFFINITY_RULES,
        "nodeB": ERR_ANTI_AFFINITY_RULES,
        "nodeC": None,
    }


def test_existing_term_with_missing_topology_key_blocks_nothing() -> None:
    """TestRequiredAffinityMultipleNodes: "Test existing pod's anti-affinity: if an existing pod has
    a term with invalid topologyKey, labelSelector of the term is firstly checked, and then
    topologyKey of the term is also checked"."""
    pod = make_pod(labels={"foo": ""})
    nodes = [
        make_node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
        make_node("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
    ]
    existing = [
        make_pod("p1", node="nodeA", anti_affinity=[exists_term("foo", "invalid-node-label")])
    ]
    assert interpod_filter(nodes, existing, pod) == {"nodeA": None, "nodeB": None}
