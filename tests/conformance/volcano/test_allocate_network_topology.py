"""allocate with network topologies: cases of volcano-sh/volcano v1.14.1
pkg/scheduler/actions/allocate/allocate_test.go, TestAllocateWithNetWorkTopologies (all 25),
TestNodeLevelScoreWithNetWorkTopologies and TestHyperNodeBinpackWithNetWorkTopologies (one
tier: gang with job order/ready/pipelined/starving, predicates, network-topology-aware with
node order, HyperNode order and HyperNode gradient; binpack's node order in the second).

Volcano's PodGroups carry the job's HyperNode in an annotation its scheduler does not read:
the HyperNode is recovered from where the job's pods run, in Volcano and here. Cases given
as HyperNode sets without objects are written as the HyperNodes making those sets (see
topology.py); the tier-name cases' first HyperNode, built under the name s1 in Volcano's
case though keyed s0, is written as s0 (its nodes are s0's).

Switched off and run (each fails then, checked): allocate's HyperNode path (the job placed
as if it had no hard topology: the "can not allocate" cases 07, 15, 16, 18 and 24 bind);
the highest tier made exclusive, in the gradient and its search root (the "can allocate"
hard cases 08-14, 17, 19-22, both runs of TestNodeLevelScore and of TestHyperNodeBinpack);
tier names left unresolved (18 and 24 bind; 19-23 bind either way: a name that does not
resolve means no hard topology, Volcano's rule too); pods on nodes the cluster lacks taken
as spanning the cluster top (23: its pods run on s0-n1 and s0-n2, which its cluster does
not have, so it is placed as a new job: with them pinning it to the top, nothing binds);
the HyperNode scores (TestNodeLevelScore's derived run: as written, the busy HyperNode is
also the first tried, which wins a tie, a random one in Volcano); the node closeness score
(the soft cases' and TestHyperNodeBinpack's derived runs). The soft cases as written bind
as many pods with the plugin off (soft mode only scores), so they are also run on nodes
named so that plain node order would spread the job: there it stays in its HyperNode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import PodGroupPhase
from koordqueue.scheduler.api.hypernode import HyperNode, NetworkTopology

from .harness import Outcome, Pod, build, node, pg, pod, queue, rl, run, tiers
from .topology import hard, nodes_of, parent_of, soft, with_topology

INQUEUE = PodGroupPhase.INQUEUE
RUNNING = PodGroupPhase.RUNNING
PODS = {"pods": "10"}
CONFIG = tiers(
    ("gang", {"JobOrder", "JobReady", "JobPipelined", "JobStarving"}),
    ("predicates", {"Predicate"}),
    ("network-topology-aware", {"NodeOrder", "HyperNodeOrder", "HyperNodeGradient"}),
)
ROLES = ("master", "worker", "worker", "worker")

TWO_LEAVES = [
    nodes_of("s0", 1, "s0-n1", "s0-n2"),
    nodes_of("s1", 1, "s1-n3", "s1-n4"),
    parent_of("s2", 2, "s0", "s1"),
]
TWO_LEAVES_NODES = ["s0-n1", "s0-n2", "s1-n3", "s1-n4"]
TIER0 = [
    nodes_of("s0", 0, "s0-n1", "s0-n2"),
    nodes_of("s1", 0, "s1-n3", "s1-n4"),
    parent_of("s2", 1, "s0", "s1"),
]
THREE_TIERS = [
    parent_of("s0", 3, "s1", "s2"),
    parent_of("s1", 2, "s3", "s4"),
    parent_of("s2", 2, "s5", "s6"),
    nodes_of("s3", 1, "s3-n1", "s3-n2"),
    nodes_of("s4", 1, "s4-n1", "s4-n2"),
    nodes_of("s5", 1, "s5-n1", "s5-n2"),
    nodes_of("s6", 1, "s6-n1", "s6-n2"),
]
THREE_TIERS_NODES = [f"s{h}-n{i}" for h in (3, 4, 5, 6) for i in (1, 2)]
NO_PARENT = TWO_LEAVES[:2]
NAMED = [
    nodes_of("s0", 1, "s0-n1", "s0-n2", tier_name="volcano.sh/task-spec"),
    nodes_of("s1", 1, "s1-n3", "s1-n4", tier_name="volcano.sh/task-spec"),
    parent_of("s2", 2, "s0", "s1", tier_name="volcano.sh/job-spec"),
]
NAMED_LEAVES = NAMED[:2]
THREE_TIERS_NAMED = [
    parent_of("s0", 3, "s1", "s2", tier_name="volcano.sh/hypernode-spec"),
    parent_of("s1", 2, "s3", "s4", tier_name="volcano.sh/job-spec"),
    parent_of("s2", 2, "s5", "s6", tier_name="volcano.sh/job-spec"),
    *(nodes_of(f"s{h}", 1, f"s{h}-n1", f"s{h}-n2", tier_name="volcano.sh/task-spec")
      for h in (3, 4, 5, 6)),
]  # fmt: skip
AFFINITY = [nodes_of("s0", 1, "s0-n1"), nodes_of("s1", 1, "s1-n2")]


def _allocate(
    topology: NetworkTopology,
    min_member: int,
    pending: int,
    running_on: Sequence[str],
    hypernodes: Sequence[HyperNode],
    node_names: Sequence[str],
    *,
    node_labels: Mapping[str, Mapping[str, str]] | None = None,
    selector: Mapping[str, str] | None = None,
    request: Resources | None = None,
) -> Outcome:
    """One job pg1 (c1/p1..: `running_on` running, then `pending` pending, roles master
    then workers) on nodes of 2 cpu / 4Gi."""
    req = request or rl("2", "4G")
    pods: list[Pod] = []
    for i, host in enumerate([*running_on, *([""] * pending)]):
        pods.append(pod(f"p{i + 1}", host, bool(host), req, "pg1", role=ROLES[min(i, 3)],
                        selector=selector))  # fmt: skip
    nodes = [
        node(n, rl("2", "4Gi", PODS), labels=(node_labels or {}).get(n)) for n in node_names
    ]
    snapshot = build(nodes, pods, [pg("pg1", "q1", min_member, INQUEUE)], [queue("q1")], "c1")
    return run(with_topology(snapshot, hypernodes, {"pg1": topology}), CONFIG, "allocate")


NAME_TASK = NetworkTopology("hard", None, "volcano.sh/task-spec")
NAME_JOB = NetworkTopology("hard", None, "volcano.sh/job-spec")
NAME_NONE = NetworkTopology("hard", None, "volcano.sh/hypercluster")

CASES = [
    pytest.param(soft(), 3, 3, [], TIER0, TWO_LEAVES_NODES, 3, id="01 soft enough"),
    pytest.param(soft(), 1, 2, [], TWO_LEAVES, TWO_LEAVES_NODES, 2, id="02 soft min<replicas"),
    pytest.param(soft(), 2, 1, ["s0-n1", "s0-n2"], TWO_LEAVES, TWO_LEAVES_NODES, 1,
                 id="04 soft rescheduled"),
    pytest.param(soft(), 3, 1, ["s0-n1", "s0-n2"], TWO_LEAVES, TWO_LEAVES_NODES, 1,
                 id="05 soft rescheduled min=replicas"),
    pytest.param(soft(), 2, 1, ["s3-n1", "s3-n2"], THREE_TIERS, THREE_TIERS_NODES, 1,
                 id="06 soft rescheduled cross tier, three tiers"),
    pytest.param(hard(1), 3, 3, [], TWO_LEAVES, TWO_LEAVES_NODES, 0, id="07 hard cross tier"),
    pytest.param(hard(2), 3, 3, [], TWO_LEAVES, TWO_LEAVES_NODES, 3, id="08 hard tier 2"),
    pytest.param(hard(1), 2, 2, [], TWO_LEAVES, TWO_LEAVES_NODES, 2, id="09 hard multi"),
    pytest.param(hard(1), 1, 2, [], TWO_LEAVES, TWO_LEAVES_NODES, 2, id="10 hard min<replicas"),
    pytest.param(hard(2), 2, 1, ["s0-n1", "s0-n2"], TWO_LEAVES, TWO_LEAVES_NODES, 1,
                 id="12 hard rescheduled"),
    pytest.param(hard(2), 3, 1, ["s0-n1", "s0-n2"], TWO_LEAVES, TWO_LEAVES_NODES, 1,
                 id="13 hard rescheduled min=replicas"),
    pytest.param(hard(2), 2, 1, ["s3-n1", "s3-n2"], THREE_TIERS, THREE_TIERS_NODES, 1,
                 id="14 hard rescheduled three tiers"),
    pytest.param(hard(1), 2, 1, ["s0-n1", "s0-n2"], TWO_LEAVES, TWO_LEAVES_NODES, 0,
                 id="15 hard rescheduled cross tier"),
    pytest.param(hard(1), 2, 1, ["s3-n1", "s3-n2"], THREE_TIERS, THREE_TIERS_NODES, 0,
                 id="16 hard rescheduled cross tier, three tiers"),
    pytest.param(hard(2), 2, 1, ["s0-n1", "s0-n2"], NO_PARENT, TWO_LEAVES_NODES, 1,
                 id="17 hard rescheduled, no common parent"),
    pytest.param(NAME_TASK, 3, 3, [], NAMED, TWO_LEAVES_NODES, 0, id="18 tier name cross"),
    pytest.param(NAME_JOB, 3, 3, [], NAMED, TWO_LEAVES_NODES, 3, id="19 tier name reached"),
    pytest.param(NAME_TASK, 2, 2, [], NAMED, TWO_LEAVES_NODES, 2, id="20 tier name multi"),
    pytest.param(NAME_JOB, 2, 1, ["s0-n1", "s0-n2"], NAMED, TWO_LEAVES_NODES, 1,
                 id="21 tier name rescheduled"),
    pytest.param(NAME_JOB, 3, 1, ["s0-n1", "s0-n2"], NAMED, TWO_LEAVES_NODES, 1,
                 id="22 tier name rescheduled min=replicas"),
    pytest.param(NAME_JOB, 2, 1, ["s0-n1", "s0-n2"], THREE_TIERS_NAMED, THREE_TIERS_NODES, 1,
                 id="23 tier name rescheduled, three tiers"),
    pytest.param(NAME_TASK, 2, 1, ["s0-n1", "s0-n2"], NAMED, TWO_LEAVES_NODES, 0,
                 id="24 tier name rescheduled cross"),
    pytest.param(NAME_NONE, 2, 1, ["s0-n1", "s0-n2"], NAMED_LEAVES, TWO_LEAVES_NODES, 1,
                 id="25 tier name unknown"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("topology", "min_member", "pending", "running_on", "hypernodes", "node_names", "binds"),
    CASES,
)
def test_allocate_with_network_topologies(
    topology: NetworkTopology,
    min_member: int,
    pending: int,
    running_on: list[str],
    hypernodes: list[HyperNode],
    node_names: list[str],
    binds: int,
) -> None:
    """TestAllocateWithNetWorkTopologies (the numbered cases; 03 and 11 below): the bind
    count (Volcano's MinimalBindCheck). A hard job stays within one HyperNode of a tier at
    most its highest (given, or named by tierName); a job already placed may only grow
    within the highest allowed ancestor of where it runs; a soft job always fits."""
    out = _allocate(topology, min_member, pending, running_on, hypernodes, node_names)
    assert len(out.binds) == binds, out.binds


@pytest.mark.parametrize("topology", [soft(), hard(1)], ids=["03 soft", "11 hard"])
def test_allocate_to_the_node_the_pod_selects(topology: NetworkTopology) -> None:
    """TestAllocateWithNetWorkTopologies, "two available hyperNodes, can allocate job to
    nodes with affinity" (soft and hard): the pod's node selector picks s1-n2."""
    out = _allocate(
        topology, 1, 1, [], AFFINITY, ["s0-n1", "s1-n2"],
        node_labels={"s1-n2": {"nodeRole": "master"}}, selector={"nodeRole": "master"},
    )  # fmt: skip
    assert out.binds == {"c1/p1": "s1-n2"}


_SPREAD = {"s0": ("a-1", "c-1"), "s1": ("b-1", "d-1")}
"""Nodes named so that name order alternates between s0 and s1."""


@pytest.mark.parametrize(("min_member", "pending"), [(3, 3), (1, 2)], ids=["01", "02"])
def test_soft_job_stays_together(min_member: int, pending: int) -> None:
    """Derived from the soft cases 01 and 02 (which bind as many pods with the plugin off):
    on nodes whose name order alternates between two HyperNodes, the soft job's pods still
    fill the first one's nodes before the other's (the closeness score), as they would on
    Volcano's case's nodes."""
    hypernodes = [nodes_of("s0", 1, *_SPREAD["s0"]), nodes_of("s1", 1, *_SPREAD["s1"]),
                  parent_of("s2", 2, "s0", "s1")]  # fmt: skip
    out = _allocate(soft(), min_member, pending, [], hypernodes, ["a-1", "b-1", "c-1", "d-1"])
    used = sorted(out.binds.values())
    assert {"a-1", "c-1"} <= set(used), used


def test_soft_rescheduled_job_stays_in_its_hypernode() -> None:
    """Derived from the soft cases 04-06: the pending pod joins its running pods'
    HyperNode, on nodes whose name order would put it elsewhere first."""
    hypernodes = [nodes_of("s0", 1, "b-1", "d-1"), nodes_of("s1", 1, "a-1", "c-1"),
                  parent_of("s2", 2, "s0", "s1")]  # fmt: skip
    out = _allocate(soft(), 2, 1, ["b-1"], hypernodes, ["a-1", "b-1", "c-1", "d-1"])
    assert out.binds == {"c1/p2": "d-1"}


@pytest.mark.parametrize("busy", ["s0", "s1"], ids=["as written", "derived: busy s1"])
def test_node_level_score_with_network_topologies(busy: str) -> None:
    """TestNodeLevelScoreWithNetWorkTopologies, "allocate job to highest score hypeNode with
    node level binpack": the HyperNode already running pg2's pods packs the job best, so it
    goes there. As written the busy HyperNode, s0, is also the first tried, which wins a tie
    (a random one in Volcano): the derived run puts pg2's pods on s1, so that only the
    HyperNode scores choose it."""
    first, second = ("s0-n1", "s0-n2") if busy == "s0" else ("s1-n3", "s1-n4")
    nodes = [
        node("s0-n1", rl("4", "8Gi", PODS)), node("s0-n2", rl("8", "16Gi", PODS)),
        node("s1-n3", rl("4", "8Gi", PODS)), node("s1-n4", rl("8", "16Gi", PODS)),
    ]  # fmt: skip
    pods = [
        pod("p1", "", False, rl("2", "4Gi"), "pg1", role="master"),
        pod("p2", "", False, rl("4", "8Gi"), "pg1", role="worker"),
        pod("p3", first, True, rl("2", "4Gi"), "pg2", role="master"),
        pod("p4", second, True, rl("4", "8Gi"), "pg2", role="worker"),
    ]
    groups = [pg("pg1", "q1", 2, INQUEUE), pg("pg2", "q1", 2, RUNNING)]
    snapshot = build(nodes, pods, groups, [queue("q1")], "c1")
    snapshot = with_topology(
        snapshot, TWO_LEAVES, {"pg1": hard(1), "pg2": NetworkTopology("", 1)}
    )
    config = tiers(
        ("gang", {"JobOrder", "JobReady", "JobPipelined", "JobStarving"}),
        ("predicates", {"Predicate"}),
        ("binpack", {"NodeOrder"}),
        ("network-topology-aware", {"NodeOrder", "HyperNodeOrder", "HyperNodeGradient"}),
    )
    out = run(snapshot, config, "allocate")
    assert out.binds == {"c1/p1": first, "c1/p2": second}


_BINPACK_NAMES = {
    "as written": ("s0-n1", "s0-n2", "s1-n3", "s1-n4", "s2-n5", "s2-n6"),
    "derived: interleaved": ("a1", "a2", "b1", "d1", "c1", "c2"),
}


@pytest.mark.parametrize("names", list(_BINPACK_NAMES), ids=list(_BINPACK_NAMES))
def test_hypernode_binpack_with_network_topologies(names: str) -> None:
    """TestHyperNodeBinpackWithNetWorkTopologies, "allocate task to node under
    LCAHyperNode": four 4-cpu pods, three tier-1 HyperNodes of two 4-cpu nodes under s3
    (hard, tier 2): two pods in each of two HyperNodes (the third pod's HyperNode takes the
    fourth: the closeness score, ties broken by the job's pods there). As written, plain
    node order gives the same split; the derived run names the nodes so that it would not
    (s1's second node sorts after s2's first)."""
    n = _BINPACK_NAMES[names]
    hypernodes = [
        nodes_of("s0", 1, n[0], n[1]),
        nodes_of("s1", 1, n[2], n[3]),
        nodes_of("s2", 1, n[4], n[5]),
        parent_of("s3", 2, "s0", "s1", "s2"),
    ]
    nodes = [node(name, rl("4", "8Gi", PODS)) for name in n]
    pods = [pod(f"p{i}", "", False, rl("4", "8Gi"), "pg1", role=ROLES[i - 1]) for i in (1, 2, 3, 4)]
    snapshot = build(nodes, pods, [pg("pg1", "q1", 4, INQUEUE)], [queue("q1")], "c1")
    out = run(with_topology(snapshot, hypernodes, {"pg1": hard(2)}), CONFIG, "allocate")
    assert len(out.binds) == 4
    per: dict[str, int] = {}
    for host in out.binds.values():
        leaf = out.session.topology.leaf_of(out.session.nodes[host])
        per[leaf] = per.get(leaf, 0) + 1
    assert sorted(per.values()) == [2, 2]


_RECORDER_TREE = [
    parent_of("ancestor1", 3, "node1", "ancestor2"),
    parent_of("ancestor2", 2, "node2"),
    nodes_of("node1", 1, "n1"),
    nodes_of("node2", 1, "n2"),
]


@pytest.mark.parametrize("room_in_node2", [True, False], ids=["decided", "no decision"])
def test_update_decision_to_job(room_in_node2: bool) -> None:
    """recorder_test.go, TestUpdateDecisionToJob and TestUpdateDecisionToJob_NoHyperNode:
    a job already in node1 placed in node2 spans their lowest common ancestor, ancestor1;
    a job allocate places nowhere keeps node1. (Volcano's Recorder holds the decision until
    the job is committed; here allocate applies it when it commits: the same end state.)
    Fails with that update switched off (checked); the no-decision case holds either way:
    nothing is placed, so nothing is updated."""
    room = "2" if room_in_node2 else "1"
    nodes = [node("n1", rl("2", "4Gi", PODS)), node("n2", rl(room, "4Gi", PODS))]
    pods = [pod("p1", "n1", True, rl("2", "4G"), "pg1", role="master"),
            pod("p2", "", False, rl("2", "4G"), "pg1", role="worker")]  # fmt: skip
    snapshot = build(nodes, pods, [pg("pg1", "q1", 2, INQUEUE)], [queue("q1")], "c1")
    out = run(with_topology(snapshot, _RECORDER_TREE, {"pg1": hard(3)}), CONFIG, "allocate")
    job = out.session.jobs["c1/pg1"]
    expected = "ancestor1" if room_in_node2 else "node1"
    assert out.session.topology.job_hypernode(job) == expected
    assert (out.binds == {"c1/p2": "n2"}) is room_in_node2
