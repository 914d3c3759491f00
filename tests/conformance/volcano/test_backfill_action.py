"""backfill action: volcano-sh/volcano pkg/scheduler/actions/backfill/backfill_test.go,
TestPickUpPendingTasks (one tier: priority with preemptable, task order and job order; drf
with queue order).

pg1 (priority 1) and pg2 (priority 2) in q1 each have best-effort and 500m tasks of
priorities 1 to 4; those of priorities 2 and 4 are pipelined in the session (on node1, which
the Go test names without creating; here it exists). Backfill picks the best-effort ones,
pipelined ones included, pg2's first, each job's by priority. Fails with pipelined tasks left
out (as the previous backfill did), with priority's job order off and with its task order
off (each checked).
"""

from __future__ import annotations

from koordqueue.scheduler.actions.backfill import pick_up_pending_tasks
from koordqueue.scheduler.api import PodGroupPhase
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.statement import Statement

from .harness import build, node, pg, pod, queue, rl, tiers

CONFIG = tiers(("priority", {"Preemptable", "TaskOrder", "JobOrder"}), ("drf", {"QueueOrder"}))
HALF = rl("500m")
NS = "default"


def test_best_effort_tasks_are_picked_by_queue_job_and_task_order() -> None:
    """TestPickUpPendingTasks, "test"."""
    pods = []
    pipelined = []
    for group in ("pg1", "pg2"):
        for prio in (1, 2, 3, 4):
            for kind, request in (("besteffort", rl()), ("unbesteffort", HALF)):
                name = f"{group}-{kind}-task-{prio}"
                pods.append(pod(name, "", False, request, group, priority=prio))
                if prio in (2, 4):
                    pipelined.append(name)
    snapshot = build(
        [node("node1", rl("8", "8Gi", {"pods": "100"}))],
        pods,
        [
            pg("pg1", "q1", 1, PodGroupPhase.INQUEUE, priority=1, task_min={"": 3}),
            pg("pg2", "q1", 1, PodGroupPhase.INQUEUE, priority=2, task_min={"": 3}),
        ],
        [queue("q1")],
        namespace=NS,
    )
    session = open_session(snapshot, CONFIG)
    node1 = session.nodes["node1"]
    for job in session.jobs.values():
        for task in list(job.tasks.values()):
            if task.name in pipelined:
                Statement(session).pipeline(task, node1)
    picked = [t.name for _job, tasks in pick_up_pending_tasks(session) for t in tasks]
    assert picked == [
        "pg2-besteffort-task-4",
        "pg2-besteffort-task-3",
        "pg2-besteffort-task-2",
        "pg2-besteffort-task-1",
        "pg1-besteffort-task-4",
        "pg1-besteffort-task-3",
        "pg1-besteffort-task-2",
        "pg1-besteffort-task-1",
    ]
