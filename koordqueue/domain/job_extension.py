"""The batch/v1 Job extension as pure functions (SPEC 2.6).

The adapter calls these with the Job object it watched; everything Kubernetes-specific about
the *rules* (resource totals, pod-set count, phase from Job status, retry back-off) is here, so
it is unit-tested without a cluster and reused by the simulator.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from koordqueue.domain.backoff import Backoff
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_ENQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
    KOORD_QUEUE_GROUP,
    KOORD_QUEUE_VERSION,
    MSG_ENQUEUED_AFTER_BACKOFF,
    MSG_ENQUEUED_AFTER_PREEMPTED,
    MSG_RUNNING_TIMEOUT,
    MSG_UNIT_FAILED,
    MSG_UNIT_RUNNING,
    MSG_UNIT_SUCCEEDED,
)
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.queue_unit import Phase
from koordqueue.domain.resources import Resources

BACKOFF_BASE: Final = 10.0
BACKOFF_CAP: Final = 15 * 60.0
BACKOFF_JITTER: Final = 0.10
UNIT_BACKOFF: Final = Backoff(BACKOFF_BASE, BACKOFF_CAP, BACKOFF_JITTER)


class InvalidJobError(ValueError):
    """A Job whose pod template cannot be turned into a resource request."""

    def __init__(self, key: str, field: str, reason: str) -> None:
        self.key = key
        self.field = field
        self.reason = reason
        super().__init__(f"Job {key}: {field}: {reason}")


def _requests(container: Mapping[str, Any], field: str) -> Resources:
    resources = container.get("resources") or {}
    # Kubernetes defaults requests to limits when only limits are given.
    limits = Resources.parse(resources.get("limits"), f"{field}.resources.limits")
    requests = Resources.parse(resources.get("requests"), f"{field}.resources.requests")
    return Resources({**limits.as_dict(), **requests.as_dict()})


def pod_requests(pod_spec: Mapping[str, Any], key: str = "?") -> Resources:
    """Effective pod request: max(sum of containers, each init container) + overhead.

    Restartable (sidecar) init containers run alongside the app and are summed as well.
    """
    try:
        total = Resources()
        for i, container in enumerate(pod_spec.get("containers") or []):
            total = total + _requests(container, f"spec.template.spec.containers[{i}]")
        init_peak = Resources()
        sidecars = Resources()
        for i, container in enumerate(pod_spec.get("initContainers") or []):
            request = _requests(container, f"spec.template.spec.initContainers[{i}]")
            if container.get("restartPolicy") == "Always":
                sidecars = sidecars + request
            else:
                init_peak = init_peak.max(sidecars + request)
        effective = (total + sidecars).max(init_peak)
        overhead = Resources.parse(pod_spec.get("overhead"), "spec.template.spec.overhead")
        return (effective + overhead).nonzero()
    except InvalidQuantityError as exc:
        raise InvalidJobError(key, exc.field, f"{exc.value!r}: {exc.reason}") from exc


def job_key(job: Mapping[str, Any]) -> str:
    metadata = job.get("metadata") or {}
    return f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"


def count_failed_indexes(indexes: str, completions: int) -> int:
    """How many indexes `status.failedIndexes` names ("1,3-5,7" -> 5).

    Raises ValueError for what the Job controller never writes: a non-number, a reversed or
    overlapping range, indexes out of order, or an index outside [0, completions).
    """
    if not indexes:
        return 0
    count, last = 0, -1
    for part in indexes.split(","):
        first_text, _, end_text = part.partition("-")
        first = int(first_text)
        end = int(end_text) if end_text else first
        if first < 0 or end < first or first <= last or end >= completions:
            raise ValueError(f"invalid failedIndexes {indexes!r} for {completions} completions")
        count += end - first + 1
        last = end
    return count


def pod_set_count(job: Mapping[str, Any]) -> int:
    """min(parallelism, completions − succeeded [− failed indexes]), never negative.

    parallelism defaults to 1 and completions to parallelism. An Indexed Job's permanently
    failed indexes will not run again, so they are not asked for; a failedIndexes value that
    cannot be parsed keeps the full demand.
    """
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    parallelism = spec.get("parallelism")
    parallelism = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    completions = parallelism if completions is None else int(completions)
    remaining = completions - int(status.get("succeeded") or 0)
    if spec.get("completionMode") == "Indexed" and status.get("failedIndexes"):
        with contextlib.suppress(ValueError):  # unparsable: keep the full demand
            remaining -= count_failed_indexes(str(status["failedIndexes"]), completions)
    return max(min(parallelism, remaining), 0)


def job_resource(job: Mapping[str, Any]) -> Resources:
    """spec.resource of the unit: parallelism × the pod template's effective requests."""
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    parallelism = 1 if parallelism is None else int(parallelism)
    pod_spec = ((spec.get("template") or {}).get("spec")) or {}
    return pod_requests(pod_spec, job_key(job)) * parallelism


