"""reclaim: take back resources that other (reclaimable) queues use beyond their share.

Follows Volcano's `actions/reclaim`: queues in queue order (overused ones skipped); in each,
starving jobs in job order; for each pending task, the queue must be preemptive for it (its
own capability and deserved, not its parents'), then nodes are tried one by one: the
reclaimable plugins pick victims among running preemptable tasks of other reclaimable queues,
victims are evicted in victim order until the task fits the node's future idle, and the task
is pipelined there. A job's evictions are committed only if the job becomes pipelined.

As in preempt, candidate nodes include those failing only what evictions resolve (inter-pod
anti-affinity, spread skew, the `pods` limit, other plugins' plain predicates: Volcano's
PredicateForPreemptAction), a pod slot counts as a resource eviction frees (Volcano's
`pods`), and the task fits a node only once the inter-pod and spread filters and the plain
predicates pass it with the evictions so far. Volcano's reclaim checks resources only before
pipelining; here the filters must pass too (docs/plugins.md).
"""

from __future__ import annotations

from koordqueue.scheduler.actions.preempt_nodes import candidate_nodes, node_fits, victims_cover
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo, TaskStatus, names
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.statement import Statement
from koordqueue.scheduler.framework.util import PriorityQueue


class ReclaimAction(Action):
    """Queues in order (skipping overused ones), starving jobs in job order, pending tasks in
    task order; a job's statement is committed only when the job is pipelined (SPEC 3.4/3.6)."""

    name = "reclaim"
    quiet = True
    scans_valid = True

    def execute(self, session: Session) -> None:
        queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order_less)
        seen: set[str] = set()
        preemptors: dict[str, PriorityQueue[JobInfo]] = {}
        tasks_by_job: dict[str, PriorityQueue[TaskInfo]] = {}
        for job in session.scan_jobs():
            if job.is_pending():
                continue
            invalid = session.job_valid(job)
            if invalid is not None:
                session.job_conditions[job.uid] = invalid.message
                continue
            if job.queue not in seen:
                seen.add(job.queue)
                queues.push(session.queues[job.queue])
            if session.job_starving(job):
                preemptors.setdefault(job.queue, PriorityQueue(session.job_order_less)).push(job)
                tasks_by_job[job.uid] = PriorityQueue(
                    session.task_order_less,
                    [t for t in job.pending_tasks() if not t.scheduling_gated],
                )
        while not queues.empty():
            queue = queues.pop()
            if session.overused(queue):
                continue
            while True:
                jobs = preemptors.get(queue.name)
                if jobs is None or jobs.empty():
                    break
                job = jobs.pop()
                statement = Statement(session)
                while session.job_starving(job):
                    tasks = tasks_by_job.get(job.uid)
                    if tasks is None or tasks.empty():
                        break
                    task = tasks.pop()
                    if task.preempt_never:
                        continue
                    if not session.preemptive(queue, [task]):
                        continue
                    if session.pre_predicate(task) is not None:
                        continue
                    self._reclaim_for(session, statement, task, job)
                if session.job_pipelined(job):
                    statement.commit()
                else:
                    statement.discard()
                if not jobs.empty():
                    queues.push(queue)

    @staticmethod
    def _reclaim_for(session: Session, statement: Statement, task: TaskInfo, job: JobInfo) -> None:
        def task_fits(node: NodeInfo) -> bool:
            return node_fits(session, task, node.index)

        for i in candidate_nodes(session, task):
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
            if not victims_cover(task, node, victims):
                continue
            ordered = session.victims_queue(victims, task)
            node_statement = Statement(session)
            while not ordered.empty() and not task_fits(node):
                node_statement.evict(ordered.pop(), names.EVICT_RECLAIM)
            if not task_fits(node):
                node_statement.discard()
                continue
            node_statement.pipeline(task, node)
            statement.merge(node_statement)
            return
