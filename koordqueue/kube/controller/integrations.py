"""Job integrations other than batch/v1 Job, served through the consumers.py seam (issue 13).

One `IntegrationConsumer` per kind enabled with `--integrations` (PyTorchJob, MPIJob, JobSet,
Pod). The rules and the API calls are the generic IntegrationReconciler's
(kube/integration_reconciler.py), which calls the API inline: here each of its calls runs as
one writer `Write`, keyed by the workload's unit, so the owner thread never waits on the API
and two looks at one workload never cross. The unit phases it writes come back to the owner
and are folded into the engine as the controller's own phase writes are (units.py), so a
finished workload releases its quota at once, not at its unit's watch event.

Two repairs do not wait for a watch event. A refused unit creation is tried again after
CREATE_RETRY's back-off (a Warning event on the workload says why). Every `resync_period` each
kind is listed again and every object reconciled as a listing's object (level-triggered, as
the batch/v1 Job resync of resync.py): a lost event cannot leave a workload without its unit,
an admitted one suspended, or a finished one holding quota.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from koordqueue.domain import names
from koordqueue.domain.backoff import Backoff
from koordqueue.domain.integrations import Integration
from koordqueue.domain.queue_unit import FINISHED_PHASES, Phase
from koordqueue.kube.api import QUEUE_UNIT, ApiError, Kind, ObjectApi
from koordqueue.kube.controller.base import (
    ADDED,
    DELETED,
    MODIFIED,
    NORMAL,
    WARNING,
    ControllerBase,
    log,
    meta,
)
from koordqueue.kube.controller.jobs import STATUS_RETRY, InitialUnitStatus, PriorityClasses
from koordqueue.kube.controller.status import unit_status_patch
from koordqueue.kube.controller.writes import Apis, PatchUnitStatus, Priority, Read, RecordEvent
from koordqueue.kube.integration_reconciler import (
    IntegrationReconciler,
    ReconcileResult,
    enabled_integrations,
    kind_of,
)

BATCH_JOB_NAME: Final = "batch/job"
"""The `--integrations` entry served by jobs.py's JobReconciler, not by this module."""
CREATE_RETRY: Final[Backoff] = STATUS_RETRY
"""When to try a refused unit creation again: the batch/v1 Job path's schedule (1 s,
doubling per refusal in a row, at most 30 s)."""

Written = list[tuple[Phase, dict[str, Any]]]
"""Unit phases a write wrote, with the unit object each write returned."""


@dataclass(slots=True)
class Look:
    """What one write did: the reconcile's result and the unit phases it wrote."""

    result: ReconcileResult | None
    phases: Written = field(default_factory=list)
    resumed: bool = False


@dataclass(frozen=True, slots=True)
class IntegrationWrite:
    """Run one IntegrationReconciler call on the writer's thread (it calls the API inline).

    `call` gets a reconciler whose phase writes are the controller's unit status patch,
    retried; each phase written is kept in the outcome for the owner to fold in.
    """

    consumer: IntegrationConsumer
    call: Callable[[IntegrationReconciler], ReconcileResult | bool | None]
    operation: str
    priority: Priority = Priority.FINISH

    def run(self, apis: Apis) -> Look:
        phases: Written = []

        def write_phase(unit_obj: Mapping[str, Any], phase: Phase, message: str) -> bool:
            m = meta(unit_obj)
            namespace, name = str(m.get("namespace")), str(m.get("name", ""))
            updated: dict[str, Any] | None
            if not unit_obj.get("status"):
                # a new unit's first status, guarded by its created resourceVersion: when the
                # unit's watch event let a round admit it first, the admission stands (409)
                rv = m.get("resourceVersion")
                patch = unit_status_patch(message, phase, initial=True, resource_version=rv)
                updated = InitialUnitStatus(namespace, name, patch, f"{namespace}/{name}").run(apis)
                if updated is None:
                    updated = _phase_if_none(apis, namespace, name, phase)
            else:
                patch = unit_status_patch(message, phase)
                updated = PatchUnitStatus(namespace, name, patch, retry=True).run(apis)
            if updated is None:
                return False
            phases.append((phase, updated))
            return True

        reconciler = self.consumer.reconciler(write_phase)
        outcome = self.call(reconciler)
        if isinstance(outcome, ReconcileResult):
            return Look(outcome, phases, outcome.resumed)
        return Look(None, phases, bool(outcome))


