"""What a workload framework must say for the queue to serve it (issue 13).

A job kind (batch/v1 Job, PyTorchJob, MPIJob, JobSet, plain Pods) is queued through one
`Integration`: how to read its pod sets (counts and per-pod requests), its priority, whether
the queue holds it (suspended), the writes that hold and release it, and where it stands
(running, finished, failed). Everything here is pure: objects are the API's JSON as dicts and
writes are returned as data, so the kube edge (koordqueue/kube/controller/workloads.py), the
simulator and the tests all run the same rules.

A workload is usually one object. A pod group is several (every Pod with the same group
label); methods that read a workload's state therefore take its `members`, one object for
every kind but Pod.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from koordqueue.domain.names import (
    JOB_ENQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
    KOORD_QUEUE_GROUP,
    KOORD_QUEUE_VERSION,
    LAST_APPLIED_ANNOTATION,
)
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.resources import Resources

if TYPE_CHECKING:
    from koordqueue.domain.reclaimable import ReclaimablePod

Obj = Mapping[str, Any]


class InvalidJobError(ValueError):
    """A workload whose pod template cannot be turned into a resource request."""

    def __init__(self, key: str, field: str, reason: str, kind: str = "Job") -> None:
        self.key = key
        self.field = field
        self.reason = reason
        self.kind = kind
        super().__init__(f"{kind} {key}: {field}: {reason}")


class JobStatus(StrEnum):
    """Where a workload stands for the job extension (Koord-Queue framework.JobStatus)."""

    CREATED = "Created"
    QUEUING = "Queuing"
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    """Group, version, kind and plural of a framework's objects (REST paths, consumerRef)."""

    group: str
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


@dataclass(frozen=True, slots=True)
class PodSet:
    """Pods of one role: how many, their template, and what each one requests."""

    name: str
    count: int
    template: Mapping[str, Any]
    request: Resources = field(default_factory=Resources)

    def to_object(self) -> dict[str, Any]:
        """The QueueUnit's spec.podSet entry (Kueue's PodSet: name, count, template)."""
        return {"name": self.name, "count": self.count, "template": dict(self.template)}


@dataclass(frozen=True, slots=True)
class WorkloadPatch:
    """A JSON merge patch of one workload object (of its `subresource` when given)."""

    body: Mapping[str, Any]
    subresource: str | None = None


@dataclass(frozen=True, slots=True)
class ListSelector:
    """What a list of a kind asks the API server to filter on (None: nothing)."""

    labels: str | None = None
    fields: str | None = None

    @property
    def whole(self) -> bool:
        """The list holds every object of the kind."""
        return self.labels is None and self.fields is None


EVERY_OBJECT = ListSelector()


@dataclass(frozen=True, slots=True)
class Reference:
    """An object besides the workload that its pod sets are read from (a TrainJob's training
    runtime). `namespace` None: cluster-scoped. The kube edge reads it and hands it back
    through `Integration.resolved`, so the rules stay pure."""

    kind: WorkloadKind
    name: str
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteWorkload:
    """Delete the object (a started Pod cannot be gated again: stopping it means deleting it)."""


Mutation = WorkloadPatch | DeleteWorkload


def meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def annotations_of(obj: Obj) -> Mapping[str, Any]:
    return meta(obj).get("annotations") or {}


def object_key(obj: Obj) -> str:
    m = meta(obj)
    return f"{m.get('namespace', 'default')}/{m.get('name', '?')}"


def condition_true(obj: Obj, kind: str) -> bool:
    """Whether status.conditions holds `kind` with status "True"."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return True
    return False


def _requests(container: Mapping[str, Any], path: str) -> Resources:
    resources = container.get("resources") or {}
    # Kubernetes defaults requests to limits when only limits are given.
    limits = Resources.parse(resources.get("limits"), f"{path}.resources.limits")
    requests = Resources.parse(resources.get("requests"), f"{path}.resources.requests")
    return Resources({**limits.as_dict(), **requests.as_dict()})


def pod_requests(
    pod_spec: Mapping[str, Any],
    key: str = "?",
    path: str = "spec.template.spec",
    kind: str = "Job",
) -> Resources:
    """Effective pod request: max(sum of containers, each init container) + overhead.

    Restartable (sidecar) init containers run alongside the app and are summed as well.
    `path` is where the pod spec sits in the object, for the error's field name.
    """
    try:
        total = Resources()
        for i, container in enumerate(pod_spec.get("containers") or []):
            total = total + _requests(container, f"{path}.containers[{i}]")
        init_peak = Resources()
        sidecars = Resources()
        for i, container in enumerate(pod_spec.get("initContainers") or []):
            request = _requests(container, f"{path}.initContainers[{i}]")
            if container.get("restartPolicy") == "Always":
                sidecars = sidecars + request
            else:
                init_peak = init_peak.max(sidecars + request)
        effective = (total + sidecars).max(init_peak)
        overhead = Resources.parse(pod_spec.get("overhead"), f"{path}.overhead")
        return (effective + overhead).nonzero()
    except InvalidQuantityError as exc:
        raise InvalidJobError(key, exc.field, f"{exc.value!r}: {exc.reason}", kind) from exc


def pod_count(
    value: Any, default: int | None, key: str, field: str, kind: str
) -> int:
    """A replica or instance count as a pod set's count: `default` when absent (None: the
    field is required), else a whole number >= 0.

    Raises InvalidJobError naming the field: a unit asking for a guessed count would hold the
    wrong quota, so a bad count is refused, never rounded or clamped.
    """
    if value is None:
        if default is None:
            raise InvalidJobError(key, field, "must be set", kind)
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJobError(key, field, f"{value!r}: must be a whole number", kind)
    if value < 0:
        raise InvalidJobError(key, field, f"{value}: must not be negative", kind)
    return value


PriorityOfClass = Callable[[str], int | None]
"""A PriorityClass's value by name (None: no such class)."""


