"""reclaim action: cases of volcano-sh/volcano pkg/scheduler/actions/reclaim/reclaim_test.go,
TestReclaim (action reclaim; one tier: conformance, gang, proportion or capacity, priority, each
with the switches the test sets; only the plugins a case registers take part).
"""

from __future__ import annotations

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import SchedulerConfig
from koordqueue.scheduler.api import NodeInfo, PodGroupPhase, QueueInfo

from .harness import Outcome, Pod, PodGroup, build, node, pg, pod, queue, rl, run, tiers

RUNNING, INQUEUE = PodGroupPhase.RUNNING, PodGroupPhase.INQUEUE
PODS = {"pods": "10"}
LOW, MID, HIGH = 100, 500, 1000

SWITCHES: dict[str, set[str]] = {
    "conformance": {"Reclaimable"},
    "gang": {"Reclaimable", "JobStarving"},
    "proportion": {"Reclaimable", "QueueOrder", "Preemptive"},
    "capacity": {"Reclaimable", "QueueOrder", "Preemptive"},
    "priority": {"Reclaimable", "JobOrder", "TaskOrder"},
}
ORDER = ("conformance", "gang", "proportion", "capacity", "priority")


def _tier(*registered: str) -> SchedulerConfig:
    """The test's tier, keeping only the plugins the case registers."""
    return tiers(*((name, SWITCHES[name]) for name in ORDER if name in registered))


def _reclaim(
    plugins: tuple[str, ...],
    nodes: list[NodeInfo],
    pods: list[Pod],
    groups: list[PodGroup],
    queues: list[QueueInfo],
) -> Outcome:
    return run(build(nodes, pods, groups, queues, namespace="c1"), _tier(*plugins), "reclaim")


def test_reclaim_takes_from_the_queue_over_its_share() -> None:
    """TestReclaim, "Two Queue with one Queue overusing resource, should reclaim"."""
    one = rl("1", "1G")
    out = _reclaim(
        ("conformance", "gang", "proportion"),
        [node("n1", rl("3", "3Gi", PODS))],
        [
            pod("preemptee1", "n1", True, one, "pg1", preemptable=False),
            pod("preemptee2", "n1", True, one, "pg1"),
            pod("preemptee3", "n1", True, one, "pg1", preemptable=False),
            pod("preemptor1", "", False, one, "pg2"),
        ],
        [pg("pg1", "q1", 1, INQUEUE, priority=LOW), pg("pg2", "q2", 1, INQUEUE, priority=HIGH)],
        [queue("q1"), queue("q2")],
    )
    assert out.evicted == ["c1/preemptee2"]


def test_reclaim_evicts_the_lower_priority_job_of_equally_overused_queues_first() -> None:
    """TestReclaim, "sort reclaimees when reclaiming from overusing queue"."""
    one = rl("1", "1G")
    out = _reclaim(
        ("conformance", "gang", "priority", "proportion"),
        [node("n1", rl("4", "4Gi", PODS))],
        [
            pod("preemptee1-1", "n1", True, one, "pg1"),
            pod("preemptee1-2", "n1", True, one, "pg1"),
            pod("preemptee2-1", "n1", True, one, "pg2"),
            pod("preemptee2-2", "n1", True, one, "pg2", preemptable=False),
            pod("preemptor1", "", False, one, "pg3"),
        ],
        [
            pg("pg1", "q1", 1, INQUEUE, priority=MID),
            pg("pg2", "q2", 1, INQUEUE, priority=LOW),
            pg("pg3", "q3", 1, INQUEUE, priority=HIGH),
        ],
        [queue("q1"), queue("q2"), queue("q3")],
    )
    assert out.evicted == ["c1/preemptee2-1"]


def test_reclaim_evicts_from_the_lower_priority_queue_first() -> None:
    """TestReclaim, "sort reclaimees when reclaiming from overusing queues with different
    queue priority"."""
    one = rl("1", "1G")
    out = _reclaim(
        ("conformance", "gang", "proportion"),
        [node("n1", rl("4", "4Gi", PODS))],
        [
            pod("preemptee1-1", "n1", True, one, "pg1"),
            pod("preemptee1-2", "n1", True, one, "pg1", preemptable=False),
            pod("preemptee2-1", "n1", True, one, "pg2"),
            pod("preemptee2-2", "n1", True, one, "pg2", preemptable=False),
            pod("preemptor1", "", False, one, "pg3"),
        ],
        [
            pg("pg1", "q1", 1, INQUEUE, priority=MID),
            pg("pg2", "q2", 1, INQUEUE, priority=MID),
            pg("pg3", "q3", 1, INQUEUE, priority=MID),
        ],
        [queue("q1", priority=5), queue("q2", priority=10), queue("q3", priority=1)],
    )
    assert out.evicted == ["c1/preemptee1-1"]


def _closed_queue_case(plugin: str) -> Outcome:
    one = rl("1", "1G")
    return _reclaim(
        ("conformance", "gang", plugin),
        [node("n1", rl("3", "3Gi", PODS))],
        [
            pod("preemptee1", "n1", True, one, "pg1", preemptable=False),
            pod("preemptee2", "n1", True, one, "pg1"),
            pod("preemptee3", "n1", True, one, "pg1", preemptable=False),
            pod("preemptor1", "", False, one, "pg2"),
        ],
        [pg("pg1", "q1", 1, RUNNING, priority=LOW), pg("pg2", "q2", 1, INQUEUE, priority=HIGH)],
        [queue("q1"), queue("q2", state="Closed")],
    )