def is_created_suspended(job: Mapping[str, Any]) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def queue_unit_for_job(
    job: Mapping[str, Any], priority_of_class: Callable[[str], int | None] | None = None
) -> dict[str, Any]:
    """The QueueUnit object for a suspended Job: same namespace/name, owner ref, copied metadata."""
    metadata = job.get("metadata") or {}
    spec = job.get("spec") or {}
    pod_spec = ((spec.get("template") or {}).get("spec")) or {}
    class_name = pod_spec.get("priorityClassName") or ""
    # the class's value when the class exists, else the template's own priority, else 0
    priority = priority_of_class(class_name) if class_name and priority_of_class else None
    if priority is None:
        priority = pod_spec.get("priority") or 0
    resource = job_resource(job)
    unit_spec: dict[str, Any] = {
        "consumerRef": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace", "default"),
            "uid": metadata.get("uid"),
        },
        "priority": int(priority),
        "queue": "",
        "resource": resource.to_quantities(),
        "podSet": [
            {
                "name": metadata.get("name"),
                "count": pod_set_count(job),
                "template": spec.get("template") or {},
            }
        ],
    }
    if class_name:
        unit_spec["priorityClassName"] = class_name
    return {
        "apiVersion": f"{KOORD_QUEUE_GROUP}/{KOORD_QUEUE_VERSION}",
        "kind": "QueueUnit",
        "metadata": {
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace", "default"),
            "labels": dict(metadata.get("labels") or {}),
            "annotations": dict(metadata.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": metadata.get("name"),
                    "uid": metadata.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": unit_spec,
    }


class JobStatus(StrEnum):
    """Where a Job stands for the extension (Koord-Queue framework.JobStatus)."""

    CREATED = "Created"
    QUEUING = "Queuing"
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


def _annotations(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return (job.get("metadata") or {}).get("annotations") or {}


def is_managed(job: Mapping[str, Any]) -> bool:
    """Enqueued once (annotated), or never started and suspended: the queue owns this Job."""
    if _annotations(job).get(JOB_HAS_ENQUEUED_ANNOTATION):
        return True
    return not (job.get("status") or {}).get("startTime") and is_created_suspended(job)


def job_status(job: Mapping[str, Any], pod_running: bool = False) -> JobStatus:
    """The Job's state, in the reference's order of precedence.

    `pod_running`: one of the Job's pods is in phase Running (the caller looks; this module
    does not list pods). With active pods and none running the Job is Pending, as it is after
    a resume (dequeue timestamp set) before any pod exists.
    """
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return JobStatus.SUCCEEDED
        if condition.get("type") == "Failed":
            return JobStatus.FAILED
    if int(status.get("active") or 0) > 0:
        return JobStatus.RUNNING if pod_running else JobStatus.PENDING
    annotations = _annotations(job)
    if annotations.get(JOB_DEQUEUE_TIMESTAMP_ANNOTATION):
        return JobStatus.PENDING
    if annotations.get(JOB_HAS_ENQUEUED_ANNOTATION) == "true":
        return JobStatus.QUEUING
    return JobStatus.CREATED


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


def enqueue_patch(job: Mapping[str, Any], now: str) -> dict[str, Any] | None:
    """Mark a Job enqueued (merge patch), or None when it already is."""
    if _annotations(job).get(JOB_HAS_ENQUEUED_ANNOTATION):
        return None
    return {
        "metadata": {
            "annotations": {
                JOB_HAS_ENQUEUED_ANNOTATION: "true",
                JOB_ENQUEUE_TIMESTAMP_ANNOTATION: now,
            }
        }
    }


def resume_patch(now: str, job: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Let the Job run and stamp when it left the queue; None when `job` is not suspended."""
    if job is not None and not is_created_suspended(job):
        return None
    return {
        "spec": {"suspend": False},
        "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: now}},
    }


def suspend_patch(job: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Stop the Job again (empty dequeue timestamp: back in the queue); None if it is stopped."""
    if job is not None and is_created_suspended(job):
        return None
    return {
        "spec": {"suspend": True},
        "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: ""}},
    }


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
