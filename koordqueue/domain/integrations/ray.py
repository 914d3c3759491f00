"""KubeRay RayJob and RayCluster (ray.io/v1), after Koord-Queue's rayjob.go and raycluster.go.

Both hold their pods with spec.suspend and describe them as one head group and worker groups
(spec.rayClusterSpec of a RayJob, the spec itself of a RayCluster). Pod sets: `head` of one
pod, then one per worker group named after it in lower case (`worker` when unnamed), of
replicas × numOfHosts pods (replicas defaults to 0 as the CRD does; numOfHosts, a multi-host
group's pods per replica, to 1, as Kueue counts it). The priority is the head template's.

Koord-Queue marks both with the enqueue timestamp annotation and, on release, the dequeue
timestamp. A RayJob is finished by its jobDeploymentStatus (Complete, Failed), runs while it
is Running; a RayCluster never finishes and runs once a worker (or, as Kueue reads it, the
cluster) is ready. A RayCluster made for a RayJob is its RayJob's business, not the queue's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from koordqueue.domain.integrations.base import (
    Integration,
    InvalidJobError,
    JobStatus,
    Mutation,
    Obj,
    PodSet,
    WorkloadKind,
    WorkloadPatch,
    annotations_of,
    meta,
    object_key,
    pod_count,
    pod_requests,
)
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_ENQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
    RAY_ORIGINATED_FROM_LABEL,
)

HEAD: Final = "head"
"""The head group's pod set (Koord-Queue's headGroupPodSetName); no worker group may use it."""
UNNAMED_GROUP: Final = "worker"
COMPLETE: Final = "Complete"
FAILED: Final = "Failed"
RUNNING: Final = "Running"
READY: Final = "ready"


def group_pod_set_name(group: str) -> str:
    """A worker group's pod set: its name in lower case, `worker` when it has none."""
    return group.lower() or UNNAMED_GROUP


def is_marked(obj: Obj) -> bool:
    """Enqueued before: Koord-Queue's enqueue timestamp (or our has-enqueued mark)."""
    notes = annotations_of(obj)
    return bool(
        notes.get(JOB_ENQUEUE_TIMESTAMP_ANNOTATION) or notes.get(JOB_HAS_ENQUEUED_ANNOTATION)
    )


def marked_status(obj: Obj) -> JobStatus:
    """Released (dequeue timestamp): Pending; enqueued: Queuing; else Created."""
    notes = annotations_of(obj)
    if notes.get(JOB_DEQUEUE_TIMESTAMP_ANNOTATION):
        return JobStatus.PENDING
    return JobStatus.QUEUING if is_marked(obj) else JobStatus.CREATED


