"""preempt: starving jobs evict lower-priority tasks in their own queue, then in their own job."""

from __future__ import annotations

from collections.abc import Callable

from koordqueue.scheduler.actions.allocate import schedulable_jobs
from koordqueue.scheduler.api import JobInfo, TaskInfo, TaskStatus, names
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.resource import fits
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.statement import Statement
from koordqueue.scheduler.framework.util import PriorityQueue


def victims_cover(task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]) -> bool:
    """Would evicting all `victims` free enough future idle on `node` for `task`."""
    freed = node.future_idle
    for victim in victims:
        freed = freed + victim.resreq
    return fits(task.request, freed)


def preempt_one(
    session: Session,
    statement: Statement,
    preemptor: TaskInfo,
    candidate_filter: Callable[[TaskInfo], bool],
    evict_reason: str = names.EVICT_PREEMPT,
) -> bool:
    """Try to pipeline `preemptor` onto a node by evicting plugin-approved victims there.

    Nodes are tried best score first; on each, victims are evicted lowest-order first and
    only until the preemptor fits the node's future idle.
    """
    if session.pre_predicate(preemptor) is not None:
        return False
    for i in session.placement.predicate_nodes(preemptor).tolist():
        node = session.node_list[i]
        candidates = [t for t in node.tasks.values() if candidate_filter(t)]
        if not candidates:
            continue
        victims = session.preemptable(preemptor, candidates)
        if not victims or not victims_cover(preemptor, node, victims):
            continue

        def evict_first(left: TaskInfo, right: TaskInfo) -> bool:
            if left.job != right.job:
                return not session.job_order_less(session.jobs[left.job], session.jobs[right.job])
            return not session.task_order_less(left, right)

        queue = PriorityQueue(evict_first, victims)
        while not queue.empty() and not fits(preemptor.request, node.future_idle):
            statement.evict(queue.pop(), evict_reason)
        if fits(preemptor.request, node.future_idle):
            statement.pipeline(preemptor, node)
            return True
    return False


class PreemptAction(Action):
    """SPEC 3.4/3.6: within a queue between jobs, then within a job; commit only if the
    preemptor job becomes pipelined."""

    name = "preempt"

    def execute(self, session: Session) -> None:
        starving: dict[str, PriorityQueue[JobInfo]] = {}
        under_request: list[JobInfo] = []
        for job in schedulable_jobs(session):
            if not job.pending_tasks() or not session.job_starving(job):
                continue
            starving.setdefault(job.queue, PriorityQueue(session.job_order_less)).push(job)
            under_request.append(job)
        for queue_name in sorted(starving):
            jobs = starving[queue_name]
            while not jobs.empty():
                job = jobs.pop()
                tasks = PriorityQueue(
                    session.task_order_less, [t for t in job.pending_tasks() if not t.best_effort]
                )
                statement = Statement(session)
                assigned = False
                while session.job_starving(job) and not tasks.empty():
                    preemptor = tasks.pop()

                    def other_job_same_queue(t: TaskInfo, p: TaskInfo = preemptor) -> bool:
                        other = session.jobs.get(t.job)
                        return (
                            t.status is TaskStatus.RUNNING
                            and t.preemptable
                            and other is not None
                            and other.queue == session.jobs[p.job].queue
                            and t.job != p.job
                        )

                    if preempt_one(session, statement, preemptor, other_job_same_queue):
                        assigned = True
                if session.job_pipelined(job):
                    statement.commit()
                else:
                    statement.discard()
                    continue
                if assigned and not tasks.empty():
                    jobs.push(job)
        for job in under_request:
            tasks = PriorityQueue(
                session.task_order_less, [t for t in job.pending_tasks() if not t.best_effort]
            )
            while not tasks.empty():
                preemptor = tasks.pop()
                statement = Statement(session)

                def same_job(t: TaskInfo, p: TaskInfo = preemptor) -> bool:
                    return t.status is TaskStatus.RUNNING and t.preemptable and t.job == p.job

                preempt_one(session, statement, preemptor, same_job)
                statement.commit()
                if session.job_pipelined(job):
                    break
