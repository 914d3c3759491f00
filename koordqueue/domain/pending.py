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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter

from koordqueue.domain.mapping import QuotaName, queue_name_for
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.round import (
    BackingOff,
    Inactive,
    LazyOutcomes,
    Outcome,
    Part,
    QueueNotFound,
    QueueUnserved,
    Record,
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
    runs: list[tuple[str, int, int]] = field(default_factory=list)
    """The tried units queue by queue: (queue, start, end) of each one's slice, in order."""
    slices: list[object] = field(default_factory=list)
    """Each run's slice as the reader kept it: the same object for as long as the queue's
    units and their last entries stay the same (a renderer's cache key)."""

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

_UID = attrgetter("uid")


@dataclass(slots=True)
class _Read:
    """What a reader took from one part of a record: uid -> its last entry there."""

    part: Part
    length: int
    last: dict[str, Outcome]
    not_tried: bool
    """Whether any entry is one of NOT_TRIED."""


@dataclass(slots=True)
class _Block:
    """One queue's slice of the order, with what it was built from."""

    units: list[QueueUnit]
    """The queue's waiting units as read (a unit equal by value keeps the slice)."""
    outcomes: list[Outcome | None]
    """Each waiting unit's last entry."""
    verdicts: list[Verdict]
    in_queue: array[int]


class PendingReader:
    """Reads rounds' records into their pending order, for a reader that asks every round
    (the visibility API). A round costs what changed since the last one read: a carried part
    of the record (`Record.parts`, the same object round after round) is read once, and a
    queue whose units and last entries are those of the last read keeps its slice; the rest
    is copied in C. Rebuilding the whole order each round (15,000 units behind a busy queue)
    was the visibility API's whole cost under a burst, and the young objects it made the
    collector's."""

    def __init__(self, verdicts: Verdicts | None = None) -> None:
        self.verdicts: Verdicts = {} if verdicts is None else verdicts
        """The verdict cache (entries of units no longer pending are dropped)."""
        self._reads: dict[int, _Read] = {}
        self._blocks: dict[str, _Block] = {}
        self.rebuilt = 0
        """Units whose slice was built again by the last read (tests, profiles)."""

    def read(self, result: RoundResult, pause: Callable[[], object] | None = None) -> PendingOrder:
        """Every pending unit of the round's record: the ordered ones, then those not tried.
        `pause`: called every PAUSE_EVERY units of interpreted work and after each step done
        in C, so a reader on another thread can hand the interpreter to the admission loop
        (kube/visibility/view.py)."""
        last, not_tried = self._last_outcomes(result, pause)
        order = PendingOrder([], [], array("l"), [], 0)
        units, queues, verdicts = order.units, order.queues, order.verdicts
        in_queue = order.in_queue
        blocks: dict[str, _Block] = {}
        self.rebuilt = 0
        for queue, waiting in result.waiting.items():
            if not waiting:
                continue
            outcomes = list(map(last.get, map(_UID, waiting)))
            block = self._blocks.get(queue)
            if block is None or block.outcomes != outcomes or block.units != waiting:
                # (a unit changed while its entry was carried: its items change with it)
                block = self._block(waiting, outcomes, pause)
                self.rebuilt += len(waiting)
            blocks[queue] = block
            start = len(units)
            units.extend(waiting)
            queues.extend([queue] * len(waiting))
            in_queue.extend(block.in_queue)
            verdicts.extend(block.verdicts)
            order.runs.append((queue, start, len(units)))
            order.slices.append(block)
            if pause is not None:
                pause()
        self._blocks = blocks
        order.tried = len(units)
        if not_tried:
            for n, outcome in enumerate(last.values(), start=1):
                if isinstance(outcome, NOT_TRIED):
                    units.append(outcome.unit)
                    queues.append(_queue_of(outcome.unit))
                    in_queue.append(0)
                    verdicts.append(_verdict(outcome, self.verdicts))
                if pause is not None and n % PAUSE_EVERY == 0:
                    pause()
        cache = self.verdicts
        if len(cache) > slack(len(units)):
            keep = set(map(_UID, units))
            for uid in [uid for uid in cache if uid not in keep]:
                del cache[uid]
        return order

    def _last_outcomes(
        self, result: RoundResult, pause: Callable[[], object] | None
    ) -> tuple[dict[str, Outcome], bool]:
        """uid -> each unit's last entry in the record (as `round.outcome_of`), and whether any
        entry is one of NOT_TRIED; each part read once for as long as records carry it."""
        record = result.outcomes
        parts: list[Part] = record.parts() if isinstance(record, Record) else [list(record)]
        reads: dict[int, _Read] = {}
        last: dict[str, Outcome] = {}
        not_tried = False
        for part in parts:
            length = part.length if isinstance(part, LazyOutcomes) else len(part)
            seen = self._reads.get(id(part))
            if seen is None or seen.part is not part or seen.length != length:
                seen = _read_part(part, length, pause)
            reads[id(part)] = seen
            last.update(seen.last)
            not_tried = not_tried or seen.not_tried
            if pause is not None:
                pause()
        self._reads = reads
        return last, not_tried

    def _block(
        self, units: list[QueueUnit], outcomes: list[Outcome | None],
        pause: Callable[[], object] | None,
    ) -> _Block:
        cache = self.verdicts
        verdicts: list[Verdict] = []
        for n, outcome in enumerate(outcomes, start=1):
            # (every waiting unit has an entry; defensive)
            verdicts.append(NO_VERDICT if outcome is None else _verdict(outcome, cache))
            if pause is not None and n % PAUSE_EVERY == 0:
                pause()
        return _Block(units, outcomes, verdicts, array("l", range(1, len(outcomes) + 1)))


def slack(live: int) -> int:
    """How large a per-unit cache may grow before entries of units gone are dropped: a
    quarter over the live count, so one unit leaving does not cost a walk of the cache (each
    round of a burst, when it did)."""
    return live + live // 4 + 64


def _read_part(part: Part, length: int, pause: Callable[[], object] | None) -> _Read:
    entries = part.items() if isinstance(part, LazyOutcomes) else part
    last: dict[str, Outcome] = {}
    not_tried = False
    for n, outcome in enumerate(entries, start=1):
        last[outcome.unit.uid] = outcome
        if isinstance(outcome, NOT_TRIED):
            not_tried = True
        if pause is not None and n % PAUSE_EVERY == 0:
            pause()
    return _Read(part, length, last, not_tried)


def pending_order(
    result: RoundResult, cache: Verdicts | None = None, pause: Callable[[], object] | None = None
) -> PendingOrder:
    """`PendingReader.read` for one round (`cache`: a verdict cache kept across calls)."""
    return PendingReader(cache).read(result, pause)


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
    A queue's units are one slice of the order, so each slice is numbered on from what its
    quota counted before it, in C. `pause`: as `PendingReader.read`'s."""
    counters: dict[str, int] = {}
    out = array("l")
    for queue, start, end in order.runs:
        count = end - start
        base = counters.get(queue, 0)
        out.extend(range(base + 1, base + count + 1))
        for quota in paths.get(queue) or (queue,):
            counters[quota] = counters.get(quota, 0) + count
        if pause is not None:
            pause()
    out.extend([0] * (len(order) - order.tried))
    return out
