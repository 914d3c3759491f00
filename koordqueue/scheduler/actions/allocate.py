"""allocate: place pending tasks queue by queue, job by job, all-or-nothing per gang.

Every task it passes by gets the rule that passed it in the session's skip record
(framework/skips.py), as the rule is applied: the pod's condition and `explain pod/NAME`
read that record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from koordqueue.scheduler.actions import allocate_topology
from koordqueue.scheduler.api import (
    READY_STATUSES,
    FitErrors,
    JobInfo,
    NodeInfo,
    QueueInfo,
    TaskInfo,
)
from koordqueue.scheduler.api.task_info import PlacementKey
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.placement import BoolArray
from koordqueue.scheduler.framework.session import JobQueue, Session, gc_paused
from koordqueue.scheduler.framework.skips import (
    BEST_EFFORT,
    GANG_NOT_READY,
    NOT_ENQUEUED,
    Skip,
    TaskSkip,
)
from koordqueue.scheduler.framework.statement import Statement
from koordqueue.scheduler.framework.util import PriorityQueue


def schedulable_jobs(session: Session) -> list[JobInfo]:
    """Jobs allocate may consider: enqueued (when enqueue runs) and valid.

    An invalid job gets its job-valid message as condition, like Volcano's gang plugin.
    """
    enqueue_configured = "enqueue" in session.config.actions
    skips = session.skips
    jobs: list[JobInfo] = []
    for job in session.scan_jobs():
        if enqueue_configured and job.is_pending():
            if job.uid not in skips.jobs:  # enqueue's (or a plugin's) reason stands
                skips.job(job.uid, NOT_ENQUEUED)
            continue
        invalid = session.job_valid(job)
        if invalid is not None:
            session.job_conditions[job.uid] = invalid.message
            skips.job(job.uid, TaskSkip(Skip.JOB_INVALID, detail=invalid.message))
            continue
        jobs.append(job)
    return jobs


def need_continue(
    job: JobInfo, failed: dict[PlacementKey, FitErrors], tasks: Iterable[TaskInfo]
) -> bool:
    """After a task failed, is it still worth trying the job's other pending tasks?

    Only when the job does not need every task, and the ready tasks plus the untried tasks
    that differ from every failed one can still reach minAvailable (and each role minimum,
    when those apply). Otherwise the statement is doomed and the scan would be wasted.
    """
    if job.min_available >= len(job.tasks):
        return False
    left = [t for t in tasks if t.placement_key() not in failed]
    if job.ready_task_num() + len(left) < job.min_available:
        return False
    roles = job.task_min_available
    if roles and job.min_available >= sum(roles.values()):
        have: dict[str, int] = {}
        for t in job.tasks.values():
            if t.status in READY_STATUSES:
                have[t.role] = have.get(t.role, 0) + 1
        for t in left:
            have[t.role] = have.get(t.role, 0) + 1
        if any(have.get(role, 0) < need for role, need in roles.items()):
            return False
    return True


class _Ordered:
    """Sort key wrapper: the session's task order as `<` (a total order: ties fall back to
    creation time and uid)."""

    __slots__ = ("less", "task")

    def __init__(self, task: TaskInfo, less: Callable[[TaskInfo, TaskInfo], bool]) -> None:
        self.task = task
        self.less = less

    def __lt__(self, other: _Ordered) -> bool:
        return self.less(self.task, other.task)


def task_queue(session: Session, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
    """The tasks in reverse task order: `pop()` gives the next one, as the priority queue of
    Volcano's allocate would. Sorted once (fewer comparisons than a heap's pops), by the
    plugins' sort keys when every enabled task order has one (the same total order)."""
    key = session.task_order_key()
    if key is not None:
        return sorted(tasks, key=key, reverse=True)
    less = session.task_order_less
    ordered = sorted((_Ordered(t, less) for t in tasks), reverse=True)
    return [o.task for o in ordered]


