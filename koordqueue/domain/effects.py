"""A round's record turned into what the world sees: status writes, events, Job resume/suspend.

One pure function, `effects`, decides every event reason and status message of an admission
round. The live controller executes the effects through its API writes, the simulator by
recording them, so `simulate` shows exactly the events and messages the cluster gets.

Messages are written once per change: a unit rejected with the same message round after round
gets one status write and one event, not one per round. `reported` (uid -> last status message
written) is the executor's memory of that; it updates it for every `SetUnitStatus` it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from koordqueue.domain import conditions
from koordqueue.domain.admission import Admitted
from koordqueue.domain.engine import RoundResult
from koordqueue.domain.integrations import INTEGRATIONS
from koordqueue.domain.names import (
    EVENT_NORMAL,
    EVENT_WARNING,
    MSG_DEACTIVATED,
    MSG_DEACTIVATED_EVENT,
    MSG_ENQUEUED_AFTER_PREEMPTED,
    MSG_INACTIVE,
    MSG_MAX_EXEC_TIME_EVENT,
    MSG_MAX_EXEC_TIME_EXCEEDED,
    MSG_PREEMPTED,
    MSG_RECLAIMED,
    MSG_UNIT_ENQUEUED,
    MSG_WAITING_RECLAIM,
    REASON_ADD_QUEUE_FAIL,
    REASON_ADMITTED,
    REASON_DEACTIVATED,
    REASON_FAILED_SCHEDULING,
    REASON_MAX_EXEC_TIME_EXCEEDED,
    REASON_PREEMPTED,
    REASON_QUEUE_NOT_FOUND,
    REASON_RECLAIMED,
)
from koordqueue.domain.queue_unit import AdmissionCount, Phase, QueueUnit
from koordqueue.domain.round import (
    Admit,
    BudgetSpent,
    Deactivated,
    Inactive,
    Outcome,
    Preempted,
    QueueNotFound,
    Reclaimed,
    Reject,
    Unmapped,
)

JOB_KIND = "Job"
WORKLOAD_KINDS: Final = frozenset(i.workload.kind for i in INTEGRATIONS.values())
"""consumerRef kinds of every job integration (Job, PyTorchJob, MPIJob, JobSet, Pod)."""


@dataclass(frozen=True, slots=True)
class SetUnitStatus:
    """Write the unit's status message, and its phase unless `phase` is None.

    With `admission`, the write admits the unit (Dequeued, admission time, its pod sets) and
    must not overwrite a newer status: executors guard it and roll the admission back when it
    cannot be written. A failed phase write drops the unit's later effects of the same round.
    """

    unit: QueueUnit
    message: str
    phase: Phase | None = None
    admission: Admitted | None = None
    evicted: str | None = None
    """The eviction's cause (domain/conditions.py reasons): Evicted=True, Admitted=False."""
    bank: bool = False
    """Add the time run since PodsReady to status.accumulatedPastExecutionTimeSeconds
    (MaximumExecutionTime on): an eviction that keeps the budget."""
    spent: bool = False
    """The budget is spent: the banked time is reset and PodsReady goes False (the clock
    stops), so the eviction that follows banks nothing."""
    admissions: tuple[AdmissionCount, ...] | None = None
    """status.admissions to write (a preemption's marks, what a partial reclaim leaves);
    None: as the phase implies."""
    checks: tuple[str, ...] = ()
    """With `admission`: the admission checks its queue asks for; the write reserves (phase
    Reserved, each check Pending) instead of admitting (domain/admission_checks.py)."""
    check_messages: tuple[str, ...] = ()
    """Each check's Pending message (its AdmissionCheck's controller; "" when none names it)."""


@dataclass(frozen=True, slots=True)
class UnitEvent:
    """A Kubernetes Event on the unit (`cause` is the outcome it reports, for metrics)."""

    unit: QueueUnit
    type: str
    reason: str
    message: str
    cause: Outcome | None = field(default=None, compare=False)
    on_workload: bool = False
    """Recorded on the unit's workload (spec.consumerRef) instead, when it has one."""


@dataclass(frozen=True, slots=True)
class QueueEvent:
    """A Kubernetes Event on the Queue `queue`."""

    queue: str
    type: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ResumeConsumer:
    """Let the unit's workload run (a Job: suspend false)."""

    unit: QueueUnit


@dataclass(frozen=True, slots=True)
class SuspendConsumer:
    """Stop the unit's workload again (a Job: suspend true)."""

    unit: QueueUnit


@dataclass(frozen=True, slots=True)
class DeactivateUnit:
    """Write spec.active=false on the unit (its budget is spent)."""

    unit: QueueUnit


Effect = (
    SetUnitStatus | UnitEvent | QueueEvent | ResumeConsumer | SuspendConsumer | DeactivateUnit
)


class UnitStatus(NamedTuple):
    """A unit's phase and status message, as one status write sets them."""

    phase: Phase
    message: str


CREATED_STATUS: Final = UnitStatus(Phase.ENQUEUED, MSG_UNIT_ENQUEUED)
"""The first status a job integration writes on the unit it made for a workload (before any
round decides on it). The controller's one workload reconciler (kube/controller/workloads.py)
writes it; the simulator records it through `created_effects`, so both say the same."""


def created_effects(unit: QueueUnit) -> list[Effect]:
    """What the controller writes on a unit as it appears, before any round.

    A workload's unit (any job integration kind) gets CREATED_STATUS from the reconciler that
    made it; on a queue no round serves (an unregistered policy) that message stays. A
    QueueUnit made by hand gets nothing until a round writes its first message.
    """
    if unit.consumer_kind not in WORKLOAD_KINDS:
        return []
    return [SetUnitStatus(unit, CREATED_STATUS.message, CREATED_STATUS.phase)]


