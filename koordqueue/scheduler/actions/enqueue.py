"""enqueue: PodGroups Pending -> Inqueue when their queue can take their minResources."""

from __future__ import annotations

from koordqueue.scheduler.api import PodGroupPhase, QueueInfo
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.session import JobQueue, Session
from koordqueue.scheduler.framework.skips import NOT_ENQUEUED
from koordqueue.scheduler.framework.util import PriorityQueue


class EnqueueAction(Action):
    """Queues in queue order, jobs in job order; a job without minResources, or one that
    passes the enqueueable vote, becomes Inqueue (SPEC 3.6)."""

    name = "enqueue"
    quiet = True

    def execute(self, session: Session) -> None:
        queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order_less)
        jobs_by_queue: dict[str, JobQueue] = {}
        for job in session.scan_jobs():
            if not job.is_pending():
                continue
            queue = session.queues[job.queue]
            if queue.name not in jobs_by_queue:
                jobs_by_queue[queue.name] = session.job_queue()
                queues.push(queue)
            jobs_by_queue[queue.name].push(job)
        while not queues.empty():
            queue = queues.pop()
            jobs = jobs_by_queue[queue.name]
            if jobs.empty():
                continue
            job = jobs.pop()
            if job.min_resources is None or session.job_enqueueable(job):
                session.job_enqueued(job)
                job.phase = PodGroupPhase.INQUEUE
            elif job.uid not in session.skips.jobs:  # a plugin's own refusal says more
                session.skips.job(job.uid, NOT_ENQUEUED)
            queues.push(queue)
