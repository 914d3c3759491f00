"""proportion: cases of volcano-sh/volcano pkg/scheduler/plugins/proportion/proportion_test.go.

TestProportion ("pod-deallocate", "realcapability-test") is not transcribed: it asserts on
Prometheus metrics scraped over HTTP between sessions and relies on pod anti-affinity, which
koordqueue's predicates do not model."""

from __future__ import annotations

import pytest

from koordqueue.scheduler.api import PodGroupPhase, QueueInfo

from .harness import Outcome, Pod, PodGroup, build, node, pg, pod, queue, rl, run, tiers
from .two_cycles import BINDING, no_double_counting

RUNNING, INQUEUE, PENDING = PodGroupPhase.RUNNING, PodGroupPhase.INQUEUE, PodGroupPhase.PENDING
PODS = {"pods": "10"}

# --- TestEnqueueAndAllocable -------------------------------------------------------------------
N1 = node("n1", rl("2", "2G", PODS))
N2 = node("n2", rl("2", "2G", PODS))
RES_1C2G, RES_2C1G = rl("1", "2G"), rl("2", "1G")
RES_1C0G, RES_0C1G, RES_1C1G = rl("1", "0G"), rl("0", "1G"), rl("1", "1G")
HOLDERS = [pod("pod1", "n1", True, RES_1C2G, "pg1"), pod("pod2", "n2", True, RES_2C1G, "pg2")]
HOLDER_GROUPS = [pg("pg1", "q1", 1, RUNNING, RES_1C2G), pg("pg2", "q2", 1, RUNNING, RES_2C1G)]
Q1 = queue("q1", None, rl("2", "2G"))
Q2 = queue("q2", None, rl("3", "3G"))
ALL_ENABLE = {"Allocatable", "Overused", "JobEnqueued"}
ENQUEUEABLE = {"JobEnqueued"}
ALLOCATABLE = {"Allocatable"}


def _enqueue_allocate(
    pods: list[Pod],
    groups: list[PodGroup],
    queues: list[QueueInfo],
    switches: set[str],
) -> Outcome:
    return run(
        build([N1, N2], pods, groups, queues),
        tiers(("proportion", switches)),
        "enqueue, allocate",
    )


def test_job_asking_only_cpu_is_admitted_although_memory_is_over_deserved() -> None:
    """TestEnqueueAndAllocable, "case0: memory exceed derserved, job only request cpu can be
    enqueued and allocated"."""
    out = _enqueue_allocate(
        [*HOLDERS, pod("pod3", "", False, RES_1C0G, "pg3")],
        [*HOLDER_GROUPS, pg("pg3", "q1", 1, PENDING, RES_1C0G)],
        [Q1, Q2],
        ALL_ENABLE,
    )
    assert out.binds == {"ns1/pod3": "n1"}


def test_job_asking_only_memory_is_admitted_although_cpu_is_over_deserved() -> None:
    """TestEnqueueAndAllocable, "case1: cpu exceed derserved, job only request memory can be
    enqueued and allocated"."""
    out = _enqueue_allocate(
        [*HOLDERS, pod("pod4", "", False, RES_0C1G, "pg4")],
        [*HOLDER_GROUPS, pg("pg4", "q2", 1, PENDING, RES_0C1G)],
        [Q1, Q2],
        ALL_ENABLE,
    )
    assert out.binds == {"ns1/pod4": "n2"}


def test_job_over_the_queue_capability_is_not_enqueued() -> None:
    """TestEnqueueAndAllocable, "case2: exceed capacity, can not enqueue"."""
    out = _enqueue_allocate(
        [*HOLDERS, pod("pod5", "", False, RES_1C1G, "pg5")],
        [*HOLDER_GROUPS, pg("pg5", "q1", 1, PENDING, RES_1C1G)],
        [Q1, Q2],
        ENQUEUEABLE,
    )
    assert out.binds == {}
    assert out.phases["ns1/pg5"] is PENDING


def test_task_over_the_queue_deserved_is_not_allocated() -> None:
    """TestEnqueueAndAllocable, "case3: exceed deserved, can not allocate"."""
    out = _enqueue_allocate(
        [*HOLDERS, pod("pod5", "", False, RES_1C1G, "pg5")],
        [*HOLDER_GROUPS, pg("pg5", "q1", 1, PENDING, RES_1C1G)],
        [Q1, Q2],
        ALLOCATABLE,
    )
    assert out.phases["ns1/pg5"] is INQUEUE
    assert out.binds == {}