def preempted_message(by: QueueUnit) -> str:
    return MSG_PREEMPTED.format(unit=by.key)


def effects(
    record: RoundResult | Iterable[Outcome], reported: Mapping[str, str] | None = None
) -> list[Effect]:
    """Every write and event a round's record asks for, in record order (see module doc)."""
    outcomes = record.outcomes if isinstance(record, RoundResult) else record
    seen = reported if reported is not None else {}
    out: list[Effect] = []
    for outcome in outcomes:
        out.extend(outcome_effects(outcome, seen))
    return out


def outcome_effects(outcome: Outcome, reported: Mapping[str, str]) -> list[Effect]:
    """The effects of one outcome; skips and back-offs have none (explain reports them)."""
    unit = outcome.unit
    if isinstance(outcome, Admit):
        message = outcome.decision.message
        return [
            SetUnitStatus(unit, message, Phase.DEQUEUED, admission=outcome.decision),
            ResumeConsumer(unit),
            UnitEvent(unit, EVENT_NORMAL, REASON_ADMITTED, message, outcome),
        ]
    if isinstance(outcome, Preempted):
        # marked: it keeps its quota until a later round reclaims it (`Reclaimed`)
        return [
            SetUnitStatus(unit, MSG_WAITING_RECLAIM, admissions=outcome.admissions),
            UnitEvent(
                unit, EVENT_WARNING, REASON_PREEMPTED, preempted_message(outcome.by), outcome
            ),
        ]
    if isinstance(outcome, Reclaimed):
        reclaimed = UnitEvent(
            unit, EVENT_NORMAL, REASON_RECLAIMED,
            MSG_RECLAIMED.format(replicas=outcome.replicas), outcome,
        )
        total = sum(a.replicas for a in unit.admissions)
        if total and outcome.replicas < total:  # some pods run: it keeps their share
            left = tuple(
                AdmissionCount(a.name, a.replicas - a.reclaim, a.running)
                for a in unit.admissions
            )
            return [SetUnitStatus(unit, MSG_RECLAIMED.format(replicas=outcome.replicas),
                                  admissions=left), reclaimed]
        # a workload's unit says what its reconciler writes once the workload is suspended
        status = (
            MSG_ENQUEUED_AFTER_PREEMPTED if unit.consumer_kind in WORKLOAD_KINDS
            else MSG_RECLAIMED.format(replicas=outcome.replicas)
        )
        return [
            SetUnitStatus(unit, status, Phase.ENQUEUED, evicted=conditions.REASON_PREEMPTED),
            SuspendConsumer(unit),
            reclaimed,
        ]
    if isinstance(outcome, Deactivated):
        if outcome.reclaiming:
            return []
        kind = unit.consumer_kind or "QueueUnit"
        return [
            SetUnitStatus(
                unit, MSG_DEACTIVATED, Phase.ENQUEUED, evicted=conditions.REASON_DEACTIVATED,
                bank=True,
            ),
            SuspendConsumer(unit),
            UnitEvent(
                unit, EVENT_NORMAL, REASON_DEACTIVATED, MSG_DEACTIVATED_EVENT.format(kind=kind),
                outcome, on_workload=True,
            ),
        ]
    if isinstance(outcome, BudgetSpent):
        event = MSG_MAX_EXEC_TIME_EVENT.format(budget=outcome.budget)
        return [
            DeactivateUnit(unit),
            SetUnitStatus(
                unit, MSG_MAX_EXEC_TIME_EXCEEDED,
                evicted=conditions.REASON_MAXIMUM_EXECUTION_TIME_EXCEEDED, spent=True,
            ),
            UnitEvent(
                unit, EVENT_WARNING, REASON_MAX_EXEC_TIME_EXCEEDED, event, outcome,
                on_workload=True,
            ),
        ]
    if isinstance(outcome, Inactive):
        return _report(unit, MSG_INACTIVE, reported, None, outcome)
    if isinstance(outcome, Reject):
        return _report(
            unit, outcome.decision.message, reported, REASON_FAILED_SCHEDULING, outcome
        )
    if isinstance(outcome, QueueNotFound):
        message = RoundResult.queue_not_found_message(unit, outcome.queue)
        return _report(unit, message, reported, REASON_QUEUE_NOT_FOUND, outcome)
    if isinstance(outcome, Unmapped):
        # status only: Koord-Queue sends no event for a unit without a quota
        return _report(unit, outcome.unresolved.message, reported, None, outcome)
    return []


def _report(
    unit: QueueUnit,
    message: str,
    reported: Mapping[str, str],
    reason: str | None,
    cause: Outcome,
) -> list[Effect]:
    """A status message and its Warning event, only when the message changed."""
    if reported.get(unit.uid) == message:
        return []
    out: list[Effect] = [SetUnitStatus(unit, message)]
    if reason is not None:
        out.append(UnitEvent(unit, EVENT_WARNING, reason, message, cause))
    return out


def queue_effects(
    queue: str, error: str | None, previous: str | None = None
) -> list[QueueEvent]:
    """A queue that cannot be served gets one AddQueueFail event per new error."""
    if error is None or error == previous:
        return []
    return [QueueEvent(queue, EVENT_WARNING, REASON_ADD_QUEUE_FAIL, error)]


def per_unit(effects: Iterable[Effect]) -> list[list[Effect]]:
    """Consecutive effects on the same object, as groups an executor runs in order."""
    groups: list[list[Effect]] = []
    last: str | None = None
    for effect in effects:
        key = f"queue/{effect.queue}" if isinstance(effect, QueueEvent) else effect.unit.uid
        if groups and key == last:
            groups[-1].append(effect)
        else:
            groups.append([effect])
        last = key
    return groups
