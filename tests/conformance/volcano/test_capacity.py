"""capacity without hierarchy: cases of volcano-sh/volcano
pkg/scheduler/plugins/capacity/capacity_test.go, Test_capacityPlugin_OnSessionOpenWithoutHierarchy
(actions allocate, reclaim; one tier: capacity, predicates, gang) and TestEnqueueAndAllocatable
(actions enqueue, allocate; one tier: capacity)."""

from __future__ import annotations

import pytest

from koordqueue.scheduler.api import NodeInfo, PodGroupPhase, QueueInfo

from .harness import Outcome, Pod, PodGroup, build, node, pg, pod, queue, rl, run, tiers
from .two_cycles import BINDING, no_double_counting

RUNNING, INQUEUE, PENDING = PodGroupPhase.RUNNING, PodGroupPhase.INQUEUE, PodGroupPhase.PENDING
PODS = {"pods": "10"}
SOURCE = "volcano-sh/volcano pkg/scheduler/plugins/capacity/capacity_test.go"


def _without_hierarchy(
    nodes: list[NodeInfo], pods: list[Pod], groups: list[PodGroup], queues: list[QueueInfo]
) -> Outcome:
    return run(
        build(nodes, pods, groups, queues),
        tiers(
            ("capacity", {"Allocatable", "Preemptive", "Reclaimable", "QueueOrder"}),
            ("predicates", {"Predicate"}),
            ("gang", {"JobStarving"}),
        ),
        "allocate, reclaim",
    )


N1 = node("n1", rl("2", "4Gi", PODS), {"selector": "worker"})
N2 = node("n2", rl("2", "4Gi", PODS))


def test_pod_is_allocated_while_the_queue_is_below_its_capability() -> None:
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy, "case0: Pod allocatable when queue
    has not exceed capability"."""
    out = _without_hierarchy(
        [N1, N2],
        [
            pod("p1", "n1", True, rl("1", "1Gi"), "pg1"),
            pod("p2", "", False, rl("1", "1Gi"), "pg2", selector={"selector": "worker"}),
        ],
        [pg("pg1", "q1", 1, RUNNING), pg("pg2", "q1", 1, INQUEUE)],
        [queue("q1", None, rl("2", "2Gi"))],
    )
    assert out.binds == {"ns1/p2": "n1"}


def test_pod_is_not_allocated_beyond_the_queue_capability() -> None:
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy, "case1: Pod not allocatable when
    queue exceed queue capability"."""
    out = _without_hierarchy(
        [N1, N2],
        [
            pod("p3", "n1", True, rl("1", "1Gi"), "pg3"),
            pod("p4", "", False, rl("1", "1Gi"), "pg4"),
        ],
        [pg("pg3", "q2", 1, RUNNING), pg("pg4", "q2", 1, INQUEUE)],
        [queue("q2", None, rl("1.5", "1.5Gi"))],
    )
    assert out.binds == {}


def test_queue_below_deserved_reclaims_from_a_queue_over_it() -> None:
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy, "case2: Can reclaim from other
    queues when allocated < deserved"."""
    out = _without_hierarchy(
        [N1, N2],
        [
            pod("p5", "n1", True, rl("2", "4Gi"), "pg5", preemptable=False),
            pod("p6", "n2", True, rl("2", "4Gi"), "pg5"),
            pod("p7", "", False, rl("2", "4Gi"), "pg6"),
        ],
        [pg("pg5", "q3", 1, RUNNING), pg("pg6", "q4", 1, INQUEUE)],
        [queue("q3", rl("2", "4Gi")), queue("q4", rl("2", "4Gi"))],
    )
    assert out.pipelined == {"ns1/pg6": {"ns1/p7": "n2"}}
    assert out.evicted == ["ns1/p6"]


def test_reclaim_for_a_scalar_only_pod_ignores_overused_cpu_and_memory() -> None:
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy, "case3: CPU & Memory are overused,
    scalar resource is not overused, but candidate pod has not request CPU & Memory, reclaim
    should happen"."""
    gpu = {"nvidia.com/A100": "10"}
    out = _without_hierarchy(
        [
            node("n3", rl("2", "4Gi", {**gpu, **PODS}), {"selector": "worker"}),
            node("n4", rl("2", "4Gi", {**gpu, **PODS})),
        ],
        [
            pod("p8", "n3", True, rl("0", "0Gi", gpu), "pg7", preemptable=False),
            pod("p9", "n4", True, rl("0", "0Gi", gpu), "pg7"),
            pod("p10", "n3", True, rl("2", "4Gi"), "pg8"),
            pod("p11", "n4", True, rl("2", "4Gi"), "pg8"),
            pod("p12", "", False, rl("0", "0Gi", gpu), "pg9"),
        ],
        [pg("pg7", "q5", 1, RUNNING), pg("pg8", "q6", 1, RUNNING), pg("pg9", "q6", 1, INQUEUE)],
        [queue("q5", rl("2", "4Gi", gpu)), queue("q6", rl("2", "4Gi", gpu))],
    )
    assert out.pipelined == {"ns1/pg9": {"ns1/p12": "n4"}}
    assert out.evicted == ["ns1/p9"]


