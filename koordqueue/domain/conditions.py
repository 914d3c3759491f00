"""QueueUnit status.conditions: the phase mirrored as metav1.Conditions (issue 35 point 3).

Koord-Queue's types and reasons (pkg/utils/conditions.go, pkg/apis/.../type.go). The phase
stays the truth: nothing decides on a condition, so a stale one cannot change queueing. Pure:
conditions in, conditions out, with the time as a string; the status writer (kube) calls it.

lastTransitionTime changes only when a condition's status flips (meta.SetStatusCondition's
rule); a changed reason or message keeps it. Evicted is never introduced by a fresh unit
being queued, only cleared (False, Requeued) when an evicted unit is queued again; PodsReady
likewise is only flipped back, never added False.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from koordqueue.domain.queue_unit import Phase

QUOTA_RESERVED: Final = "QuotaReserved"
ADMITTED: Final = "Admitted"
PODS_READY: Final = "PodsReady"
FINISHED: Final = "Finished"
EVICTED: Final = "Evicted"
TYPES: Final = (QUOTA_RESERVED, ADMITTED, PODS_READY, FINISHED, EVICTED)

# reasons on QuotaReserved, Admitted, PodsReady, Finished
REASON_PENDING: Final = "Pending"
REASON_QUOTA_RESERVED: Final = "QuotaReserved"
REASON_WAITING_FOR_ADMISSION_CHECKS: Final = "WaitingForAdmissionChecks"
REASON_ADMITTED: Final = "Admitted"
REASON_PODS_RUNNING: Final = "PodsRunning"
REASON_SUCCEEDED: Final = "Succeeded"
REASON_FAILED: Final = "Failed"
REASON_SCHEDULING_FAILED: Final = "SchedulingFailed"
REASON_REQUEUED: Final = "Requeued"
# reasons on Evicted (and on Admitted=False when the eviction's cause is known)
REASON_DEACTIVATED: Final = "Deactivated"
REASON_BACKOFF_TIMEOUT: Final = "BackoffTimeout"
REASON_PREEMPTED: Final = "Preempted"
REASON_MAXIMUM_EXECUTION_TIME_EXCEEDED: Final = "MaximumExecutionTimeExceeded"

MSG_WAITING: Final = "The queue unit is waiting in its queue"
MSG_NOT_ADMITTED: Final = "The queue unit is not admitted yet"
MSG_PODS_NOT_RUNNING: Final = "The pods of the job are not running"
MSG_REQUEUED: Final = "The queue unit is queued again"
MSG_QUOTA_RESERVED: Final = "Quota is reserved in the queue"
MSG_WAITING_FOR_CHECKS: Final = "Waiting for all admission checks to be ready"
MSG_ADMITTED: Final = "The queue unit is admitted and the job is released"
MSG_PODS_RUNNING: Final = "The pods of the job are running"
MSG_SUCCEEDED: Final = "The job succeeded"
MSG_FAILED: Final = "The job failed"
MSG_BACKOFF_RELEASED: Final = "The reservation is released while backing off"
MSG_NO_LONGER_ADMITTED: Final = "The queue unit is no longer admitted"
MSG_PREEMPTED_RELEASED: Final = "The reservation is released: preempted"


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str
    last_transition_time: str = ""

    def to_object(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": "True" if self.status else "False",
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
        }


Conditions = tuple[Condition, ...]


def from_objects(objects: Iterable[Mapping[str, Any]] | None) -> Conditions:
    """status.conditions as read from the API (entries without a type are dropped)."""
    out: list[Condition] = []
    for obj in objects or ():
        kind = obj.get("type")
        if not isinstance(kind, str) or not kind:
            continue
        out.append(
            Condition(
                kind,
                obj.get("status") == "True",
                str(obj.get("reason") or ""),
                str(obj.get("message") or ""),
                str(obj.get("lastTransitionTime") or ""),
            )
        )
    return tuple(out)


def to_objects(conditions: Conditions) -> list[dict[str, Any]]:
    return [c.to_object() for c in conditions]


def find(conditions: Sequence[Condition], kind: str) -> Condition | None:
    return next((c for c in conditions if c.type == kind), None)


def is_true(conditions: Sequence[Condition], kind: str) -> bool:
    found = find(conditions, kind)
    return found is not None and found.status


def set_condition(
    conditions: Conditions, new: Condition, now: str, *, only_if_present: bool = False
) -> Conditions:
    """`new` in place of its type (appended when absent unless `only_if_present`)."""
    for index, old in enumerate(conditions):
        if old.type != new.type:
            continue
        if (old.status, old.reason, old.message) == (new.status, new.reason, new.message):
            return conditions
        stamp = now if old.status != new.status else old.last_transition_time
        return (
            *conditions[:index],
            replace(new, last_transition_time=stamp),
            *conditions[index + 1 :],
        )
    if only_if_present:
        return conditions
    return (*conditions, replace(new, last_transition_time=now))


def _rules(phase: Phase, message: str) -> list[tuple[Condition, bool]]:
    """(condition, only if present) for `phase`; Koord-Queue's SyncQueueUnitConditions."""
    reserved = Condition(QUOTA_RESERVED, True, REASON_QUOTA_RESERVED, MSG_QUOTA_RESERVED)
    admitted = Condition(ADMITTED, True, REASON_ADMITTED, MSG_ADMITTED)
    if phase is Phase.ENQUEUED:
        return [
            (Condition(QUOTA_RESERVED, False, REASON_PENDING, MSG_WAITING), False),
            (Condition(ADMITTED, False, REASON_PENDING, MSG_NOT_ADMITTED), False),
            # PodsReady starts the execution clock: leaving it True would count twice
            (Condition(PODS_READY, False, REASON_PENDING, MSG_PODS_NOT_RUNNING), True),
            (Condition(EVICTED, False, REASON_REQUEUED, MSG_REQUEUED), True),
        ]
    if phase is Phase.RESERVED:
        return [
            (reserved, False),
            (
                Condition(
                    ADMITTED, False, REASON_WAITING_FOR_ADMISSION_CHECKS, MSG_WAITING_FOR_CHECKS
                ),
                False,
            ),
        ]
    if phase in (Phase.DEQUEUED, Phase.SCHED_READY, Phase.SCHED_SUCCEED):
        return [(reserved, False), (admitted, False)]
    if phase is Phase.RUNNING:
        return [
            (reserved, False),
            (admitted, False),
            (Condition(PODS_READY, True, REASON_PODS_RUNNING, MSG_PODS_RUNNING), False),
        ]
    if phase is Phase.SUCCEED:
        return [(Condition(FINISHED, True, REASON_SUCCEEDED, MSG_SUCCEEDED), False)]
    if phase is Phase.FAILED:
        return [(Condition(FINISHED, True, REASON_FAILED, MSG_FAILED), False)]
    if phase is Phase.BACKOFF:
        reason = REASON_BACKOFF_TIMEOUT
        return [
            (Condition(QUOTA_RESERVED, False, reason, MSG_BACKOFF_RELEASED), False),
            (Condition(ADMITTED, False, reason, MSG_NO_LONGER_ADMITTED), False),
            (Condition(PODS_READY, False, reason, MSG_PODS_NOT_RUNNING), True),
            (Condition(EVICTED, True, reason, message), False),
        ]
    if phase is Phase.SCHED_FAILED:
        return [(Condition(ADMITTED, False, REASON_SCHEDULING_FAILED, message), False)]
    if phase is Phase.PREEMPTED:
        return [
            (Condition(QUOTA_RESERVED, False, REASON_PREEMPTED, MSG_PREEMPTED_RELEASED), False),
            (Condition(PODS_READY, False, REASON_PREEMPTED, MSG_PODS_NOT_RUNNING), True),
            (Condition(EVICTED, True, REASON_PREEMPTED, message), False),
            (Condition(ADMITTED, False, REASON_PREEMPTED, message), False),
        ]
    return []


def sync(conditions: Conditions, phase: Phase, message: str, now: str) -> Conditions:
    """The conditions after the unit's phase became `phase` (with status message `message`)."""
    for condition, only_if_present in _rules(phase, message):
        conditions = set_condition(conditions, condition, now, only_if_present=only_if_present)
    return conditions


def evict(conditions: Conditions, reason: str, message: str, now: str) -> Conditions:
    """Evicted=True and Admitted=False with the eviction's precise `reason` (Deactivated,
    Preempted, MaximumExecutionTimeExceeded), over what `sync` inferred from the phase."""
    conditions = set_condition(conditions, Condition(EVICTED, True, reason, message), now)
    return set_condition(conditions, Condition(ADMITTED, False, reason, message), now)


def stop_execution_clock(conditions: Conditions, now: str) -> Conditions:
    """PodsReady back to False (if present), so a discarded interval is not banked again."""
    return set_condition(
        conditions,
        Condition(PODS_READY, False, REASON_PENDING, MSG_PODS_NOT_RUNNING),
        now,
        only_if_present=True,
    )
