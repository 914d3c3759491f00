"""A recorded outcome in one word and one line: the reason a unit waits (or does not).

Everything that reports why a unit waits reads it from the round's record through these two
functions: `explain` (with the numbers behind it), the visibility API and `kubectl
koordqueue` (the line). Rejections, QueueNotFound and an unmapped unit say exactly the status
message the controller writes for them (effects.py); the skips, which have no status write,
get one line each from the format constants in names.py.
"""

from __future__ import annotations

from enum import StrEnum

from koordqueue.domain.admission import (
    EmptyQuotaSpec,
    QuotaCycle,
    QuotaExceeded,
    QuotaMissing,
    Rejection,
)
from koordqueue.domain.mapping import UnresolvedReason
from koordqueue.domain.names import (
    MSG_BACKING_OFF,
    MSG_BEING_RECLAIMED,
    MSG_BEYOND_MAX_DEPTH,
    MSG_BLOCKED_BY_HEAD,
    MSG_DEACTIVATED,
    MSG_HIGH_PRIORITY_WAITING,
    MSG_INACTIVE,
    MSG_MAX_EXEC_TIME_EXCEEDED,
    MSG_NOT_OFFERED,
    MSG_QUEUE_HELD,
    MSG_RECLAIMED,
    MSG_WAITING_FOR_PODS_RUNNING,
    MSG_WAITING_RECLAIM,
    REASON_ADD_QUEUE_FAIL,
    REASON_ADMITTED,
    REASON_DEACTIVATED,
    REASON_QUEUE_NOT_FOUND,
    REASON_RECLAIMED,
)
from koordqueue.domain.round import (
    Admit,
    BackingOff,
    BeyondMaxDepth,
    BlockedByHead,
    BudgetSpent,
    Deactivated,
    Finished,
    HighPriorityWaiting,
    Holding,
    Inactive,
    NotOffered,
    Outcome,
    Preempted,
    QueueHeld,
    QueueNotFound,
    QueueUnserved,
    Reclaimed,
    Reject,
    RoundResult,
    Unmapped,
    WaitingForPodsRunning,
)


class Reason(StrEnum):
    """The one-word answer; event reasons where an event exists, so operators can grep both."""

    ADMITTED = REASON_ADMITTED
    FINISHED = "Finished"
    NO_QUOTA_LABEL = "NoQuotaLabel"
    INVALID_QUOTA_LABEL = "InvalidQuotaLabel"
    QUEUE_NOT_FOUND = REASON_QUEUE_NOT_FOUND
    ADD_QUEUE_FAIL = REASON_ADD_QUEUE_FAIL
    QUEUE_HELD = "QueueHeld"
    QUOTA_EXCEEDED = "QuotaExceeded"
    ANCESTOR_EXHAUSTED = "AncestorExhausted"
    EMPTY_QUOTA_SPEC = "EmptyQuotaSpec"
    QUOTA_CYCLE = "QuotaCycle"
    ANCESTOR_NOT_FOUND = "AncestorNotFound"
    BLOCKED_BY_HEAD = "BlockedByHead"
    BEYOND_MAX_DEPTH = "BeyondMaxDepth"
    WAITING_FOR_PODS_RUNNING = "WaitingForPodsRunning"
    BACKOFF = "Backoff"
    INACTIVE = "Inactive"
    DEACTIVATED = REASON_DEACTIVATED
    BEING_RECLAIMED = "BeingReclaimed"
    """A queue-level preemption marked it: it holds its quota until reclaimed."""
    RECLAIMED = REASON_RECLAIMED
    FITS = "Fits"
    INVALID_QUEUE_UNIT = "InvalidQueueUnit"
    NO_QUEUE_UNIT = "NoQueueUnit"


