"""QueueUnits: folded into the engine; SchedFailed backs off; every unit status write."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from koordqueue.domain import names
from koordqueue.domain.job_extension import (
    backoff_delay,
)
from koordqueue.domain.queue_unit import (
    ADMITTED_PHASES,
    FINISHED_PHASES,
    WAITING_PHASES,
    InvalidQueueUnitError,
    Phase,
    QueueUnit,
    queue_unit_from_object,
)
from koordqueue.kube.api import (
    QUEUE_UNIT,
    with_retries,
)
from koordqueue.kube.controller.base import (
    WARNING,
    ControllerBase,
    _meta,
    _now,
)


class UnitHandlers(ControllerBase):
    def on_unit(self, event_type: str | None, obj: dict[str, Any]) -> None:
        meta = _meta(obj)
        uid = meta.get("uid", "")
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        if event_type == "DELETED":
            with self.lock:
                self.engine.remove_unit(uid)
                self._units.pop(uid, None)
                self._reported.pop(uid, None)
                if self._unit_by_key.get(key) == uid:
                    del self._unit_by_key[key]
            self.wake.set()
            return
        try:
            unit = queue_unit_from_object(obj)
        except InvalidQueueUnitError as exc:
            if self._reported.get(uid) != str(exc):
                self._reported[uid] = str(exc)
                self.recorder.record(obj, WARNING, names.REASON_INVALID_QUEUE_UNIT, str(exc))
            return
        if unit.phase is Phase.SCHED_FAILED:
            self._back_off(unit, obj)
            return
        with self.lock:
            known = self.engine.unit(uid)
            if known is not None and self.engine.is_admitted(uid) and unit.phase in WAITING_PHASES:
                # A stale event from before our own admission write: our decision stands.
                unit = replace(unit, phase=known.phase)
            self.engine.upsert_unit(unit)
            message = (obj.get("status") or {}).get("message")
            if unit.phase is Phase.BACKOFF and (
                uid in self._timed_out or (known is None and message == names.MSG_RUNNING_TIMEOUT)
            ):
                # backed off by the running timeout (seen first after a restart, or a stale
                # earlier version counted it again): its quota stays free until the Job's
                # back-off ends and the Job reconcile enqueues it
                self._timed_out.add(uid)
                self.engine.requeue(uid, math.inf)
            self._units[uid] = obj
            self._unit_by_key[key] = uid
        if known is None or unit.phase in FINISHED_PHASES:
            self.wake.set()
        if unit.phase is Phase.SCHED_SUCCEED and (known is None or known.phase != unit.phase):
            self._reconcile_consumer(obj)

    def _back_off(self, unit: QueueUnit, obj: dict[str, Any]) -> None:
        """SchedFailed: release the quota, suspend the Job, retry after an exponential back-off."""
        attempts = int((obj.get("status") or {}).get("attempts") or 0) + 1
        delay = backoff_delay(attempts)
        with self.lock:
            self.engine.upsert_unit(replace(unit, phase=Phase.BACKOFF))
            self.engine.requeue(unit.uid, self.clock() + delay)
            self._units[unit.uid] = obj
        message = names.MSG_SCHED_FAILED_BACKOFF.format(attempts=attempts, delay=delay)
        patch = {
            "status": {
                "phase": Phase.BACKOFF.value,
                "attempts": attempts,
                "message": message,
                "lastUpdateTime": _now(),
                "admissions": [],
            }
        }
        updated = self._patch_unit_status(unit, patch)
        self._suspend_consumer(obj)
        if updated is not None:
            self.recorder.record(updated, WARNING, names.REASON_BACKOFF, message)
        self.wake.set()


    def _set_unit_phase(self, unit: QueueUnit, phase: Phase, message: str) -> bool:
        """Write the phase, then record it in the engine; False (and nothing recorded) if the
        API refused the write, so the quota stays held as long as the API says it is."""
        status: dict[str, Any] = {
            "phase": phase.value,
            "message": message,
            "lastUpdateTime": _now(),
        }
        if phase not in ADMITTED_PHASES:  # finished or back in the queue: it holds nothing
            status["admissions"] = []
        patch = {"status": status}
        if self._patch_unit_status(unit, patch, retry=True) is None:
            return False
        with self.lock:
            self.engine.upsert_unit(replace(unit, phase=phase))
        return True

    def _patch_unit_status(
        self, unit: QueueUnit, patch: dict[str, Any], *, retry: bool = False
    ) -> dict[str, Any] | None:
        """Unconditional status merge patch; remembers the result (None if the API refused)."""

        def call() -> dict[str, Any]:
            return self.api.merge_patch(QUEUE_UNIT, unit.name, patch, unit.namespace, "status")

        updated: dict[str, Any] | None = self._safely(
            "patch unit status", (lambda: with_retries(call)) if retry else call
        )
        if updated is not None:
            with self.lock:
                self._units[unit.uid] = updated
                message = (patch.get("status") or {}).get("message")
                if message is not None:
                    self._reported[unit.uid] = message
        return updated

