"""Admission rounds: the engine decides, `effects()` says what that means, the writer does it.

A round plans effects only for the record's new entries (`Record.new`): every other entry
was planned by an earlier round, and what it asked for is in `reported` already (a unit whose
`reported` message changes outside a round is renewed in the engine). The unit gauges come
from counts the engine keeps as units move. So a round's own cost is what changed, not the
backlog. Each unit's effects of a round (domain/effects.py: status, workload, event, in that order)
become one `EffectChain`, run by the writer after the unit's earlier writes; its outcome
comes back to the owner, which remembers what was written and rolls back an admission the
API refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordqueue.domain.activation import ACTIVE_FIELD
from koordqueue.domain.effects import (
    DeactivateUnit,
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
from koordqueue.domain.mapping import UnresolvedReason
from koordqueue.domain.queue_unit import Phase
from koordqueue.domain.round import Admit, Reject
from koordqueue.kube import metrics
from koordqueue.kube.api import QUEUE_UNIT, ApiError
from koordqueue.kube.controller.base import log, queue_label
from koordqueue.kube.controller.state import ControllerState
from koordqueue.kube.controller.status import (
    ACCUMULATED_FIELD,
    banked_seconds,
    now_string,
    unit_status_patch,
    workload_reference,
)
from koordqueue.kube.controller.writes import (
    AdmitUnit,
    Apis,
    MergePatch,
    PatchUnitStatus,
    RecordEvent,
    SyncQueueUsage,
    Write,
)
from koordqueue.kube.quota_status import QueueUsageWriter

StatusOutcome = tuple[SetUnitStatus, dict[str, Any] | None]


@dataclass(frozen=True, slots=True)
class ChainOutcome:
    """What a chain wrote (each status write and its answer) and the events it asks for."""

    statuses: list[StatusOutcome]
    events: list[RecordEvent]
    lost: list[SetUnitStatus] = field(default_factory=list)
    """Message-only writes that met a transient failure (a dropped connection, 429, 5xx):
    the owner plans them again (a 404 or 422 is not retried: the unit is gone or refuses)."""


def _count_rejection(effect: UnitEvent | QueueEvent) -> None:
    if isinstance(effect, UnitEvent) and isinstance(effect.cause, Reject):
        kind = type(effect.cause.decision).__name__
        metrics.REJECTIONS.labels(queue_label(effect.unit), kind).inc()


@dataclass(frozen=True, slots=True)
class EffectChain:
    """One object's effects of a round, as writes run in order.

    A phase write that fails drops the rest (no event or workload change for a decision
    that was not persisted); the outcome lists each status write with what it returned, and
    the events, which the owner hands back to the writer at background priority.
    """

    effects: tuple[Effect, ...]
    current: Mapping[str, Any] | None
    """The unit object as the owner last saw it (resourceVersion guard, pod sets, target)."""
    workload: Mapping[int, Write[Any] | None]
    """Effect index -> the resume/suspend write of the unit's workload (None: none)."""
    now: str
    conditions: bool = True
    """The QueueUnitConditions gate: status writes keep status.conditions in line."""
    bank: bool = False
    """The MaximumExecutionTime gate: an eviction banks the time run."""

    def run(self, apis: Apis) -> ChainOutcome:
        written: Mapping[str, Any] | None = None
        out = ChainOutcome([], [])
        for index, effect in enumerate(self.effects):
            if isinstance(effect, SetUnitStatus):
                result = self._status(effect, apis, out)
                out.statuses.append((effect, result))
                # a message that could not be written leaves the unit as it was
                written = result if result is not None or effect.phase else self.current
                if result is None and effect.phase is not None:
                    return out
            elif isinstance(effect, UnitEvent):
                target = written or self.current
                if effect.on_workload and target is not None:
                    target = workload_reference(target) or target
                if target is not None:
                    _count_rejection(effect)
                    event = RecordEvent(target, effect.type, effect.reason, effect.message)
                    out.events.append(event)
            elif isinstance(effect, DeactivateUnit):
                unit = effect.unit
                spec = {"spec": {ACTIVE_FIELD: False}}
                patch = MergePatch(QUEUE_UNIT, unit.name, unit.namespace, spec, "deactivate unit")
                if patch.run(apis) is None:
                    return out  # not persisted: no eviction of a unit still active
            elif isinstance(effect, ResumeConsumer | SuspendConsumer):
                write = self.workload.get(index)
                if write is not None and (isinstance(effect, SuspendConsumer) or written):
                    write.run(apis)
            # (QueueEvents come from on_queue, which records them on the Queue it holds)
        return out

    def _status(
        self, effect: SetUnitStatus, apis: Apis, out: ChainOutcome
    ) -> dict[str, Any] | None:
        unit = effect.unit
        if effect.admission is not None:
            admit = AdmitUnit(
                unit, self.current or {}, effect.message, self.now, conditions=self.conditions,
                checks=effect.checks, check_messages=effect.check_messages,
                phase=effect.phase or Phase.DEQUEUED,
            )
            return admit.run(apis)
        seen = _conditions(self.current) if self.conditions else None
        # a message-only write gives a unit that has none (a bare unit) its first conditions
        mirror = unit.phase if effect.phase is None and seen == [] else None
        patch = unit_status_patch(
            effect.message,
            effect.phase,
            now=self.now,
            conditions=seen,
            mirror=mirror,
            evicted=effect.evicted,
            stop_clock=effect.spent,
            admissions=effect.admissions,
        )
        if effect.spent:
            patch["status"][ACCUMULATED_FIELD] = None  # a fresh budget once reactivated
        if effect.bank and self.bank:
            banked = banked_seconds(self.current, self.now)
            if banked is not None:
                patch["status"][ACCUMULATED_FIELD] = banked
        operation = "patch unit status" if effect.phase is None else "preempt"
        write = PatchUnitStatus(unit.namespace, unit.name, patch, operation=operation)
        if effect.phase is not None:
            return write.run(apis)
        try:
            return write.call(apis)
        except ApiError as exc:
            metrics.API_ERRORS.labels(operation).inc()
            log.warning("api call failed", operation=operation, error=str(exc))
            if exc.retryable:
                out.lost.append(effect)
            return None