def verdict_of(outcome: Outcome | None) -> Reason:
    """The one-word answer for a recorded outcome (None: the unit is in no record)."""
    match outcome:
        case Admit() | NotOffered() | None:
            return Reason.FITS
        case Holding():
            return Reason.ADMITTED
        case Preempted():
            return Reason.BEING_RECLAIMED
        case Reclaimed():
            return Reason.RECLAIMED
        case Finished():
            return Reason.FINISHED
        case Unmapped(unresolved=unresolved):
            if unresolved.reason is UnresolvedReason.NO_LABEL:
                return Reason.NO_QUOTA_LABEL
            return Reason.INVALID_QUOTA_LABEL
        case QueueNotFound():
            return Reason.QUEUE_NOT_FOUND
        case QueueUnserved():
            return Reason.ADD_QUEUE_FAIL
        case QueueHeld():
            return Reason.QUEUE_HELD
        case Reject(decision=decision):
            return rejection_reason(decision)
        case WaitingForPodsRunning():
            return Reason.WAITING_FOR_PODS_RUNNING
        case BeyondMaxDepth():
            return Reason.BEYOND_MAX_DEPTH
        case BlockedByHead() | HighPriorityWaiting():
            return Reason.BLOCKED_BY_HEAD
        case BackingOff():
            return Reason.BACKOFF
        case Inactive():
            return Reason.INACTIVE
        case Deactivated() | BudgetSpent():
            return Reason.DEACTIVATED
    raise AssertionError(f"no reason for {outcome!r}")  # pragma: no cover (union exhausted)


def rejection_reason(decision: Rejection) -> Reason:
    if isinstance(decision, QuotaExceeded):
        own = decision.path[:1] == (decision.quota,)
        return Reason.QUOTA_EXCEEDED if own else Reason.ANCESTOR_EXHAUSTED
    if isinstance(decision, EmptyQuotaSpec):
        return Reason.EMPTY_QUOTA_SPEC
    if isinstance(decision, QuotaCycle):
        return Reason.QUOTA_CYCLE
    if isinstance(decision, QuotaMissing):
        return Reason.ANCESTOR_NOT_FOUND
    return Reason.QUOTA_EXCEEDED  # AlreadyReserved: never offered while admitted


def verdict_message(outcome: Outcome) -> str:
    """The one line for a waiting unit's recorded outcome (the status message where the
    controller writes one)."""
    match outcome:
        case Reject(decision=decision):
            return decision.message
        case Admit(decision=decision):
            return decision.message
        case QueueNotFound(queue=queue):
            return RoundResult.queue_not_found_message(outcome.unit, queue)
        case Unmapped(unresolved=unresolved):
            return unresolved.message
        case QueueUnserved(error=error):
            return error
        case QueueHeld(queue=queue):
            return MSG_QUEUE_HELD.format(queue=queue)
        case BlockedByHead(quota=quota, head=head):
            return MSG_BLOCKED_BY_HEAD.format(quota=quota, head=head)
        case HighPriorityWaiting(waiting=waiting, threshold=threshold):
            return MSG_HIGH_PRIORITY_WAITING.format(
                threshold=threshold, count=len(waiting), first=", ".join(waiting[:3])
            )
        case BeyondMaxDepth(position=position, depth=depth):
            return MSG_BEYOND_MAX_DEPTH.format(position=position, depth=depth)
        case WaitingForPodsRunning(not_running=not_running):
            return MSG_WAITING_FOR_PODS_RUNNING.format(units=", ".join(sorted(not_running)))
        case BackingOff(until=until):
            return MSG_BACKING_OFF.format(until=until)
        case Inactive():
            return MSG_INACTIVE
        case Deactivated(reclaiming=reclaiming):
            return MSG_BEING_RECLAIMED if reclaiming else MSG_DEACTIVATED
        case BudgetSpent():
            return MSG_MAX_EXEC_TIME_EXCEEDED
        case Preempted():
            return MSG_WAITING_RECLAIM
        case Reclaimed(replicas=replicas):
            return MSG_RECLAIMED.format(replicas=replicas)
    return MSG_NOT_OFFERED
