"""capacity with enableHierarchy: cases of volcano-sh/volcano
pkg/scheduler/plugins/capacity/capacity_test.go, Test_capacityPlugin_OnSessionOpenWithHierarchy
(actions enqueue, reclaim, allocate; one tier: capacity with enableHierarchy, predicates, gang).

Cases "case7" and "case10" of that test only check that the session does not panic (they have
no pods and no expectation) and are not transcribed."""

from __future__ import annotations

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import NodeInfo, PodGroupPhase, QueueInfo

from .harness import Outcome, Pod, PodGroup, build, node, pg, pod, queue, rl, run, tiers

RUNNING, INQUEUE, PENDING = PodGroupPhase.RUNNING, PodGroupPhase.INQUEUE, PodGroupPhase.PENDING
N1 = node("n1", rl("8", "8Gi", {"pods": "11"}))
GPU = "nvidia.com/gpu"


def _hierarchy(
    nodes: list[NodeInfo], pods: list[Pod], groups: list[PodGroup], queues: list[QueueInfo]
) -> Outcome:
    return run(
        build(nodes, pods, groups, queues),
        tiers(
            (
                "capacity",
                {
                    "Allocatable",
                    "Preemptive",
                    "Reclaimable",
                    "QueueOrder",
                    "Hierarchy",
                    "JobEnqueued",
                },
            ),
            ("predicates", {"Predicate"}),
            ("gang", {"JobStarving"}),
        ),
        "enqueue, reclaim, allocate",
    )


def child(
    name: str, parent: str, deserved: Resources | None = None, capability: Resources | None = None
) -> QueueInfo:
    """buildQueueWithParents(name, parent, deserved, capability)."""
    return queue(name, deserved, capability, parent=parent or None)


ROOT = child("root", "")
Q1 = child("q1", "root", None, rl("4", "4Gi"))
Q2 = child("q2", "root", None, rl("4", "4Gi"))
Q11 = child("q11", "q1", None, rl("1", "1Gi"))
Q12 = child("q12", "q1", None, rl("3", "3Gi"))
Q3 = child("q3", "root", rl("4", "4Gi", {"pods": "10"}), rl("4", "4Gi", {"pods": "10"}))
Q4 = child("q4", "root", rl("2", "2Gi", {"pods": "1"}), rl("4", "4Gi", {"pods": "4"}))
Q31 = child("q31", "q3", rl("2", "2Gi", {"pods": "2"}), rl("4", "4Gi", {"pods": "4"}))
Q32 = child("q32", "q3", rl("2", "2Gi", {"pods": "2"}), rl("4", "4Gi", {"pods": "4"}))
Q33 = child("q33", "q3", rl("0", "0Gi", {"pods": "2"}), rl("4", "4Gi", {"pods": "4"}))


def test_leaf_queue_receives_allocations() -> None:
    """ "case0: Pod allocatable when queue is leaf queue"."""
    out = _hierarchy(
        [N1],
        [pod("p1", "", False, rl("1", "1Gi"), "pg1")],
        [pg("pg1", "q11", 1, INQUEUE)],
        [ROOT, Q1, Q2, Q11, Q12],
    )
    assert out.binds == {"ns1/p1": "n1"}


def test_inner_queue_receives_no_allocations() -> None:
    """ "case1: Pod not allocatable when queue is not leaf queue"."""
    out = _hierarchy(
        [N1],
        [pod("p2", "", False, rl("1", "1Gi"), "pg2")],
        [pg("pg2", "q1", 1, PENDING)],
        [ROOT, Q1, Q2, Q11, Q12],
    )
    assert out.binds == {}


def test_gang_within_the_leaf_and_parent_capability_is_allocated() -> None:
    """ "case2: Pod allocatable when queue has not exceed capability"."""
    out = _hierarchy(
        [N1],
        [
            pod("p3", "", False, rl("2", "2Gi"), "pg3"),
            pod("p4", "", False, rl("2", "2Gi"), "pg3"),
        ],
        [pg("pg3", "q31", 2, INQUEUE)],
        [ROOT, Q3, Q4, Q31, Q32],
    )
    assert out.binds == {"ns1/p3": "n1", "ns1/p4": "n1"}


def test_leaf_below_deserved_reclaims_from_its_sibling_although_the_parent_is_full() -> None:
    """ "case3: Can reclaim from other queues when allocated < deserved": q32 (deserved 2) is
    empty while its sibling q31 holds 4 of the full q3's 4; the victim is the sibling's
    preemptable pod, not the other branch's (q4) — closest queues first."""
    out = _hierarchy(
        [N1],
        [
            pod("p5", "n1", True, rl("4", "4Gi"), "pg4"),
            pod("p6", "n1", True, rl("2", "2Gi"), "pg5", preemptable=False),
            pod("p7", "n1", True, rl("2", "2Gi"), "pg5"),
            pod("p8", "", False, rl("2", "2Gi"), "pg6"),
        ],
        [pg("pg4", "q4", 1, RUNNING), pg("pg5", "q31", 1, RUNNING), pg("pg6", "q32", 1, INQUEUE)],
        [ROOT, Q3, Q31, Q32, Q4],
    )
    assert out.pipelined == {"ns1/pg6": {"ns1/p8": "n1"}}
    assert out.evicted == ["ns1/p7"]


def test_ancestor_real_capability_limits_a_leaf() -> None:
    """ "case4: Pod is not allocatable when ancestor queue's real capability not enough"."""
    out = _hierarchy(
        [N1],
        [
            pod("p6", "n1", True, rl("2", "2Gi"), "pg5", preemptable=False),
            pod("p9", "n1", True, rl("2", "2Gi"), "pg7"),
            pod("p10", "", False, rl("3", "3Gi"), "pg8"),
        ],
        [pg("pg5", "q31", 1, RUNNING), pg("pg7", "q32", 1, RUNNING), pg("pg8", "q33", 1, INQUEUE)],
        [ROOT, Q3, Q31, Q32, Q33],
    )
    assert out.binds == {}