def release_patch(spec: Mapping[str, Any], now: str) -> WorkloadPatch:
    """The spec change that lets it run, with the dequeue timestamp."""
    return WorkloadPatch(
        {"spec": dict(spec), "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: now}}}
    )


def hold_patch(spec: Mapping[str, Any]) -> WorkloadPatch:
    """The spec change that holds it, the dequeue timestamp emptied (it reads Queuing again)."""
    return WorkloadPatch(
        {"spec": dict(spec), "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: ""}}}
    )


class RayWorkload(Integration):
    """What RayJob and RayCluster share: the cluster spec's groups, the suspend field."""

    cluster_path: ClassVar[str]
    """Where the RayClusterSpec sits ("spec.rayClusterSpec" or "spec")."""

    def cluster_spec(self, obj: Obj) -> Mapping[str, Any]:
        spec: Mapping[str, Any] = obj.get("spec") or {}
        for part in self.cluster_path.split(".")[1:]:
            spec = spec.get(part) or {}
        return spec

    def _head_pod_spec(self, obj: Obj) -> Mapping[str, Any]:
        head = self.cluster_spec(obj).get("headGroupSpec") or {}
        return (head.get("template") or {}).get("spec") or {}

    def pod_sets(self, members: Sequence[Obj]) -> tuple[PodSet, ...]:
        obj = members[0]
        key, kind, path = object_key(obj), self.workload.kind, self.cluster_path
        cluster = self.cluster_spec(obj)
        head = cluster.get("headGroupSpec") or {}
        head_template = head.get("template") or {}
        head_request = pod_requests(
            self._head_pod_spec(obj), key, f"{path}.headGroupSpec.template.spec", kind
        )
        pod_sets = [PodSet(HEAD, 1, head_template, head_request)]
        seen = {HEAD: f"{path}.headGroupSpec"}
        for i, group in enumerate(cluster.get("workerGroupSpecs") or []):
            where = f"{path}.workerGroupSpecs[{i}]"
            name = group_pod_set_name(str(group.get("groupName") or ""))
            if name in seen:
                raise InvalidJobError(
                    key, f"{where}.groupName", f"{name!r} is taken by {seen[name]}", kind
                )
            seen[name] = where
            replicas = pod_count(group.get("replicas"), 0, key, f"{where}.replicas", kind)
            hosts = pod_count(group.get("numOfHosts"), 1, key, f"{where}.numOfHosts", kind)
            template = group.get("template") or {}
            request = pod_requests(template.get("spec") or {}, key, f"{where}.template.spec", kind)
            pod_sets.append(PodSet(name, replicas * hosts, template, request))
        return tuple(pod_sets)

    def priority_class_name(self, obj: Obj) -> str:
        return str(self._head_pod_spec(obj).get("priorityClassName") or "")

    def enqueue(
        self, obj: Obj, now: str, now_rfc3339: str | None = None
    ) -> tuple[WorkloadPatch, ...]:
        """Koord-Queue's mark, unless its enqueue timestamp is there already."""
        return () if is_marked(obj) else super().enqueue(obj, now, now_rfc3339)

    def template_priority(self, obj: Obj) -> int | None:
        value = self._head_pod_spec(obj).get("priority")
        return None if value is None else int(value)

    def resume(self, obj: Obj, now: str, now_rfc3339: str | None = None) -> tuple[Mutation, ...]:
        if not self.is_suspended(obj):
            return ()
        return (release_patch({"suspend": False}, now),)

    def suspend(self, obj: Obj) -> tuple[Mutation, ...]:
        if self.is_suspended(obj):
            return ()
        return (hold_patch({"suspend": True}),)


class RayJob(RayWorkload):
    """ray.io/v1 RayJob: spec.suspend (a bool) holds it; its RayCluster is made on release."""

    name = "ray.io/rayjob"
    workload = WorkloadKind("ray.io", "v1", "RayJob", "rayjobs")
    unit_suffix = "ray-qu"
    cluster_path = "spec.rayClusterSpec"

    def is_suspended(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("suspend"))

    def is_managed(self, obj: Obj) -> bool:
        """Enqueued before, or never started and held (Koord-Queue's ManagedByQueue)."""
        if is_marked(obj):
            return True
        return not (obj.get("status") or {}).get("startTime") and self.is_suspended(obj)

    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        obj = members[0]
        deployment = (obj.get("status") or {}).get("jobDeploymentStatus")
        if deployment == COMPLETE:
            return JobStatus.SUCCEEDED
        if deployment == FAILED:
            return JobStatus.FAILED
        if deployment == RUNNING:
            return JobStatus.RUNNING
        return marked_status(obj)


class RayCluster(RayWorkload):
    """ray.io/v1 RayCluster: spec.suspend (optional bool) holds it; it never finishes."""

    name = "ray.io/raycluster"
    workload = WorkloadKind("ray.io", "v1", "RayCluster", "rayclusters")
    unit_suffix = "raycluster-qu"
    cluster_path = "spec"

    def is_suspended(self, obj: Obj) -> bool:
        return (obj.get("spec") or {}).get("suspend") is True

    def is_managed(self, obj: Obj) -> bool:
        """Not one a RayJob made (that RayJob is queued), not labelled as originating from a
        RayCluster; else enqueued before or held (Koord-Queue's ManagedByQueue)."""
        owners = meta(obj).get("ownerReferences") or []
        if owners and owners[0].get("kind") == RayJob.workload.kind:
            return False
        labels = meta(obj).get("labels") or {}
        if labels.get(RAY_ORIGINATED_FROM_LABEL) == self.workload.kind:
            return False
        return is_marked(obj) or self.is_suspended(obj)

    def pod_running(self, members: Sequence[Obj]) -> bool | None:
        status = members[0].get("status") or {}
        return int(status.get("readyWorkerReplicas") or 0) > 0 or status.get("state") == READY

    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        """A ready worker (Koord-Queue) or a ready cluster (Kueue's IsActive): Running;
        else as marked. Never Succeeded or Failed: a cluster serves until deleted."""
        obj = members[0]
        if self.pod_running(members) or pod_running:
            return JobStatus.RUNNING
        if not is_marked(obj):
            return JobStatus.CREATED
        return marked_status(obj)
