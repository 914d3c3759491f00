"""preempt's topology-aware path: volcano-sh/volcano v1.14.1 pkg/scheduler/actions/preempt/
preempt_test.go TestTopologyAwarePreempt, v1.15.1's added case (capacity's queue order,
"preemption with priority queues"), and what a networkTopology does to preempt. v1.15.1
also reverses the reprieve order (the most important victim first, as kube-scheduler);
koordqueue follows v1.15.1 there (no case of either version tells them apart).

TestTopologyAwarePreempt runs TestPreempt's first ten cases with the action argument
`enableTopologyAwarePreemption: true` and the predicates plugin added (and proportion's
predicate switch, which koordqueue's proportion does not use), plus one case of its own:
a preemptor anti-affine to one of two low-priority pods on a full node evicts only that
one. Volcano's expected evictions are compared as sets, as its CheckAll does. Its one-node
cases end the same with the path off (koordqueue's victim order happens to take the
anti-affine pod first); with the reprieve loop taken out, "allocatable and has enough
resource, don't preempt" fails (checked). Our own cases need the path: with it off, the
reprieve case and the node choice case fail (checked).

"Topology-aware" is pod topology (inter-pod affinity, spread), not HyperNodes: Volcano's
preempt has no HyperNode path (v1.14.1, v1.15.1, master); it skips a starving job with a
networkTopology (its issue 4374), and v1.15's gangpreempt is what evicts for such a job.
The last cases show both paths skip it (fails with the skip taken out: the topology job
preempts then).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from koordqueue.scheduler import SchedulerConfig
from koordqueue.scheduler.actions.preempt_topology import TopologyAwareOptions, pick_node
from koordqueue.scheduler.api import NodeInfo, PodGroupPhase, QueueInfo, TaskInfo
from koordqueue.scheduler.api import topology_names as tn
from koordqueue.scheduler.api.hypernode import NetworkTopology
from koordqueue.scheduler.framework.interface import Arguments

from .harness import Outcome, Pod, PodGroup, build, node, pg, pod, queue, rl, run, tiers
from .test_preempt_action import HIGH, INQUEUE, LOW, ONE, PODS, p

TIERS_CASES: tuple[tuple[str, set[str]], ...] = (
    ("conformance", {"Preemptable"}),
    ("gang", {"Preemptable", "JobPipelined", "JobStarving"}),
    ("priority", {"TaskOrder", "JobOrder", "Preemptable", "JobPipelined", "JobStarving"}),
    ("proportion", {"Overused", "Allocatable", "QueueOrder", "Predicate"}),
    ("predicates", {"Preemptable", "Predicate"}),
)
TIERS = tiers(*TIERS_CASES)


def _config(enabled: bool) -> SchedulerConfig:
    arguments = Arguments({tn.ENABLE_TOPOLOGY_AWARE_PREEMPTION: enabled})
    return dataclasses.replace(TIERS, configurations=(("preempt", arguments),))


AWARE = _config(True)
NORMAL = _config(False)
Case = tuple[list[NodeInfo], list[Pod], list[PodGroup], list[QueueInfo], set[str]]


def _run(config: SchedulerConfig, case: Case) -> Outcome:
    nodes, pods, groups, queues, _expected = case
    return run(build(nodes, pods, groups, queues, namespace="c1"), config, "preempt")


def _low_high(low_min: int, high_min: int, low_task: dict[str, int] | None = None,
              high_task: dict[str, int] | None = None) -> list[PodGroup]:  # fmt: skip
    return [
        pg("pg1", "q1", low_min, INQUEUE, priority=LOW, task_min=low_task),
        pg("pg2", "q1", high_min, INQUEUE, priority=HIGH, task_min=high_task),
    ]


def _anti_affine(labels: dict[str, str]) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term]}}}  # fmt: skip


CASES: dict[str, Case] = {
    "do not preempt if there are enough idle resources": (
        [node("n1", rl("10", "10G", PODS))],
        [p("preemptee1", "n1", ONE, "pg1"), p("preemptee2", "n1", ONE, "pg1"),
         p("preemptor1", "", ONE, "pg1")],
        [pg("pg1", "q1", 3, INQUEUE, task_min={"": 3})],
        [queue("q1")],
        set(),
    ),
    "do not preempt if job is pipelined": (
        [node("n1", rl("3", "3G", PODS))],
        [p("preemptee1", "n1", ONE, "pg1"), p("preemptee2", "n1", ONE, "pg1"),
         p("preemptee3", "n1", ONE, "pg2"), p("preemptor2", "", ONE, "pg2")],
        [pg("pg1", "q1", 1, INQUEUE, task_min={"": 2}),
         pg("pg2", "q1", 1, INQUEUE, task_min={"": 2})],
        [queue("q1")],
        set(),
    ),
    "preempt one task of different job to fit both jobs on one node": (
        [node("n1", rl("2", "2G", PODS))],
        [p("preemptee1", "n1", ONE, "pg1"), p("preemptee2", "n1", ONE, "pg1", preemptable=False),
         p("preemptor1", "", ONE, "pg2"), p("preemptor2", "", ONE, "pg2")],
        _low_high(1, 1, {"": 2}, {"": 2}),
        [queue("q1")],
        {"c1/preemptee1"},
    ),
    "preempt enough tasks to fit large task of different job": (
        [node("n1", rl("6", "6G", PODS))],
        [p("preemptee1", "n1", ONE, "pg1"), p("preemptee2", "n1", ONE, "pg1"),
         p("preemptee3", "n1", ONE, "pg1", preemptable=False),
         p("preemptor1", "", rl("5", "5G"), "pg2")],
        _low_high(1, 1, {"": 3}, {"": 1}),
        [queue("q1")],
        {"c1/preemptee1", "c1/preemptee2"},
    ),
    "preempt low priority job in same queue": (
        [node("n1", rl("12", "12G", PODS))],
        [p("preemptee1", "n1", rl("3", "3G"), "pg1"), p("preemptor1", "", rl("3", "3G"), "pg2")],
        _low_high(0, 1, {}, {"": 1}),
        [queue("q1", None, rl("4", "4G"))],
        {"c1/preemptee1"},
    ),
    "preempt low priority job in same queue: allocatable and has enough resource, don't "
    "preempt": (
        [node("n1", rl("12", "12G", PODS))],
        [p("preemptee1", "n1", rl("3", "3G"), "pg1"), p("preemptor1", "", rl("3", "3G"), "pg2")],
        _low_high(1, 1, {}, {"": 1}),
        [queue("q1", None, rl("6", "6G"))],
        set(),
    ),
    "preempt low priority job in same queue but not pod with preemptable=false or higher "
    "priority": (
        [node("n1", rl("12", "12G", PODS))],
        [p("preemptee1", "n1", ONE, "pg1", preemptable=False), p("preemptee2", "n1", ONE, "pg1"),
         p("preemptee3", "n1", ONE, "pg1", priority=HIGH), p("preemptor1", "", ONE, "pg2")],
        _low_high(1, 1, {}, {"": 1}),
        [queue("q1", None, rl("3", "3G"))],
        {"c1/preemptee2"},
    ),
    "unBestEffort high-priority pod preempt BestEffort low-priority pod in same queue": (
        [node("n1", rl("12", "12G", {"pods": "1"}))],
        [p("preemptee1", "n1", rl(), "pg1"), p("preemptor1", "", rl("3", "3G"), "pg2")],
        _low_high(0, 1, {}, {"": 1}),
        [queue("q1", None, rl("6", "6G"))],
        {"c1/preemptee1"},
    ),
    "BestEffort high-priority pod preempt BestEffort low-priority pod in same queue": (
        [node("n1", rl("12", "12G", {"pods": "1"}))],
        [p("preemptee1", "n1", rl(), "pg1"), p("preemptor1", "", rl(), "pg2")],
        _low_high(0, 1, {}, {"": 1}),
        [queue("q1", None, rl("6", "6G"))],
        {"c1/preemptee1"},
    ),
    "can not preempt resources when task preemption policy is never": (
        [node("n1", rl("1", "1Gi", {"pods": "1"}))],
        [p("preemptee1", "n1", ONE, "pg1"),
         p("preemptor1", "", ONE, "pg2", preempt_never=True)],
        _low_high(0, 1),
        [queue("q1")],
        set(),
    ),
    "preempt low-priority pod when high-priority pod has PodAntiAffinity conflict": (
        [node("n1", rl("2", "2Gi", {"pods": "2"}), {"kubernetes.io/hostname": "n1"})],
        [
            p("preemptee1", "n1", ONE, "pg2"),
            pod("preemptee2", "n1", True, ONE, "pg1", priority=1,
                labels={"volcano.sh/preemptable": "true", "test": "test"},
                spec=_anti_affine({"volcano.sh/preemptable": "true", "test": "test"})),
            pod("preemptor1", "", False, ONE, "pg3", priority=1, labels={"test": "test"},
                spec=_anti_affine({"test": "test"})),
        ],
        [pg("pg1", "q1", 0, INQUEUE, priority=LOW, task_min={}),
         pg("pg2", "q1", 0, INQUEUE, priority=LOW, task_min={}),
         pg("pg3", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 1})],
        [queue("q1", None, rl("2", "2G"))],
        {"c1/preemptee2"},
    ),
}  # fmt: skip
ANTI_AFFINITY = "preempt low-priority pod when high-priority pod has PodAntiAffinity conflict"


@pytest.mark.parametrize("name", list(CASES))
def test_topology_aware_preempt(name: str) -> None:
    """TestTopologyAwarePreempt, each case by its name."""
    case = CASES[name]
    assert set(_run(AWARE, case).evicted) == case[4]


def test_a_victim_not_needed_is_reprieved() -> None:
    """The anti-affinity case with the two victims' names swapped, so that victim order
    (the jobs tie: reverse task order, by name) takes the pod the preemptor is not
    anti-affine to first. Normal preemption evicts until the preemptor fits, so both go;
    the topology-aware path reprieves the first (fails with the reprieve loop taken out:
    checked)."""
    nodes, pods, groups, queues, _ = CASES[ANTI_AFFINITY]
    rename = {"preemptee1": "preemptee2", "preemptee2": "preemptee1"}
    swapped = [dataclasses.replace(x, name=rename.get(x.name, x.name)) for x in pods]
    case: Case = (nodes, swapped, groups, queues, {"c1/preemptee1"})
    assert _run(NORMAL, case).evicted == ["c1/preemptee1", "c1/preemptee2"]
    assert _run(AWARE, case).evicted == ["c1/preemptee1"]


def test_the_chosen_node_has_the_least_important_victims() -> None:
    """pickOneNodeForPreemption, first rule: n1's victim has priority 50, n2's 20, so n2 is
    chosen though n1 comes first (normal preemption takes n1). Two candidates are dry-run
    because `minCandidateNodesAbsolute` says 2 (10% of two nodes is one: n1 alone)."""
    case: Case = (
        [node("n1", rl("1", "1G", PODS)), node("n2", rl("1", "1G", PODS))],
        [p("mid", "n1", ONE, "pg1", priority=50), p("low", "n2", ONE, "pg3", priority=20),
         p("preemptor1", "", ONE, "pg2")],
        [pg("pg1", "q1", 1, INQUEUE, priority=LOW, task_min={}),
         pg("pg3", "q1", 1, INQUEUE, priority=LOW, task_min={}),
         pg("pg2", "q1", 1, INQUEUE, priority=HIGH, task_min={"": 1})],
        [queue("q1")],
        {"c1/low"},
    )  # fmt: skip
    two = dataclasses.replace(AWARE, configurations=(("preempt", Arguments({
        tn.ENABLE_TOPOLOGY_AWARE_PREEMPTION: True, tn.MIN_CANDIDATE_NODES_ABSOLUTE: 2})),))
    aware = _run(two, case)
    assert aware.evicted == ["c1/low"]
    assert aware.pipelined == {"c1/pg2": {"c1/preemptor1": "n2"}}
    assert _run(AWARE, case).evicted == ["c1/mid"]
    assert _run(NORMAL, case).evicted == ["c1/mid"]


def _victim(name: str, priority: int, creation: float) -> TaskInfo:
    return TaskInfo(uid=name, name=name, namespace="c1", job="j", priority=priority,
                    creation=creation)  # fmt: skip


def test_pick_node_tie_breaks() -> None:
    """pickOneNodeForPreemption's later rules, each deciding alone: lowest sum of
    priorities, then fewest victims, then the latest start of the most important victims,
    then the first node."""
    a, b = _victim("a", 10, 1.0), _victim("b", 10, 2.0)
    c, d = _victim("c", 5, 1.0), _victim("d", 10, 1.0)
    assert pick_node([(0, [a, d]), (1, [b, c])])[0] == 1  # sums 20 > 15
    assert pick_node([(0, [a, c]), (1, [b])])[0] == 1  # the same highest; sum 15 < 10+2^31
    assert pick_node([(0, [a]), (1, [b])])[0] == 1  # started later
    assert pick_node([(0, [a]), (1, [d])])[0] == 0  # all tied: the first


def test_how_many_candidates_are_dry_run() -> None:
    """calculateNumCandidates: 10% of the nodes, at least 1, at most 100, at most all."""
    how = TopologyAwareOptions(enabled=True)
    assert [how.candidates(n) for n in (0, 5, 50, 2000)] == [0, 1, 5, 100]
    assert TopologyAwareOptions(True, 50, 3, 4).candidates(20) == 4


@pytest.mark.parametrize("config", [NORMAL, AWARE], ids=["normal", "topology-aware"])
@pytest.mark.parametrize("topology", [NetworkTopology("hard", 1), NetworkTopology("soft")],
                         ids=["hard", "soft"])  # fmt: skip
def test_a_job_with_a_network_topology_does_not_preempt(
    config: SchedulerConfig, topology: NetworkTopology
) -> None:
    """Volcano's preempt skips a starving job whose PodGroup has a networkTopology, of either
    mode (JobInfo.ContainsNetworkTopology). The same case without one preempts."""
    case = CASES["preempt one task of different job to fit both jobs on one node"]
    nodes, pods, groups, queues, _ = case
    snapshot = build(nodes, pods, groups, queues, namespace="c1")
    assert run(snapshot, config, "preempt").evicted == ["c1/preemptee1"]
    snapshot = build(nodes, pods, groups, queues, namespace="c1")
    for job in snapshot.jobs:
        if job.name == "pg2":
            job.network_topology = topology
    assert run(snapshot, config, "preempt").evicted == []


def test_preemption_with_priority_queues() -> None:
    """TestTopologyAwarePreempt v1.15.1, "preemption with priority queues" (its tiers add
    capacity with queue order): q2 (priority 10) runs preemptee2 of a high-priority job, q1
    (priority 1) preemptee1 of a low one; n1 is full; q1's high-priority preemptor evicts
    preemptee1, in its own queue."""
    config = dataclasses.replace(
        tiers(*TIERS_CASES, ("capacity", {"QueueOrder"})), configurations=AWARE.configurations
    )
    running = PodGroupPhase.RUNNING
    snapshot = build(
        [node("n1", rl("2", "2Gi", {"pods": "2"}))],
        [p("preemptee2", "n1", ONE, "pg3"), p("preemptee1", "n1", ONE, "pg1"),
         p("preemptor1", "", ONE, "pg2")],
        [pg("pg3", "q2", 1, running, priority=HIGH), pg("pg1", "q1", 0, running, priority=LOW),
         pg("pg2", "q1", 1, INQUEUE, priority=HIGH)],
        [queue("q1", ONE, ONE, priority=1), queue("q2", ONE, ONE, priority=10)],
        namespace="c1",
    )  # fmt: skip
    assert run(snapshot, config, "preempt").evicted == ["c1/preemptee1"]
