"""reclaim: take back resources that other (reclaimable) queues use beyond their share."""

from __future__ import annotations

from koordqueue.scheduler.actions.allocate import schedulable_jobs
from koordqueue.scheduler.actions.preempt import victims_cover
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo, TaskStatus, names
from koordqueue.scheduler.api.resource import fits
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.statement import Statement
from koordqueue.scheduler.framework.util import PriorityQueue


class ReclaimAction(Action):
    """Queues in order (skipping overused ones); for a pending task, find a node where the
    reclaimable plugins approve enough running tasks of other reclaimable queues, evict them
    and pipeline the task there (SPEC 3.4/3.6)."""

    name = "reclaim"

    def execute(self, session: Session) -> None:
        queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order_less)
        jobs_by_queue: dict[str, PriorityQueue[JobInfo]] = {}
        tasks_by_job: dict[str, PriorityQueue[TaskInfo]] = {}
        for job in schedulable_jobs(session):
            pending = [
                t for t in job.pending_tasks() if not t.best_effort and not t.scheduling_gated
            ]
            if not pending:
                continue
            if job.queue not in jobs_by_queue:
                jobs_by_queue[job.queue] = PriorityQueue(session.job_order_less)
                queues.push(session.queues[job.queue])
            jobs_by_queue[job.queue].push(job)
            tasks_by_job[job.uid] = PriorityQueue(session.task_order_less, pending)
        while not queues.empty():
            queue = queues.pop()
            if session.overused(queue):
                continue
            jobs = jobs_by_queue[queue.name]
            if jobs.empty():
                continue
            job = jobs.pop()
            tasks = tasks_by_job[job.uid]
            if tasks.empty():
                continue
            task = tasks.pop()
            if not session.allocatable(queue, task) or session.pre_predicate(task) is not None:
                queues.push(queue)
                continue
            if self._reclaim_for(session, job, task):
                jobs.push(job)
            queues.push(queue)

    @staticmethod
    def _reclaim_for(session: Session, job: JobInfo, task: TaskInfo) -> bool:
        for i in session.placement.predicate_nodes(task).tolist():
            node = session.node_list[i]
            candidates: list[TaskInfo] = []
            for other in node.tasks.values():
                if other.status is not TaskStatus.RUNNING or not other.preemptable:
                    continue
                owner = session.jobs.get(other.job)
                if owner is None or owner.queue == job.queue:
                    continue
                if session.queues[owner.queue].reclaimable:
                    candidates.append(other)
            if not candidates:
                continue
            victims = session.reclaimable(task, candidates)
            if not victims or not victims_cover(task, node, victims):
                continue
            statement = Statement(session)
            for victim in victims:
                if fits(task.request, node.future_idle):
                    break
                statement.evict(victim, names.EVICT_RECLAIM)
            if fits(task.request, node.future_idle):
                statement.pipeline(task, node)
                statement.commit()
                return True
            statement.discard()
        return False