class AllocateAction(Action):
    """SPEC 3.4: pick queue (skipping overused), job, task; pre-predicate, predicate, score;
    allocate on idle or pipeline onto future idle; commit only when the job is ready."""

    name = "allocate"
    quiet = True
    scans_valid = True

    def execute(self, session: Session) -> None:
        with gc_paused():
            self._execute(session)

    def _execute(self, session: Session) -> None:
        queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order_less)
        jobs_by_queue: dict[str, JobQueue] = {}
        # A job's tasks change only while allocate works on that job, so the tasks wanted
        # now are the ones its first turn would find.
        wanted: dict[str, list[TaskInfo]] = {}
        skips = session.skips
        for job in schedulable_jobs(session):
            if allocate_topology.waits(session, job):
                continue
            candidates = job.pending_tasks()
            mine = [t for t in candidates if self._wanted(t)]
            if len(mine) != len(candidates):
                for t in candidates:
                    if t.best_effort and not t.scheduling_gated:
                        skips.task(t.uid, job.uid, BEST_EFFORT)
            if not mine:
                continue
            wanted[job.uid] = mine
            if job.queue not in jobs_by_queue:
                jobs_by_queue[job.queue] = session.job_queue()
                queues.push(session.queues[job.queue])
            jobs_by_queue[job.queue].push(job)
        pending: dict[str, list[TaskInfo]] = {}
        shapes: dict[PlacementKey, FitErrors | None] = {}
        while not queues.empty():
            queue = queues.pop()
            jobs = jobs_by_queue[queue.name]
            if session.overused(queue):
                overused = TaskSkip(Skip.QUEUE_OVERUSED, detail=queue.name)
                while not jobs.empty():  # the queue is done for this session
                    job = jobs.pop()
                    skips.job(job.uid, overused)
                    for task in pending.get(job.uid) or wanted[job.uid]:
                        errors = _no_node_fits(session, task, shapes)
                        if errors is not None:
                            session.fit_errors[task.uid] = errors
                            skips.task(task.uid, job.uid,
                                       TaskSkip(Skip.QUEUE_OVERUSED, errors, queue.name))
                continue
            if jobs.empty():
                continue
            job = jobs.pop()
            tasks = pending.get(job.uid)
            if tasks is None:
                tasks = task_queue(session, wanted[job.uid])
                pending[job.uid] = tasks
            if allocate_topology.allocate_hard(
                session, queue=queue, job=job, tasks=tasks, jobs=jobs, shapes=shapes,
                allocate_tasks=self._allocate_tasks,
            ):
                queues.push(queue)
                continue
            statement = Statement(session)
            self._allocate_tasks(
                session, statement, queue=queue, job=job, tasks=tasks, jobs=jobs, shapes=shapes,
                placed=allocate_topology.span(session, job),
            )
            if session.job_ready(job):
                statement.commit()
            elif not session.job_pipelined(job):
                statement.discard()
                skips.job(job.uid, GANG_NOT_READY)
            queues.push(queue)

    @staticmethod
    def _wanted(task: TaskInfo) -> bool:
        # Best-effort tasks are backfill's; externally gated tasks wait for their gate.
        return not task.best_effort and not task.scheduling_gated

    @staticmethod
    def _allocate_tasks(
        session: Session,
        statement: Statement,
        *,
        queue: QueueInfo,
        job: JobInfo,
        tasks: list[TaskInfo],
        jobs: JobQueue,
        shapes: dict[PlacementKey, FitErrors | None],
        within: BoolArray | None = None,
        placed: Callable[[TaskInfo, NodeInfo], None] | None = None,
    ) -> None:
        """Place the job's tasks in order (on the nodes `within` marks, when given: one
        HyperNode's); `placed` hears of each placement (the job's topology span)."""
        failed: dict[PlacementKey, FitErrors] = {}
        skips = session.skips
        while tasks:
            task = tasks.pop()
            if not session.allocatable(queue, task):
                errors = _no_node_fits(session, task, shapes)
                if errors is not None:
                    session.fit_errors[task.uid] = errors
                skips.task(task.uid, job.uid, TaskSkip(Skip.QUEUE_FULL, errors, queue.name))
                continue
            known = failed.get(task.placement_key()) if failed else None
            if known is not None:
                # Same request and constraints as a task that found no node: skip the scan.
                session.fit_errors[task.uid] = known
                skips.task(task.uid, job.uid, TaskSkip(Skip.NO_NODE, known))
                continue
            reason = session.pre_predicate(task)
            if reason is not None:
                # One task's pre-predicate failure must not sink the others while the gang
                # can still reach minAvailable without it.
                errors = FitErrors.all_nodes(session.nodes, reason)
                session.fit_errors[task.uid] = errors
                skips.task(task.uid, job.uid, TaskSkip(Skip.PRE_PREDICATE, errors))
                if not need_continue(job, failed, tasks):
                    _gave_up(session, job, tasks, failed, errors)
                    break
                continue
            choice = session.select_node(task, within)
            if isinstance(choice, FitErrors):
                session.fit_errors[task.uid] = choice
                failed[task.placement_key()] = choice
                skips.task(task.uid, job.uid, TaskSkip(Skip.NO_NODE, choice))
                if not need_continue(job, failed, tasks):
                    _gave_up(session, job, tasks, failed, choice)
                    break
                continue
            node, pipelined = choice
            if pipelined:
                statement.pipeline(task, node)
            else:
                statement.allocate(task, node)
            if placed is not None:
                placed(task, node)
            if tasks and session.job_ready(job):
                # Ready: commit this part and give other jobs a turn before the rest.
                jobs.push(job)
                break


def _no_node_fits(
    session: Session, task: TaskInfo, shapes: dict[PlacementKey, FitErrors | None]
) -> FitErrors | None:
    """For a task its queue refused (or skipped, overused): the per-node reasons when no
    node could take it either (what kube-scheduler would say, and what a person can act
    on), None when one could. Asked once per task shape in a session: placements only take
    room away, so a shape no node fits stays so, and one that fitted is refused anyway."""
    key = task.placement_key()
    if key in shapes:
        return shapes[key]
    errors: FitErrors | None = None
    reason = session.pre_predicate(task)
    if reason is not None:
        errors = FitErrors.all_nodes(session.nodes, reason)
    else:
        found = session.placement.fit_errors(task)
        if len(found.node_reasons) >= found.total_nodes:
            errors = found
    shapes[key] = errors
    return errors


def _gave_up(
    session: Session,
    job: JobInfo,
    untried: list[TaskInfo],
    failed: dict[PlacementKey, FitErrors],
    cause: FitErrors,
) -> None:
    """The gang cannot reach minAvailable any more, so its other tasks are not tried: one
    identical to a task that found no node gets that task's answer (a scan would give it),
    any other is recorded as given up, with the cause."""
    skips = session.skips
    gave_up = TaskSkip(Skip.GANG_GAVE_UP, cause)
    for task in untried:
        known = failed.get(task.placement_key())
        if known is not None:
            session.fit_errors[task.uid] = known
            skips.task(task.uid, job.uid, TaskSkip(Skip.NO_NODE, known))
        else:
            skips.task(task.uid, job.uid, gave_up)


__all__ = [
    "AllocateAction",
    "gc_paused",
    "need_continue",
    "schedulable_jobs",
]
