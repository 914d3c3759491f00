"""batch/v1 Job (SPEC 2.6; Koord-Queue pkg/jobext/handles/job.go): the first integration.

The rules koordqueue.domain.job_extension has always applied, behind the Integration
interface; job_extension keeps its functions as thin wrappers of these.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from koordqueue.domain.integrations.base import (
    Integration,
    JobStatus,
    Mutation,
    Obj,
    PodSet,
    WorkloadKind,
    WorkloadPatch,
    annotations_of,
    meta,
    object_key,
    pod_requests,
)
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
)
from koordqueue.domain.reclaimable import ReclaimablePod, job_reclaimable_pods
from koordqueue.domain.resources import Resources

CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"


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


def _parallelism(spec: Mapping[str, Any]) -> int:
    parallelism = spec.get("parallelism")
    return 1 if parallelism is None else int(parallelism)


def _pod_spec(job: Obj) -> Mapping[str, Any]:
    return (((job.get("spec") or {}).get("template") or {}).get("spec")) or {}


def pod_set_count(job: Obj) -> int:
    """min(parallelism, completions − succeeded [− failed indexes]), never negative.

    parallelism defaults to 1 and completions to parallelism. An Indexed Job's permanently
    failed indexes will not run again, so they are not asked for; a failedIndexes value that
    cannot be parsed keeps the full demand.
    """
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    parallelism = _parallelism(spec)
    completions = spec.get("completions")
    completions = parallelism if completions is None else int(completions)
    remaining = completions - int(status.get("succeeded") or 0)
    if spec.get("completionMode") == "Indexed" and status.get("failedIndexes"):
        with contextlib.suppress(ValueError):  # unparsable: keep the full demand
            remaining -= count_failed_indexes(str(status["failedIndexes"]), completions)
    return max(min(parallelism, remaining), 0)


def job_resource(job: Obj) -> Resources:
    """spec.resource of the unit: parallelism × the pod template's effective requests."""
    return pod_requests(_pod_spec(job), object_key(job)) * _parallelism(job.get("spec") or {})


class BatchJob(Integration):
    """batch/v1 Job: spec.suspend holds it; its status counters and conditions say the rest."""

    name = "batch/job"
    workload = WorkloadKind("batch", "v1", "Job", "jobs")

    def pod_sets(self, members: Sequence[Obj]) -> tuple[PodSet, ...]:
        job = members[0]
        template = (job.get("spec") or {}).get("template") or {}
        request = pod_requests(_pod_spec(job), object_key(job))
        return (PodSet(str(meta(job).get("name")), pod_set_count(job), template, request),)

    def resource(self, members: Sequence[Obj]) -> Resources:
        # parallelism, not the remaining count: what Koord-Queue's Resources() asks for
        return job_resource(members[0])

    def priority_class_name(self, obj: Obj) -> str:
        return str(_pod_spec(obj).get("priorityClassName") or "")

    def template_priority(self, obj: Obj) -> int | None:
        value = _pod_spec(obj).get("priority")
        return None if value is None else int(value)

    def is_suspended(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("suspend"))

    def is_managed(self, obj: Obj) -> bool:
        if annotations_of(obj).get(JOB_HAS_ENQUEUED_ANNOTATION):
            return True
        return not (obj.get("status") or {}).get("startTime") and self.is_suspended(obj)

    def resume(
        self, obj: Obj | None, now: str, now_rfc3339: str | None = None
    ) -> tuple[Mutation, ...]:
        """suspend: false and the dequeue timestamp (always, when no object is given)."""
        if obj is not None and not self.is_suspended(obj):
            return ()
        return (
            WorkloadPatch(
                {
                    "spec": {"suspend": False},
                    "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: now}},
                }
            ),
        )

    def suspend(self, obj: Obj | None) -> tuple[Mutation, ...]:
        """suspend: true and an empty dequeue timestamp (back in the queue)."""
        if obj is not None and self.is_suspended(obj):
            return ()
        return (
            WorkloadPatch(
                {
                    "spec": {"suspend": True},
                    "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: ""}},
                }
            ),
        )

    def resume_unread(self, now: str) -> tuple[Mutation, ...]:
        return self.resume(None, now)

    def suspend_unread(self) -> tuple[Mutation, ...]:
        return self.suspend(None)

    def reclaimable_pods(self, members: Sequence[Obj]) -> tuple[ReclaimablePod, ...]:
        """Kueue's rule (reclaimable.job_reclaimable_pods), on the Job's one pod set."""
        job = members[0]
        spec, status = job.get("spec") or {}, job.get("status") or {}
        completions = spec.get("completions")
        return job_reclaimable_pods(
            str(meta(job).get("name")), _parallelism(spec),
            None if completions is None else int(completions), int(status.get("succeeded") or 0),
        )

    def pod_running(self, members: Sequence[Obj]) -> bool | None:
        """status.ready answers without a call; with active pods none ready, list them."""
        status = members[0].get("status") or {}
        if int(status.get("ready") or 0) > 0:
            return True
        if int(status.get("active") or 0) == 0:
            return False
        return None

    def pod_selector(self, obj: Obj) -> str | None:
        return f"{CONTROLLER_UID_LABEL}={meta(obj).get('uid')}"

    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        """The Job's state, in the reference's order of precedence.

        `pod_running`: one of the Job's pods is in phase Running. With active pods and none
        running the Job is Pending, as it is after a resume (dequeue timestamp set) before
        any pod exists.
        """
        job = members[0]
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
        notes = annotations_of(job)
        if notes.get(JOB_DEQUEUE_TIMESTAMP_ANNOTATION):
            return JobStatus.PENDING
        if notes.get(JOB_HAS_ENQUEUED_ANNOTATION) == "true":
            return JobStatus.QUEUING
        return JobStatus.CREATED
