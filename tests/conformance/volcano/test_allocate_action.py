"""allocate action: cases of volcano-sh/volcano pkg/scheduler/actions/allocate/allocate_test.go,
TestAllocate (action allocate; one tier: gang with job order/ready/pipelined/starving, drf with
preemptable/job order, proportion with queue order/reclaimable/allocatable, predicates with
predicate, nodeorder with node order).

The network-topology, hypernode, DRA and sharding tests of that file exercise features
koordqueue does not have and are not transcribed."""

from __future__ import annotations

from koordqueue.scheduler.api import NodeInfo, PodGroupPhase, QueueInfo

from .harness import Outcome, Pod, PodGroup, build, node, pg, pod, queue, rl, run, tiers

INQUEUE = PodGroupPhase.INQUEUE
PODS = {"pods": "10"}
ONE = rl("1", "1G")
CONFIG = tiers(
    ("gang", {"JobOrder", "JobReady", "JobPipelined", "JobStarving"}),
    ("drf", {"Preemptable", "JobOrder"}),
    ("proportion", {"QueueOrder", "Reclaimable", "Allocatable"}),
    ("predicates", {"Predicate"}),
    ("nodeorder", {"NodeOrder"}),
)


def _allocate(
    nodes: list[NodeInfo], pods: list[Pod], groups: list[PodGroup], queues: list[QueueInfo]
) -> Outcome:
    return run(build(nodes, pods, groups, queues, namespace="c1"), CONFIG, "allocate")


def test_task_whose_node_selector_matches_no_node_is_skipped() -> None:
    """TestAllocate, "prepredicate failed: node selector does not match"."""
    out = _allocate(
        [node("n1", rl("2", "4Gi", PODS), {"nodeRole": "worker"})],
        [
            pod("p1", "", False, ONE, "pg1", role="master", selector={"nodeRole": "master"}),
            pod("p2", "", False, ONE, "pg1", role="worker", selector={"nodeRole": "worker"}),
        ],
        [pg("pg1", "c1", 1, INQUEUE)],
        [queue("c1")],
    )
    assert out.binds == {"c1/p2": "n1"}


def test_allocation_continues_past_a_failed_task_until_role_minimums_are_met() -> None:
    """TestAllocate, "prepredicate failed and tasks are not used up, continue on until min
    member meet"."""
    out = _allocate(
        [
            node("n1", rl("1", "2Gi", PODS), {"nodeRole": "master"}),
            node("n2", rl("1", "2Gi", PODS), {"nodeRole": "worker"}),
        ],
        [
            pod("p0", "", False, ONE, "pg1", role="master", selector={"nodeRole": "master"}),
            pod("p1", "", False, ONE, "pg1", role="master", selector={"nodeRole": "master"}),
            pod("p2", "", False, ONE, "pg1", role="worker", selector={"nodeRole": "worker"}),
            pod("p3", "", False, ONE, "pg1", role="worker", selector={"nodeRole": "worker"}),
        ],
        [pg("pg1", "c1", 2, INQUEUE, task_min={"master": 1, "worker": 1})],
        [queue("c1")],
    )
    assert out.binds == {"c1/p0": "n1", "c1/p2": "n2"}


def test_gang_whose_role_minimum_cannot_be_placed_binds_nothing() -> None:
    """TestAllocate, "master's min member can not be allocated, break from allocating"."""
    out = _allocate(
        [
            node("n1", rl("1", "2Gi", PODS), {"nodeRole": "master"}),
            node("n2", rl("2", "2Gi", PODS), {"nodeRole": "worker"}),
        ],
        [
            pod("p0", "", False, ONE, "pg1", role="master", selector={"nodeRole": "master"}),
            pod("p1", "", False, ONE, "pg1", role="master", selector={"nodeRole": "master"}),
            pod("p2", "", False, ONE, "pg1", role="worker", selector={"nodeRole": "worker"}),
            pod("p3", "", False, ONE, "pg1", role="worker", selector={"nodeRole": "worker"}),
        ],
        [pg("pg1", "c1", 2, INQUEUE, task_min={"master": 2, "worker": 0})],
        [queue("c1")],
    )
    assert out.binds == {}


def test_one_job_with_two_pods_on_one_node() -> None:
    """TestAllocate, "one Job with two Pods on one node"."""
    out = _allocate(
        [node("n1", rl("2", "4Gi", PODS))],
        [pod("p1", "", False, ONE, "pg1"), pod("p2", "", False, ONE, "pg1")],
        [pg("pg1", "c1", 0, INQUEUE)],
        [queue("c1")],
    )
    assert out.binds == {"c1/p1": "n1", "c1/p2": "n1"}


def test_two_queues_share_one_node_by_their_deserved() -> None:
    """TestAllocate, "two Jobs on one node": each queue deserves half the node, so each gets
    one pod (proportion's allocatable stops a queue at its deserved)."""
    out = _allocate(
        [node("n1", rl("2", "4G", PODS))],
        [
            pod("pg1-p-1", "", False, ONE, "pg1"),
            pod("pg1-p-2", "", False, ONE, "pg1"),
            pod("pg2-p-1", "", False, ONE, "pg2", namespace="c2"),
            pod("pg2-p-2", "", False, ONE, "pg2", namespace="c2"),
        ],
        [pg("pg1", "c1", 0, INQUEUE), pg("pg2", "c2", 0, INQUEUE, namespace="c2")],
        [queue("c1"), queue("c2")],
    )
    assert out.binds == {"c2/pg2-p-1": "n1", "c1/pg1-p-1": "n1"}


def test_queue_whose_job_does_not_fit_does_not_block_others() -> None:
    """TestAllocate, "high priority queue should not block others"."""
    out = _allocate(
        [node("n1", rl("2", "4G", PODS))],
        [pod("p1", "", False, rl("3", "1G"), "pg1"), pod("p2", "", False, ONE, "pg2")],
        [pg("pg1", "c1", 0, INQUEUE), pg("pg2", "c2", 0, INQUEUE)],
        [queue("c1"), queue("c2")],
    )
    assert out.binds == {"c1/p2": "n1"}
