"""preempt: starving jobs evict lower-priority tasks in their own queue, then in their own job.

Follows Volcano's `actions/preempt` (normal preemption; its topology-aware path, argument
`enableTopologyAwarePreemption`, is preempt_topology.py): queues with
starving jobs in queue order; in each, starving jobs in job order take victims from other jobs
of the same queue, in one statement committed only if the job becomes pipelined; then each
under-request job of the queue preempts within itself, one task at a time. On a node, victims
are the preemptable plugins' choice; they are evicted in victim order only until the
preemptor fits — the queue must allow it (allocatable), the node's future idle must hold
it, and the node must pass the inter-pod affinity and spread filters with the evictions so
far (Volcano's preemptorFitsOnNode re-runs the predicates) — and a node's evictions are
kept only if the preemptor is pipelined there. Candidate nodes are those where evictions
could help: a node failing only anti-affinity or spread skew is tried (kube-scheduler's
nodesWherePreemptionMightHelp), so a victim's own anti-affinity or its share of a skew no
longer blocks the preemptor. A job with a networkTopology does not preempt (Volcano skips
it, volcano-sh/volcano issue 4374; gangpreempt evicts for it).
"""

from __future__ import annotations

from collections.abc import Callable

from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo, names
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.statement import Statement
from koordqueue.scheduler.framework.util import PriorityQueue

from .preempt_nodes import (
    PREEMPTABLE_STATUSES,
    candidate_nodes,
    no_victims,
    node_fits,
    victims_cover,
)
from .preempt_topology import options, topology_aware_preempt_one


def preempt_one(
    session: Session,
    statement: Statement,
    preemptor: TaskInfo,
    candidate_filter: Callable[[TaskInfo], bool],
    evict_reason: str = names.EVICT_PREEMPT,
) -> bool:
    """Try to pipeline `preemptor` onto a node, evicting plugin-approved victims there.

    Nodes are tried best score first; on each, victims are evicted in victim order only
    until the preemptor fits (queue allocatable, node future idle, inter-pod filters); the
    node's evictions join `statement` only when the preemptor is pipelined there.
    """
    if preemptor.preempt_never or session.pre_predicate(preemptor) is not None:
        no_victims(session, preemptor, (), never=preemptor.preempt_never)
        return False
    queue = session.queues[session.jobs[preemptor.job].queue]

    def preemptor_fits(node: NodeInfo) -> bool:
        return session.allocatable(queue, preemptor) and node_fits(session, preemptor, node.index)

    helpful = candidate_nodes(session, preemptor)
    for i in helpful:
        node = session.node_list[i]
        candidates = [t for t in node.tasks.values() if candidate_filter(t)]
        victims = session.preemptable(preemptor, candidates)
        if not victims_cover(preemptor, node, victims):
            continue
        node_statement = Statement(session)
        ordered = session.victims_queue(victims, preemptor)
        fit = preemptor_fits(node)
        while not ordered.empty() and not fit:
            node_statement.evict(ordered.pop(), evict_reason)
            fit = preemptor_fits(node)
        if fit:
            node_statement.pipeline(preemptor, node)
            statement.merge(node_statement)
            return True
        node_statement.discard()
    no_victims(session, preemptor, [session.node_list[i].name for i in helpful])
    return False


def _preemptable_by(preemptor: TaskInfo, task: TaskInfo) -> bool:
    """Running, preemptable, and not a resource-holding task for a best-effort preemptor."""
    if task.status not in PREEMPTABLE_STATUSES or not task.preemptable:
        return False
    return not (preemptor.best_effort and not task.best_effort)


class PreemptAction(Action):
    """SPEC 3.4/3.6: within a queue between jobs, then within a job; commit only if the
    preemptor job becomes pipelined."""

    name = "preempt"
    quiet = True
    scans_valid = True

    def execute(self, session: Session) -> None:
        how = options(session)

        def one(s: Statement, p: TaskInfo, keep: Callable[[TaskInfo], bool]) -> bool:
            if how.enabled:
                return topology_aware_preempt_one(session, s, p, keep, how)
            return preempt_one(session, s, p, keep)

        preemptors: dict[str, PriorityQueue[JobInfo]] = {}
        tasks_by_job: dict[str, PriorityQueue[TaskInfo]] = {}
        under_request: dict[str, list[JobInfo]] = {}
        for job in session.scan_jobs():
            if job.is_pending():
                continue
            invalid = session.job_valid(job)
            if invalid is not None:
                session.job_conditions[job.uid] = invalid.message
                continue
            if job.queue not in session.queues or not session.job_starving(job):
                continue
            if job.network_topology is not None:
                # Volcano skips them too (its issue 4374); gangpreempt evicts for them
                continue
            preemptors.setdefault(job.queue, PriorityQueue(session.job_order_less)).push(job)
            under_request.setdefault(job.queue, []).append(job)
            tasks_by_job[job.uid] = PriorityQueue(
                session.task_order_less,
                [t for t in job.pending_tasks() if not t.scheduling_gated],
            )
        queues: PriorityQueue[QueueInfo] = PriorityQueue(
            session.queue_order_less, [session.queues[name] for name in preemptors]
        )
        while not queues.empty():
            queue = queues.pop()
            jobs = preemptors[queue.name]
            while not jobs.empty():
                job = jobs.pop()
                statement = Statement(session)
                while session.job_starving(job):
                    tasks = tasks_by_job[job.uid]
                    if tasks.empty():
                        break
                    preemptor = tasks.pop()

                    def other_job_same_queue(t: TaskInfo, p: TaskInfo = preemptor) -> bool:
                        other = session.jobs.get(t.job)
                        return (
                            _preemptable_by(p, t)
                            and other is not None
                            and other.queue == session.jobs[p.job].queue
                            and t.job != p.job
                        )

                    one(statement, preemptor, other_job_same_queue)
                if session.job_pipelined(job):
                    statement.commit()
                else:
                    statement.discard()
            for job in under_request.get(queue.name, []):
                own = PriorityQueue(
                    session.task_order_less,
                    [t for t in job.pending_tasks() if not t.scheduling_gated],
                )
                while not own.empty():
                    preemptor = own.pop()
                    statement = Statement(session)

                    def same_job(t: TaskInfo, p: TaskInfo = preemptor) -> bool:
                        return _preemptable_by(p, t) and t.job == p.job

                    if not one(statement, preemptor, same_job):
                        statement.discard()
                        break
                    statement.commit()
