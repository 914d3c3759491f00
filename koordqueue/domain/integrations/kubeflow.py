"""Kubeflow TFJob, PyTorchJob, XGBoostJob, PaddleJob, JAXJob (kubeflow.org/v1) and MPIJob
(kubeflow.org/v2beta1).

All hold their pods with spec.runPolicy.suspend and describe them as replica specs by role
(spec.pytorchReplicaSpecs, spec.mpiReplicaSpecs, ...: {Role: {replicas, template}}), with the
training-operator's status conditions (Created, Running, Restarting, Succeeded, Failed).

The queue's side follows Koord-Queue's Kubeflow job handles (pkg/jobext/handles/tfjob.go,
pytorchjob.go): enqueueing writes a `Queuing` status condition (True, "Job Enqueued"); holding
sets runPolicy.suspend and the annotation scheduling.x-k8s.io/suspend="true"; resuming turns
the condition False ("Job Dequeued"), sets the annotation "false", runPolicy.suspend false and
the dequeue timestamp. The state reads Succeeded/Failed conditions (True) first, then any
Running or Scheduled condition, then "not suspended" (Pending), then the Queuing condition.
Pod sets follow Kueue (pkg/controller/jobs/kubeflow, mpijob): one per role present, in the
operator's role order, named in lower case, replicas defaulting to 1. XGBoostJob, PaddleJob
and JAXJob have no Koord-Queue handle: the same markers (one shape), Kueue's priority.
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
    object_key,
    pod_count,
    pod_requests,
)
from koordqueue.domain.names import (
    INTEGRATION_SUSPEND_ANNOTATION,
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    MSG_JOB_DEQUEUED_CONDITION,
    MSG_JOB_ENQUEUED_CONDITION,
    QUEUING_CONDITION,
)

SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
RUNNING_CONDITIONS: Final = frozenset({"Running", "Scheduled"})


class KubeflowJob(Integration):
    """A training-operator style job; subclasses name the replica-specs field and roles."""

    replica_specs_field: ClassVar[str]
    roles: ClassVar[tuple[str, ...]]
    """The operator's role order (Kueue's OrderedReplicaTypes); other roles follow by name."""
    strict_roles: ClassVar[bool] = False
    """A role outside `roles` is refused (InvalidJobError) rather than queued after them."""

    # --- replica specs --------------------------------------------------------------------
    def replica_specs(self, obj: Obj) -> Mapping[str, Mapping[str, Any]]:
        return ((obj.get("spec") or {}).get(self.replica_specs_field)) or {}

    def ordered_roles(self, obj: Obj) -> list[str]:
        specs = self.replica_specs(obj)
        known = [role for role in self.roles if specs.get(role) is not None]
        return known + sorted(r for r in specs if r not in self.roles and specs[r] is not None)

    def _pod_spec(self, obj: Obj, role: str) -> Mapping[str, Any]:
        return ((self.replica_specs(obj)[role].get("template") or {}).get("spec")) or {}

    def pod_sets(self, members: Sequence[Obj]) -> tuple[PodSet, ...]:
        obj = members[0]
        specs = self.replica_specs(obj)
        kind, key = self.workload.kind, object_key(obj)
        unknown = [role for role in specs if role not in self.roles]
        if self.strict_roles and unknown:
            field = f"spec.{self.replica_specs_field}.{unknown[0]}"
            known = ", ".join(self.roles)
            raise InvalidJobError(key, field, f"unknown role (known: {known})", kind)
        pod_sets = []
        for role in self.ordered_roles(obj):
            spec = specs[role]
            path = f"spec.{self.replica_specs_field}.{role}.template.spec"
            request = pod_requests(self._pod_spec(obj, role), key, path, kind)
            field = f"spec.{self.replica_specs_field}.{role}.replicas"
            count = pod_count(spec.get("replicas"), 1, key, field, kind)
            pod_sets.append(PodSet(role.lower(), count, spec.get("template") or {}, request))
        return tuple(pod_sets)

    def _run_policy(self, obj: Obj) -> Mapping[str, Any]:
        return ((obj.get("spec") or {}).get("runPolicy")) or {}

    # --- priority -------------------------------------------------------------------------
    def priority_roles(self, obj: Obj) -> list[str]:
        """The roles whose template gives the priority, first set wins."""
        return self.ordered_roles(obj)

    def priority_class_name(self, obj: Obj) -> str:
        for role in self.priority_roles(obj):
            name = self._pod_spec(obj, role).get("priorityClassName")
            if name:
                return str(name)
        return ""

    def template_priority(self, obj: Obj) -> int | None:
        for role in self.priority_roles(obj):
            value = self._pod_spec(obj, role).get("priority")
            if value is not None:
                return int(value)
        return None

    # --- holding and releasing ------------------------------------------------------------
    def is_suspended(self, obj: Obj) -> bool:
        if annotations_of(obj).get(INTEGRATION_SUSPEND_ANNOTATION) == "true":
            return True
        return bool(self._run_policy(obj).get("suspend"))

    @staticmethod
    def _has_queuing_condition(obj: Obj) -> bool:
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c.get("type") == QUEUING_CONDITION for c in conditions)

    def is_managed(self, obj: Obj) -> bool:
        """A Queuing condition (of any status), or never started and held."""
        if self._has_queuing_condition(obj):
            return True
        return not (obj.get("status") or {}).get("startTime") and self.is_suspended(obj)

    @staticmethod
    def _conditions_with(
        obj: Obj, status: str, message: str, now: str
    ) -> list[dict[str, Any]] | None:
        """status.conditions with Queuing set to `status`; None when it already is."""
        conditions = [dict(c) for c in (obj.get("status") or {}).get("conditions") or []]
        for condition in conditions:
            if condition.get("type") == QUEUING_CONDITION:
                if condition.get("status") == status:
                    return None
                condition.update(
                    status=status, lastUpdateTime=now, lastTransitionTime=now, message=message
                )
                return conditions
        conditions.append(
            {
                "type": QUEUING_CONDITION,
                "status": status,
                "lastUpdateTime": now,
                "lastTransitionTime": now,
                "message": message,
            }
        )
        return conditions

    def enqueue(
        self, obj: Obj, now: str, now_rfc3339: str | None = None
    ) -> tuple[WorkloadPatch, ...]:
        """The Queuing condition, True ("Job Enqueued"), on the status subresource."""
        stamp = now_rfc3339 or now
        conditions = self._conditions_with(obj, "True", MSG_JOB_ENQUEUED_CONDITION, stamp)
        if conditions is None:
            return ()
        return (WorkloadPatch({"status": {"conditions": conditions}}, "status"),)

    def resume(self, obj: Obj, now: str, now_rfc3339: str | None = None) -> tuple[Mutation, ...]:
        """Queuing False ("Job Dequeued"); then, if held, release it and stamp the dequeue."""
        writes: list[Mutation] = []
        stamp = now_rfc3339 or now
        conditions = self._conditions_with(obj, "False", MSG_JOB_DEQUEUED_CONDITION, stamp)
        if conditions is not None:
            writes.append(WorkloadPatch({"status": {"conditions": conditions}}, "status"))
        if self.is_suspended(obj):
            writes.append(
                WorkloadPatch(
                    {
                        "metadata": {
                            "annotations": {
                                INTEGRATION_SUSPEND_ANNOTATION: "false",
                                JOB_DEQUEUE_TIMESTAMP_ANNOTATION: now,
                            }
                        },
                        "spec": {"runPolicy": {"suspend": False}},
                    }
                )
            )
        return tuple(writes)

    def suspend(self, obj: Obj) -> tuple[Mutation, ...]:
        if self.is_suspended(obj):
            return ()
        return (
            WorkloadPatch(
                {
                    "metadata": {"annotations": {INTEGRATION_SUSPEND_ANNOTATION: "true"}},
                    "spec": {"runPolicy": {"suspend": True}},
                }
            ),
        )

    # --- where it stands ------------------------------------------------------------------
    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        obj = members[0]
        running = queuing = False
        for condition in (obj.get("status") or {}).get("conditions") or []:
            kind, value = condition.get("type"), condition.get("status")
            if kind == SUCCEEDED and value == "True":
                return JobStatus.SUCCEEDED
            if kind == FAILED and value == "True":
                return JobStatus.FAILED
            # any status: Koord-Queue tests the type only
            running = running or kind in RUNNING_CONDITIONS
            queuing = queuing or kind == QUEUING_CONDITION
        if running:
            return JobStatus.RUNNING
        if not self.is_suspended(obj):
            return JobStatus.PENDING
        if queuing:
            return JobStatus.QUEUING
        return JobStatus.CREATED


class _KueueKubeflowJob(KubeflowJob):
    """A training-operator kind Koord-Queue has no handle for, after Kueue's kubeflowjob:
    priority from runPolicy.schedulingPolicy.priorityClass, then the first role (in the
    operator's order) whose template names one; the operator's roles only."""

    strict_roles = True

    def priority_class_name(self, obj: Obj) -> str:
        scheduling = self._run_policy(obj).get("schedulingPolicy") or {}
        if scheduling.get("priorityClass"):
            return str(scheduling["priorityClass"])
        return super().priority_class_name(obj)


class TFJob(_KueueKubeflowJob):
    """kubeflow.org/v1 TFJob (training-operator), roles Chief, Master, PS, Worker, Evaluator.

    Koord-Queue's tfjob.go is PyTorchJob's handle with its own suffix (tf-qu): the same
    markers, status and priority (the first role that is not Master). Roles as Kueue's
    OrderedReplicaTypes; the operator knows no others, so another name is refused.
    """

    name = "kubeflow.org/tfjob"
    workload = WorkloadKind("kubeflow.org", "v1", "TFJob", "tfjobs")
    replica_specs_field = "tfReplicaSpecs"
    unit_suffix = "tf-qu"
    roles = ("Chief", "Master", "PS", "Worker", "Evaluator")

    def priority_roles(self, obj: Obj) -> list[str]:
        """Koord-Queue's TFJob Priority(): the first role that is not Master (after Kueue's
        runPolicy.schedulingPolicy.priorityClass, which Koord-Queue never reads)."""
        return [role for role in self.ordered_roles(obj) if role != "Master"]


class PyTorchJob(KubeflowJob):
    """kubeflow.org/v1 PyTorchJob (training-operator), roles Master and Worker."""

    name = "kubeflow.org/pytorchjob"
    workload = WorkloadKind("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
    replica_specs_field = "pytorchReplicaSpecs"
    unit_suffix = "py-qu"
    roles = ("Master", "Worker")

    def priority_roles(self, obj: Obj) -> list[str]:
        """Koord-Queue's PyTorchJob Priority(): the first role that is not Master."""
        return [role for role in self.ordered_roles(obj) if role != "Master"]


