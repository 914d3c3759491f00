"""What an incremental admission round remembers between rounds, to skip what did not change.

Per unit CheckUsage refused: the usage of the quota chain it was checked against, up to the
level that refused it (`Rejections`); per queue, the record of its last round (`Memo`): the
trailing rejections of an in-order queue (`Tail`), the skips beyond max depth, and a quiet
Block/Intelligent queue's whole turn. A round re-checks a unit only when something it read
changed (`ChainUsage` keeps the values it read identical objects while they are equal).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import NamedTuple

from koordqueue.domain.admission import (
    Admitted,
    Decision,
    EmptyQuotaSpec,
    QuotaCycle,
    QuotaExceeded,
    QuotaMissing,
    Rejection,
)
from koordqueue.domain.policies import QueuePolicy
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.quota import is_oversold
from koordqueue.domain.quota_tree import QuotaTree
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import Outcome, Part, RoundResult

UsagePrefix = tuple[Resources, ...]
"""Usage of the first quotas of a chain (from the unit's own quota up), as CheckUsage read it."""

ChainShape = tuple[tuple[str, ...], tuple[tuple[tuple[str, int], ...], ...], str | None]
"""What CheckUsage reads of a chain besides usage: its path, each quota's max (in order: the
first resource over its limit is the one reported) and the parent after the path (the root,
or where the chain breaks: a missing quota or a cycle)."""


class Checked(NamedTuple):
    """A rejection and what it depended on: the unit, its chain's shape and the usage of the
    chain up to the level that refused it (levels above were never read)."""

    unit: QueueUnit
    shape: ChainShape
    usage: UsagePrefix
    decision: Rejection


@dataclass(slots=True)
class Tail:
    """The last units a Priority-ordered round rejected after its last admission, with the
    usage they were checked against (up to the highest level that refused one of them).

    `suffix`: the tail was the end of the queue's whole index (no max-depth cut, no unit
    backing off), so `Order.stable` says how much of it is still the end of the queue
    without comparing units."""

    units: list[QueueUnit]
    outcomes: list[Outcome]
    rejected: list[tuple[QueueUnit, Rejection]]
    usage: UsagePrefix
    shape: ChainShape
    suffix: bool = False


@dataclass(slots=True)
class Memo:
    """A queue's last round, as far as a later round may reuse it (see `_serve_queue`)."""

    policy: QueuePolicy
    tail: Tail | None = None
    skipped_order: object = None
    skipped: list[Outcome] = field(default_factory=list)
    quiet_order: object = None
    quiet_key: Hashable | None = None
    quiet_outcomes: list[Part] = field(default_factory=list)
    quiet_waiting: list[QueueUnit] = field(default_factory=list)


class ChainUsage:
    """The usage along one queue's quota chain during its turn in a round, re-read after
    every admission or preemption. Values equal to the last ones read for the queue are
    replaced by those objects, so most comparisons with a remembered prefix are identities."""

    __slots__ = ("_full", "_name", "_prefixes", "_seen", "_tree", "path", "shape")

    def __init__(
        self,
        tree: QuotaTree,
        name: str,
        seen: dict[str, UsagePrefix],
        shapes: dict[str, ChainShape],
    ) -> None:
        self._tree = tree
        self._name = name
        self._seen = seen
        self.path = path = tree.path(name)
        limits = []
        for q in path:
            spec = tree.get(q)
            assert spec is not None  # a chain's path holds live quotas only
            limits.append(tuple(spec.max.items()))
        last = tree.get(path[-1]) if path else None
        shape: ChainShape = (path, tuple(limits), None if last is None else last.parent)
        old = shapes.get(name)
        if old == shape:
            shape = old  # identity: the common comparison is then one pointer compare
        else:
            shapes[name] = shape
        self.shape = shape
        self._full: UsagePrefix | None = None
        self._prefixes: dict[int, UsagePrefix] = {}

    def prefix(self, levels: int) -> UsagePrefix:
        """The usage of the chain's first `levels` quotas (the same object until a change)."""
        cached = self._prefixes.get(levels)
        if cached is not None:
            return cached
        full = self._full
        if full is None:
            full = self._full = self._read()
        cached = self._prefixes[levels] = full[:levels]
        return cached

    def _read(self) -> UsagePrefix:
        seen = self._seen.get(self._name, ())
        fresh = tuple(self._tree.used(q) for q in self.path)
        if len(seen) == len(fresh):
            fresh = tuple(old if old == new else new for old, new in zip(seen, fresh, strict=True))
        self._seen[self._name] = fresh
        return fresh

    def changed(self) -> None:
        self._full = None
        self._prefixes = {}


def levels_read(decision: Rejection, path: tuple[str, ...]) -> int | None:
    """How many quotas of the chain a rejection read (None: not a CheckUsage verdict)."""
    if isinstance(decision, QuotaExceeded | EmptyQuotaSpec):
        try:
            return path.index(decision.quota) + 1
        except ValueError:
            return None
    if isinstance(decision, QuotaMissing | QuotaCycle):
        return len(path)
    return None


def reuse_tail(
    tail: Tail,
    j: int,
    *,
    still_waiting: list[QueueUnit],
    result: RoundResult,
    run: tuple[list[QueueUnit], list[Outcome], list[tuple[QueueUnit, Rejection]]],
    usage: UsagePrefix,
) -> Tail:
    """Record `tail[j:]` as this round's decisions; returns the queue's new tail (the
    rejections since the last admission, `run`, followed by the reused ones). A new
    tail starts at 0 again, so an idle round copies each list once, in C."""
    run_units, run_outcomes, run_rejected = run
    if j == 0:
        units, outcomes, rejected = tail.units, tail.outcomes, tail.rejected
    else:
        units, outcomes, rejected = tail.units[j:], tail.outcomes[j:], tail.rejected[j:]
    result.outcomes.carry(outcomes)
    result.rejected.extend(rejected)
    still_waiting.extend(units)
    if not run_units:
        if j == 0 and usage == tail.usage:
            return tail
        return Tail(units, outcomes, rejected, usage, tail.shape)
    run_units.extend(units)
    run_outcomes.extend(outcomes)
    run_rejected.extend(rejected)
    return Tail(run_units, run_outcomes, run_rejected, usage, tail.shape)


class Rejections:
    """Each waiting unit's last CheckUsage rejection and what it read."""

    __slots__ = ("checked",)

    def __init__(self) -> None:
        self.checked: dict[str, Checked] = {}

    def decide(
        self, tree: QuotaTree, unit: QueueUnit, quota: str, usage: ChainUsage, *, admit: bool
    ) -> Decision:
        """CheckUsage for a waiting unit (recording the admission when `admit`), or its last
        rejection when nothing it read has changed since: the unit itself, the quota
        structure, and the usage of its chain up to the level that refused it."""
        uid = unit.uid
        last = self.checked.get(uid)
        if (
            last is not None
            and last.unit is unit
            and last.shape == usage.shape
            and last.usage == usage.prefix(len(last.usage))
        ):
            return last.decision
        if admit:
            decision = tree.try_admit(
                uid, unit.key, quota, unit.resource, oversold=is_oversold(unit.annotations)
            )
        else:
            decision = tree.check(unit.key, quota, unit.resource)
        if isinstance(decision, Admitted):
            if admit:
                usage.changed()
                self.checked.pop(uid, None)
        else:
            levels = levels_read(decision, usage.path)
            if levels is not None:
                self.checked[uid] = Checked(unit, usage.shape, usage.prefix(levels), decision)
        return decision