def test_job_of_a_closed_queue_is_not_enqueued() -> None:
    """TestEnqueueAndAllocable, "case4: queue with  non-open state, can not enqueue"."""
    out = _enqueue_allocate(
        [pod("pod6", "", False, RES_1C1G, "pg6")],
        [pg("pg6", "q3", 1, PENDING, RES_1C1G)],
        [queue("q3", None, rl("3", "3G"), state="Closed")],
        ENQUEUEABLE,
    )
    assert out.binds == {}
    assert out.phases["ns1/pg6"] is PENDING


# --- TestAllocate --------------------------------------------------------------------------------


def test_queue_priority_orders_queues_before_share() -> None:
    """TestAllocate, "case0: Pods are assigned according to the order of Queue Priority in
    which PGs are placed" (actions allocate, reclaim; proportion with enableQueueOrder)."""
    out = run(
        build(
            [node("n1", rl("2", "4Gi", PODS)), node("n2", rl("2", "4Gi", PODS))],
            [
                pod("p1", "n1", True, rl("2", "4Gi"), "pg1"),
                pod("p2", "", False, rl("2", "4Gi"), "pg2"),
                pod("p3", "", False, rl("2", "4Gi"), "pg3"),
            ],
            [pg("pg1", "q1", 1, RUNNING), pg("pg2", "q2", 1, INQUEUE), pg("pg3", "q3", 1, INQUEUE)],
            [
                queue("q1", None, rl("2", "4Gi"), priority=5),
                queue("q2", None, rl("2", "4Gi"), priority=1),
                queue("q3", None, rl("2", "4Gi"), priority=10),
            ],
        ),
        tiers(("proportion", {"QueueOrder"})),
        "allocate, reclaim",
    )
    assert out.binds == {"ns1/p3": "n2"}


# --- TestNoDoubleCountingForInqueueJobWithBindingTasks -------------------------------------------


def test_inqueue_job_with_binding_tasks_is_not_counted_twice() -> None:
    """TestNoDoubleCountingForInqueueJobWithBindingTasks (proportion with allocatable,
    overused and job enqueued): cycle 1 allocates pgA's three 1-cpu pods (minResources 3
    cpu); with their binds sent, pgA is still Inqueue and its tasks Binding; in cycle 2 pgB
    (1 cpu) fits the 4-cpu queue (3 allocated + 0 still reserved by pgA + 1) and is enqueued
    and bound. Both cycles run on the scheduler cache (two_cycles.py). Fails when pgA's
    reservation is its whole minResources regardless of what it was allocated (checked in
    queue_accounting.inqueue: 3 + 3 + 1 > 4, pB1 not bound)."""
    config = tiers(("proportion", {"Allocatable", "Overused", "JobEnqueued"}))
    first, statuses, second = no_double_counting(config)
    assert first == {"pA1": "n1", "pA2": "n1", "pA3": "n1"}
    assert statuses == BINDING
    assert second == {"pB1": "n1"}


# --- TestJobEnqueuedOnOtherPluginsReject --------------------------------------------------------


@pytest.mark.usefixtures("rejecter")
def test_job_rejected_by_another_plugin_reserves_nothing_in_the_queue() -> None:
    """TestJobEnqueuedOnOtherPluginsReject, "phantom inqueue reservation: rejecter blocks pgA,
    pgB must still be admitted"."""
    res = rl("1", "1G")
    out = run(
        build(
            [node("n1", rl("4", "4G", PODS))],
            [pod("podA", "", False, res, "pgA"), pod("podB", "", False, res, "pgB")],
            [pg("pgA", "q1", 1, PENDING, res), pg("pgB", "q1", 1, PENDING, res)],
            [queue("q1", None, rl("1", "4G"))],
        ),
        tiers(("proportion", {"JobEnqueued"}), ("test-rejecter", {"JobEnqueued"})),
        "enqueue",
    )
    assert out.phases["ns1/pgB"] is INQUEUE
    assert out.phases["ns1/pgA"] is PENDING
