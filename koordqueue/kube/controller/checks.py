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
from koordqueue.domain import names, requeue
from koordqueue.domain.effects import Effect, ResumeConsumer, SetUnitStatus, UnitEvent
from koordqueue.domain.job_extension import backoff_delay
from koordqueue.domain.mapping import QuotaName, queue_name_for
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.kube.controller.base import DELETED, NORMAL, WARNING, log, meta
from koordqueue.kube.controller.state import ControllerState
from koordqueue.kube.controller.status import (
    REQUEUE_FIELD,
    requeue_object,
    seen_conditions,
    unit_status_patch,
)
from koordqueue.kube.controller.writes import PatchUnitStatus, RecordEvent


def queue_of(unit: QueueUnit) -> str | None:
    resolution = queue_name_for(unit.labels)
    return resolution.name if isinstance(resolution, QuotaName) else None


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
        queue = queue_of(unit)
        return ac.required(self.by_queue.get(queue, ()), unit.labels) if queue else ()

    def strict(self, unit: QueueUnit) -> bool:
        """Strict dequeue mode holds on the unit's queue (--strictDequeueMode, --queue-list)."""
        queue = queue_of(unit) or ""
        return ac.strict_for(queue, self.state.settings.strict_dequeue_mode, self.strict_queues)

    def reserve(self, group: list[Effect]) -> list[Effect]:
        """A unit's effects of a round, as Koord-Queue's Dequeue writes them: an admission on
        a queue with matching checks becomes a reservation (Reserved, checks Pending, event
        QuotaReserved), one on a strict-dequeue queue SchedReady (the scheduler's SchedSucceed
        resumes it); either way the workload stays suspended."""
        admission = next(
            (e for e in group if isinstance(e, SetUnitStatus) and e.admission is not None), None
        )
        if admission is None:
            return group
        checks = self.asked(admission.unit)
        objects = self.known(checks)
        if checks:
            phase, message = Phase.RESERVED, ac.MSG_RESERVED
            event: tuple[str, str] | None = (
                names.REASON_QUOTA_RESERVED,
                ac.MSG_RESERVED_EVENT.format(checks=ac.labelled(checks, objects)),
            )
        elif self.strict(admission.unit):
            phase, message, event = Phase.SCHED_READY, ac.MSG_SCHED_READY, None
        else:
            return group
        engine = self.state.engine
        held = engine.unit(admission.unit.uid)
        if held is not None and held.phase is Phase.DEQUEUED:
            # the engine's own record says so from now on: a Job event seen before the
            # write's echo must not read Dequeued and resume the Job
            engine.upsert_unit(replace(held, phase=phase))
        out: list[Effect] = []
        for effect in group:
            if effect is admission:
                said = tuple(ac.pending_message(objects.get(n)) for n in checks)
                out.append(
                    replace(
                        effect, message=message, phase=phase, checks=checks, check_messages=said
                    )
                )
            elif isinstance(effect, UnitEvent) and effect.reason == names.REASON_ADMITTED:
                if event is not None:
                    out.append(replace(effect, reason=event[0], message=event[1]))
                else:
                    out.append(effect)
            elif not isinstance(effect, ResumeConsumer):
                out.append(effect)
        return out

    # --- the unit side ----------------------------------------------------------------------
    def on_reserved(self, unit: QueueUnit, obj: dict[str, Any]) -> None:
        """A Reserved unit as the API shows it: release it, back it off, or keep waiting."""
        if unit.uid in self.deciding:
            return
        states = ac.states_from_objects((obj.get("status") or {}).get(ac.CHECKS_FIELD))
        evaluation = ac.evaluate(states, self.asked(unit))
        if evaluation.verdict is ac.Verdict.READY:
            self._release(unit, obj)
        elif evaluation.verdict is ac.Verdict.BACK_OFF and evaluation.failed is not None:
            self._back_off(unit, obj, evaluation.failed)

    def _release(self, unit: QueueUnit, obj: dict[str, Any]) -> None:
        state = self.state
        strict = self.strict(unit)
        phase = Phase.SCHED_READY if strict else Phase.DEQUEUED
        patch = unit_status_patch(
            ac.MSG_ALL_READY,
            phase,
            resource_version=meta(obj).get("resourceVersion"),
            conditions=seen_conditions(state.features, obj),
        )
        consumer = state.consumer_of(obj)
        resume = consumer.resume(obj) if consumer is not None and not strict else None

        def written(updated: dict[str, Any] | None) -> None:
            self.deciding.discard(unit.uid)
            if updated is None:
                return  # a newer version (a check changed again) is evaluated instead
            state.remember_unit(unit.uid, updated, ac.MSG_ALL_READY)
            state.engine.upsert_unit(replace(unit, phase=phase))
            state.writer.submit(
                RecordEvent(updated, NORMAL, names.REASON_ADMITTED, ac.MSG_ALL_READY)
            )
            if resume is not None:  # strict mode: the scheduler's SchedSucceed resumes it
                state.writer.submit(resume, key=unit.uid)

        self.deciding.add(unit.uid)
        write = PatchUnitStatus(unit.namespace, unit.name, patch, operation="release unit")
        state.writer.submit(write, written, unit.uid)

    def _back_off(self, unit: QueueUnit, obj: dict[str, Any], failed: ac.CheckState) -> None:
        """Release the reservation and re-queue at requeueAt (BackoffTimeout)."""
        state = self.state
        now = state.clock()
        attempts = int((obj.get("status") or {}).get("attempts") or 0) + 1
        structured = None
        if state.features.requeue_state:
            previous = requeue.state_of(unit.requeue_count, unit.requeue_at)
            structured = requeue.record(previous, state.settings.backoff_base_seconds, now)
        until = structured.requeue_at if structured else now + backoff_delay(attempts)
        message = ac.failure_message(failed, until - now)
        patch = unit_status_patch(
            message,
            Phase.BACKOFF,
            attempts=attempts,
            resource_version=meta(obj).get("resourceVersion"),
            conditions=seen_conditions(state.features, obj),
        )
        if structured is not None:
            patch["status"][REQUEUE_FIELD] = requeue_object(structured)

        def written(updated: dict[str, Any] | None) -> None:
            self.deciding.discard(unit.uid)
            if updated is None:
                return
            state.remember_unit(unit.uid, updated, message)
            state.engine.upsert_unit(replace(unit, phase=Phase.BACKOFF))
            state.engine.requeue(unit.uid, until)  # its quota goes back now
            state.wake.set()
            state.writer.submit(RecordEvent(updated, WARNING, names.REASON_BACKOFF, message))
            log.info("admission check failed", unit=unit.key, check=failed.name)

        self.deciding.add(unit.uid)
        write = PatchUnitStatus(unit.namespace, unit.name, patch, operation="back off unit")
        state.writer.submit(write, written, unit.uid)
