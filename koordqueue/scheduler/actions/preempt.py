"""preempt: starving jobs evict lower-priority tasks in their own queue, then in their own job.

Follows Volcano's `actions/preempt` (normal, not topology-aware, preemption): queues with
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
longer blocks the preemptor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection

import numpy as np

from koordqueue.domain.quantity import NANO
from koordqueue.domain.resources import PODS
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo, TaskStatus, names
from koordqueue.scheduler.api.fit_errors import preemption_answer
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.resource import fits
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.statement import Statement
from koordqueue.scheduler.framework.util import PriorityQueue
from koordqueue.scheduler.interpod import preemption_candidates

PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
"""Only tasks already placed and running may be preempted (Volcano's PreemptableStatus)."""


HOLDING_STATUSES = frozenset(
    {
        TaskStatus.ALLOCATED,
        TaskStatus.PIPELINED,
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
    }
)
"""Tasks that hold or reserve a pod slot once evictions complete (releasing ones give theirs
back): Volcano's future-idle `pods`."""


def pod_room(node: NodeInfo) -> float:
    """Pods `node` can still take once its releasing tasks are gone (inf without a `pods`
    allocatable). Volcano counts `pods` as a resource every task requests, so an eviction
    frees a slot as it frees cpu and memory."""
    if PODS not in node.allocatable:
        return math.inf
    holding = sum(1 for t in node.tasks.values() if t.status in HOLDING_STATUSES)
    return node.allocatable.get_nanos(PODS) / NANO - holding


def victims_cover(task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]) -> bool:
    """Would evicting all `victims` free enough future idle on `node` for `task`: resources,
    and a pod slot (Volcano's ValidateVictims, `pods` included)."""
    freed = node.future_idle
    for victim in victims:
        freed = freed + victim.resreq
    return fits(task.request, freed) and pod_room(node) + len(victims) >= 1


def candidate_nodes(session: Session, task: TaskInfo) -> list[int]:
    """Node indices, best score first, passing the predicates except what evictions could
    lift: inter-pod anti-affinity and spread skew, the `pods` limit, and the plain (per-node)
    predicates of other plugins (Volcano's PredicateForPreemptAction keeps a node whose
    failure is Unschedulable; a plugin's FitError is). Nodes are re-checked after each
    eviction (`node_fits`)."""
    engine = session.placement
    tensor = session.tensor
    full = bool((tensor.pod_count >= tensor.pod_limit).any())
    with preemption_candidates(session):
        if not engine.predicates and not full:
            nodes: list[int] = engine.predicate_nodes(task).tolist()
            return nodes
        idx = np.arange(tensor.size, dtype=np.intp)
        passes = np.ones(tensor.size, dtype=np.bool_)
        for fn, _explain in engine.batch_predicates:
            # the predicates plugin's filter has a twin without the pods limit
            # (PodLimitedPredicate; actions import no plugin, so it is read by name)
            lifted = getattr(fn, "without_pod_limit", fn)
            passes &= lifted(task, idx)
        for dynamic, _explain in engine.dynamic_predicates:
            mask = dynamic(task)
            if mask is not None:
                passes &= mask
        scores = np.zeros(tensor.size, dtype=np.float64)
        for score in engine.batch_scores:
            scores += score(task, idx)
        for one in engine.scores:
            scores += np.array([one(task, n) for n in session.node_list], dtype=np.float64)
        eff = np.where(passes, scores, -np.inf)
        total = eff
        for make in engine.dynamic_scores:
            scorer = make(task)
            extra = scorer(eff) if scorer is not None else None
            if extra is not None:
                total = total + extra
        found = np.flatnonzero(passes)
        order = np.argsort(-total[found], kind="stable")
        ordered: list[int] = found[order].tolist()
        return ordered


def node_fits(session: Session, task: TaskInfo, index: int) -> bool:
    """Whether `task` fits node `index` as the session now has it (evictions so far taken
    into account): future idle resources, a pod slot, the plain predicates and the
    query-time filters (inter-pod affinity, topology spread)."""
    node = session.nodes[session.node_list[index].name]  # an eviction may have copied it
    if not fits(task.request, node.future_idle) or pod_room(node) < 1:
        return False
    if any(pred(task, node) is not None for pred in session.placement.predicates):
        return False
    return filters_pass(session, task, index)


def filters_pass(session: Session, task: TaskInfo, index: int) -> bool:
    """Whether the query-time filters (inter-pod affinity, topology spread) pass node
    `index` now: their counts follow the evictions made so far."""
    for fn, _explain in session.placement.dynamic_predicates:
        mask = fn(task)
        if mask is not None and not bool(mask[index]):
            return False
    return True


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


def no_victims(
    session: Session, preemptor: TaskInfo, candidates: Collection[str], *, never: bool = False
) -> None:
    """Add kube-scheduler's preemption answer to the task's fit errors (the suffix its
    condition ends with): nodes where evictions could have helped found no victims, the
    others could not be helped by preemption."""
    errors = session.fit_errors.get(preemptor.uid)
    if errors is not None:
        answer = preemption_answer(session.nodes, set(candidates), never=never)
        session.fit_errors[preemptor.uid] = errors.with_preemption(answer)


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

                    preempt_one(session, statement, preemptor, other_job_same_queue)
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

                    if not preempt_one(session, statement, preemptor, same_job):
                        statement.discard()
                        break
                    statement.commit()
