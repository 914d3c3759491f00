"""backfill: place best-effort (empty request) tasks of scheduled jobs (Volcano's backfill).

The tasks are picked as Volcano's pickUpPendingTasks picks them: per queue in queue order,
per job in job order, per task in task order; best-effort tasks that an earlier action
pipelined are taken back to pending first, so they are placed for real here.
"""

from __future__ import annotations

from koordqueue.scheduler.api import FitErrors, JobInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.skips import (
    GANG_NOT_READY,
    Skip,
    TaskSkip,
)
from koordqueue.scheduler.framework.statement import Statement
from koordqueue.scheduler.framework.util import PriorityQueue


def pick_up_pending_tasks(session: Session) -> list[tuple[JobInfo, list[TaskInfo]]]:
    """Best-effort tasks to place, grouped by job: queues in queue order, their jobs in job
    order, each job's tasks in task order. Pipelined best-effort tasks are un-pipelined."""
    enqueue_configured = "enqueue" in session.config.actions
    queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order_less)
    jobs: dict[str, PriorityQueue[JobInfo]] = {}
    tasks: dict[str, PriorityQueue[TaskInfo]] = {}
    for job in session.scan_jobs():
        if enqueue_configured and job.is_pending():
            continue
        pending = [t for t in job.pending_tasks() if t.best_effort and not t.scheduling_gated]
        pipelined = [
            t for t in job.task_status_index.get(TaskStatus.PIPELINED, {}).values() if t.best_effort
        ]
        # the (pure) validity check only for jobs with best-effort work: most have none
        if not pending and not pipelined:
            continue
        if session.job_valid(job) is not None or job.queue not in session.queues:
            continue
        for task in pipelined:
            session.unallocate_task(task)
        own = tasks[job.uid] = PriorityQueue(session.task_order_less, pending)
        for task in pipelined:
            own.push(job.tasks.get(task.uid, task))
        queued = jobs.get(job.queue)
        if queued is None:
            queued = jobs[job.queue] = PriorityQueue(session.job_order_less)
            queues.push(session.queues[job.queue])
        queued.push(job)
    picked: list[tuple[JobInfo, list[TaskInfo]]] = []
    while not queues.empty():
        queued = jobs[queues.pop().name]
        while not queued.empty():
            job = queued.pop()
            own = tasks[job.uid]
            picked.append((job, [own.pop() for _ in range(len(own))]))
    return picked


class BackfillAction(Action):
    """Best-effort tasks use no resources, so any node passing the predicates will do;
    the highest-scored one is taken. Binds follow the gang rule like allocate."""

    name = "backfill"
    quiet = True

    def execute(self, session: Session) -> None:
        for job, tasks in pick_up_pending_tasks(session):
            statement = Statement(session)
            skips = session.skips
            placed: list[TaskInfo] = []
            for task in tasks:
                reason = session.pre_predicate(task)
                if reason is not None:
                    errors = FitErrors.all_nodes(session.nodes, reason)
                    session.fit_errors[task.uid] = errors
                    skips.task(task.uid, job.uid, TaskSkip(Skip.PRE_PREDICATE, errors))
                    continue
                choice = session.select_node(task)
                if isinstance(choice, FitErrors):
                    session.fit_errors[task.uid] = choice
                    skips.task(task.uid, job.uid, TaskSkip(Skip.NO_NODE, choice))
                    continue
                statement.allocate(task, choice[0])
                placed.append(task)
            if session.job_ready(job):
                statement.commit()
            elif not session.job_pipelined(job):
                statement.discard()
                for task in placed:
                    skips.task(task.uid, job.uid, GANG_NOT_READY)
