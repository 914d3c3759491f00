"""MPIJob kubeflow.org/v1alpha1 as Koord-Queue reads it (mpijob_v1alpha1.go): Aliyun's fork
of the early mpi-operator (AliyunContainerService/mpi-operator).

One pod template for every worker: spec.replicas pods of spec.template, one pod set named
after the job. The spec has no suspend field: the queue holds it with the annotation
scheduling.x-k8s.io/suspend="true" (an operator that honours it) and releases it by removing
the annotation, stamping the dequeue time. Marked with Koord-Queue's Job annotations. State:
status.launcherStatus Succeeded / Failed / Active; else released (no hold annotation, or
"false"): Pending; enqueued: Queuing; else Created. Priority: the template's.

Its CRD is named mpijobs.kubeflow.org like mpi-operator's v2beta1 one: a cluster serves one of
them; `kubeflow.org/mpijob` (v2beta1) wins when both versions are served.
"""

from __future__ import annotations

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
    pod_count,
    pod_requests,
)
from koordqueue.domain.names import (
    INTEGRATION_SUSPEND_ANNOTATION,
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
)

LAUNCHER_ACTIVE: Final = "Active"
LAUNCHER_SUCCEEDED: Final = "Succeeded"
LAUNCHER_FAILED: Final = "Failed"


class MPIJobV1alpha1(Integration):
    name = "kubeflow.org/mpijob-v1alpha1"
    """Kueue has no such integration: Kueue's name for MPIJob with the version it serves."""
    workload = WorkloadKind("kubeflow.org", "v1alpha1", "MPIJob", "mpijobs")
    unit_suffix = "mpi-qu"

    @staticmethod
    def _pod_spec(obj: Obj) -> Mapping[str, Any]:
        return (((obj.get("spec") or {}).get("template") or {}).get("spec")) or {}

    def pod_sets(self, members: Sequence[Obj]) -> tuple[PodSet, ...]:
        """One pod set named after the job; spec.replicas is required (the fork's other
        sizing, spec.gpus, is not read by Koord-Queue either)."""
        obj = members[0]
        spec, key, kind = obj.get("spec") or {}, object_key(obj), self.workload.kind
        count = pod_count(spec.get("replicas"), None, key, "spec.replicas", kind)
        request = pod_requests(self._pod_spec(obj), key, "spec.template.spec", kind)
        name = str(meta(obj).get("name", ""))
        return (PodSet(name, count, spec.get("template") or {}, request),)

    def priority_class_name(self, obj: Obj) -> str:
        return str(self._pod_spec(obj).get("priorityClassName") or "")

    def template_priority(self, obj: Obj) -> int | None:
        value = self._pod_spec(obj).get("priority")
        return None if value is None else int(value)

    def is_suspended(self, obj: Obj) -> bool:
        return annotations_of(obj).get(INTEGRATION_SUSPEND_ANNOTATION) == "true"

    @staticmethod
    def _launcher(obj: Obj) -> str:
        return str((obj.get("status") or {}).get("launcherStatus") or "")

    def is_managed(self, obj: Obj) -> bool:
        if annotations_of(obj).get(JOB_HAS_ENQUEUED_ANNOTATION):
            return True
        return not self._launcher(obj) and self.is_suspended(obj)

    def resume(self, obj: Obj, now: str, now_rfc3339: str | None = None) -> tuple[Mutation, ...]:
        """The hold annotation removed (a merge patch's null), the dequeue time stamped."""
        if not self.is_suspended(obj):
            return ()
        notes = {INTEGRATION_SUSPEND_ANNOTATION: None, JOB_DEQUEUE_TIMESTAMP_ANNOTATION: now}
        return (WorkloadPatch({"metadata": {"annotations": notes}}),)

    def suspend(self, obj: Obj) -> tuple[Mutation, ...]:
        if self.is_suspended(obj):
            return ()
        notes = {INTEGRATION_SUSPEND_ANNOTATION: "true", JOB_DEQUEUE_TIMESTAMP_ANNOTATION: ""}
        return (WorkloadPatch({"metadata": {"annotations": notes}}),)

    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        obj = members[0]
        launcher = self._launcher(obj)
        if launcher == LAUNCHER_SUCCEEDED:
            return JobStatus.SUCCEEDED
        if launcher == LAUNCHER_FAILED:
            return JobStatus.FAILED
        if launcher == LAUNCHER_ACTIVE:
            return JobStatus.RUNNING
        if annotations_of(obj).get(INTEGRATION_SUSPEND_ANNOTATION, "false") == "false":
            return JobStatus.PENDING
        if annotations_of(obj).get(JOB_HAS_ENQUEUED_ANNOTATION):
            return JobStatus.QUEUING
        return JobStatus.CREATED
