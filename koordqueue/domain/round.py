"""What an admission round decided for each unit it looked at, and why (typed reasons).

The engine's round appends one outcome per unit: admitted, rejected by CheckUsage, or skipped
with the rule that skipped it. Everything else reads this record instead of re-deriving the
rules: `effects` turns it into events and status writes for the controller and the simulator,
and `explain` reads a dry round's record for one unit. A dry round also states the units no
round looks at (`Finished`, `Holding`), so every unit has exactly one verdict in its record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from koordqueue.domain.admission import Admitted, Rejection
from koordqueue.domain.mapping import Unresolved
from koordqueue.domain.names import MSG_QUEUE_NOT_FOUND
from koordqueue.domain.queue_unit import AdmissionCount, QueueUnit


@dataclass(slots=True)
class Admit:
    """CheckUsage admitted the unit (after preempting, if `Preempted` outcomes name it)."""

    unit: QueueUnit
    decision: Admitted


@dataclass(slots=True)
class Reject:
    """The policy offered the unit and CheckUsage refused it."""

    unit: QueueUnit
    decision: Rejection


@dataclass(slots=True)
class Preempted:
    """An admitted unit whose pods are not all running was marked for reclaim so that `by`
    gets in: `admissions` carry the reclaimState.replicas to write. It keeps its quota until
    a later round reclaims it (`Reclaimed`)."""

    unit: QueueUnit
    by: QueueUnit
    admissions: tuple[AdmissionCount, ...] = ()


@dataclass(slots=True)
class Reclaimed:
    """A marked victim's pods not running were taken back this round: its quota is free and
    it waits in its queue again (`unit` is as it was, admitted and marked)."""

    unit: QueueUnit
    replicas: int


@dataclass(slots=True)
class QueueNotFound:
    """The unit names a queue (or quota) that does not exist."""

    unit: QueueUnit
    queue: str


@dataclass(slots=True)
class Unmapped:
    """The unit names no usable quota: it is never admitted."""

    unit: QueueUnit
    unresolved: Unresolved


@dataclass(slots=True)
class QueueUnserved:
    """Its queue asks for a policy the factory cannot serve (AddQueueFail on the Queue)."""

    unit: QueueUnit
    queue: str
    error: str


@dataclass(slots=True)
class QueueHeld:
    """Its queue is held (`koord-queue/stop-policy: Hold`): no round offers its units."""

    unit: QueueUnit
    queue: str


@dataclass(slots=True)
class BlockedByHead:
    """Block/Intelligent: its quota is blocked since `since` by `head` (maybe the unit itself)."""

    unit: QueueUnit
    quota: str
    head: str
    since: float


@dataclass(slots=True)
class HighPriorityWaiting:
    """Intelligent: below the priority threshold, and these high units still wait."""

    unit: QueueUnit
    waiting: tuple[str, ...]
    threshold: int


@dataclass(slots=True)
class BeyondMaxDepth:
    """Its position (1-based) is past `koord-queue/max-depth`: the policy does not scan it."""

    unit: QueueUnit
    position: int
    depth: int


@dataclass(slots=True)
class WaitingForPodsRunning:
    """wait-for-pods-running: these admitted units of the queue do not run yet."""

    unit: QueueUnit
    not_running: tuple[str, ...]


@dataclass(slots=True)
class BackingOff:
    """The unit is kept out of rounds until `until` (back-off after a failure)."""

    unit: QueueUnit
    until: float


@dataclass(slots=True)
class Inactive:
    """spec.active is false: the unit keeps its place in its queue and is never offered."""

    unit: QueueUnit


@dataclass(slots=True)
class Deactivated:
    """An admitted unit whose spec.active turned false: this round took its admission back
    (`unit` is as it was, admitted). `reclaiming`: a preemption still takes its pods back,
    so nothing was taken yet; a later round deactivates it."""

    unit: QueueUnit
    reclaiming: bool = False


@dataclass(slots=True)
class BudgetSpent:
    """An admitted unit ran spec.maximumExecutionTimeSeconds: this round deactivates it
    (spec.active false); the next round evicts it (`Deactivated`)."""

    unit: QueueUnit
    budget: int


@dataclass(slots=True)
class Finished:
    """The unit finished (Succeed/Failed): its quota is released and no round offers it.
    Recorded by a dry round only (the controller has nothing to write for it)."""

    unit: QueueUnit


@dataclass(slots=True)
class Holding:
    """The unit was admitted before and keeps its quota in `quota` (no round offers it
    again). Recorded by a dry round only, after every outcome of the round itself."""

    unit: QueueUnit
    quota: str


@dataclass(slots=True)
class NotOffered:
    """The policy did not offer the unit this round for no rule above (should not happen)."""

    unit: QueueUnit


Skip = BlockedByHead | HighPriorityWaiting | BeyondMaxDepth | NotOffered
"""Why a policy did not offer a waiting unit."""

Outcome = (
    Admit
    | Reject
    | Preempted
    | Reclaimed
    | QueueNotFound
    | Unmapped
    | QueueUnserved
    | QueueHeld
    | WaitingForPodsRunning
    | BackingOff
    | Inactive
    | Deactivated
    | BudgetSpent
    | Finished
    | Holding
    | Skip
)


def outcome_of(record: Iterable[Outcome], uid: str) -> Outcome | None:
    """The verdict a record holds for the unit `uid`: its last entry (a preemption's victim
    has one entry; a unit has at most one otherwise). For readers such as explain."""
    found: Outcome | None = None
    for outcome in record:
        if outcome.unit.uid == uid:
            found = outcome
    return found


class LazyOutcomes:
    """A run of skip entries built on first read, from state captured when it was recorded.

    A blocked queue skips thousands of units each round; the controller never reads skips (they
    have no effects), so a round records the run in O(1) and only a reader (the simulator,
    explain, a test) pays for the entries, once."""

    __slots__ = ("_build", "_items", "length")

    def __init__(self, length: int, build: Callable[[], list[Outcome]]) -> None:
        self.length = length
        self._build: Callable[[], list[Outcome]] | None = build
        self._items: list[Outcome] | None = None

    def items(self) -> list[Outcome]:
        if self._items is None:
            assert self._build is not None
            self._items, self._build = self._build(), None
            assert len(self._items) == self.length
        return self._items


class _New(list[Outcome]):
    """A part of a record holding outcomes first recorded by that round."""

    __slots__ = ()


Part = list[Outcome] | LazyOutcomes


class Record(Sequence[Outcome]):
    """A round's outcomes in order, built from parts: entries new this round, lists carried
    over from an earlier round (never changed once recorded) and lazy runs of skips.

    Reads like a list. `new()` yields only the entries first recorded by this round: the
    outcomes of every other entry were in an earlier record already, so their effects were
    planned then (effects.py), which lets the controller plan a round in what changed."""

    __slots__ = ("_flat", "_open", "_parts")

    def __init__(self, outcomes: Iterable[Outcome] = ()) -> None:
        self._parts: list[Part] = []
        self._open: _New | None = None
        self._flat: list[Outcome] | None = None
        self.extend(outcomes)

    # --- recording ---------------------------------------------------------------------
    def open(self) -> list[Outcome]:
        """The list new entries go to (append to it directly in hot loops, until the next
        `carry` or `lazy`, which closes it)."""
        current = self._open
        if current is None:
            current = self._open = _New()
            self._parts.append(current)
        self._flat = None
        return current

    def append(self, outcome: Outcome) -> None:
        self.open().append(outcome)

    def extend(self, outcomes: Iterable[Outcome]) -> None:
        """New entries (a generator's, a list built this round)."""
        self.open().extend(outcomes)

    def carry(self, outcomes: list[Outcome]) -> None:
        """Entries recorded by an earlier round, as that round's list (shared, never changed)."""
        if outcomes:
            self._parts.append(outcomes)
            self._open = self._flat = None

    def lazy(self, run: LazyOutcomes) -> None:
        if run.length:
            self._parts.append(run)
            self._open = self._flat = None

    def mark(self) -> tuple[int, int]:
        """Where the record ends now (for `since`)."""
        return len(self._parts), len(self._open) if self._open is not None else -1

    def since(self, mark: tuple[int, int]) -> list[Part]:
        """The parts recorded after `mark`, as parts a later record may carry."""
        count, open_length = mark
        out: list[Part] = []
        if open_length >= 0:  # the list open at the mark: only what came after it
            part = self._parts[count - 1]
            assert isinstance(part, _New)
            if len(part) > open_length:
                out.append(part[open_length:])
        for part in self._parts[count:]:
            out.append(list(part) if isinstance(part, _New) else part)
        return out

    def carry_parts(self, parts: list[Part]) -> None:
        for part in parts:
            if isinstance(part, LazyOutcomes):
                self.lazy(part)
            else:
                self.carry(part)

    # --- reading -----------------------------------------------------------------------
    def parts(self) -> list[Part]:
        """The record's parts in order: a carried part is the same object in every record
        that carries it (a reader across rounds may key what it read from it by identity)."""
        return list(self._parts)

    def new(self) -> Iterator[Outcome]:
        """The entries first recorded by this round, in record order."""
        for part in self._parts:
            if isinstance(part, _New):
                yield from part

    def _all(self) -> list[Outcome]:
        flat = self._flat
        if flat is None:
            flat = []
            for part in self._parts:
                flat.extend(part.items() if isinstance(part, LazyOutcomes) else part)
            self._flat = flat
        return flat

    def __iter__(self) -> Iterator[Outcome]:
        for part in self._parts:
            yield from part.items() if isinstance(part, LazyOutcomes) else part

    def __len__(self) -> int:
        return sum(
            part.length if isinstance(part, LazyOutcomes) else len(part) for part in self._parts
        )

    @overload
    def __getitem__(self, index: int) -> Outcome: ...

    @overload
    def __getitem__(self, index: slice) -> list[Outcome]: ...

    def __getitem__(self, index: int | slice) -> Outcome | list[Outcome]:
        return self._all()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record | list | tuple):
            return self._all() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Record({self._all()!r})"