class MPIJob(_KueueKubeflowJob):
    """kubeflow.org/v2beta1 MPIJob (mpi-operator), roles Launcher and Worker.

    Priority as Kueue's MPIJob.PriorityClass(): runPolicy.schedulingPolicy.priorityClass,
    then the Launcher's template, then the Worker's (Koord-Queue has no v2beta1 handle).
    """

    name = "kubeflow.org/mpijob"
    workload = WorkloadKind("kubeflow.org", "v2beta1", "MPIJob", "mpijobs")
    replica_specs_field = "mpiReplicaSpecs"
    unit_suffix = "mpi-qu"
    roles = ("Launcher", "Worker")
    strict_roles = False


class XGBoostJob(_KueueKubeflowJob):
    """kubeflow.org/v1 XGBoostJob (training-operator), roles Master and Worker."""

    name = "kubeflow.org/xgboostjob"
    workload = WorkloadKind("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs")
    replica_specs_field = "xgbReplicaSpecs"
    unit_suffix = "xgb-qu"
    roles = ("Master", "Worker")


class PaddleJob(_KueueKubeflowJob):
    """kubeflow.org/v1 PaddleJob (training-operator), roles Master and Worker."""

    name = "kubeflow.org/paddlejob"
    workload = WorkloadKind("kubeflow.org", "v1", "PaddleJob", "paddlejobs")
    replica_specs_field = "paddleReplicaSpecs"
    unit_suffix = "paddle-qu"
    roles = ("Master", "Worker")


class JAXJob(_KueueKubeflowJob):
    """kubeflow.org/v1 JAXJob (training-operator), one role: Worker."""

    name = "kubeflow.org/jaxjob"
    workload = WorkloadKind("kubeflow.org", "v1", "JAXJob", "jaxjobs")
    replica_specs_field = "jaxReplicaSpecs"
    unit_suffix = "jax-qu"
    roles = ("Worker",)
