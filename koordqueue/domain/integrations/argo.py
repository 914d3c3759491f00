"""Argo Workflow (argoproj.io/v1alpha1), after Koord-Queue's argoworkflow.go.

A Workflow's pods are not known before it runs (its steps make them), so its demand is what
the annotation koord-queue/min-resources says (a resource list, YAML or JSON): one pod set
`default` of one pod asking for it; no annotation, no demand. spec.suspend holds and releases
it (a running Suspend node also reads as held). The queue marks it with Koord-Queue's
annotations and an `Enqueued` status condition (Argo's Workflow has no status subresource: the
mark is one patch of the object). Its state: not enqueued, Created; held, Queuing; then the
phase: Succeeded; Failed or Error; none yet or Pending, Pending; anything else Running.
Priority: spec.priority as the value, else the entry template's priorityClassName. The unit's
suffix is `wf-qu` (Koord-Queue's is "": a Workflow's unit would take the name of a batch/v1
Job's of the same name).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import yaml

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
)
from koordqueue.domain.names import (
    ARGO_ENQUEUED_CONDITION,
    ARGO_MIN_RESOURCES_ANNOTATION,
    ARGO_SUSPEND_TEMPLATE,
    JOB_ENQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
    MSG_ARGO_ENQUEUED,
)
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.resources import Resources

POD_SET: Final = "default"
SUSPEND_NODE: Final = "Suspend"
NODE_RUNNING: Final = "Running"
SUCCEEDED_PHASES: Final = frozenset({"Succeeded"})
FAILED_PHASES: Final = frozenset({"Failed", "Error"})
NOT_STARTED_PHASES: Final = frozenset({None, "", "Pending"})
"""Koord-Queue reads these as Running too; here a released Workflow runs once Argo says so
(until then it is Pending: preemptible, and under the running timeout)."""


def min_resources(obj: Obj) -> Resources:
    """The annotation's resource list (empty without it).

    Raises InvalidJobError when it is neither a JSON nor a YAML map of quantities: Koord-Queue
    logs that and asks for nothing; a unit asking for nothing would run it outside its quota.
    """
    raw = annotations_of(obj).get(ARGO_MIN_RESOURCES_ANNOTATION)
    if not raw:
        return Resources()
    field = f"metadata.annotations[{ARGO_MIN_RESOURCES_ANNOTATION}]"
    key = object_key(obj)
    text = str(raw).strip()
    try:
        parsed = json.loads(text) if text.startswith("{") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        reason = f"not a JSON or YAML resource list ({str(exc).splitlines()[0]})"
        raise InvalidJobError(key, field, reason, "Workflow") from exc
    if not isinstance(parsed, dict):
        raise InvalidJobError(key, field, f"{text!r}: not a map of resources", "Workflow")
    try:
        return Resources.parse({str(k): str(v) for k, v in parsed.items()}, field).nonzero()
    except InvalidQuantityError as exc:
        raise InvalidJobError(key, exc.field, f"{exc.value!r}: {exc.reason}", "Workflow") from exc


def _maps(value: Any) -> list[Mapping[str, Any]]:
    """The mappings of a list (or a map's values): a Workflow's spec and status are kept
    whole by its CRD, unchecked, so anything else in them is passed over, never a crash."""
    items = value.values() if isinstance(value, Mapping) else value
    return [i for i in items if isinstance(i, Mapping)] if isinstance(items, Iterable) else []


def _status(obj: Obj) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def enqueued(obj: Obj) -> bool:
    """The first `Enqueued` condition says True (Koord-Queue's checkWfConditions)."""
    for condition in _maps(_status(obj).get("conditions") or []):
        if condition.get("type") == ARGO_ENQUEUED_CONDITION:
            return bool(condition.get("status") == "True")
    return False


class ArgoWorkflow(Integration):
    name = "argoproj.io/workflow"
    workload = WorkloadKind("argoproj.io", "v1alpha1", "Workflow", "workflows")
    unit_suffix = "wf-qu"

    @staticmethod
    def _spec(obj: Obj) -> Mapping[str, Any]:
        spec = obj.get("spec")
        return spec if isinstance(spec, Mapping) else {}

    def pod_sets(self, members: Sequence[Obj]) -> tuple[PodSet, ...]:
        request = min_resources(members[0])
        quantities = request.to_quantities()
        container = {
            "name": POD_SET,
            "resources": {"requests": quantities, "limits": dict(quantities)},
        }
        return (PodSet(POD_SET, 1, {"spec": {"containers": [container]}}, request),)

    def _entry_template(self, obj: Obj) -> Mapping[str, Any] | None:
        entry = self._spec(obj).get("entrypoint")
        if not entry:
            return None
        for template in _maps(self._spec(obj).get("templates") or []):
            if template.get("name") == entry:
                return template
        return None

    def priority_class_name(self, obj: Obj) -> str:
        if self._spec(obj).get("priority") is not None:
            return ""  # spec.priority is the value itself
        entry = self._entry_template(obj)
        return str((entry or {}).get("priorityClassName") or "")

    def template_priority(self, obj: Obj) -> int | None:
        value = self._spec(obj).get("priority")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            reason = f"{value!r}: must be a whole number"
            raise InvalidJobError(object_key(obj), "spec.priority", reason, "Workflow")
        return value

    def is_suspended(self, obj: Obj) -> bool:
        for node in _maps(_status(obj).get("nodes") or {}):
            if node.get("type") == SUSPEND_NODE and node.get("phase") == NODE_RUNNING:
                return True
        return self._spec(obj).get("suspend") is True

    def is_managed(self, obj: Obj) -> bool:
        """Koord-Queue's rule: a suspend template named koord-queue-suspend (in the spec or
        the stored templates); ours also: enqueued before, or created held and not started."""
        status = _status(obj)
        templates = [
            *_maps(self._spec(obj).get("templates") or []),
            *_maps(status.get("storedTemplates") or {}),
        ]
        for template in templates:
            named = template.get("name") == ARGO_SUSPEND_TEMPLATE
            if named and template.get("suspend") is not None:
                return True
        if annotations_of(obj).get(JOB_HAS_ENQUEUED_ANNOTATION) or enqueued(obj):
            return True
        return not status.get("phase") and self._spec(obj).get("suspend") is True

    def enqueue(
        self, obj: Obj, now: str, now_rfc3339: str | None = None
    ) -> tuple[WorkloadPatch, ...]:
        """The annotations and the Enqueued condition, in one patch of the object."""
        if enqueued(obj) and annotations_of(obj).get(JOB_HAS_ENQUEUED_ANNOTATION):
            return ()
        conditions = [
            dict(c)
            for c in _maps(_status(obj).get("conditions") or [])
            if c.get("type") != ARGO_ENQUEUED_CONDITION
        ]
        message = MSG_ARGO_ENQUEUED.format(name=meta(obj).get("name", ""))
        conditions.append({"type": ARGO_ENQUEUED_CONDITION, "status": "True", "message": message})
        notes = {JOB_HAS_ENQUEUED_ANNOTATION: "true", JOB_ENQUEUE_TIMESTAMP_ANNOTATION: now}
        return (
            WorkloadPatch(
                {"metadata": {"annotations": notes}, "status": {"conditions": conditions}}
            ),
        )

    def resume(self, obj: Obj, now: str, now_rfc3339: str | None = None) -> tuple[Mutation, ...]:
        if not self.is_suspended(obj):
            return ()
        return (WorkloadPatch({"spec": {"suspend": False}}),)

    def suspend(self, obj: Obj) -> tuple[Mutation, ...]:
        if self.is_suspended(obj):
            return ()
        return (WorkloadPatch({"spec": {"suspend": True}}),)

    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        obj = members[0]
        if not enqueued(obj):
            return JobStatus.CREATED
        if self.is_suspended(obj):
            return JobStatus.QUEUING
        phase = _status(obj).get("phase")
        if phase in SUCCEEDED_PHASES:
            return JobStatus.SUCCEEDED
        if phase in FAILED_PHASES:
            return JobStatus.FAILED
        if phase in NOT_STARTED_PHASES:
            return JobStatus.PENDING  # released, not yet started by Argo's controller
        return JobStatus.RUNNING