def test_closed_queue_does_not_reclaim_with_proportion() -> None:
    """TestReclaim, "can not reclaim resources when queue is not open(proportion plugin)"."""
    out = _closed_queue_case("proportion")
    assert out.evicted == []
    assert out.pipelined == {}


def test_closed_queue_does_not_reclaim_with_capacity() -> None:
    """TestReclaim, "can not reclaim resources when queue is not open(capacity plugin)"."""
    out = _closed_queue_case("capacity")
    assert out.evicted == []
    assert out.pipelined == {}


def test_reclaim_counts_the_node_idle_resources() -> None:
    """TestReclaim, "Node available resources should be included in reclaimed resources":
    cpu is free on the node, only memory is missing, so one victim is enough."""
    one = rl("1", "1G")
    out = _reclaim(
        ("conformance", "gang", "priority", "proportion"),
        [node("n1", rl("10", "2Gi", PODS))],
        [
            pod("preemptee1-1", "n1", True, one, "pg1"),
            pod("preemptee2-1", "n1", True, one, "pg2"),
            pod("preemptor1", "", False, rl("2", "1G"), "pg3"),
        ],
        [
            pg("pg1", "q1", 0, RUNNING, priority=MID),
            pg("pg2", "q2", 0, RUNNING, priority=MID),
            pg("pg3", "q3", 1, INQUEUE, priority=MID),
        ],
        [queue("q1", priority=1), queue("q2", priority=2), queue("q3", weight=3)],
    )
    assert out.evicted == ["c1/preemptee1-1"]


def test_reclaim_evicts_nothing_when_the_node_already_fits() -> None:
    """TestReclaim, "only commit evictions on the node where reclaim succeeds"."""
    out = _reclaim(
        ("conformance", "gang", "proportion"),
        [node("n1", rl("10", "10G", PODS))],
        [
            pod("victim-n1", "n1", True, rl("2", "2G"), "pg-victim"),
            pod("preemptor1", "", False, rl("3", "3G"), "pg-preemptor"),
        ],
        [
            pg("pg-victim", "q1", 0, RUNNING, priority=LOW),
            pg("pg-preemptor", "q2", 1, INQUEUE, priority=LOW),
        ],
        [queue("q1", weight=1), queue("q2", weight=9)],
    )
    assert out.evicted == []
    assert out.pipelined == {"c1/pg-preemptor": {"c1/preemptor1": "n1"}}


def _never_case(min_member: int, guarantee: Resources | None, never: bool) -> Outcome:
    return _reclaim(
        ("conformance", "gang", "proportion"),
        [node("n1", rl("1", "1Gi", {"pods": "1"}))],
        [
            pod("preemptee1", "n1", True, rl("1", "1G"), "pg1"),
            pod("preemptor1", "", False, rl("1", "1G"), "pg2", preempt_never=never),
        ],
        [
            pg("pg1", "q1", 0, INQUEUE, priority=LOW),
            pg("pg2", "q2", min_member, INQUEUE, priority=HIGH),
        ],
        [queue("q1", weight=5), queue("q2", weight=10, guarantee=guarantee)],
    )


def test_task_with_preemption_policy_never_does_not_reclaim() -> None:
    """TestReclaim, "can not reclaim resources when task preemption policy is never".

    As written the case reclaims nothing even without the policy (in Volcano too): pg2's
    minMember 0 never starves, and q2's deserved 2/3 cpu is short of the task's 1 cpu. So it
    is also run with pg2's minMember 1 and q2 guaranteed the task's request, where only the
    policy stops the reclaim: without `preemptionPolicy: Never` that variant evicts
    preemptee1 (asserted below, and checked by dropping the flag from the task)."""
    assert _never_case(0, None, never=True).evicted == []
    guaranteed = rl("1", "1G")
    assert _never_case(1, guaranteed, never=True).evicted == []
    assert _never_case(1, guaranteed, never=False).evicted == ["c1/preemptee1"]


def test_second_task_reclaims_when_the_first_may_not() -> None:
    """TestReclaim, "Reclaim succeeds for second task when first task has
    PreemptionPolicy=Never"."""
    one = rl("1", "1G")
    out = _reclaim(
        ("conformance", "gang", "proportion", "priority"),
        [node("n1", rl("2", "2G", PODS))],
        [
            pod("victim-pod-no", "n1", True, one, "pg-victim", preemptable=False),
            pod("victim-pod", "n1", True, one, "pg-victim"),
            pod(
                "preemptor-task1-non-preemptable",
                "",
                False,
                one,
                "pg-preemptor",
                preempt_never=True,
            ),
            pod("preemptor-task2-preemptable", "", False, one, "pg-preemptor"),
        ],
        [
            pg("pg-victim", "q1", 1, RUNNING, priority=LOW),
            pg("pg-preemptor", "q2", 2, INQUEUE, priority=HIGH),
        ],
        [queue("q1"), queue("q2")],
    )
    assert out.evicted == ["c1/victim-pod"]
    # the slot goes to the second task: without the policy the first (earlier in task
    # order) reclaims it (checked by dropping the flag)
    assert out.pipelined == {"c1/pg-preemptor": {"c1/preemptor-task2-preemptable": "n1"}}
