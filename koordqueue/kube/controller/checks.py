"""Admission checks on the live cluster (issue 35 point 5; the rules: domain/admission_checks.py).

A round's admission on a queue with matching checks is written as Reserved with each check
Pending and the workload left suspended (`reserve`). Each later version of a Reserved unit,
and each change of its Queue's checks, is evaluated here: all Ready writes Dequeued (or
SchedReady in strict dequeue mode) and resumes the workload; a Retry or Rejected check
releases the reservation and backs the unit off until status.requeueState.requeueAt, bare
units as well as workloads' (Koord-Queue keeps status.admissions and re-queues only
Job-owned units). Every write is guarded by the resourceVersion evaluated, so a check's
controller writing at the same time is never overwritten: the conflict's newer version is
evaluated instead.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from koordqueue.domain import admission_checks as ac
from koordqueue.domain import requeue, reservation
from koordqueue.domain.effects import Effect, SetUnitStatus
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.reservation import queue_of
from koordqueue.kube.controller.base import DELETED, log, meta
from koordqueue.kube.controller.state import ControllerState
from koordqueue.kube.controller.status import (
    REQUEUE_FIELD,
    requeue_object,
    seen_conditions,
    unit_status_patch,
)
from koordqueue.kube.controller.writes import PatchUnitStatus, RecordEvent


class AdmissionChecks:
    """Each Queue's checks, and the Reserved units' fate as their check states change."""

    def __init__(self, state: ControllerState) -> None:
        self.state = state
        self.by_queue: dict[str, tuple[ac.CheckSpec, ...]] = {}
        self.deciding: set[str] = set()
        """Units whose release or back-off is in flight (a second version waits for it)."""
        self.strict_queues = ac.parse_queue_list(state.settings.queue_list)
        self.objects: dict[str, ac.CheckObject] = {}
        """Kueue's AdmissionCheck objects by name (on_admission_check), when the CRD is
        installed: a reservation names the controller of each check they name."""
        self._objects_lock = threading.Lock()

    # --- Kueue's AdmissionCheck objects -------------------------------------------------------
    def on_admission_check(self, event_type: str | None, obj: dict[str, Any]) -> None:
        """An AdmissionCheck event. Called from its informer's thread, not the owner loop:
        it only updates the catalogue the next reservation reads."""
        check = ac.check_object(obj)
        if check is None:
            return
        with self._objects_lock:
            if event_type == DELETED:
                self.objects.pop(check.name, None)
            else:
                self.objects[check.name] = check

    def known(self, checks: tuple[str, ...]) -> dict[str, ac.CheckObject]:
        """The AdmissionCheck objects named by `checks`."""
        with self._objects_lock:
            return {n: self.objects[n] for n in checks if n in self.objects}

    # --- the Queue side ---------------------------------------------------------------------
    def queue_changed(self, name: str, spec: dict[str, Any] | None) -> str | None:
        """A Queue's spec.admissionChecks (None: the Queue is gone); the error if unreadable
        (the Queue then asks for none, so nothing is held on a check nobody can name)."""
        error: str | None = None
        try:
            checks = ac.parse_checks((spec or {}).get(ac.CHECKS_FIELD))
        except ac.InvalidAdmissionCheckError as exc:
            checks, error = (), f"Queue {name}: {exc}"
        if self.by_queue.get(name, ()) == checks:
            return error
        if checks:
            self.by_queue[name] = checks
        else:
            self.by_queue.pop(name, None)
        for uid, obj in list(self.state.unit_objects.items()):
            unit = self.state.engine.unit(uid)
            if unit is None or queue_of(unit) != name:
                continue
            if (obj.get("status") or {}).get("phase") == Phase.RESERVED.value:
                self.on_reserved(unit, obj)  # a removed check counts as Ready
        return error

    def asked(self, unit: QueueUnit) -> tuple[str, ...]:
        """The checks `unit` must pass on its queue (none: it is released at once)."""
        return reservation.asked(self.by_queue, unit)

    def strict(self, unit: QueueUnit) -> bool:
        """Strict dequeue mode holds on the unit's queue (--strictDequeueMode, --queue-list)."""
        queue = queue_of(unit) or ""
        return ac.strict_for(queue, self.state.settings.strict_dequeue_mode, self.strict_queues)

    def reserve(self, group: list[Effect]) -> list[Effect]:
        """A unit's effects of a round with its admission made a reservation or SchedReady
        where its queue says so (reservation.reserve, which the replay calls too)."""
        admission = next(
            (e for e in group if isinstance(e, SetUnitStatus) and e.admission is not None), None
        )
        if admission is None:
            return group
        checks = self.asked(admission.unit)
        out, phase = reservation.reserve(
            group, checks, self.known(checks), self.strict(admission.unit)
        )
        if phase is None:
            return group
        engine = self.state.engine
        held = engine.unit(admission.unit.uid)
        if held is not None and held.phase is Phase.DEQUEUED:
            # the engine's own record says so from now on: a Job event seen before the
            # write's echo must not read Dequeued and resume the Job
            engine.upsert_unit(replace(held, phase=phase))
        return out

    # --- the unit side ----------------------------------------------------------------------
    def on_reserved(self, unit: QueueUnit, obj: dict[str, Any]) -> None:
        """A Reserved unit as the API shows it: release it, back it off, or keep waiting
        (reservation.fate, which the replay calls too)."""
        if unit.uid in self.deciding:
            return
        state = self.state
        status = obj.get("status") or {}
        states = ac.states_from_objects(status.get(ac.CHECKS_FIELD))
        structured = state.features.requeue_state
        clock = reservation.Clock(
            state.clock(),
            attempts=int(status.get("attempts") or 0),
            structured=structured,
            previous=(requeue.state_of(unit.requeue_count, unit.requeue_at)
                      if structured else None),
            base=state.settings.backoff_base_seconds,
        )
        decided = reservation.fate(states, self.asked(unit), self.strict(unit), clock)
        if isinstance(decided, reservation.Release):
            self._release(unit, obj, decided)
        elif isinstance(decided, reservation.BackOff):
            self._back_off(unit, obj, decided, clock.now)

    def _release(
        self, unit: QueueUnit, obj: dict[str, Any], decided: reservation.Release
    ) -> None:
        state = self.state
        phase = decided.phase
        patch = unit_status_patch(
            decided.message,
            phase,
            resource_version=meta(obj).get("resourceVersion"),
            conditions=seen_conditions(state.features, obj),
        )
        consumer = state.consumer_of(obj)
        resume = consumer.resume(obj) if consumer is not None and decided.resume else None

        def written(updated: dict[str, Any] | None) -> None:
            self.deciding.discard(unit.uid)
            if updated is None:
                return  # a newer version (a check changed again) is evaluated instead
            state.remember_unit(unit.uid, updated, decided.message)
            state.engine.upsert_unit(replace(unit, phase=phase))
            state.writer.submit(
                RecordEvent(updated, decided.event_type, decided.reason, decided.message)
            )
            if resume is not None:  # strict mode: the scheduler's SchedSucceed resumes it
                state.writer.submit(resume, key=unit.uid)

        self.deciding.add(unit.uid)
        write = PatchUnitStatus(unit.namespace, unit.name, patch, operation="release unit")
        state.writer.submit(write, written, unit.uid)

    def _back_off(
        self, unit: QueueUnit, obj: dict[str, Any], decided: reservation.BackOff, now: float
    ) -> None:
        """Release the reservation and re-queue at requeueAt (BackoffTimeout)."""
        state = self.state
        message, until = decided.message, decided.until
        patch = unit_status_patch(
            message,
            decided.phase,
            attempts=decided.attempts,
            resource_version=meta(obj).get("resourceVersion"),
            conditions=seen_conditions(state.features, obj),
        )
        if decided.requeue is not None:
            patch["status"][REQUEUE_FIELD] = requeue_object(decided.requeue)

        def written(updated: dict[str, Any] | None) -> None:
            self.deciding.discard(unit.uid)
            if updated is None:
                return
            state.remember_unit(unit.uid, updated, message)
            state.engine.upsert_unit(replace(unit, phase=decided.phase))
            state.engine.requeue(unit.uid, until)  # its quota goes back now
            state.wake.set()
            state.writer.submit(
                RecordEvent(updated, decided.event_type, decided.reason, message)
            )
            log.info("admission check failed", unit=unit.key, check=decided.failed.name)

        self.deciding.add(unit.uid)
        write = PatchUnitStatus(unit.namespace, unit.name, patch, operation="back off unit")
        state.writer.submit(write, written, unit.uid)
