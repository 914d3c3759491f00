"""The pending units of a round's record, in the order the next round tries them.

One reader of the record for everyone who lists pending units (the visibility API, `kubectl
koordqueue`, a Queue's status): the order is the round's `waiting` (queues in the order the
round served them, each queue in its policy's order), the reason each unit waits is its last
entry in the record (`verdict.py`). Nothing here re-derives a rule: a unit the record does
not hold is not pending. Units no round tries (backing off, queue missing or not served, no
quota label) follow the ordered ones, without positions, in record order.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping
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


Verdict = tuple[Outcome | None, Reason, str]
"""A unit's last outcome, and that outcome's reason and line."""
Verdicts = dict[str, Verdict]
"""uid -> its verdict: a reader's cache across rounds. An entry carried from an earlier
round's record is the same object, so its line is not formatted again (and no new object is
made for it)."""


def _verdict(outcome: Outcome, cache: Verdicts | None) -> Verdict:
    if cache is None:
        return outcome, verdict_of(outcome), verdict_message(outcome)
    hit = cache.get(outcome.unit.uid)
    if hit is not None and hit[0] is outcome:
        return hit
    verdict = cache[outcome.unit.uid] = (outcome, verdict_of(outcome), verdict_message(outcome))
    return verdict


NO_VERDICT: Verdict = (None, verdict_of(None), "")


@dataclass(slots=True)
class PendingOrder:
    """A round's pending units as columns, in order: `units[:tried]` are those the next
    round tries (position = index + 1), the rest those it does not. Columns, not an object per
    unit: a reader that asks every round keeps no per-unit objects alive between rounds (with
    15,000 units, those objects made the collector's full passes stall admission)."""

    units: list[QueueUnit]
    queues: list[str]
    in_queue: array[int]
    """1-based position in its queue; 0: not tried."""
    verdicts: list[Verdict]
    tried: int

    def __len__(self) -> int:
        return len(self.units)

    def position(self, index: int) -> int | None:
        return index + 1 if index < self.tried else None

    def entry(self, index: int) -> PendingUnit:
        _, reason, message = self.verdicts[index]
        in_queue = self.in_queue[index]
        return PendingUnit(self.units[index], self.queues[index], self.position(index),
                           in_queue or None, reason, message)


PAUSE_EVERY = 128
"""Units between two calls of a reader's `pause` (~0.15 ms of work: an admission round that
wakes meanwhile waits about that long for the interpreter; at 512 it waited ~1 ms)."""


def pending_order(
    result: RoundResult, cache: Verdicts | None = None, pause: Callable[[], object] | None = None
) -> PendingOrder:
    """Every pending unit of the round's record: the ordered ones, then those not tried.
    `cache`: kept by a reader that asks every round (entries of units no longer pending are
    dropped). `pause`: called every PAUSE_EVERY units, so a reader on another thread can hand
    the interpreter to the admission loop (kube/visibility/view.py)."""
    if pause is None:
        last = last_outcomes(result.outcomes)
    else:
        last = {}
        for n, entry in enumerate(result.outcomes, start=1):
            last[entry.unit.uid] = entry
            if n % PAUSE_EVERY == 0:
                pause()
    order = PendingOrder([], [], array("l"), [], 0)
    units, queues, in_queue, verdicts = order.units, order.queues, order.in_queue, order.verdicts
    for queue, waiting in result.waiting.items():
        for index, unit in enumerate(waiting, start=1):
            outcome = last.get(unit.uid)
            units.append(unit)
            queues.append(queue)
            in_queue.append(index)
            # (every waiting unit has an entry; defensive)
            verdicts.append(NO_VERDICT if outcome is None else _verdict(outcome, cache))
            if pause is not None and len(units) % PAUSE_EVERY == 0:
                pause()
    order.tried = len(units)
    for outcome in last.values():
        if isinstance(outcome, NOT_TRIED):
            units.append(outcome.unit)
            queues.append(_queue_of(outcome.unit))
            in_queue.append(0)
            verdicts.append(_verdict(outcome, cache))
            if pause is not None and len(units) % PAUSE_EVERY == 0:
                pause()
    if cache is not None and len(cache) > len(units):
        keep = {unit.uid for unit in units}
        for uid in [uid for uid in cache if uid not in keep]:
            del cache[uid]
    return order


def pending_units(result: RoundResult, cache: Verdicts | None = None) -> list[PendingUnit]:
    """`pending_order` as one object per unit."""
    order = pending_order(result, cache)
    return [order.entry(i) for i in range(len(order))]


def in_quota(
    order: PendingOrder, quota: str, paths: Mapping[str, tuple[str, ...]]
) -> tuple[array[int], array[int]]:
    """The units counted against `quota` (its own and its descendants'): their indexes in
    `order`, and each one's position among them (0: not tried), the order in which they would
    claim the quota's room. `paths`: queue -> its chain up to the root (`RoundResult.paths`)."""
    indexes, positions = array("l"), array("l")
    position = 0
    counted = {q for q, path in paths.items() if quota in path} | {quota}
    for index, queue in enumerate(order.queues):
        if queue not in counted:
            continue
        indexes.append(index)
        if index < order.tried:
            position += 1
            positions.append(position)
        else:
            positions.append(0)
    return indexes, positions


def own_quota_positions(
    order: PendingOrder,
    paths: Mapping[str, tuple[str, ...]],
    pause: Callable[[], object] | None = None,
) -> array[int]:
    """Each unit's position among the units counted against its own quota (0: not tried).
    `pause`: as `pending_order`'s."""
    counters: dict[str, int] = {}
    out = array("l")
    for index, queue in enumerate(order.queues):
        if pause is not None and index % PAUSE_EVERY == PAUSE_EVERY - 1:
            pause()
        if index >= order.tried:
            out.append(0)
            continue
        for quota in paths.get(queue) or (queue,):
            counters[quota] = counters.get(quota, 0) + 1
        out.append(counters[queue])
    return out
