"""Where each unit waits, as a round reads it: the admission engine's indexes.

Kept up to date on every change to a unit or its admission (`UnitIndex.reindex`), so that a
round neither scans every unit nor sorts: per queue, the waiting units (back-off included)
sorted in offer order, the admitted ones, the units naming no quota, and the per-queue counts
the metrics export.
"""

from __future__ import annotations

from bisect import bisect_left

from koordqueue.domain.mapping import Unresolved, queue_name_for
from koordqueue.domain.policies import order_key
from koordqueue.domain.queue_unit import FINISHED_PHASES, QueueUnit

WAITING = 0
ADMITTED = 1
UNMAPPED = 2

OrderKey = tuple[int, bool, float, str, int]
"""`order_key` plus the unit's arrival number: a full scan sorts the units in arrival order
with a stable sort, so arrival breaks the ties."""


class Order:
    """A queue's waiting units (back-off included), sorted as a round offers them.

    Kept up to date on every change, so a round neither scans every unit nor sorts. `version`
    changes with every insert or removal (numbers are never reused across queues)."""

    __slots__ = ("keys", "stable", "units", "version")

    def __init__(self) -> None:
        self.keys: list[OrderKey] = []
        self.units: list[QueueUnit] = []
        self.version = 0
        self.stable = 0
        """How many trailing units are the same, in the same order, as when the queue's last
        round ended (set by the round, lowered by every insert and removal)."""


class UnitIndex:
    """Each unit's place (waiting or admitted in a queue, or unmapped) and the per-queue
    views of those places."""

    __slots__ = (
        "_counts", "_counts_changed", "_okey", "_versions", "admitted_in", "unmapped",
        "waiting", "where",
    )

    def __init__(self) -> None:
        self.where: dict[str, tuple[int, str]] = {}
        """Each unit's place: (WAITING or ADMITTED, queue) or (UNMAPPED, "")."""
        self._okey: dict[str, tuple[OrderKey, QueueUnit]] = {}
        self.waiting: dict[str, Order] = {}
        self.admitted_in: dict[str, dict[str, None]] = {}
        self.unmapped: dict[str, None] = {}
        self._versions = 0
        self._counts: dict[str, list[int]] = {}
        """Per queue: [units waiting, units admitted], kept by `reindex` (metrics)."""
        self._counts_changed: set[str] = set()

    def reindex(
        self, uid: str, unit: QueueUnit | None, *, admitted: bool, first_attempt: float,
        seq: int,
    ) -> None:
        """Put a unit where a round looks for it after any change to it or its admission
        (`unit` None: it is gone). `first_attempt` and `seq` (its arrival number) order it
        among its queue's waiting units."""
        place: tuple[int, str] | None = None
        if unit is not None and unit.phase not in FINISHED_PHASES:
            resolution = queue_name_for(unit.labels)
            if isinstance(resolution, Unresolved):
                if not admitted:
                    place = (UNMAPPED, "")
            else:
                place = (ADMITTED if admitted else WAITING, resolution.name)
        old = self.where.get(uid)
        if old == place and (place is None or place[0] != WAITING or self._okey[uid][1] is unit):
            return
        if old is not None:
            kind, queue = old
            if kind != UNMAPPED:
                self._counts[queue][kind] -= 1
                self._counts_changed.add(queue)
            if kind == WAITING:
                key, _ = self._okey.pop(uid)
                order = self.waiting[queue]
                i = bisect_left(order.keys, key)
                order.stable = min(order.stable, len(order.keys) - i - 1)
                del order.keys[i], order.units[i]
                self._versions += 1
                order.version = self._versions
                if not order.units:
                    del self.waiting[queue]
            elif kind == ADMITTED:
                members = self.admitted_in[queue]
                del members[uid]
                if not members:
                    del self.admitted_in[queue]
            else:
                del self.unmapped[uid]
        if place is None:
            self.where.pop(uid, None)
            return
        assert unit is not None
        self.where[uid] = place
        kind, queue = place
        if kind != UNMAPPED:
            (self._counts.get(queue) or self._counts.setdefault(queue, [0, 0]))[kind] += 1
            self._counts_changed.add(queue)
        if kind == WAITING:
            key = (*order_key(unit, first_attempt), seq)
            self._okey[uid] = (key, unit)
            order = self.waiting.get(queue) or self.waiting.setdefault(queue, Order())
            i = bisect_left(order.keys, key)
            order.stable = min(order.stable, len(order.keys) - i)
            order.keys.insert(i, key)
            order.units.insert(i, unit)
            self._versions += 1
            order.version = self._versions
        elif kind == ADMITTED:
            self.admitted_in.setdefault(queue, {})[uid] = None
        else:
            self.unmapped[uid] = None

    def count_changes(self) -> dict[str, tuple[int, int]]:
        """Per queue whose counts changed since the last call: (units waiting, units
        admitted)."""
        out: dict[str, tuple[int, int]] = {}
        for queue in self._counts_changed:
            entry = self._counts.get(queue)
            if entry is None:
                continue
            out[queue] = (entry[0], entry[1])
            if entry == [0, 0]:
                del self._counts[queue]
        self._counts_changed.clear()
        return out
