"""One reconciler for every job integration (issue 13): a workload object in, API writes out.

Given an `Integration` from koordqueue.domain.integrations, it maps one watched object (or a
pod group: every Pod with the object's group label) to its QueueUnit, creates the unit when
the workload is held and whole, and keeps the workload in line with the unit's phase: resume
when admitted, suspend again on preemption or running timeout, write Running / Succeed /
Failed from the workload's state. The decision is Koord-Queue's job reconcile
(koordqueue.domain.job_extension.reconcile_job), the same one batch/v1 Job gets; only the
reading and the writes come from the integration.

It talks to the cluster through the ObjectApi Protocol only and calls it inline, so it runs
as it is in unit tests against the in-memory API; a controller that runs writes elsewhere
wraps these calls (see docs/integrations.md, "Wiring"). `crd_installed` lets the caller skip
a kind whose CRD is not installed, with one log line, instead of failing its watch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import structlog

from koordqueue.domain.effects import CREATED_STATUS
from koordqueue.domain.integrations import (
    DeleteWorkload,
    Integration,
    InvalidJobError,
    JobStatus,
    Mutation,
    WorkloadPatch,
    parse_integrations,
    queue_unit_for,
)
from koordqueue.domain.integrations.base import PriorityOfClass
from koordqueue.domain.job_extension import JobAction, go_time_string, reconcile_job
from koordqueue.domain.queue_unit import (
    ADMITTED_PHASES,
    FINISHED_PHASES,
    InvalidQueueUnitError,
    Phase,
    queue_unit_from_object,
)
from koordqueue.kube.api import POD, QUEUE_UNIT, ApiError, Kind, ObjectApi, with_retries

log = structlog.get_logger(__name__)

CRD: Final = Kind(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
BUILT_IN_GROUPS: Final = frozenset({"", "batch"})
"""API groups served by every cluster: their kinds need no CRD."""
POD_RUNNING: Final = "Running"

PhaseWriter = Callable[[Mapping[str, Any], Phase, str], bool]
"""Write a unit's phase and message; True when it landed."""


def kind_of(integration: Integration) -> Kind:
    """The REST kind of an integration's objects."""
    w = integration.workload
    return Kind(w.group, w.version, w.plural, w.kind)


def crd_name(kind: Kind) -> str:
    return f"{kind.plural}.{kind.group}"


def crd_installed(api: ObjectApi, kind: Kind) -> bool:
    """Whether the cluster serves `kind` at its version: built in, or its CRD serves it.

    A CRD that cannot be read (no permission, API unreachable) counts as not installed; the
    caller logs that once and serves the other kinds.
    """
    if kind.group in BUILT_IN_GROUPS:
        return True
    try:
        crd = api.get(CRD, crd_name(kind))
    except ApiError as exc:
        log.warning("cannot read CRD", crd=crd_name(kind), error=str(exc))
        return False
    if crd is None:
        return False
    versions = (crd.get("spec") or {}).get("versions") or []
    return any(v.get("name") == kind.version and v.get("served", True) for v in versions)


def enabled_integrations(api: ObjectApi, names: str | Iterable[str]) -> tuple[Integration, ...]:
    """The `--integrations` entries whose kinds this cluster serves; one log line per skip.

    Raises ValueError for a name no integration has (a flag typo is an error, a missing CRD
    is not).
    """
    enabled = []
    for integration in parse_integrations(names):
        kind = kind_of(integration)
        if crd_installed(api, kind):
            enabled.append(integration)
        else:
            log.info(
                "integration skipped: its CRD is not installed",
                integration=integration.name,
                crd=crd_name(kind),
                version=kind.version,
            )
    return tuple(enabled)


def api_time() -> str:
    """The API's RFC 3339 time, to the second."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    """What one look at a workload did (for logs, metrics and tests)."""

    created: Mapping[str, Any] | None = None
    """The unit made for the workload."""
    action: JobAction | None = None
    """The job reconcile's decision for a workload that has a unit."""
    phase: Phase | None = None
    """The unit phase written."""
    resumed: bool = False
    suspended: bool = False
    deleted_unit: bool = False
    skipped: str = ""
    """Why nothing was done ("" when something was looked at)."""
    error: InvalidJobError | None = None
    """The workload cannot be queued (the caller records an InvalidJob event)."""
    refused: str = ""
    """The API refused a write the unit's creation needs (the error): the caller tries again
    after a back-off; "" when nothing was refused (a workload gone is not a refusal)."""