def _phase_if_none(apis: Apis, namespace: str, name: str, phase: Phase) -> dict[str, Any] | None:
    """A new unit's phase when a round's message (no phase) landed before its first status.

    Only the phase is written (the round's message stays), guarded by the version read, so
    an admission that lands meanwhile is never overwritten; None when it already has one.
    """
    for _ in range(3):
        try:
            fresh = apis.api.get(QUEUE_UNIT, name, namespace)
        except ApiError:
            return None
        if fresh is None or (fresh.get("status") or {}).get("phase"):
            return None
        rv = meta(fresh).get("resourceVersion")
        patch = {"metadata": {"resourceVersion": rv}, "status": {"phase": phase.value}}
        try:
            return apis.api.merge_patch(QUEUE_UNIT, name, patch, namespace, "status")
        except ApiError as exc:
            if not exc.conflict:
                log.warning("unit phase not written", unit=f"{namespace}/{name}", error=str(exc))
                return None
    return None


class IntegrationConsumer:
    """A ConsumerReconciler for one integration's workloads (all calls on the owner thread)."""

    def __init__(self, ctl: ControllerBase, integration: Integration) -> None:
        self.ctl = ctl
        self.integration = integration
        self.kind: Kind = kind_of(integration)
        self.priorities = PriorityClasses(ctl.api)
        self.timers: dict[str, float] = {}  # unit namespace/name -> when to look again
        self.refusals: dict[str, int] = {}  # unit key -> creations refused in a row
        self.retries: dict[str, tuple[float, dict[str, Any]]] = {}
        """unit key -> (when, a workload object) to try a refused creation again."""
        self.next_resync = ctl.clock() + ctl.settings.resync_period
        self.resync_touched: set[str] | None = None
        """While the periodic resync's list is read: unit keys whose workloads had watch
        events meanwhile (newer than the listing: the fold leaves them alone)."""
        self.resync_known: frozenset[str] = frozenset()
        """Unit keys of this kind the engine knew when the list was asked for."""

    @property
    def consumer_kind(self) -> str:
        return self.integration.workload.kind

    @property
    def watched(self) -> Kind:
        return self.kind

    def reconciler(
        self, write_phase: Callable[[Mapping[str, Any], Phase, str], bool]
    ) -> IntegrationReconciler:
        """A reconciler for one write (stateless: the API is its state)."""
        settings = self.ctl.settings
        return IntegrationReconciler(
            self.ctl.api,
            self.integration,
            priority_of_class=self.priorities.value,
            running_timeout=settings.job_running_timeout,
            backoff_time=settings.job_backoff_time,
            clock=self.ctl.clock,
            write_phase=write_phase,
        )

    # --- keys and state the owner holds ---------------------------------------------------
    def unit_key(self, obj: Mapping[str, Any]) -> str:
        """namespace/name of the workload's unit (one per group for a pod group)."""
        namespace = meta(obj).get("namespace") or "default"
        return f"{namespace}/{self.integration.unit_name(obj)}"

    def _write_key(self, unit_key: str) -> str:
        """The unit's uid once known (ordered with its admission writes), else its key."""
        return self.ctl.unit_by_key.get(unit_key) or unit_key

    def _in_scheduling_backoff(self, unit_key: str) -> bool:
        uid = self.ctl.unit_by_key.get(unit_key)
        unit = self.ctl.engine.unit(uid) if uid else None
        return unit is not None and unit.phase is Phase.BACKOFF and uid not in self.ctl.timed_out

    # --- the seam -------------------------------------------------------------------------
    def on_event(self, event_type: str | None, obj: dict[str, Any]) -> None:
        if not self.integration.may_be_queued(obj):
            return  # (most pods): no API call, no write
        key = self.unit_key(obj)
        if self.resync_touched is not None:
            self.resync_touched.add(key)
        if event_type != DELETED and self._in_scheduling_backoff(key):
            return  # its SchedFailed back-off runs on the engine's clock

        def call(reconciler: IntegrationReconciler) -> ReconcileResult:
            return reconciler.on_event(event_type, obj)

        self._look(key, event_type, obj, call)

    def _look(
        self,
        key: str,
        event_type: str | None,
        obj: dict[str, Any],
        call: Callable[[IntegrationReconciler], ReconcileResult],
    ) -> None:
        """Submit one look at a workload object, a look that may create its unit."""
        known = key in self.ctl.unit_by_key
        priority = Priority.FINISH if known else Priority.START
        if not known and event_type != DELETED:
            # this write may create the unit: its watch event waits for us (units.py)
            self.ctl.units_being_created.setdefault(key, None)
        write = IntegrationWrite(self, call, f"reconcile {self.kind.plural}", priority)
        self.ctl.writer.submit(
            write, lambda look: self._took_in(key, obj, look), self._write_key(key)
        )

    def resume(self, unit_obj: Mapping[str, Any]) -> IntegrationWrite:
        target = dict(unit_obj)
        return IntegrationWrite(self, lambda r: r.resume(target), f"resume {self.kind.plural}")

    def suspend(self, unit_obj: Mapping[str, Any]) -> IntegrationWrite:
        target = dict(unit_obj)
        return IntegrationWrite(self, lambda r: r.suspend(target), f"suspend {self.kind.plural}")

    def unit_scheduled(self, unit_obj: Mapping[str, Any]) -> None:
        self._sync(dict(unit_obj))

    def fire_timers(self) -> None:
        """Due looks through units, due creation retries, and the periodic resync."""
        now = self.ctl.clock()
        for key in [key for key, at in self.timers.items() if at <= now]:
            self.timers.pop(key, None)
            uid = self.ctl.unit_by_key.get(key)
            unit_obj = self.ctl.unit_objects.get(uid) if uid else None
            if unit_obj is not None:
                self._sync(unit_obj)
        for key in [key for key, (at, _) in self.retries.items() if at <= now]:
            _, obj = self.retries.pop(key)
            self._look(key, None, obj, partial(IntegrationReconciler.look_again, obj=obj))
        if now >= self.next_resync:
            self.start_resync()

    # --- the periodic resync ---------------------------------------------------------------
    def start_resync(self) -> None:
        """List the kind on the writer's pool; fold the listing in when it comes back."""
        if self.resync_touched is not None:
            return  # the last one has not come back yet
        ctl = self.ctl
        self.next_resync = ctl.clock() + ctl.settings.resync_period
        self.resync_touched = set()
        self.resync_known = frozenset(self._unit_keys())
        kind, selector = self.kind, self.integration.resync_selector()

        def listing(api: ObjectApi) -> list[dict[str, Any]]:
            if selector.whole:
                return api.list_objects(kind)
            return api.list_objects(kind, None, selector.labels, selector.fields)

        read = Read(listing, f"resync {kind.plural}")
        ctl.writer.submit(read, self._fold_resync, priority=Priority.BACKGROUND)

    def _finished(self, key: str) -> bool:
        """The unit is Succeed or Failed: nothing left to repair (and no API call per
        finished workload per period)."""
        uid = self.ctl.unit_by_key.get(key)
        unit = self.ctl.engine.unit(uid) if uid else None
        return unit is not None and unit.phase in FINISHED_PHASES

    def _unit_keys(self) -> list[str]:
        """Keys of the engine's units whose consumer is this kind."""
        ctl, kind = self.ctl, self.consumer_kind
        out = []
        for key, uid in ctl.unit_by_key.items():
            unit_obj = ctl.unit_objects.get(uid)
            ref = ((unit_obj or {}).get("spec") or {}).get("consumerRef") or {}
            if ref.get("kind") == kind:
                out.append(key)
        return out

    def _fold_resync(self, listed: list[dict[str, Any]] | None) -> None:
        """Reconcile each listed workload once (one look per unit: a group's first member) as
        a listing's object, then look at the units of this kind whose workload was not
        listed (with a narrow list, the kind's resync_selector, only those not finished).
        Workloads that had events since the list was asked for, or wait for a creation
        retry, are left to those."""
        touched, self.resync_touched = self.resync_touched or set(), None
        known, self.resync_known = self.resync_known, frozenset()
        if listed is None:
            return  # refused (logged): the next period tries again
        seen: set[str] = set()
        for obj in listed:
            if not self.integration.may_be_queued(obj):
                continue
            key = self.unit_key(obj)
            if key in seen:
                continue
            seen.add(key)
            if key not in touched and key not in self.retries and not self._finished(key):
                self.on_event(None, obj)
        narrow = not self.integration.resync_selector().whole
        for key in sorted(known - seen - touched):
            uid = self.ctl.unit_by_key.get(key)
            unit_obj = self.ctl.unit_objects.get(uid) if uid else None
            if unit_obj is None or (narrow and self._finished(key)):
                continue  # (a narrow list leaves finished workloads out: nothing to repair)
            call = partial(
                IntegrationReconciler.release_orphan,
                unit_obj=dict(unit_obj),
                in_scheduling_backoff=self._in_scheduling_backoff(key),
            )
            write = IntegrationWrite(self, call, f"resync {self.kind.plural}")
            self.ctl.writer.submit(write, partial(self._took_in, key, None), self._write_key(key))

    # --- looks at a workload through its unit ---------------------------------------------
    def _sync(self, unit_obj: dict[str, Any]) -> None:
        m = meta(unit_obj)
        key = f"{m.get('namespace') or 'default'}/{m.get('name', '')}"
        backoff = self._in_scheduling_backoff(key)

        def call(reconciler: IntegrationReconciler) -> ReconcileResult:
            members = reconciler.consumer_members(unit_obj)
            if not members:
                return ReconcileResult(skipped="workload gone")
            return reconciler.sync(members, unit_obj, in_scheduling_backoff=backoff)

        write = IntegrationWrite(self, call, f"sync {self.kind.plural}")
        self.ctl.writer.submit(
            write, lambda look: self._took_in(key, None, look), self._write_key(key)
        )

    def _took_in(self, key: str, obj: Mapping[str, Any] | None, look: Look | None) -> None:
        """Fold a write's unit phases into the engine, arm its timer, record its events."""
        ctl = self.ctl
        held = ctl.units_being_created.pop(key, None) if obj is not None else None
        if look is None:
            if held is not None:
                ctl.on_unit(ADDED, held)
            return
        if obj is not None and look.result is not None:
            self._count_refusal(key, obj, look.result)
        for phase, updated in look.phases:
            uid = str(meta(updated).get("uid") or "")
            if phase is Phase.BACKOFF:
                ctl.timed_out.add(uid)  # the running timeout: quota free until re-enqueued
            ctl.on_unit(MODIFIED, updated)
            if phase is Phase.ENQUEUED and uid in ctl.timed_out:
                ctl.engine.defer(uid, 0.0)
                ctl.timed_out.discard(uid)
            ctl.wake.set()
        result = look.result
        if held is not None and not look.phases:
            ctl.on_unit(ADDED, held)  # made by someone else, or no first phase: fold it as is
        if result is None:
            return
        if result.deleted_unit:
            gone = ctl.unit_by_key.get(key)
            if gone:
                ctl.engine.remove_unit(gone)
                ctl.timed_out.discard(gone)
                ctl.wake.set()
            self.timers.pop(key, None)
        action = result.action
        if action is not None:
            if action.recheck_after is None:
                self.timers.pop(key, None)
            else:
                self.timers[key] = ctl.clock() + max(action.recheck_after, 0.0)
        if obj is None:
            return  # (a look through the unit: no workload object in hand for events)
        if result.error is not None:
            error = str(result.error)
            ctl.writer.submit(RecordEvent(obj, WARNING, names.REASON_INVALID_JOB, error))
        if look.resumed and action is not None and action.resume_event:
            ctl.writer.submit(RecordEvent(obj, NORMAL, names.REASON_RESUME, names.MSG_RESUME))

    def _count_refusal(self, key: str, obj: Mapping[str, Any], result: ReconcileResult) -> None:
        """A refused creation (or read): try again after the back-off and say why in an
        event; any other outcome ends the refusals in a row."""
        if not result.refused:
            self.refusals.pop(key, None)
            self.retries.pop(key, None)
            return
        failures = self.refusals.get(key, 0)
        self.refusals[key] = failures + 1
        delay = CREATE_RETRY.delay(failures)
        self.retries[key] = (self.ctl.clock() + delay, dict(obj))
        log.warning(
            "QueueUnit creation refused; trying again after a back-off",
            unit=key,
            kind=self.kind.kind,
            error=result.refused,
            attempt=failures + 1,
            retry_in=delay,
        )
        message = names.MSG_UNIT_CREATE_REFUSED.format(
            unit=key, error=result.refused, attempt=failures + 1, delay=delay
        )
        self.ctl.writer.submit(RecordEvent(obj, WARNING, names.REASON_UNIT_CREATE_REFUSED, message))


def register_integrations(ctl: ControllerBase) -> tuple[Integration, ...]:
    """Serve the `--integrations` kinds this cluster has (a missing CRD: one log line).

    Registers one IntegrationConsumer per enabled kind other than batch/v1 Job under its
    workload kind, so the operator starts one informer for each; without `batch/job` in the
    list the Job reconciler is unregistered. Returns the integrations served.
    """
    enabled = enabled_integrations(ctl.api, ctl.settings.integrations)
    served = {integration.name for integration in enabled}
    if BATCH_JOB_NAME not in served:
        ctl.consumers.pop("Job", None)
    for integration in enabled:
        if integration.name == BATCH_JOB_NAME:
            continue
        consumer = IntegrationConsumer(ctl, integration)
        ctl.consumers[consumer.consumer_kind] = consumer
    log.info("integrations served", integrations=sorted(served))
    return enabled
