"""QueueUnits: folded into the engine; a SchedFailed unit backs off; the unit phase writes."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from koordqueue.domain import names, requeue
from koordqueue.domain.job_extension import backoff_delay
from koordqueue.domain.queue_unit import (
    FINISHED_PHASES,
    WAITING_PHASES,
    InvalidQueueUnitError,
    Phase,
    QueueUnit,
    queue_unit_from_object,
)
from koordqueue.kube.controller.base import DELETED, MODIFIED, WARNING, meta, newer, object_key
from koordqueue.kube.controller.state import ControllerState
from koordqueue.kube.controller.status import (
    REQUEUE_FIELD,
    requeue_object,
    seen_conditions,
    unit_status_patch,
)
from koordqueue.kube.controller.writes import PatchUnitStatus, RecordEvent


class UnitHandlers:
    """QueueUnit events into the engine, and the unit phase writes others ask for."""

    def __init__(
        self,
        state: ControllerState,
        on_reserved: Callable[[QueueUnit, dict[str, Any]], None] | None = None,
    ) -> None:
        self.state = state
        self.on_reserved = on_reserved
        """A Reserved unit's new version: its admission checks decide (checks.py)."""

    def on_unit(self, event_type: str | None, obj: dict[str, Any]) -> None:
        state = self.state
        uid = meta(obj).get("uid", "")
        key = object_key(obj)
        if event_type == DELETED:
            if state.resync_window is not None:
                state.resync_window.deleted_units.add(uid)
            state.engine.remove_unit(uid)
            state.unit_objects.pop(uid, None)
            state.held_in_flight.pop(uid, None)
            state.reported.pop(uid, None)
            if state.unit_by_key.get(key) == uid:
                del state.unit_by_key[key]
            state.wake.set()
            return
        if key in state.units_being_created and not (obj.get("status") or {}).get("phase"):
            # our own unit, seen by the watch before its create call came back: its creator
            # folds it in and writes its first phase; a round deciding on it now would write
            # first and make that guarded write miss
            state.units_being_created[key] = obj
            return
        if newer(state.unit_objects.get(uid), obj):
            # A late event from before a version we already hold (our own write's answer or a
            # later event): folding it in would undo that version, e.g. move a unit we wrote
            # Succeed back to Dequeued and admit it again (found by bench_scale.py).
            return
        try:
            unit = queue_unit_from_object(obj)
        except InvalidQueueUnitError as exc:
            if state.reported.get(uid) != str(exc):
                state.reported[uid] = str(exc)
                state.engine.renew(uid)  # its next entry's message must be written again
                state.writer.submit(
                    RecordEvent(obj, WARNING, names.REASON_INVALID_QUEUE_UNIT, str(exc))
                )
            return
        if unit.phase is Phase.SCHED_FAILED:
            self._back_off(unit, obj)
            return
        known = state.engine.unit(uid)
        if known is not None and unit.phase is not known.phase and uid in state.phases_in_flight:
            # most often from before a round's phase write still in flight (writes of a unit
            # are keyed, so none of ours lands between): folded in, a victim reclaimed a
            # moment ago would count as admitted again. Held, not dropped: it may be newer
            # than the write (someone else's), which `phase_landed` tells once it lands
            state.held_in_flight[uid] = obj
            return
        if known is not None and state.engine.is_admitted(uid) and unit.phase in WAITING_PHASES:
            # A stale event from before our own admission write: our decision stands.
            unit = replace(unit, phase=known.phase)
        state.engine.upsert_unit(unit)
        message = (obj.get("status") or {}).get("message")
        if unit.phase is Phase.BACKOFF and (
            uid in state.timed_out or (known is None and message == names.MSG_RUNNING_TIMEOUT)
        ):
            # backed off by the running timeout (seen first after a restart, or a stale
            # earlier version counted it again): its quota stays free until the Job's
            # back-off ends and the Job reconcile enqueues it
            state.timed_out.add(uid)
            state.engine.requeue(uid, math.inf)
        state.unit_objects[uid] = obj
        state.unit_by_key[key] = uid
        if known is None or unit.phase in FINISHED_PHASES or known.active != unit.active:
            state.wake.set()  # (spec.active flipped: admit it, or evict it)
        if unit.phase is Phase.RESERVED and self.on_reserved is not None:
            self.on_reserved(unit, obj)
        if unit.phase is Phase.SCHED_SUCCEED and (known is None or known.phase != unit.phase):
            consumer = state.consumer_of(obj)
            if consumer is not None:
                consumer.unit_scheduled(obj)

    def phase_landed(self, uid: str) -> None:
        """A round's phase write of the unit was taken in: a version the watch showed while
        it was in flight counts now if it is newer than what the write returned."""
        state = self.state
        if uid in state.phases_in_flight:
            return  # another of its phase writes is still out
        held = state.held_in_flight.pop(uid, None)
        if held is None:
            return
        current = state.unit_objects.get(uid)
        if current is None or newer(held, current):
            self.on_unit(MODIFIED, held)

    def _back_off(self, unit: QueueUnit, obj: dict[str, Any]) -> None:
        """SchedFailed: release the quota, suspend the workload, retry after a back-off."""
        state = self.state
        attempts = int((obj.get("status") or {}).get("attempts") or 0) + 1
        now = state.clock()
        structured = None
        if state.features.requeue_state:  # counted from status.requeueState, not attempts
            previous = requeue.state_of(unit.requeue_count, unit.requeue_at)
            structured = requeue.record(previous, requeue.DEFAULT_BASE, now)
        until = structured.requeue_at if structured else now + backoff_delay(attempts)
        state.engine.upsert_unit(replace(unit, phase=Phase.BACKOFF))
        state.engine.requeue(unit.uid, until)
        state.unit_objects[unit.uid] = obj
        message = names.MSG_SCHED_FAILED_BACKOFF.format(attempts=attempts, delay=until - now)
        patch = unit_status_patch(
            message,
            Phase.BACKOFF,
            attempts=attempts,
            conditions=seen_conditions(state.features, obj),
        )
        if structured is not None:
            patch["status"][REQUEUE_FIELD] = requeue_object(structured)

        def written(updated: dict[str, Any] | None) -> None:
            # the watch may have shown a newer version before this answer came back (a
            # scheduler's SchedSucceed): the answer must not take the unit back
            if updated is None:
                return
            if not newer(state.unit_objects.get(unit.uid), updated):
                state.remember_unit(unit.uid, updated, message)
            state.writer.submit(RecordEvent(updated, WARNING, names.REASON_BACKOFF, message))

        state.writer.submit(PatchUnitStatus(unit.namespace, unit.name, patch), written, unit.uid)
        consumer = state.consumer_of(obj)
        suspend = consumer.suspend(obj) if consumer is not None else None
        if suspend is not None:
            state.writer.submit(suspend, key=unit.uid)
        state.wake.set()

    def write_unit_phase(
        self, unit: QueueUnit, phase: Phase, message: str, then: Callable[[bool], None]
    ) -> None:
        """Write the phase (retried), then record it in the engine; `then(False)` (and nothing
        recorded) if the API refused, so the quota stays held as long as the API says it is."""
        state = self.state
        seen = seen_conditions(state.features, state.unit_objects.get(unit.uid))
        patch = unit_status_patch(message, phase, conditions=seen)
        if state.features.requeue_state and phase is Phase.RUNNING:
            patch["status"][REQUEUE_FIELD] = None  # it ran: a later failure starts over
        elif state.features.requeue_state and phase is Phase.BACKOFF:  # the running timeout
            previous = requeue.state_of(unit.requeue_count, unit.requeue_at)
            structured = requeue.record(previous, state.settings.job_backoff_time, state.clock())
            patch["status"][REQUEUE_FIELD] = requeue_object(structured)

        def written(updated: dict[str, Any] | None) -> None:
            # the watch may have shown a newer version before this answer came back (a
            # scheduler's SchedSucceed): the answer must not take the unit back
            if updated is not None and not newer(state.unit_objects.get(unit.uid), updated):
                state.remember_unit(unit.uid, updated, message)
                try:  # the written object: its PodsReady time starts the budget's clock
                    state.engine.upsert_unit(replace(queue_unit_from_object(updated), phase=phase))
                except InvalidQueueUnitError:
                    state.engine.upsert_unit(replace(unit, phase=phase))
            then(updated is not None)

        write = PatchUnitStatus(unit.namespace, unit.name, patch, retry=True)
        state.writer.submit(write, written, unit.uid)
