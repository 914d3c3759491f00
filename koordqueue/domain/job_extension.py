"""The batch/v1 Job extension as pure functions (SPEC 2.6).

The adapter calls these with the Job object it watched; everything Kubernetes-specific about
the *rules* (resource totals, pod-set count, phase from Job status, retry back-off) is here, so
it is unit-tested without a cluster and reused by the simulator.

The Job's own rules now live in koordqueue.domain.integrations.batch_job (the first of the
job integrations, issue 13); the Job functions here are thin wrappers kept for their callers.
What stays here is shared by every integration: the reconcile decision (`reconcile_job`),
Go's timestamp format and the retry back-off.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

from koordqueue.domain.backoff import Backoff
from koordqueue.domain.integrations import BATCH_JOB
from koordqueue.domain.integrations.base import (
    InvalidJobError,
    JobStatus,
    Mutation,
    WorkloadPatch,
    object_key,
    pod_requests,
    queue_unit_for,
)
from koordqueue.domain.integrations.batch_job import (
    count_failed_indexes,
    job_resource,
    pod_set_count,
)
from koordqueue.domain.names import (
    MSG_ENQUEUED_AFTER_BACKOFF,
    MSG_ENQUEUED_AFTER_PREEMPTED,
    MSG_RUNNING_TIMEOUT,
    MSG_UNIT_FAILED,
    MSG_UNIT_RUNNING,
    MSG_UNIT_SUCCEEDED,
)
from koordqueue.domain.queue_unit import Phase

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "BACKOFF_JITTER",
    "UNIT_BACKOFF",
    "InvalidJobError",
    "JobAction",
    "JobStatus",
    "backoff_delay",
    "count_failed_indexes",
    "enqueue_patch",
    "go_time_string",
    "is_created_suspended",
    "is_managed",
    "job_key",
    "job_resource",
    "job_status",
    "pod_requests",
    "pod_set_count",
    "queue_unit_for_job",
    "reconcile_job",
    "resume_patch",
    "suspend_patch",
]

BACKOFF_BASE: Final = 10.0
BACKOFF_CAP: Final = 15 * 60.0
BACKOFF_JITTER: Final = 0.10
UNIT_BACKOFF: Final = Backoff(BACKOFF_BASE, BACKOFF_CAP, BACKOFF_JITTER)


def job_key(job: Mapping[str, Any]) -> str:
    return object_key(job)


def is_created_suspended(job: Mapping[str, Any]) -> bool:
    return BATCH_JOB.is_suspended(job)


def queue_unit_for_job(
    job: Mapping[str, Any], priority_of_class: Callable[[str], int | None] | None = None
) -> dict[str, Any]:
    """The QueueUnit object for a suspended Job: same namespace/name, owner ref, copied metadata."""
    return queue_unit_for(BATCH_JOB, [job], priority_of_class)


def is_managed(job: Mapping[str, Any]) -> bool:
    """Enqueued once (annotated), or never started and suspended: the queue owns this Job."""
    return BATCH_JOB.is_managed(job)


def job_status(job: Mapping[str, Any], pod_running: bool = False) -> JobStatus:
    """The Job's state, in the reference's order of precedence (BatchJob.status)."""
    return BATCH_JOB.status([job], pod_running)


_PROCESS_START_NS: Final = time.monotonic_ns()


def go_time_string(epoch_ns: int | None = None, monotonic_ns: int | None = None) -> str:
    """A timestamp as Go's `time.Now().String()` prints it, which the reference writes verbatim.

    "2006-01-02 15:04:05.999999999 +0000 UTC m=+0.000000001": nanoseconds without trailing
    zeros, always UTC here, and the monotonic reading (seconds since the process started).
    """
    if epoch_ns is None:
        epoch_ns = time.time_ns()
    if monotonic_ns is None:
        monotonic_ns = time.monotonic_ns() - _PROCESS_START_NS
    seconds, nanos = divmod(epoch_ns, 1_000_000_000)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")
    if nanos:
        text += "." + f"{nanos:09d}".rstrip("0")
    sign = "-" if monotonic_ns < 0 else "+"
    mono_s, mono_ns = divmod(abs(monotonic_ns), 1_000_000_000)
    return f"{text} +0000 UTC m={sign}{mono_s}.{mono_ns:09d}"


def _patch(mutations: tuple[Mutation, ...]) -> dict[str, Any] | None:
    for mutation in mutations:
        if isinstance(mutation, WorkloadPatch):
            return dict(mutation.body)
    return None


def enqueue_patch(job: Mapping[str, Any], now: str) -> dict[str, Any] | None:
    """Mark a Job enqueued (merge patch), or None when it already is."""
    return _patch(BATCH_JOB.enqueue(job, now))


def resume_patch(now: str, job: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Let the Job run and stamp when it left the queue; None when `job` is not suspended."""
    return _patch(BATCH_JOB.resume(job, now))