def test_unset_cpu_capability_is_inherited_from_the_parent() -> None:
    """ "case5: If the capability cpu or memory is not specified, the value should be inherited
    from parent queue"."""
    out = _hierarchy(
        [N1],
        [pod("p11", "", False, rl("1", ""), "pg9")],
        [pg("pg9", "q51", 1, RUNNING)],
        [ROOT, child("q5", "root", None, rl("", "4Gi")), child("q51", "q5", None, rl("", "2Gi"))],
    )
    assert out.binds == {"ns1/p11": "n1"}


def test_job_is_not_enqueued_when_an_ancestor_capability_is_used_up() -> None:
    """ "case6: podgroup can't be enqueued when any ancestor queue's capability is not
    enough": q61 and q62 inherit q6's capability (2 cpu, 4Gi); the first job takes it all."""
    out = _hierarchy(
        [N1],
        [],
        [
            pg("pg10", "q61", 1, PENDING, rl("2", "4Gi")),
            pg("pg11", "q62", 1, PENDING, rl("2", "4Gi")),
        ],
        [
            ROOT,
            child("q6", "root", None, rl("2", "4Gi")),
            child("q61", "q6"),
            child("q62", "q6"),
        ],
    )
    assert out.phases["ns1/pg10"] is INQUEUE
    assert out.phases["ns1/pg11"] is PENDING


def test_scalar_in_deserved_does_not_block_allocation() -> None:
    """ "case8: When the queue's deserved value has a scalar resource set, the check can
    pass"."""
    out = _hierarchy(
        [node("n-gpu", rl("8", "8Gi", {GPU: "8", "pods": "10"}))],
        [pod("p12", "", False, rl("2", "2Gi", {GPU: "1"}), "pg12")],
        [pg("pg12", "q81", 1, INQUEUE)],
        [
            ROOT,
            child("q8", "root", rl("4", "4Gi", {GPU: "8"})),
            child("q81", "q8", rl("2", "2Gi", {GPU: "4"})),
            child("q82", "q8", rl("2", "2Gi", {GPU: "4"})),
        ],
    )
    assert out.binds == {"ns1/p12": "n-gpu"}


def test_zero_scalar_in_deserved_does_not_block_allocation() -> None:
    """ "case9: When some scalar resources are 0 in deserved, the check can still pass"."""
    huge = "hugepages-1Gi"
    out = _hierarchy(
        [node("n2", rl("8", "8Gi", {GPU: "8", "pods": "10", huge: "0"}))],
        [pod("p13", "", False, rl("2", "2Gi", {GPU: "1"}), "pg13")],
        [pg("pg13", "q91", 1, INQUEUE)],
        [
            ROOT,
            child("q9", "root", rl("2", "2Gi", {GPU: "8", huge: "0"})),
            child("q91", "q9", rl("2", "2Gi", {GPU: "4", huge: "0"})),
        ],
    )
    assert out.binds == {"ns1/p13": "n2"}


def test_unset_scalar_capability_is_inherited_from_the_parent() -> None:
    """ "case11: If the capability scalar resources is not specified, the value should be
    inherited from parent queue"."""
    out = _hierarchy(
        [node("n2", rl("8", "8Gi", {GPU: "8", "pods": "10", "hugepages-1Gi": "0"}))],
        [
            pod("p14", "", False, rl("1", "1Gi", {GPU: "4"}), "pg14"),
            pod("p15", "", False, rl("1", "1Gi", {GPU: "4"}), "pg15"),
        ],
        [pg("pg14", "case11_queue11", 1, INQUEUE), pg("pg15", "case11_queue12", 1, INQUEUE)],
        [
            ROOT,
            child("case11_queue1", "root"),
            child("case11_queue11", "case11_queue1", None, rl("4", "4Gi", {GPU: "4"})),
            child("case11_queue12", "case11_queue1", None, rl("4", "4Gi", {GPU: "4"})),
        ],
    )
    assert out.binds == {"ns1/p14": "n2", "ns1/p15": "n2"}


def test_leaf_reclaims_when_below_deserved_on_a_single_scalar_dimension() -> None:
    """ "case12: Can reclaim from other queues when allocated <= deserved on a single scalar
    dimension"."""
    a100, hca = "nvidia.com/a100", "rdma/hca"
    want = rl("1", "1Gi", {a100: "2", hca: "1"})
    out = _hierarchy(
        [node("n3", rl("16", "16Gi", {a100: "5", hca: "1001", "pods": "11"}))],
        [
            pod("p16", "", False, want, "pg16"),
            pod("p17", "n3", True, want, "pg17"),
            pod("p18", "n3", True, want, "pg18", preemptable=False),
        ],
        [
            pg("pg16", "case12_queue11", 1, INQUEUE),
            pg("pg17", "case12_queue12", 1, RUNNING),
            pg("pg18", "case12_queue12", 1, RUNNING),
        ],
        [
            child("root", "", rl("16", "16Gi", {"nvidia.com/a100": "4", "rdma": "1000"})),
            child("case12_queue1", "root", rl("", "", {a100: "2"})),
            child("case12_queue11", "case12_queue1", rl("", "", {a100: "2"})),
            child("case12_queue12", "case12_queue1"),
        ],
    )
    assert out.pipelined == {"ns1/pg16": {"ns1/p16": "n3"}}
    assert out.evicted == ["ns1/p17"]
