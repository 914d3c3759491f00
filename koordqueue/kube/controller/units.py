"""QueueUnits: folded into the engine; a SchedFailed unit backs off; the unit phase writes."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from koordqueue.domain import names
from koordqueue.domain.job_extension import backoff_delay
from koordqueue.domain.queue_unit import (
    FINISHED_PHASES,
    WAITING_PHASES,
    InvalidQueueUnitError,
    Phase,
    QueueUnit,
    queue_unit_from_object,
)
from koordqueue.kube.controller.base import (
    DELETED,
    WARNING,
    ControllerBase,
    meta,
    newer,
    object_key,
)
from koordqueue.kube.controller.status import unit_status_patch
from koordqueue.kube.controller.writes import PatchUnitStatus, RecordEvent


class UnitHandlers(ControllerBase):
    def on_unit(self, event_type: str | None, obj: dict[str, Any]) -> None:
        uid = meta(obj).get("uid", "")
        key = object_key(obj)
        if event_type == DELETED:
            if self.resync_window is not None:
                self.resync_window.deleted_units.add(uid)
            self.engine.remove_unit(uid)
            self.unit_objects.pop(uid, None)
            self.reported.pop(uid, None)
            if self.unit_by_key.get(key) == uid:
                del self.unit_by_key[key]
            self.wake.set()
            return
        if key in self.units_being_created and not (obj.get("status") or {}).get("phase"):
            # our own unit, seen by the watch before its create call came back: its creator
            # folds it in and writes its first phase; a round deciding on it now would write
            # first and make that guarded write miss
            self.units_being_created[key] = obj
            return
        if newer(self.unit_objects.get(uid), obj):
            # A late event from before a version we already hold (our own write's answer or a
            # later event): folding it in would undo that version, e.g. move a unit we wrote
            # Succeed back to Dequeued and admit it again (found by bench_scale.py).
            return
        try:
            unit = queue_unit_from_object(obj)
        except InvalidQueueUnitError as exc:
            if self.reported.get(uid) != str(exc):
                self.reported[uid] = str(exc)
                self.engine.renew(uid)  # its next entry's message must be written again
                self.writer.submit(
                    RecordEvent(obj, WARNING, names.REASON_INVALID_QUEUE_UNIT, str(exc))
                )
            return
        if unit.phase is Phase.SCHED_FAILED:
            self._back_off(unit, obj)
            return
        known = self.engine.unit(uid)
        if known is not None and self.engine.is_admitted(uid) and unit.phase in WAITING_PHASES:
            # A stale event from before our own admission write: our decision stands.
            unit = replace(unit, phase=known.phase)
        self.engine.upsert_unit(unit)
        message = (obj.get("status") or {}).get("message")
        if unit.phase is Phase.BACKOFF and (
            uid in self.timed_out or (known is None and message == names.MSG_RUNNING_TIMEOUT)
        ):
            # backed off by the running timeout (seen first after a restart, or a stale
            # earlier version counted it again): its quota stays free until the Job's
            # back-off ends and the Job reconcile enqueues it
            self.timed_out.add(uid)
            self.engine.requeue(uid, math.inf)
        self.unit_objects[uid] = obj
        self.unit_by_key[key] = uid
        if known is None or unit.phase in FINISHED_PHASES:
            self.wake.set()
        if unit.phase is Phase.SCHED_SUCCEED and (known is None or known.phase != unit.phase):
            consumer = self.consumer_of(obj)
            if consumer is not None:
                consumer.unit_scheduled(obj)

    def _back_off(self, unit: QueueUnit, obj: dict[str, Any]) -> None:
        """SchedFailed: release the quota, suspend the workload, retry after a back-off."""
        attempts = int((obj.get("status") or {}).get("attempts") or 0) + 1
        delay = backoff_delay(attempts)
        self.engine.upsert_unit(replace(unit, phase=Phase.BACKOFF))
        self.engine.requeue(unit.uid, self.clock() + delay)
        self.unit_objects[unit.uid] = obj
        message = names.MSG_SCHED_FAILED_BACKOFF.format(attempts=attempts, delay=delay)
        patch = unit_status_patch(message, Phase.BACKOFF, attempts=attempts)

        def written(updated: dict[str, Any] | None) -> None:
            if updated is not None:
                self.remember_unit(unit.uid, updated, message)
                self.writer.submit(RecordEvent(updated, WARNING, names.REASON_BACKOFF, message))

        self.writer.submit(PatchUnitStatus(unit.namespace, unit.name, patch), written, unit.uid)
        consumer = self.consumer_of(obj)
        suspend = consumer.suspend(obj) if consumer is not None else None
        if suspend is not None:
            self.writer.submit(suspend, key=unit.uid)
        self.wake.set()

    def write_unit_phase(
        self, unit: QueueUnit, phase: Phase, message: str, then: Callable[[bool], None]
    ) -> None:
        """Write the phase (retried), then record it in the engine; `then(False)` (and nothing
        recorded) if the API refused, so the quota stays held as long as the API says it is."""
        patch = unit_status_patch(message, phase)

        def written(updated: dict[str, Any] | None) -> None:
            if updated is not None:
                self.remember_unit(unit.uid, updated, message)
                self.engine.upsert_unit(replace(unit, phase=phase))
            then(updated is not None)

        write = PatchUnitStatus(unit.namespace, unit.name, patch, retry=True)
        self.writer.submit(write, written, unit.uid)
