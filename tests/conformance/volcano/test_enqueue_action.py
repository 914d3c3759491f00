"""enqueue action: cases of volcano-sh/volcano pkg/scheduler/actions/enqueue/enqueue_test.go,
TestEnqueue (action enqueue, no nodes; one tier: drf with job order/job enqueued, proportion
with queue order/job enqueued, sla, gang with job order). sla is left out of the tier: with
its 3-minute waiting time and freshly created PodGroups it takes no part in Volcano's cases,
and these builders create PodGroups at time 0 (sla would find them all overdue);
test_sla_plugin.py has sla's own enqueue cases."""

from __future__ import annotations

from koordqueue.scheduler.api import PodGroupPhase, QueueInfo

from .harness import Outcome, Pod, PodGroup, build, pg, pod, queue, rl, run, tiers

INQUEUE, PENDING, RUNNING = PodGroupPhase.INQUEUE, PodGroupPhase.PENDING, PodGroupPhase.RUNNING
CONFIG = tiers(
    ("drf", {"JobOrder", "JobEnqueued"}),
    ("proportion", {"QueueOrder", "JobEnqueued"}),
    ("gang", {"JobOrder"}),
)
Q_C1 = queue("c1", None, rl("4", "4G"))
Q_C2 = queue("c2", None, rl("4", "4G"))


def _enqueue(pods: list[Pod], groups: list[PodGroup], queues: list[QueueInfo]) -> Outcome:
    return run(build([], pods, groups, queues, namespace="c1"), CONFIG, "enqueue")


def test_inqueue_podgroup_stays_inqueue() -> None:
    """TestEnqueue, "when podgroup status is inqueue"."""
    out = _enqueue(
        [pod("p1", "", False, rl("1", "1G"), "pg1"), pod("p2", "", False, rl("1", "1G"), "pg1")],
        [pg("pg1", "c1", 2, INQUEUE)],
        [Q_C1, Q_C2],
    )
    assert out.phases["c1/pg1"] is INQUEUE


def test_pending_podgroups_without_min_resources_are_enqueued() -> None:
    """TestEnqueue, "when podgroup status is pending"."""
    out = _enqueue(
        [pod("p1", "", False, rl("3", "1G"), "pg1"), pod("p2", "", False, rl("1", "1G"), "pg2")],
        [pg("pg1", "c1", 1, PENDING), pg("pg2", "c2", 1, PENDING)],
        [Q_C1, Q_C2],
    )
    assert out.phases["c1/pg1"] is INQUEUE
    assert out.phases["c1/pg2"] is INQUEUE


def test_running_podgroup_stays_running() -> None:
    """TestEnqueue, "when podgroup status is running"."""
    out = _enqueue(
        [pod("p1", "", True, rl("1", "1G"), "pg1"), pod("p2", "", True, rl("1", "1G"), "pg1")],
        [pg("pg1", "c1", 2, RUNNING)],
        [Q_C1],
    )
    assert out.phases["c1/pg1"] is RUNNING


def test_podgroup_of_a_missing_queue_is_not_enqueued() -> None:
    """TestEnqueue, "pggroup cannot enqueue because the specified queue is c1, but there is
    only c2" (koordqueue drops the job from the session with a warning)."""
    out = _enqueue([], [pg("pg1", "c1", 0, PENDING)], [Q_C2])
    assert "c1/pg1" not in out.phases
    assert any("pg1" in w for w in out.session.warnings)


def test_podgroup_larger_than_its_queue_is_not_enqueued() -> None:
    """TestEnqueue, "pggroup cannot enqueue because queue resources are less than podgroup
    MinResources"."""
    out = _enqueue(
        [], [pg("pg1", "c1", 1, PENDING, rl("8", "8G"))], [queue("c1", None, rl("1", "1G"))]
    )
    assert out.phases["c1/pg1"] is PENDING
