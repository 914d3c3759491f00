"""JobSet (jobset.x-k8s.io/v1alpha2): spec.suspend holds it; replicated Jobs are its roles.

Pod sets follow Kueue (pkg/controller/jobs/jobset): one per spec.replicatedJobs[] entry, named
after it, of replicas × min(parallelism, completions) pods (parallelism defaults to 1,
completions to parallelism). It is finished when its Completed or Failed condition is True.
Koord-Queue has no JobSet handle, so the queue's markers are those of its batch/v1 Job
handle: the job-has-enqueued / enqueue / dequeue timestamp annotations, and the state reads
as the Job's does: finished first, then running (a replicated Job with ready pods), then
pending (active Jobs, or resumed), then queuing (enqueued).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koordqueue.domain.integrations.base import (
    JobStatus,
    Obj,
    PodSet,
    WorkloadKind,
    annotations_of,
    condition_true,
    object_key,
    pod_requests,
)
from koordqueue.domain.integrations.spec_suspend import SpecSuspendWorkload
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
)
from koordqueue.domain.reclaimable import ReclaimablePod, jobset_reclaimable_pods


def pods_per_replica(replicated_job: Mapping[str, Any]) -> int:
    """min(parallelism, completions) of the Job template (Kueue's PodsCountPerReplica)."""
    spec = ((replicated_job.get("template") or {}).get("spec")) or {}
    parallelism = spec.get("parallelism")
    count = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    if completions is not None and int(completions) < count:
        count = int(completions)
    return count


def _replicas(replicated_job: Mapping[str, Any]) -> int:
    replicas = replicated_job.get("replicas")
    return 1 if replicas is None else int(replicas)


class JobSet(SpecSuspendWorkload):
    name = "jobset.x-k8s.io/jobset"
    workload = WorkloadKind("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")
    unit_suffix = "js-qu"

    @staticmethod
    def replicated_jobs(obj: Obj) -> list[Mapping[str, Any]]:
        return list(((obj.get("spec") or {}).get("replicatedJobs")) or [])

    @staticmethod
    def _pod_template(replicated_job: Mapping[str, Any]) -> Mapping[str, Any]:
        return (((replicated_job.get("template") or {}).get("spec") or {}).get("template")) or {}

    def pod_sets(self, members: Sequence[Obj]) -> tuple[PodSet, ...]:
        obj = members[0]
        pod_sets = []
        for i, replicated in enumerate(self.replicated_jobs(obj)):
            template = self._pod_template(replicated)
            path = f"spec.replicatedJobs[{i}].template.spec.template.spec"
            request = pod_requests(template.get("spec") or {}, object_key(obj), path, "JobSet")
            count = _replicas(replicated) * pods_per_replica(replicated)
            pod_sets.append(PodSet(str(replicated.get("name", "")), count, template, request))
        return tuple(pod_sets)

    def _pod_specs(self, obj: Obj) -> list[Mapping[str, Any]]:
        return [self._pod_template(rj).get("spec") or {} for rj in self.replicated_jobs(obj)]

    def started(self, obj: Obj) -> bool:
        """Any replicated Job ever active, ready or finished."""
        return any(
            int(s.get(k) or 0) > 0
            for s in self._replicated_status(obj)
            for k in ("active", "ready", "succeeded", "failed")
        )

    @staticmethod
    def _replicated_status(obj: Obj) -> list[Mapping[str, Any]]:
        return list(((obj.get("status") or {}).get("replicatedJobsStatus")) or [])

    def reclaimable_pods(self, members: Sequence[Obj]) -> tuple[ReclaimablePod, ...]:
        """Kueue's rule (reclaimable.jobset_reclaimable_pods), per replicated Job."""
        obj = members[0]
        succeeded = {
            str(s.get("name", "")): int(s.get("succeeded") or 0)
            for s in self._replicated_status(obj)
        }
        return jobset_reclaimable_pods(
            (str(rj.get("name", "")), _replicas(rj), pods_per_replica(rj),
             succeeded.get(str(rj.get("name", "")), 0))
            for rj in self.replicated_jobs(obj)
        )

    def pod_running(self, members: Sequence[Obj]) -> bool | None:
        """A replicated Job with ready Jobs (status counts child Jobs whose pods are ready)."""
        return any(int(s.get("ready") or 0) > 0 for s in self._replicated_status(members[0]))

    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        obj = members[0]
        if condition_true(obj, "Completed"):
            return JobStatus.SUCCEEDED
        if condition_true(obj, "Failed"):
            return JobStatus.FAILED
        replicated = self._replicated_status(obj)
        if any(int(s.get("ready") or 0) > 0 for s in replicated) or pod_running:
            return JobStatus.RUNNING
        if any(int(s.get("active") or 0) > 0 for s in replicated):
            return JobStatus.PENDING
        notes = annotations_of(obj)
        if notes.get(JOB_DEQUEUE_TIMESTAMP_ANNOTATION):
            return JobStatus.PENDING
        if notes.get(JOB_HAS_ENQUEUED_ANNOTATION) == "true":
            return JobStatus.QUEUING
        return JobStatus.CREATED
