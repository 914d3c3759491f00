"""Admission rounds: decide, then execute the round's effects through the API."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from koordqueue.domain.effects import (
    Effect,
    QueueEvent,
    ResumeConsumer,
    SetUnitStatus,
    SuspendConsumer,
    UnitEvent,
    effects,
    per_unit,
)
from koordqueue.domain.engine import RoundResult
from koordqueue.domain.queue_unit import (
    ADMITTED_PHASES,
    FINISHED_PHASES,
    Phase,
    QueueUnit,
)
from koordqueue.domain.round import Reject
from koordqueue.kube import metrics
from koordqueue.kube.api import (
    QUEUE_UNIT,
    ApiError,
)
from koordqueue.kube.controller.base import (
    NORMAL,
    ControllerBase,
    _admissions,
    _meta,
    _now,
    _queue_label,
    log,
)


class AdmissionRounds(ControllerBase):
    def admission_round(self) -> RoundResult:
        """One round: decide under the lock, then execute its effects in parallel outside it."""
        started = time.monotonic()
        if self._job_timers:
            self.fire_job_timers()
        with self.lock:
            result = self.engine.run_round(self.clock())
            planned = effects(result, self._reported)
        futures = [self._pool.submit(self._execute, group) for group in per_unit(planned)]
        for future in futures:
            try:
                future.result()
            except Exception as exc:  # one failed write must not stop the others or the loop
                log.warning("admission write failed", error=str(exc))
        self._export_metrics(result)
        metrics.ROUND_DURATION.observe(time.monotonic() - started)
        return result

    def _execute(self, group: list[Effect]) -> None:
        """Run one object's effects (from `effects()`) in order through the API.

        A phase write that fails drops the rest of the unit's effects (no event or Job change
        for a decision that was not persisted); an admission that cannot be written is rolled
        back in the engine.
        """
        obj: dict[str, Any] | None = None
        for effect in group:
            if isinstance(effect, SetUnitStatus):
                obj = self._write_status(effect)
                if obj is None and effect.phase is not None:
                    return
            elif isinstance(effect, UnitEvent):
                target = obj or self._units.get(effect.unit.uid)
                if target is not None:
                    self._record_event(target, effect)
            elif isinstance(effect, ResumeConsumer):
                if obj is not None:
                    self._resume_consumer(obj)
            elif isinstance(effect, SuspendConsumer):
                self._suspend_consumer(obj or self._units.get(effect.unit.uid) or {})
            # (QueueEvents come from on_queue, which records them on the Queue it holds)

    def _record_event(self, obj: Mapping[str, Any], effect: UnitEvent | QueueEvent) -> None:
        if isinstance(effect, UnitEvent) and isinstance(effect.cause, Reject):
            kind = type(effect.cause.decision).__name__
            metrics.REJECTIONS.labels(_queue_label(effect.unit), kind).inc()
        if effect.type == NORMAL:
            # a Normal event is for humans; it must not delay the next admission's writes
            self._events.submit(self.recorder.record, obj, effect.type, effect.reason,
                                effect.message)
        else:
            self.recorder.record(obj, effect.type, effect.reason, effect.message)

    def _write_status(self, effect: SetUnitStatus) -> dict[str, Any] | None:
        """The status write of one effect; the written object, or None if it failed."""
        unit = effect.unit
        if effect.admission is not None:
            return self._persist_admission(effect)
        if effect.phase is None:
            self._reported[unit.uid] = effect.message
            patch = {"status": {"message": effect.message, "lastUpdateTime": _now()}}
            return self._patch_unit_status(unit, patch) or self._units.get(unit.uid)
        status: dict[str, Any] = {
            "phase": effect.phase.value,
            "message": effect.message,
            "lastUpdateTime": _now(),
        }
        if effect.phase not in ADMITTED_PHASES:
            status["admissions"] = []
        try:
            updated = self.api.merge_patch(
                QUEUE_UNIT, unit.name, {"status": status}, unit.namespace, "status"
            )
        except ApiError as exc:
            metrics.API_ERRORS.labels("preempt").inc()
            log.warning("unit status not persisted", unit=unit.key, error=str(exc))
            return None
        with self.lock:
            self._units[unit.uid] = updated
            self._reported[unit.uid] = effect.message
        return updated

    def _persist_admission(self, effect: SetUnitStatus) -> dict[str, Any] | None:
        """Write an admission, guarded by resourceVersion; roll it back if it cannot be."""
        unit, decision = effect.unit, effect.admission
        assert decision is not None
        now = _now()
        for _ in range(3):
            current = self._units.get(unit.uid) or {}
            rv = _meta(current).get("resourceVersion")
            patch: dict[str, Any] = {
                "status": {
                    "phase": Phase.DEQUEUED.value,
                    "message": effect.message,
                    "lastUpdateTime": now,
                    "admissionTime": now,
                    "admissions": _admissions(current),
                }
            }
            if rv:
                patch["metadata"] = {"resourceVersion": rv}
            try:
                updated = self.api.merge_patch(
                    QUEUE_UNIT, unit.name, patch, unit.namespace, "status"
                )
            except ApiError as exc:
                if exc.conflict:
                    fresh = self.api.get(QUEUE_UNIT, unit.name, unit.namespace)
                    if fresh is None or _meta(fresh).get("uid") != unit.uid:
                        break
                    fresh_phase = (fresh.get("status") or {}).get("phase") or Phase.ENQUEUED.value
                    if Phase(fresh_phase) in FINISHED_PHASES:
                        break
                    self._units[unit.uid] = fresh
                    continue
                landed = self._admission_landed(unit, now) if exc.retryable else None
                if landed is None:
                    if not exc.not_found:
                        metrics.API_ERRORS.labels("admit").inc()
                        log.warning("admission not persisted", unit=unit.key, error=str(exc))
                    break
                updated = landed  # the answer was lost, not the write
            with self.lock:
                self._units[unit.uid] = updated
                self._reported[unit.uid] = effect.message
            metrics.ADMISSIONS.labels(decision.quota).inc()
            if unit.created:
                metrics.ADMISSION_LATENCY.observe(max(self.clock() - unit.created, 0.0))
            log.info("admitted", unit=unit.key, quota=decision.quota, path=",".join(decision.path))
            return updated
        with self.lock:
            self.engine.rollback(unit.uid)
        return None

    def _admission_landed(self, unit: QueueUnit, admitted_at: str) -> dict[str, Any] | None:
        """After a write whose outcome is unknown (connection lost, timeout, 5xx): the unit
        if our admission is what the API holds now, else None. Rolling back an admission
        that did land would leave the Job suspended and its quota counted twice."""
        fresh = self._safely(
            "get unit", lambda: self.api.get(QUEUE_UNIT, unit.name, unit.namespace)
        )
        if fresh is None or _meta(fresh).get("uid") != unit.uid:
            return None
        status = fresh.get("status") or {}
        ours = status.get("admissionTime") == admitted_at
        return dict(fresh) if ours and status.get("phase") == Phase.DEQUEUED.value else None

    def _export_metrics(self, result: RoundResult) -> None:
        with self.lock:
            units = self.engine.units()
            pending: dict[str, int] = {}
            admitted: dict[str, int] = {}
            for unit in units:
                queue = _queue_label(unit)
                if not queue or unit.phase in FINISHED_PHASES:
                    continue
                target = admitted if self.engine.is_admitted(unit.uid) else pending
                target[queue] = target.get(queue, 0) + 1
            usage = self.engine.tree.report() if metrics.QUOTA_USAGE.due() else None
        if usage is not None:  # per-quota usage split (issue 18, item 8), throttled
            metrics.QUOTA_USAGE.export(usage)
            self._pool.submit(self._safely, "queue usage", lambda: self._queue_usage.sync(usage))
        for queue in set(pending) | set(admitted) | self._known_metric_queues:
            metrics.UNITS_PENDING.labels(queue).set(pending.get(queue, 0))
            metrics.UNITS_ADMITTED.labels(queue).set(admitted.get(queue, 0))
        self._known_metric_queues |= set(pending) | set(admitted)
        reasons: dict[str, int] = {}
        for _, unresolved in result.unmapped:
            reasons[unresolved.reason.value] = reasons.get(unresolved.reason.value, 0) + 1
        for reason in (
            "no quota label",
            "empty quota label",
            "quota label is not a string",
            "quota label is not a valid name",
        ):
            metrics.UNITS_UNMAPPED.labels(reason).set(reasons.get(reason, 0))
        metrics.UNITS_QUEUE_NOT_FOUND.set(len(result.queue_not_found))