def _conditions(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return list(((obj or {}).get("status") or {}).get("conditions") or [])


def _moves_phase(group: list[Effect]) -> bool:
    """The chain writes the unit's phase (the engine holds the new one already)."""
    return any(isinstance(e, SetUnitStatus) and e.phase is not None for e in group)


def _planned_unit(group: list[Effect]) -> tuple[str, bool]:
    """(uid, admitted) of one unit's chain (see `AdmissionRounds._unplanned`)."""
    first = group[0]
    assert not isinstance(first, QueueEvent)
    admitted = any(isinstance(e, SetUnitStatus) and e.admission is not None for e in group)
    return first.unit.uid, admitted


class AdmissionRounds:
    """Admission rounds and the writes of their decisions."""

    def __init__(
        self,
        state: ControllerState,
        before_round: Callable[[], None],
        reserve: Callable[[list[Effect]], list[Effect]] | None = None,
        phase_landed: Callable[[str], None] | None = None,
    ) -> None:
        self.state = state
        self.phase_landed = phase_landed
        """Told (with the unit's uid) once a chain that moves its phase is taken in: the
        watch's version held back meanwhile may count now (UnitHandlers.phase_landed)."""
        self.before_round = before_round
        """Called first in each round: each kind's due looks, the periodic resync when due
        (Resync.fire_timers)."""
        self.reserve = reserve
        """A unit's effects with an admission on a queue with admission checks turned into a
        reservation (checks.AdmissionChecks.reserve)."""
        self.queue_usage = QueueUsageWriter(state.api, state.settings.namespace)
        self.usage_cadence = metrics.Cadence()  # this controller's, so rounds of another don't

    def admission_round(self) -> RoundResult:
        """One round: decide, hand its effects to the writer, export the metrics."""
        state = self.state
        started = time.monotonic()
        self.before_round()
        now = state.clock()
        result = state.engine.run_round(now)
        state.published.publish(result, now)
        state.round_writes_pending = True

        def written() -> None:
            state.round_writes_pending = False
            state.round_writes_done_at = time.monotonic()

        try:
            planned = effects(result.outcomes.new(), state.reported)
        except Exception:
            # nothing of this round is planned: its new entries must be new again next round
            self._unplanned([(o.unit.uid, isinstance(o, Admit)) for o in result.outcomes.new()])
            written()
            raise
        self.execute(planned, written)
        if result.preempted:
            state.wake.set()  # the next round (once these writes land) reclaims the victims
        self._publish_queue_items(result)
        self._export_metrics(result)
        metrics.ROUND_DURATION.observe(time.monotonic() - started)
        return result

    def execute(self, planned: list[Effect], done: Callable[[], None] | None = None) -> None:
        """Run effects (from `effects()`) through the writer, one chain per object; `done`
        once every chain's outcome has been taken in."""
        state = self.state
        # (QueueEvents are recorded by on_queue on the Queue object it holds)
        groups = [g for g in per_unit(planned) if not isinstance(g[0], QueueEvent)]
        if self.reserve is not None:
            groups = [self.reserve(g) for g in groups]
        pending = [len(groups)]
        if not groups and done is not None:
            done()

        in_flight = state.phases_in_flight

        def landed(uid: str) -> None:
            left = in_flight.get(uid, 0) - 1
            if left > 0:
                in_flight[uid] = left
            else:
                in_flight.pop(uid, None)

        def replay(uid: str) -> None:
            if self.phase_landed is not None:
                self.phase_landed(uid)

        def taken_in(outcome: ChainOutcome) -> None:
            self._took_in(outcome)
            pending[0] -= 1
            if pending[0] == 0 and done is not None:
                done()

        for at, group in enumerate(groups):
            first = group[0]
            assert not isinstance(first, QueueEvent)
            uid = first.unit.uid
            before = state.reported.get(uid)
            try:
                current = state.unit_objects.get(uid)
                workload: dict[int, Write[Any] | None] = {}
                consumer = state.consumer_of(current) if current is not None else None
                for index, effect in enumerate(group):
                    if consumer is not None and current is not None:
                        if isinstance(effect, ResumeConsumer):
                            workload[index] = consumer.resume(current)
                        elif isinstance(effect, SuspendConsumer):
                            workload[index] = consumer.suspend(current)
                for effect in group:
                    if isinstance(effect, SetUnitStatus) and effect.phase is None:
                        state.reported[uid] = effect.message  # once per change, even in flight
                chain = EffectChain(
                    tuple(group), current, workload, now_string(), state.features.conditions,
                    state.features.maximum_execution_time,
                )
                then = taken_in
                if _moves_phase(group):
                    in_flight[uid] = in_flight.get(uid, 0) + 1

                    def then(outcome: ChainOutcome, uid: str = uid) -> None:
                        landed(uid)
                        taken_in(outcome)
                        replay(uid)

                try:
                    state.writer.submit(chain, then, uid)
                except Exception:
                    if then is not taken_in:
                        landed(uid)
                        replay(uid)
                    raise
            except Exception:
                # this chain and those after it were never handed to the writer
                if before is None:
                    state.reported.pop(uid, None)
                else:
                    state.reported[uid] = before
                self._unplanned([_planned_unit(g) for g in groups[at:]])
                pending[0] -= len(groups) - at
                if pending[0] == 0 and done is not None:
                    done()
                raise

    def _unplanned(self, units: list[tuple[str, bool]]) -> None:
        """Units ((uid, admitted this round)) whose effects were planned but never handed to
        the writer: their record entries are carried from now on, so they are renewed (planned
        again next round, as the full walk did), and an admission nobody will write is rolled
        back (decided again next round) rather than held in memory only."""
        state = self.state
        for uid, admitted in units:
            if admitted:
                state.engine.rollback(uid)
            state.engine.renew(uid)

    def _took_in(self, outcome: ChainOutcome) -> None:
        state = self.state
        for event in outcome.events:
            state.writer.submit(event)
        for effect, obj in outcome.statuses:
            unit = effect.unit
            if effect.admission is not None:
                if obj is None:
                    state.engine.rollback(unit.uid)
                    continue
                decision = effect.admission
                metrics.ADMISSIONS.labels(decision.quota).inc()
                if unit.created:
                    metrics.ADMISSION_LATENCY.observe(max(state.clock() - unit.created, 0.0))
                log.info(
                    "admitted", unit=unit.key, quota=decision.quota, path=",".join(decision.path)
                )
            elif obj is None and effect.phase is not None:
                log.warning("unit status not persisted", unit=unit.key)
            if obj is not None and unit.uid in state.unit_objects:
                state.remember_unit(unit.uid, obj, effect.message)
        for effect in outcome.lost:
            # `execute` marked the message reported and the record carries its entry, so no
            # later round would plan it again (bench/soak.py's fz-unit-3118): forget the
            # mark, renew the entry; the next round writes it (the same patch: idempotent)
            if state.reported.get(effect.unit.uid) == effect.message:
                state.reported.pop(effect.unit.uid, None)
            state.engine.renew(effect.unit.uid)

    def sync_usage(self) -> None:
        """The per-quota usage split (issue 18, item 8) to the metrics and the Queues'
        annotations, at most once per cadence: after each round, and by the owner loop while
        rounds wait for a round's writes (one write without an answer held them for the
        client's 30 s timeout, and the annotations with them: bench/soak.py)."""
        if self.usage_cadence.due():
            usage = self.state.engine.tree.report()
            metrics.QUOTA_USAGE.export(usage)
            self.state.writer.submit(SyncQueueUsage(self.queue_usage, tuple(usage)))

    def _publish_queue_items(self, result: RoundResult) -> None:
        """The due Queues' status.queueItemDetails, from this round's record."""
        publisher = self.state.queue_items
        for write in publisher.plan(result, self.state.clock()):
            self.state.writer.submit(write, publisher.taken_in(write.name))

    def _export_metrics(self, result: RoundResult) -> None:
        state = self.state
        for queue, (pending, admitted) in state.engine.count_changes().items():
            metrics.UNITS_PENDING.labels(queue).set(pending)
            metrics.UNITS_ADMITTED.labels(queue).set(admitted)
        self.sync_usage()
        reasons: dict[str, int] = {}
        for _, unresolved in result.unmapped:
            reasons[unresolved.reason.value] = reasons.get(unresolved.reason.value, 0) + 1
        for reason in UnresolvedReason:
            metrics.UNITS_UNMAPPED.labels(reason.value).set(reasons.get(reason.value, 0))
        metrics.UNITS_QUEUE_NOT_FOUND.set(len(result.queue_not_found))