def test_queue_priority_orders_queues_before_share() -> None:
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy, "case4: Pods are assigned according
    to the order of Queue Priority in which PGs are placed": the priority-10 queue wins the
    only free node over the priority-1 queue."""
    out = _without_hierarchy(
        [node("n5", rl("2", "4Gi", PODS)), node("n6", rl("2", "4Gi", PODS))],
        [
            pod("p13", "n5", True, rl("2", "4Gi"), "pg10"),
            pod("p14", "", False, rl("2", "4Gi"), "pg11"),
            pod("p15", "", False, rl("2", "4Gi"), "pg12"),
        ],
        [pg("pg10", "q7", 1, RUNNING), pg("pg11", "q8", 1, INQUEUE), pg("pg12", "q9", 1, INQUEUE)],
        [
            queue("q7", None, rl("2", "4Gi"), priority=5),
            queue("q8", None, rl("2", "4Gi"), priority=1),
            queue("q9", None, rl("2", "4Gi"), priority=10),
        ],
    )
    assert out.binds == {"ns1/p15": "n6"}


def test_reclaim_when_allocated_plus_request_fits_deserved_on_one_dimension() -> None:
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy, "case5: Can reclaim from other
    queues when allocated + req <= deserved on one dimension"."""
    out = _without_hierarchy(
        [N1],
        [
            pod("p16", "n1", True, rl("1", "3Gi"), "pg16"),
            pod("p17", "", False, rl("1", "1Gi"), "pg17"),
            pod("p18", "n1", True, rl("1", "1Gi"), "pg18"),
        ],
        [
            pg("pg16", "q10", 1, RUNNING),
            pg("pg17", "q10", 1, INQUEUE),
            pg("pg18", "q11", 1, RUNNING),
        ],
        [
            queue("q10", rl("2", "2Gi"), rl("4", "4Gi")),
            queue("q11", rl("0", "0Gi"), rl("2", "2Gi")),
        ],
    )
    assert out.pipelined == {"ns1/pg17": {"ns1/p17": "n1"}}
    assert out.evicted == ["ns1/p18"]


def test_no_reclaim_when_allocated_plus_request_exceeds_deserved_everywhere() -> None:
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy, "case6: Can not reclaim from other
    queues when allocated + req > deserved"."""
    out = _without_hierarchy(
        [N1],
        [
            pod("p19", "n1", True, rl("1", "1Gi"), "pg19"),
            pod("p20", "", False, rl("1", "2Gi"), "pg20"),
            pod("p21", "n1", True, rl("1", "1Gi"), "pg21"),
        ],
        [
            pg("pg19", "q12", 1, RUNNING),
            pg("pg20", "q12", 1, INQUEUE),
            pg("pg21", "q13", 1, RUNNING),
        ],
        [
            queue("q12", rl("1", "2Gi"), rl("4", "4Gi")),
            queue("q13", rl("0", "0Gi"), rl("2", "2Gi")),
        ],
    )
    assert out.evicted == []
    assert out.pipelined == {}


def test_queue_within_its_gpu_deserved_keeps_its_pods_whatever_cpu_it_uses() -> None:
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy, "case7: allocated does not contain
    scalar dimension (GPU), deserved does; should not reclaim"."""
    gpu = "nvidia.com/gpu"
    out = _without_hierarchy(
        [node("n7", rl("4", "8Gi", {gpu: "4", **PODS}))],
        [
            pod("p22", "n7", True, rl("2", "4Gi"), "pg22"),
            pod("p23", "n7", True, rl("0", "0Gi", {gpu: "1"}), "pg23"),
            pod("p24", "n7", True, rl("2", "1Gi", {gpu: "1"}), "pg24"),
            pod("p25", "", False, rl("2", "3Gi", {gpu: "1"}), "pg25"),
        ],
        [
            pg("pg22", "queue14", 1, RUNNING),
            pg("pg23", "queue15", 1, RUNNING),
            pg("pg24", "queue16", 1, RUNNING),
            pg("pg25", "queue16", 1, INQUEUE),
        ],
        [
            queue("queue14", rl("2", "4Gi", {gpu: "2"})),
            queue("queue15"),
            queue("queue16", rl("2", "4Gi", {gpu: "2"})),
        ],
    )
    assert out.evicted == []
    assert out.pipelined == {}


