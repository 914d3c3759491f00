"""gang: a job is bound only when minAvailable tasks can be (all-or-nothing)."""

from __future__ import annotations

from koordqueue.scheduler.api import JobInfo, TaskInfo, TaskStatus, names
from koordqueue.scheduler.framework.interface import Plugin, ValidateResult, Vote
from koordqueue.scheduler.framework.session import Session


class GangPlugin(Plugin):
    """Job valid/ready/pipelined/starving by minAvailable; unready jobs first; victims only
    from jobs that stay at or above their minAvailable."""

    name = "gang"
    quiet = True

    def on_session_open(self, session: Session) -> None:
        def valid(job: JobInfo) -> ValidateResult | None:
            count = job.valid_task_num()
            if count < job.min_available:
                return ValidateResult(
                    names.NOT_ENOUGH_PODS_REASON,
                    names.NOT_ENOUGH_VALID_TASKS.format(valid=count, min=job.min_available),
                )
            return None

        def job_order(left: JobInfo, right: JobInfo) -> int:
            lr, rr = left.is_ready(), right.is_ready()
            if lr == rr:
                return 0
            return 1 if lr else -1

        def evictable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            occupied: dict[str, int] = {}
            victims = []
            for candidate in candidates:
                job = session.jobs[candidate.job]
                left = occupied.get(job.uid, job.ready_task_num())
                if job.min_available <= left - 1 or job.min_available == 1:
                    occupied[job.uid] = left - 1
                    victims.append(candidate)
            return victims

        session.add_job_valid_fn(self.name, valid)
        # key: unready (0) before ready (1); readiness changes only with the job's tasks
        session.add_job_order_fn(self.name, job_order, key=lambda job: 1 if job.is_ready() else 0)
        session.add_job_ready_fn(self.name, lambda job: job.is_ready())
        session.add_job_pipelined_fn(
            self.name, lambda job: Vote.PERMIT if job.is_pipelined() else Vote.REJECT
        )
        session.add_job_starving_fn(
            self.name, lambda job: job.ready_task_num() + job.waiting_task_num() < job.min_available
        )
        session.add_preemptable_fn(self.name, evictable)
        session.add_reclaimable_fn(self.name, evictable)
        # gang eviction keeps gangs whole through its bundles: every candidate is allowed
        session.add_unified_evictable_fn(self.name, lambda _ctx, candidates: list(candidates))
        session.add_job_close_condition_fn(self.name, unready_condition)

    def on_session_close(self, session: Session) -> None:
        # jobs the session left quiet get the same condition through its memo
        for job in session.scan_jobs():
            message = unready_condition(job, job.uid in session.job_conditions)
            if message is not None:
                session.job_conditions[job.uid] = message


def unready_condition(job: JobInfo, has_condition: bool) -> str | None:
    """Why an enqueued job is not ready (minAvailable not reached), unless it already has a
    condition; None for a ready or Pending job. Depends on the job alone."""
    if job.is_ready() or has_condition or job.is_pending():
        return None
    if releasing_covers_min(job):
        return None
    missing = job.min_available - job.ready_task_num()
    detail = names.POD_GROUP_NOT_READY.format(
        histogram=f"{job.status_histogram()}, {job.min_available} minAvailable"
    )
    return names.GANG_UNSCHEDULABLE.format(missing=missing, total=len(job.tasks), detail=detail)


SCHEDULED_STATUSES = (TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.FAILED, TaskStatus.SUCCEEDED)
"""Volcano's ScheduledStatus."""


def releasing_covers_min(job: JobInfo) -> bool:
    """Volcano's shouldSkipUnschedulableForReleasing: an unready job whose releasing tasks
    still on their nodes, with its scheduled ones, reach minAvailable gets no unschedulable
    condition (their pods still hold the gang's slots), unless a task is still pending or
    pipelined (work that needs scheduling)."""
    releasing = job.task_status_index.get(TaskStatus.RELEASING, {})
    on_nodes = sum(1 for task in releasing.values() if task.node_name)
    if on_nodes == 0 or job.count(TaskStatus.PENDING, TaskStatus.PIPELINED):
        return False
    return job.count(*SCHEDULED_STATUSES) + on_nodes >= job.min_available
