"""A reservation's course, decided once for the controller and the replay (issue 35 point 5,
issue 29).

domain/admission_checks.py says what a Reserved unit's check states call for; this module
turns that into what is written: the phase and message of a round's admission on a queue
with checks (`reserve`), and of a Reserved unit released or backed off (`fate`). The live
controller (kube/controller/checks.py) executes these against the API, with its guarded
writes; `simulate` (simulation/simulator.py) records them. Both call the same functions, so
a snapshot's Reserved unit is replayed as the controller treats it.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from koordqueue.domain import admission_checks as ac
from koordqueue.domain import names, requeue
from koordqueue.domain.effects import (
    Effect,
    ResumeConsumer,
    SetUnitStatus,
    UnitEvent,
)
from koordqueue.domain.job_extension import backoff_delay
from koordqueue.domain.mapping import QuotaName, queue_name_for
from koordqueue.domain.queue_unit import Phase, QueueUnit


def queue_of(unit: QueueUnit) -> str | None:
    """The Queue whose checks `unit` answers to (its quota's name), None without one."""
    resolution = queue_name_for(unit.labels)
    return resolution.name if isinstance(resolution, QuotaName) else None


def asked(by_queue: Mapping[str, tuple[ac.CheckSpec, ...]], unit: QueueUnit) -> tuple[str, ...]:
    """The checks `unit` must pass, given each Queue's checks (none: released at once)."""
    queue = queue_of(unit)
    return ac.required(by_queue.get(queue, ()), unit.labels) if queue else ()


def reserve(
    group: Sequence[Effect],
    checks: tuple[str, ...],
    objects: Mapping[str, ac.CheckObject],
    strict: bool,
) -> tuple[list[Effect], Phase | None]:
    """A unit's effects of a round, as Koord-Queue's Dequeue writes them, and the phase its
    admission now writes (None: unchanged, Dequeued). An admission on a queue with matching
    `checks` becomes a reservation (Reserved, each check Pending, event QuotaReserved), one on
    a strict-dequeue queue SchedReady (the scheduler's SchedSucceed resumes it); either way
    the workload stays suspended. `objects`: Kueue's AdmissionChecks the checks name."""
    admission = next(
        (e for e in group if isinstance(e, SetUnitStatus) and e.admission is not None), None
    )
    if admission is None:
        return list(group), None
    event: tuple[str, str] | None
    if checks:
        phase, message = Phase.RESERVED, ac.MSG_RESERVED
        event = (
            names.REASON_QUOTA_RESERVED,
            ac.MSG_RESERVED_EVENT.format(checks=ac.labelled(checks, objects)),
        )
    elif strict:
        phase, message, event = Phase.SCHED_READY, ac.MSG_SCHED_READY, None
    else:
        return list(group), None
    out: list[Effect] = []
    for effect in group:
        if effect is admission:
            said = tuple(ac.pending_message(objects.get(n)) for n in checks)
            out.append(
                replace(effect, message=message, phase=phase, checks=checks, check_messages=said)
            )
        elif isinstance(effect, UnitEvent) and effect.reason == names.REASON_ADMITTED:
            out.append(effect if event is None else
                       replace(effect, reason=event[0], message=event[1]))
        elif not isinstance(effect, ResumeConsumer):
            out.append(effect)
    return out, phase


@dataclass(frozen=True, slots=True)
class Release:
    """Every check asked for is Ready: the unit is admitted."""

    phase: Phase
    """Dequeued, or SchedReady in strict dequeue mode."""
    message: str = ac.MSG_ALL_READY
    event_type: str = names.EVENT_NORMAL
    reason: str = names.REASON_ADMITTED

    @property
    def resume(self) -> bool:
        """The workload runs now (strict mode: the scheduler's SchedSucceed resumes it)."""
        return self.phase is Phase.DEQUEUED


@dataclass(frozen=True, slots=True)
class BackOff:
    """A check is Retry or Rejected: the reservation is given back until `until`."""

    failed: ac.CheckState
    attempts: int
    """status.attempts after this back-off."""
    until: float
    requeue: requeue.RequeueState | None
    """status.requeueState to write (the QueueUnitRequeueState gate), else None."""
    message: str
    phase: Phase = Phase.BACKOFF
    event_type: str = names.EVENT_WARNING
    reason: str = names.REASON_BACKOFF


@dataclass(frozen=True, slots=True)
class Clock:
    """What a back-off's deadline is computed from."""

    now: float
    attempts: int = 0
    """status.attempts before it."""
    structured: bool = False
    """The QueueUnitRequeueState gate: requeue.record's schedule instead of the flat one."""
    previous: requeue.RequeueState | None = None
    base: float = requeue.DEFAULT_BASE
    """--backoff-base-seconds (the structured schedule)."""


def fate(
    states: Iterable[ac.CheckState],
    asked: Iterable[str],
    strict: bool,
    clock: Clock,
    rng: random.Random | None = None,
) -> Release | BackOff | None:
    """What a Reserved unit's check states call for (None: it keeps waiting, Reserved)."""
    evaluation = ac.evaluate(states, asked)
    if evaluation.verdict is ac.Verdict.READY:
        return Release(Phase.SCHED_READY if strict else Phase.DEQUEUED)
    if evaluation.verdict is not ac.Verdict.BACK_OFF or evaluation.failed is None:
        return None
    attempts = clock.attempts + 1
    structured = (
        requeue.record(clock.previous, clock.base, clock.now, rng) if clock.structured else None
    )
    until = structured.requeue_at if structured else clock.now + backoff_delay(attempts, rng)
    message = ac.failure_message(evaluation.failed, until - clock.now)
    return BackOff(evaluation.failed, attempts, until, structured, message)


def fate_effects(unit: QueueUnit, decided: Release | BackOff) -> list[Effect]:
    """The decision as effects (the replay records them; the controller writes the same
    phase, message and event with its guarded patch)."""
    out: list[Effect] = [SetUnitStatus(unit, decided.message, decided.phase)]
    if isinstance(decided, Release) and decided.resume:
        out.append(ResumeConsumer(unit))
    out.append(UnitEvent(unit, decided.event_type, decided.reason, decided.message))
    return out