def test_reclaim_evicts_only_victims_that_free_what_the_reclaimer_needs() -> None:
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy, "case8: reclaimer dimensions are
    considered properly while evicting reclaimees": the GPU reclaimer evicts the GPU pod only,
    not the memory-only or cpu-only ones."""
    gpu = "nvidia.com/gpu"
    out = _without_hierarchy(
        [node("n8", rl("4", "8Gi", {gpu: "1", **PODS}))],
        [
            pod("p26", "n8", True, rl("0", "4Gi"), "pg26"),
            pod("p27", "n8", True, rl("1", "0Gi"), "pg27"),
            pod("p28", "n8", True, rl("0", "0Gi", {gpu: "1"}), "pg28"),
            pod("p29", "n8", True, rl("2", "4Gi"), "pg29"),
            pod("p30", "", False, rl("1", "0Gi", {gpu: "1"}), "pg30"),
        ],
        [
            pg("pg26", "queue17", 1, RUNNING),
            pg("pg27", "queue17", 1, RUNNING),
            pg("pg28", "queue17", 1, RUNNING),
            pg("pg29", "queue18", 1, RUNNING),
            pg("pg30", "queue18", 1, INQUEUE),
        ],
        [queue("queue17", rl("2", "2Gi")), queue("queue18", rl("2", "4Gi", {gpu: "1"}))],
    )
    assert out.pipelined == {"ns1/pg30": {"ns1/p30": "n8"}}
    assert out.evicted == ["ns1/p28"]


def test_pod_within_its_scalar_deserved_is_not_reclaimed_for_cpu() -> None:
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy, "case9: reclaimee has intersecting
    scalar dimensions with deserved shouldn't be reclaimed on cpu/memory"."""
    gpu = "nvidia.com/gpu"
    out = _without_hierarchy(
        [node("n8", rl("4", "8Gi", {gpu: "1", **PODS}))],
        [
            pod("p31", "n8", True, rl("4", "4Gi", {gpu: "1"}), "pg31"),
            pod("p32", "", False, rl("1", "1Gi"), "pg32"),
        ],
        [pg("pg31", "queue19", 1, RUNNING), pg("pg32", "queue20", 1, INQUEUE)],
        [queue("queue19", rl("", "", {gpu: "1"})), queue("queue20", rl("2", "2Gi"))],
    )
    assert out.evicted == []
    assert out.pipelined == {}


def test_no_reclaim_beyond_the_reclaiming_queue_capability() -> None:
    """Test_capacityPlugin_OnSessionOpenWithoutHierarchy, "case10: PreemptiveFn respects
    capability — no reclaim when futureUsed would exceed capability"."""
    out = _without_hierarchy(
        [node("n9", rl("8", "100Gi", PODS)), node("n10", rl("8", "100Gi", PODS))],
        [
            pod("p33", "n9", True, rl("7", "90Gi"), "pg33"),
            pod("p34", "", False, rl("2", "5Gi"), "pg34"),
            pod("p35", "n10", True, rl("2", "5Gi"), "pg35"),
        ],
        [
            pg("pg33", "queue21", 1, RUNNING),
            pg("pg34", "queue21", 1, INQUEUE),
            pg("pg35", "queue22", 1, RUNNING),
        ],
        [
            queue("queue21", rl("8", "100Gi"), rl("8", "100Gi")),
            queue("queue22", None, rl("2", "5Gi")),
        ],
    )
    assert out.evicted == []
    assert out.pipelined == {}


# --- TestEnqueueAndAllocatable ---------------------------------------------------------------

E1 = node("n1", rl("3", "3G", PODS))
E2 = node("n2", rl("3", "3G", PODS))
RES_1C3G, RES_3C1G = rl("1", "3G"), rl("3", "1G")
RES_1C0G, RES_0C1G, RES_1C1G = rl("1", "0G"), rl("0", "1G"), rl("1", "1G")
Q1 = queue("q1", rl("2", "2G"), rl("2", "2G"))
Q2 = queue("q2", rl("2", "2G"), rl("3", "3G"))
HOLDERS = [pod("pod1", "n1", True, RES_1C3G, "pg1"), pod("pod2", "n2", True, RES_3C1G, "pg2")]
HOLDER_GROUPS = [pg("pg1", "q1", 1, RUNNING, RES_1C3G), pg("pg2", "q2", 1, RUNNING, RES_3C1G)]


def _enqueue_allocate(pods: list[Pod], groups: list[PodGroup], queues: list[QueueInfo]) -> Outcome:
    config = tiers(("capacity", {"Allocatable", "Preemptive", "Overused", "JobEnqueued"}))
    return run(build([E1, E2], pods, groups, queues), config, "enqueue, allocate")