class Integration(ABC):
    """One framework's rules. Subclasses are stateless; one instance serves every object."""

    name: ClassVar[str]
    """The `--integrations` entry (Kueue's names: batch/job, kubeflow.org/pytorchjob, ...)."""
    workload: ClassVar[WorkloadKind]
    unit_suffix: ClassVar[str] = ""
    """Appended to the unit's name ("-" + suffix), as Koord-Queue's QueueUnitSuffix() does:
    units of different kinds with the same name in one namespace do not collide."""

    # --- identity -------------------------------------------------------------------------
    def group_name(self, obj: Obj) -> str | None:
        """The group an object belongs to when several objects form one workload, else None."""
        return None

    def group_label(self) -> str | None:
        """The label that names an object's group (None: every object is its own workload)."""
        return None

    def unit_name(self, obj: Obj) -> str:
        """Name of the workload's QueueUnit (in the object's namespace)."""
        base = self.consumer_name(obj)
        return f"{base}-{self.unit_suffix}" if self.unit_suffix else base

    def expected_members(self, members: Sequence[Obj]) -> int:
        """How many objects the workload has when whole; its unit waits for that many."""
        return 1

    # --- what it asks for -----------------------------------------------------------------
    @abstractmethod
    def pod_sets(self, members: Sequence[Obj]) -> tuple[PodSet, ...]:
        """Its pods by role, with counts and per-pod requests (raises InvalidJobError)."""

    def references(self, obj: Obj) -> tuple[Reference, ...]:
        """Objects the pod sets are read from besides the workload (none for most kinds)."""
        return ()

    def resolved(self, found: Mapping[Reference, Obj | None]) -> Integration:
        """This integration reading its workload's `references` as `found` (None: the object
        is not there); the one whose pod sets, resource and priority make the unit."""
        return self

    def resource(self, members: Sequence[Obj]) -> Resources:
        """The unit's spec.resource: every pod set's count × per-pod request."""
        total = Resources()
        for pod_set in self.pod_sets(members):
            total = total + pod_set.request * pod_set.count
        return total

    @abstractmethod
    def priority_class_name(self, obj: Obj) -> str:
        """The priority class the workload's pods ask for ("" when none)."""

    @abstractmethod
    def template_priority(self, obj: Obj) -> int | None:
        """The pods' own spec.priority, used when the class does not exist."""

    def priority(self, obj: Obj, priority_of_class: PriorityOfClass | None = None) -> int:
        """The class's value when the class exists, else the template's priority, else 0."""
        class_name = self.priority_class_name(obj)
        value = priority_of_class(class_name) if class_name and priority_of_class else None
        if value is None:
            value = self.template_priority(obj)
        return int(value or 0)

    # --- holding and releasing it ---------------------------------------------------------
    @abstractmethod
    def is_suspended(self, obj: Obj) -> bool:
        """The queue holds this object (it runs nothing)."""

    @abstractmethod
    def is_managed(self, obj: Obj) -> bool:
        """The queue owns this object: enqueued before, or created held and never started."""

    def may_be_queued(self, obj: Obj) -> bool:
        """False when the object is surely none of the queue's business (no unit, never
        will be): lets a reconciler of a busy kind (Pod) skip it without an API call."""
        return True

    def resync_selector(self) -> ListSelector:
        """What the periodic resync lists of the kind: every object, unless the kind is too
        busy to list whole (Pod). Objects a narrower list leaves out are looked at through
        their units (a unit not finished whose workload was not listed)."""
        return EVERY_OBJECT

    def enqueue(
        self, obj: Obj, now: str, now_rfc3339: str | None = None
    ) -> tuple[WorkloadPatch, ...]:
        """Mark the object enqueued (Koord-Queue's job annotations); nothing when it is.

        `now`: Go's time string (what the reference writes into annotations); `now_rfc3339`:
        the API's time, for typed fields such as a condition's lastTransitionTime.
        """
        if annotations_of(obj).get(JOB_HAS_ENQUEUED_ANNOTATION):
            return ()
        return (
            WorkloadPatch(
                {
                    "metadata": {
                        "annotations": {
                            JOB_HAS_ENQUEUED_ANNOTATION: "true",
                            JOB_ENQUEUE_TIMESTAMP_ANNOTATION: now,
                        }
                    }
                }
            ),
        )

    @abstractmethod
    def resume(self, obj: Obj, now: str, now_rfc3339: str | None = None) -> tuple[Mutation, ...]:
        """The writes that let the object run; nothing when it already runs."""

    @abstractmethod
    def suspend(self, obj: Obj) -> tuple[Mutation, ...]:
        """The writes that hold the object again; nothing when it is held."""

    def resume_unread(self, now: str) -> tuple[Mutation, ...] | None:
        """The resume writes when they need no read of the object first (None: they do).

        A kind whose release is one fixed patch (batch/v1 Job) is resumed on admission
        without a GET; the others are read, as their writes depend on the object."""
        return None

    def suspend_unread(self) -> tuple[Mutation, ...] | None:
        """The suspend writes when they need no read of the object first (None: they do)."""
        return None

    # --- where it stands ------------------------------------------------------------------
    def reclaimable_pods(self, members: Sequence[Obj]) -> tuple[ReclaimablePod, ...]:
        """Pods that finished and are no longer needed, per pod set (Kueue's
        ReclaimablePods): their share goes back to the quota. None unless the kind says."""
        return ()

    def pod_running(self, members: Sequence[Obj]) -> bool | None:
        """Whether one of its pods runs, when its status says; None: the caller lists pods."""
        return False

    def pod_selector(self, obj: Obj) -> str | None:
        """Label selector of its pods, for when `pod_running` cannot tell."""
        return None

    @abstractmethod
    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        """Where the workload stands (finished and failed first, then running, pending...)."""

    # --- the unit -------------------------------------------------------------------------
    def copied_metadata(self, members: Sequence[Obj]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Labels and annotations the unit copies verbatim (the first member's), but kubectl
        apply's copy of the workload's manifest: it describes the workload, not the unit (a
        `kubectl apply` of the unit would diff against it), and can be as large as the
        workload itself."""
        first = meta(members[0])
        notes = {
            k: v for k, v in (first.get("annotations") or {}).items()
            if k != LAST_APPLIED_ANNOTATION
        }
        return dict(first.get("labels") or {}), notes

    def admits_late_members(self, members: Sequence[Obj]) -> bool:
        """A held member that comes while the workload is admitted is let go (a serving pod
        group's replaced pod); False: a member is released only with its unit's admission."""
        return False

    def owner_uids(self, members: Sequence[Obj]) -> set[str]:
        """uids whose presence among a unit's owners makes it this workload's unit."""
        return {str(meta(m).get("uid")) for m in members if meta(m).get("uid")}

    def consumer_name(self, obj: Obj) -> str:
        """spec.consumerRef.name: the object's name, or the group's for a group."""
        return self.group_name(obj) or str(meta(obj).get("name", ""))

    def owner_references(self, members: Sequence[Obj]) -> list[dict[str, Any]]:
        """The unit is owned by its object (controller), or by every member of a group."""
        single = len(members) == 1 and self.group_name(members[0]) is None
        refs = []
        for member in members:
            m = meta(member)
            ref: dict[str, Any] = {
                "apiVersion": self.workload.api_version,
                "kind": self.workload.kind,
                "name": m.get("name"),
                "uid": m.get("uid"),
            }
            if single:
                ref["controller"] = True
                ref["blockOwnerDeletion"] = True
            refs.append(ref)
        return refs


def queue_unit_for(
    integration: Integration,
    members: Sequence[Obj],
    priority_of_class: PriorityOfClass | None = None,
) -> dict[str, Any]:
    """The QueueUnit object for a held workload: its name, owner refs, copied metadata.

    Raises InvalidJobError when a pod template's requests cannot be parsed.
    """
    first = members[0]
    m = meta(first)
    namespace = m.get("namespace", "default")
    name = integration.unit_name(first)
    class_name = integration.priority_class_name(first)
    resource = integration.resource(members)
    pod_sets = integration.pod_sets(members)
    single = integration.group_name(first) is None
    unit_spec: dict[str, Any] = {
        "consumerRef": {
            "apiVersion": integration.workload.api_version,
            "kind": integration.workload.kind,
            "name": integration.consumer_name(first),
            "namespace": namespace,
            **({"uid": m.get("uid")} if single else {}),
        },
        "priority": integration.priority(first, priority_of_class),
        "queue": "",
        "resource": resource.to_quantities(),
        "podSet": [pod_set.to_object() for pod_set in pod_sets],
    }
    if class_name:
        unit_spec["priorityClassName"] = class_name
    labels, copied = integration.copied_metadata(members)
    return {
        "apiVersion": f"{KOORD_QUEUE_GROUP}/{KOORD_QUEUE_VERSION}",
        "kind": "QueueUnit",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": copied,
            "ownerReferences": integration.owner_references(members),
        },
        "spec": unit_spec,
    }