def suspend_patch(job: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Stop the Job again (empty dequeue timestamp: back in the queue); None if it is stopped."""
    return _patch(BATCH_JOB.suspend(job))


@dataclass(frozen=True, slots=True)
class JobAction:
    """What one look at a Job and its unit calls for; the adapter carries it out."""

    phase: Phase | None = None
    """New unit phase to write (with `message`), or None to leave the unit as it is."""
    message: str = ""
    resume: bool = False
    resume_event: bool = False
    """Record the `Resume` event on the Job (the reference does so only for SchedSucceed)."""
    suspend: bool = False
    recheck_after: float | None = None
    """Seconds after which a time-based rule (running timeout, back-off) may fire."""


_FINISHED: Final = {
    JobStatus.RUNNING: (Phase.RUNNING, MSG_UNIT_RUNNING),
    JobStatus.SUCCEEDED: (Phase.SUCCEED, MSG_UNIT_SUCCEEDED),
    JobStatus.FAILED: (Phase.FAILED, MSG_UNIT_FAILED),
}


def reconcile_job(
    status: JobStatus,
    phase: Phase,
    since_update: float,
    running_timeout: float = 0.0,
    backoff_time: float = 0.0,
) -> JobAction:
    """The job extension's decision for a Job in `status` whose unit is in `phase`.

    `since_update`: seconds since the unit's status.lastUpdateTime. `running_timeout` (0: off):
    how long a resumed Job may stay Pending with its unit Dequeued before the unit backs off
    and the Job is suspended again; `backoff_time`: how long it then stays backed off.
    """
    if status in _FINISHED:
        target, message = _FINISHED[status]
        return JobAction(target, message) if phase is not target else JobAction()
    if status is JobStatus.QUEUING:
        if phase is Phase.PREEMPTED:
            return JobAction(Phase.ENQUEUED, MSG_ENQUEUED_AFTER_PREEMPTED)
        if phase is Phase.SCHED_SUCCEED:
            return JobAction(resume=True, resume_event=True, recheck_after=running_timeout or None)
        if phase is Phase.DEQUEUED:
            return JobAction(resume=True, recheck_after=running_timeout or None)
        if phase is Phase.BACKOFF:
            return _after_backoff(since_update, backoff_time)
        return JobAction()
    if status is JobStatus.PENDING:
        if phase in (Phase.SCHED_FAILED, Phase.SCHED_SUCCEED):
            return JobAction()
        if phase is Phase.PREEMPTED:
            return JobAction(Phase.ENQUEUED, MSG_ENQUEUED_AFTER_PREEMPTED, suspend=True)
        if running_timeout <= 0:
            return JobAction()
        if phase is Phase.DEQUEUED:
            if since_update >= running_timeout:
                return JobAction(
                    Phase.BACKOFF, MSG_RUNNING_TIMEOUT, suspend=True, recheck_after=backoff_time
                )
            return JobAction(recheck_after=running_timeout - since_update)
        if phase is Phase.BACKOFF:
            return replace(_after_backoff(since_update, backoff_time), suspend=True)
    return JobAction()


def _after_backoff(since_update: float, backoff_time: float) -> JobAction:
    if since_update > backoff_time:
        return JobAction(Phase.ENQUEUED, MSG_ENQUEUED_AFTER_BACKOFF)
    return JobAction(recheck_after=backoff_time - since_update)


def backoff_delay(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds before retry `attempt` (1-based): 10 s doubling, capped at 15 min, ±10% jitter."""
    return UNIT_BACKOFF.delay(attempt - 1, rng)
