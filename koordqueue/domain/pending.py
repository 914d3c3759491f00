"""The pending units of a round's record, in the order the next round tries them.

One reader of the record for everyone who lists pending units (the visibility API, `kubectl
koordqueue`, a Queue's status): the order is the round's `waiting` (queues in the order the
round served them, each queue in its policy's order), the reason each unit waits is its last
entry in the record (`verdict.py`). Nothing here re-derives a rule: a unit the record does
not hold is not pending. Units no round tries (backing off, queue missing or not served, no
quota label) follow the ordered ones, without positions, in record order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from koordqueue.domain.mapping import QuotaName, queue_name_for
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.round import (
    BackingOff,
    Inactive,
    Outcome,
    QueueNotFound,
    QueueUnserved,
    RoundResult,
    Unmapped,
)
from koordqueue.domain.verdict import Reason, verdict_message, verdict_of

NOT_TRIED = (BackingOff, Inactive, QueueNotFound, QueueUnserved, Unmapped)
"""Outcomes of pending units the next round does not offer to CheckUsage."""


@dataclass(frozen=True, slots=True)
class PendingUnit:
    """One pending unit as the record has it. Positions are 1-based; None: not tried."""

    unit: QueueUnit
    queue: str
    """Its queue, the same string as its quota ("" when it names none)."""
    position: int | None
    """In the whole round: queues in serving order, each in its own order."""
    position_in_queue: int | None
    reason: Reason
    message: str

    @property
    def quota(self) -> str:
        return self.queue


def _queue_of(unit: QueueUnit) -> str:
    resolution = queue_name_for(unit.labels)
    return resolution.name if isinstance(resolution, QuotaName) else ""


def last_outcomes(record: Iterable[Outcome]) -> dict[str, Outcome]:
    """uid -> the unit's last entry in the record (its verdict, as `round.outcome_of`)."""
    return {outcome.unit.uid: outcome for outcome in record}


def queue_order(result: RoundResult, queue: str) -> list[tuple[int, QueueUnit]]:
    """One queue's waiting units with their 1-based positions in it, as the round left them
    (what `pending_units` numbers `position_in_queue`; a Queue's status reads it alone)."""
    return list(enumerate(result.waiting.get(queue, ()), start=1))


Verdicts = dict[str, tuple[Outcome, Reason, str]]
"""uid -> (its last outcome, that outcome's reason and line): a reader's cache across rounds.
An entry carried from an earlier round's record is the same object, so its line is not
formatted again."""


def _verdict(outcome: Outcome, cache: Verdicts | None) -> tuple[Reason, str]:
    if cache is None:
        return verdict_of(outcome), verdict_message(outcome)
    hit = cache.get(outcome.unit.uid)
    if hit is not None and hit[0] is outcome:
        return hit[1], hit[2]
    reason, message = verdict_of(outcome), verdict_message(outcome)
    cache[outcome.unit.uid] = (outcome, reason, message)
    return reason, message


def pending_units(result: RoundResult, cache: Verdicts | None = None) -> list[PendingUnit]:
    """Every pending unit of the round's record: the ordered ones, then those not tried.
    `cache`: kept by a reader that asks every round (entries of units no longer pending are
    dropped)."""
    last = last_outcomes(result.outcomes)
    out: list[PendingUnit] = []
    position = 0
    for queue in result.waiting:
        for index, unit in queue_order(result, queue):
            position += 1
            outcome = last.get(unit.uid)
            if outcome is None:  # (every waiting unit has an entry; defensive)
                reason, message = verdict_of(None), ""
            else:
                reason, message = _verdict(outcome, cache)
            out.append(PendingUnit(unit, queue, position, index, reason, message))
    for outcome in last.values():
        if isinstance(outcome, NOT_TRIED):
            unit = outcome.unit
            reason, message = _verdict(outcome, cache)
            out.append(PendingUnit(unit, _queue_of(unit), None, None, reason, message))
    if cache is not None and len(cache) > len(out):
        keep = {entry.unit.uid for entry in out}
        for uid in [uid for uid in cache if uid not in keep]:
            del cache[uid]
    return out


def in_quota(
    pending: Iterable[PendingUnit], quota: str, paths: Mapping[str, tuple[str, ...]]
) -> list[tuple[int | None, PendingUnit]]:
    """The units counted against `quota` (its own and its descendants'), each with its
    position among them: the order in which they would claim the quota's room. `paths`:
    queue -> its chain up to the root (`RoundResult.paths`)."""
    out: list[tuple[int | None, PendingUnit]] = []
    position = 0
    for entry in pending:
        if quota != entry.queue and quota not in paths.get(entry.queue, ()):
            continue
        if entry.position is None:
            out.append((None, entry))
        else:
            position += 1
            out.append((position, entry))
    return out