@dataclass(frozen=True, slots=True)
class Preemption:
    """`victims` are marked for reclaim so that `unit` gets in (a later round); their pods
    not running are taken back and they go back to the queue."""

    unit: QueueUnit
    victims: tuple[QueueUnit, ...]


@dataclass(slots=True)
class RoundResult:
    """What one admission round decided; `effects()` turns it into writes and events.

    `outcomes` is the record: one typed outcome per unit the round looked at, in the order
    decided (a preemption's victims come right before the unit they make room for); its
    `new()` entries are those not carried over from an earlier round's record. The
    lists below are the same decisions grouped by kind, for metrics and callers that only
    need one kind.
    """

    outcomes: Record = field(default_factory=Record)
    admitted: list[tuple[QueueUnit, Admitted]] = field(default_factory=list)
    rejected: list[tuple[QueueUnit, Rejection]] = field(default_factory=list)
    queue_not_found: list[tuple[QueueUnit, str]] = field(default_factory=list)
    unmapped: list[tuple[QueueUnit, Unresolved]] = field(default_factory=list)
    preempted: list[Preemption] = field(default_factory=list)
    unserved_queues: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, list[QueueUnit]] = field(default_factory=dict)
    """Per queue, units still waiting after the round, in queue order (for positions); the
    queues in the order the round served them (pending.py reads the whole order from it)."""
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per queue in `waiting`, its quota chain up to the root as the round checked it (who
    counts against which quota, for positions in a quota)."""

    @staticmethod
    def queue_not_found_message(unit: QueueUnit, queue: str) -> str:
        return MSG_QUEUE_NOT_FOUND.format(queue=queue, namespace=unit.namespace, name=unit.name)