def test_job_asking_only_cpu_is_admitted_although_memory_is_over_deserved() -> None:
    """TestEnqueueAndAllocatable, "case0: memory exceed derserved, job only request cpu can be
    enqueued and allocated" (`memory: 0` is not a demand)."""
    out = _enqueue_allocate(
        [*HOLDERS, pod("pod3", "", False, RES_1C0G, "pg3")],
        [*HOLDER_GROUPS, pg("pg3", "q1", 1, PENDING, RES_1C0G)],
        [Q1, Q2],
    )
    assert out.binds == {"ns1/pod3": "n1"}


def test_job_asking_only_memory_is_admitted_although_cpu_is_over_deserved() -> None:
    """TestEnqueueAndAllocatable, "case1: cpu exceed derserved, job only request memory can
    be enqueued and allocated"."""
    out = _enqueue_allocate(
        [*HOLDERS, pod("pod4", "", False, RES_0C1G, "pg4")],
        [*HOLDER_GROUPS, pg("pg4", "q2", 1, PENDING, RES_0C1G)],
        [Q1, Q2],
    )
    assert out.binds == {"ns1/pod4": "n2"}


def test_job_over_the_queue_capability_is_not_enqueued() -> None:
    """TestEnqueueAndAllocatable, "case2: exceed capacity, can not enqueue"."""
    out = _enqueue_allocate(
        [*HOLDERS, pod("pod5", "", False, RES_1C1G, "pg5")],
        [*HOLDER_GROUPS, pg("pg5", "q1", 1, PENDING, RES_1C1G)],
        [Q1, Q2],
    )
    assert out.binds == {}
    assert out.phases["ns1/pg5"] is PENDING


def test_job_of_a_closed_queue_is_not_enqueued() -> None:
    """TestEnqueueAndAllocatable, "case4: queue with non-open state, can not enqueue"."""
    out = _enqueue_allocate(
        [pod("pod6", "", False, RES_1C1G, "pg6")],
        [pg("pg6", "q3", 1, PENDING, RES_1C1G)],
        [queue("q3", None, rl("3", "3G"), state="Closed")],
    )
    assert out.binds == {}
    assert out.phases["ns1/pg6"] is PENDING


def test_inqueue_job_with_binding_tasks_is_not_counted_twice() -> None:
    """TestNoDoubleCountingForInqueueJobWithBindingTasks (capacity with allocatable,
    overused and job enqueued): cycle 1 allocates pgA's three 1-cpu pods (minResources 3
    cpu); with their binds sent, pgA is still Inqueue and its tasks Binding; in cycle 2 pgB
    (1 cpu) fits the 4-cpu queue (3 allocated + 0 still reserved by pgA + 1) and is enqueued
    and bound. Both cycles run on the scheduler cache (two_cycles.py). Fails when pgA's
    reservation is its whole minResources regardless of what it was allocated (checked in
    queue_accounting.inqueue: 3 + 3 + 1 > 4, pB1 not bound)."""
    config = tiers(("capacity", {"Allocatable", "Overused", "JobEnqueued"}))
    first, statuses, second = no_double_counting(config)
    assert first == {"pA1": "n1", "pA2": "n1", "pA3": "n1"}
    assert statuses == BINDING
    assert second == {"pB1": "n1"}


def test_job_of_a_deleted_queue_is_not_scheduled_with_hierarchy() -> None:
    """Test_buildHierarchicalQueueAttrs_nilSafety, "no-panic when job references a deleted
    queue"."""
    out = run(
        build(
            [node("n1", rl("4", "4Gi", PODS))],
            [pod("orphan", "", False, rl("1", "1Gi"), "pg-orphan")],
            [pg("pg-orphan", "deleted-queue", 1, INQUEUE)],
            [queue("root")],
        ),
        tiers(
            (
                "capacity",
                {"Allocatable", "Reclaimable", "QueueOrder", "Hierarchy", "JobEnqueued"},
            ),
            ("predicates", {"Predicate"}),
            ("gang", {"JobStarving"}),
        ),
        "allocate",
    )
    assert out.binds == {}


@pytest.mark.usefixtures("rejecter")
def test_job_rejected_by_another_plugin_reserves_nothing_in_the_queue() -> None:
    """TestJobEnqueuedOnOtherPluginsReject, "pgA rejected by co-tier plugin must not consume
    q1 capacity; pgB must be admitted"."""
    res = rl("1", "1G")
    out = run(
        build(
            [node("n1", rl("4", "4G", PODS))],
            [pod("podA", "", False, res, "pgA"), pod("podB", "", False, res, "pgB")],
            [pg("pgA", "q1", 1, PENDING, res), pg("pgB", "q1", 1, PENDING, res)],
            [queue("q1", rl("1", "4G"), rl("1", "4G"))],
        ),
        tiers(("capacity", {"JobEnqueued"}), ("test-rejecter", {"JobEnqueued"})),
        "enqueue",
    )
    assert out.phases["ns1/pgB"] is INQUEUE
    assert out.phases["ns1/pgA"] is PENDING