class IntegrationReconciler:
    """Serves one integration's objects; stateless between calls (the API is the state)."""

    def __init__(
        self,
        api: ObjectApi,
        integration: Integration,
        *,
        priority_of_class: PriorityOfClass | None = None,
        running_timeout: float = 0.0,
        backoff_time: float = 0.0,
        clock: Callable[[], float] = time.time,
        go_now: Callable[[], str] = go_time_string,
        api_now: Callable[[], str] = api_time,
        write_phase: PhaseWriter | None = None,
    ) -> None:
        self.api = api
        self.integration = integration
        self.kind = kind_of(integration)
        self.priority_of_class = priority_of_class
        self.running_timeout = running_timeout
        self.backoff_time = backoff_time
        self.clock = clock
        self.go_now = go_now
        self.api_now = api_now
        self.write_phase = write_phase or self._write_phase
        self.last_refusal = ""
        """The error of the last workload write the API refused (not a 404)."""

    # --- reading ----------------------------------------------------------------------------
    def members(self, obj: Mapping[str, Any], deleted: bool = False) -> list[dict[str, Any]]:
        """The workload's objects, by name: `obj` alone, or its group's current members.

        The event's copy of `obj` replaces the listed one (it may be newer); a deleted `obj`
        is left out.
        """
        integration = self.integration
        group = integration.group_name(obj)
        if group is None:
            return [] if deleted else [dict(obj)]
        label = integration.group_label() or ""
        m = _meta(obj)
        namespace = m.get("namespace")
        listed = self.api.list_objects(self.kind, namespace, f"{label}={group}")
        by_name = {
            str(_meta(o).get("name")): o
            for o in listed
            if (_meta(o).get("labels") or {}).get(label) == group
        }
        name = str(m.get("name"))
        if deleted:
            by_name.pop(name, None)
        else:
            by_name[name] = dict(obj)
        return [by_name[key] for key in sorted(by_name)]

    def unit_of(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.api.get(
            QUEUE_UNIT, self.integration.unit_name(obj), _meta(obj).get("namespace")
        )

    @staticmethod
    def owned(unit_obj: Mapping[str, Any], members: Sequence[Mapping[str, Any]]) -> bool:
        uids = {_meta(m).get("uid") for m in members}
        return any(ref.get("uid") in uids for ref in _meta(unit_obj).get("ownerReferences") or [])

    def unit_body(self, members: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The QueueUnit for the workload (raises InvalidJobError)."""
        return queue_unit_for(self.integration, members, self.priority_of_class)

    # --- events -----------------------------------------------------------------------------
    def on_event(self, event_type: str | None, obj: Mapping[str, Any]) -> ReconcileResult:
        """A watch event of one object (None: an object of a listing)."""
        if not self.integration.may_be_queued(obj):
            return ReconcileResult(skipped="not the queue's")
        if event_type == "DELETED":
            return self._deleted(obj)
        try:
            members = self.members(obj)
            unit_obj = self.unit_of(obj)
        except ApiError as exc:  # (a raise would leave the caller's hold on the unit key)
            log.warning("could not read the workload's unit", kind=self.kind.kind, error=str(exc))
            return ReconcileResult(skipped="read refused", refused=str(exc) or "refused")
        if unit_obj is None:
            return self.create_unit(members)
        if not self.owned(unit_obj, members):
            return ReconcileResult(skipped="unit of the same name belongs to another object")
        return self.sync(members, unit_obj)

    def _deleted(self, obj: Mapping[str, Any]) -> ReconcileResult:
        unit_obj = self.unit_of(obj)
        if unit_obj is None or not self.owned(unit_obj, [obj]):
            return ReconcileResult(skipped="no unit of its own")
        remaining = self.members(obj, deleted=True)
        if remaining and self.owned(unit_obj, remaining):
            return self.sync(remaining, unit_obj)  # a group that still has pods
        m = _meta(unit_obj)
        try:
            gone = self.api.delete(QUEUE_UNIT, m.get("name", ""), m.get("namespace"), m.get("uid"))
        except ApiError as exc:
            log.warning("could not delete QueueUnit", unit=m.get("name"), error=str(exc))
            return ReconcileResult(skipped="unit deletion refused")
        return ReconcileResult(deleted_unit=gone)

    # --- a unit for a new workload ----------------------------------------------------------
    def create_unit(self, members: Sequence[Mapping[str, Any]]) -> ReconcileResult:
        """Mark the workload enqueued and create its unit (Enqueued), when it is ours."""
        integration = self.integration
        if not members:
            return ReconcileResult(skipped="no objects")
        if not any(integration.is_managed(m) for m in members):
            return ReconcileResult(skipped="not managed")
        try:
            expected = integration.expected_members(members)
            if len(members) < expected:
                return ReconcileResult(skipped=f"waiting for {expected - len(members)} more")
            body = self.unit_body(members)
        except InvalidJobError as exc:
            log.warning("workload cannot be queued", error=str(exc))
            return ReconcileResult(skipped="invalid", error=exc)
        status = integration.status(members, bool(integration.pod_running(members)))
        if status not in (JobStatus.CREATED, JobStatus.QUEUING):
            return ReconcileResult(skipped=f"already {status.value}")
        go_now, api_now = self.go_now(), self.api_now()
        for member in members:
            for patch in integration.enqueue(member, go_now, api_now):
                self.last_refusal = ""
                written = self._apply(member, patch)
                if written is None:
                    return ReconcileResult(skipped="enqueue refused", refused=self.last_refusal)
                if patch.subresource is None and len(members) == 1:
                    marked = dict(_meta(written).get("annotations") or {})
                    body["metadata"]["annotations"] = marked
        namespace = body["metadata"]["namespace"]
        try:
            created = with_retries(  # (409 is AlreadyExists here: asking again cannot help)
                lambda: self.api.create(QUEUE_UNIT, body, namespace), retry_conflicts=False
            )
        except ApiError as exc:
            if exc.conflict:
                return ReconcileResult(skipped="unit exists")
            log.warning("could not create QueueUnit", unit=body["metadata"]["name"], error=str(exc))
            return ReconcileResult(skipped="unit creation refused", refused=str(exc) or "refused")
        self.write_phase(created, CREATED_STATUS.phase, CREATED_STATUS.message)
        log.info(
            "queue unit created",
            unit=f"{namespace}/{body['metadata']['name']}",
            kind=self.kind.kind,
            resource=body["spec"]["resource"],
        )
        return ReconcileResult(created=created, phase=CREATED_STATUS.phase)

    # --- keeping the workload in line with its unit -----------------------------------------
    def _pods_running(self, members: Sequence[Mapping[str, Any]], phase: Phase) -> bool:
        running = self.integration.pod_running(members)
        if running is not None:
            return running
        if phase is Phase.RUNNING or phase in FINISHED_PHASES:
            return False
        selector = self.integration.pod_selector(members[0])
        try:
            pods = self.api.list_objects(POD, _meta(members[0]).get("namespace"), selector)
        except ApiError as exc:
            log.warning("could not list pods", error=str(exc))
            return False
        return any((pod.get("status") or {}).get("phase") == POD_RUNNING for pod in pods)

    def sync(
        self,
        members: Sequence[Mapping[str, Any]],
        unit_obj: Mapping[str, Any],
        in_scheduling_backoff: bool = False,
    ) -> ReconcileResult:
        """The job reconcile for a workload and its unit, and its writes.

        `in_scheduling_backoff`: the unit waits out a SchedFailed back-off on the admission
        engine's clock, which is not this reconciler's to end (the caller knows; jobs.py
        keeps the same rule).
        """
        try:
            unit = queue_unit_from_object(unit_obj)
        except InvalidQueueUnitError as exc:
            return ReconcileResult(skipped=f"invalid unit: {exc}")
        if unit.phase is Phase.BACKOFF and in_scheduling_backoff:
            return ReconcileResult(skipped="scheduling back-off")
        integration = self.integration
        status = integration.status(members, self._pods_running(members, unit.phase))
        updated = _epoch((unit_obj.get("status") or {}).get("lastUpdateTime"))
        since = self.clock() - updated if updated is not None else 0.0
        action = reconcile_job(status, unit.phase, since, self.running_timeout, self.backoff_time)
        if action.phase is not None and not self.write_phase(
            unit_obj, action.phase, action.message
        ):
            return ReconcileResult(action=action, skipped="phase write refused")
        suspended = any(integration.is_suspended(m) for m in members)
        resumed = stopped = False
        if action.suspend and not all(integration.is_suspended(m) for m in members):
            stopped = self._each(members, integration.suspend)
        elif action.resume and suspended and unit.phase in ADMITTED_PHASES:
            go_now, api_now = self.go_now(), self.api_now()
            resumed = self._each(members, lambda m: integration.resume(m, go_now, api_now))
        return ReconcileResult(
            action=action, phase=action.phase, resumed=resumed, suspended=stopped
        )

    # --- looks again: a retry, the periodic resync ------------------------------------------
    def look_again(self, obj: Mapping[str, Any]) -> ReconcileResult:
        """`on_event` for the object as the API has it now (a retry after a refused write).

        A group's member that is gone hands over to a remaining member; a workload that is
        gone is nothing to do.
        """
        m = _meta(obj)
        try:
            fresh = self.api.get(self.kind, str(m.get("name", "")), m.get("namespace"))
            if fresh is None and self.integration.group_name(obj) is not None:
                remaining = self.members(obj, deleted=True)
                fresh = remaining[0] if remaining else None
        except ApiError as exc:
            return ReconcileResult(skipped="read refused", refused=str(exc) or "refused")
        if fresh is None:
            return ReconcileResult(skipped="workload gone")
        return self.on_event(None, fresh)

    def release_orphan(
        self, unit_obj: Mapping[str, Any], in_scheduling_backoff: bool = False
    ) -> ReconcileResult:
        """The periodic resync's look at a unit whose workload was not listed.

        The workload is read again: still there, it is synced as usual; gone, the unit is
        deleted (guarded by its uid) if it is one this integration made (owned by an object
        of its kind): its DELETED event was lost and no garbage collector removed the unit.
        """
        try:
            members = self.consumer_members(unit_obj)
        except ApiError as exc:
            return ReconcileResult(skipped="read refused", refused=str(exc) or "refused")
        if members:
            return self.sync(members, unit_obj, in_scheduling_backoff)
        m = _meta(unit_obj)
        ours = any(
            ref.get("kind") == self.kind.kind for ref in m.get("ownerReferences") or []
        )
        if not ours:
            return ReconcileResult(skipped="not made by this integration")
        try:
            gone = self.api.delete(QUEUE_UNIT, m.get("name", ""), m.get("namespace"), m.get("uid"))
        except ApiError as exc:
            log.warning("could not delete QueueUnit", unit=m.get("name"), error=str(exc))
            return ReconcileResult(skipped="unit deletion refused")
        log.info("queue unit of a gone workload deleted", unit=m.get("name"), kind=self.kind.kind)
        return ReconcileResult(deleted_unit=gone)

    # --- the seam the controller's admission uses -------------------------------------------
    def consumer_members(self, unit_obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The workload objects a unit's consumerRef names (a group's members for a group)."""
        ref = (unit_obj.get("spec") or {}).get("consumerRef") or {}
        namespace = ref.get("namespace") or _meta(unit_obj).get("namespace")
        name = str(ref.get("name") or "")
        label = self.integration.group_label()
        if label is not None and not ref.get("uid"):
            listed = self.api.list_objects(self.kind, namespace, f"{label}={name}")
            chosen = [o for o in listed if (_meta(o).get("labels") or {}).get(label) == name]
            return sorted(chosen, key=lambda o: str(_meta(o).get("name")))
        obj = self.api.get(self.kind, name, namespace)
        return [] if obj is None else [obj]

    def resume(self, unit_obj: Mapping[str, Any]) -> bool:
        """Let the unit's workload run (the unit was admitted); True if anything was written."""
        go_now, api_now = self.go_now(), self.api_now()
        members = self.consumer_members(unit_obj)
        return self._each(members, lambda m: self.integration.resume(m, go_now, api_now))

    def suspend(self, unit_obj: Mapping[str, Any]) -> bool:
        """Hold the unit's workload again (preempted); True if anything was written."""
        return self._each(self.consumer_members(unit_obj), self.integration.suspend)

    # --- writes -----------------------------------------------------------------------------
    def _each(
        self,
        members: Sequence[Mapping[str, Any]],
        mutations_of: Callable[[Mapping[str, Any]], tuple[Mutation, ...]],
    ) -> bool:
        wrote = False
        for member in members:
            for mutation in mutations_of(member):
                if self._apply(member, mutation) is not None:
                    wrote = True
        return wrote

    def _apply(self, obj: Mapping[str, Any], mutation: Mutation) -> dict[str, Any] | None:
        """Run one write on `obj`: its outcome, or None when refused (logged) or gone."""
        m = _meta(obj)
        name, namespace = str(m.get("name", "")), m.get("namespace")
        try:
            if isinstance(mutation, DeleteWorkload):
                gone = self.api.delete(self.kind, name, namespace, m.get("uid"))
                return {"deleted": gone}
            patch: WorkloadPatch = mutation
            guarded = bool((patch.body.get("metadata") or {}).get("resourceVersion"))
            return with_retries(
                lambda: self.api.merge_patch(
                    self.kind, name, dict(patch.body), namespace, patch.subresource
                ),
                retry_conflicts=not guarded,  # a guarded patch must be decided again
            )
        except ApiError as exc:
            if not exc.not_found:
                self.last_refusal = str(exc) or "refused"
                log.warning(
                    "workload write refused",
                    kind=self.kind.kind,
                    object=f"{namespace}/{name}",
                    error=str(exc),
                )
            return None

    def _write_phase(self, unit_obj: Mapping[str, Any], phase: Phase, message: str) -> bool:
        """Default phase write: status phase, message, lastUpdateTime (as the controller's
        status patch; a phase that holds no quota also clears `admissions`)."""
        status: dict[str, Any] = {
            "phase": phase.value,
            "message": message,
            "lastUpdateTime": self.api_now(),
        }
        if phase not in ADMITTED_PHASES:
            status["admissions"] = []
        m = _meta(unit_obj)
        try:
            self.api.merge_patch(
                QUEUE_UNIT, str(m.get("name", "")), {"status": status}, m.get("namespace"), "status"
            )
        except ApiError as exc:
            log.warning("unit phase not written", unit=m.get("name"), error=str(exc))
            return False
        return True
