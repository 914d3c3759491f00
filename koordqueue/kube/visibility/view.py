"""The answers of the visibility API, read from the last published admission round.

The owner thread publishes each round's `RoundResult` (one reference swap, `Publication`);
nothing here touches the engine. The first request after a round reads its record once
(`domain.pending`) under this module's lock, on the caller's thread, and later requests of
the same round reuse it: a client polling every second costs one read of the record per
round, and none when nobody asks. A round whose pending order is the one before (a quiet
backlog) keeps that order's answers: only their header (the round) is new.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import islice
from typing import Any, Final

import orjson
from cachetools import LRUCache

from koordqueue.domain import names
from koordqueue.domain.pending import (
    PAUSE_EVERY,
    PendingOrder,
    PendingReader,
    Verdict,
    in_quota,
    own_quota_positions,
    slack,
)
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.round import RoundResult

API_VERSION: Final = f"{names.VISIBILITY_GROUP}/{names.VISIBILITY_VERSION}"

BREATHE_S: Final = 0.0001
"""How long an answer being built lets go of the interpreter every PAUSE_EVERY units. CPython
hands the GIL to a waiting thread only after 5 ms (sys.getswitchinterval), so an answer of
15,000 units (~40 ms of Python) held the admission loop up to 5 ms at a time: admission p99
3.7x the quiet one in bench/bench_visibility.py. A real sleep, not sleep(0): the waiting
thread must win the GIL."""


def _breathe() -> None:
    time.sleep(BREATHE_S)


@dataclass(frozen=True, slots=True)
class PublishedRound:
    """One admission round as the owner thread handed it over (never changed after)."""

    result: RoundResult
    number: int
    at: float
    """Epoch seconds when the round ran."""


class Publication:
    """The last round, swapped in by the owner thread, read by any other."""

    def __init__(self) -> None:
        self._last: PublishedRound | None = None
        self._count = 0

    def publish(self, result: RoundResult, at: float) -> None:
        """(Owner thread.) Replaces the last round; one attribute store, no lock."""
        self._count += 1
        self._last = PublishedRound(result, self._count, at)

    def last(self) -> PublishedRound | None:
        return self._last


@dataclass(frozen=True, slots=True)
class Query:
    """Koord-Queue's QueueUnitOptions (queue, phase, offset, limit), plus a namespace."""

    namespace: str = ""
    queue: str = ""
    phase: str = ""
    offset: int = 0
    limit: int = names.VISIBILITY_DEFAULT_LIMIT


class BadQuery(ValueError):
    """A query option that cannot be read (answered 400, naming the option)."""


def parse_query(params: Mapping[str, list[str]]) -> Query:
    def one(key: str) -> str:
        values = params.get(key) or [""]
        return values[-1]

    def number(key: str, default: int) -> int:
        raw = one(key)
        if not raw:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise BadQuery(f"{key}: not an integer: {raw!r}") from None
        if value < 0:
            raise BadQuery(f"{key}: must not be negative: {value}")
        return value

    return Query(
        namespace=one("namespace"),
        queue=one("queue"),
        phase=one("phase"),
        offset=number("offset", 0),
        limit=number("limit", names.VISIBILITY_DEFAULT_LIMIT),
    )


ANSWERS_KEPT: Final = 64
"""Answers (their items) kept per pending order: one per distinct query asked."""

AnswerKey = tuple[str, str, Query]
"""(route, queue or quota name, query)."""


@dataclass(slots=True)
class Snapshot:
    """One round's pending units, read from its record once (columns: `PendingOrder`)."""

    round: PublishedRound
    order: PendingOrder
    in_own_quota: array[int]
    """Each unit's position among the units counted against its own quota (0: not tried)."""
    queues: dict[str, int] = field(default_factory=dict)
    """Queue -> pending units (tried or not)."""
    answers: LRUCache[AnswerKey, tuple[int, bytes]] = field(
        default_factory=lambda: LRUCache(ANSWERS_KEPT)
    )
    """Each query's (total, items) for this pending order: shared by the snapshots of later
    rounds whose order is the same, so a client polling a quiet backlog costs one order
    build and a comparison per round, not a walk of every unit per answer."""

    def same_order(self, order: PendingOrder, paths: Mapping[str, tuple[str, ...]]) -> bool:
        """The same units, queues, positions and verdicts (in C: by identity, and by value
        only where the objects differ)."""
        mine = self.order
        return (
            mine.tried == order.tried
            and mine.units == order.units
            and mine.verdicts == order.verdicts
            and mine.queues == order.queues
            and mine.in_queue == order.in_queue
            and self.paths == paths
        )

    @property
    def paths(self) -> dict[str, tuple[str, ...]]:
        return self.round.result.paths


class PendingView:
    """Builds (once per round) and answers the API's queries.

    Answers are JSON bytes put together from fragments cached per unit (its fields that change
    only with it) and per verdict: with 15,000 units, building them as dicts for every answer
    kept tens of thousands of objects alive at a time, and the collector's full passes they
    caused held the admission loop for 70 ms (bench/bench_visibility.py)."""

    def __init__(self, publication: Publication) -> None:
        self._publication = publication
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._reader = PendingReader()
        self._static: dict[str, tuple[QueueUnit, bytes]] = {}
        """uid -> (the unit object, the JSON of its fields that only change with it)."""
        self._lines: dict[str, tuple[Verdict, bytes]] = {}
        """uid -> (its verdict, the JSON of its reason and message)."""
        self._rendered: dict[str, _Slice] = {}
        """Queue -> its run of items as last rendered."""

    def snapshot(self) -> Snapshot | None:
        """The last round's snapshot (None: no round yet, e.g. a standby)."""
        last = self._publication.last()
        if last is None:
            return None
        with self._lock:  # one reader builds it; the others wait and reuse it
            current = self._snapshot
            if current is None or current.round is not last:
                order = self._reader.read(last.result, _breathe)
                paths = last.result.paths
                if current is not None and current.same_order(order, paths):
                    # the same answers, over this order's columns: a resync re-reads every
                    # unit (equal objects, not the same ones), and a snapshot that kept the
                    # old columns compared them value by value every round after it
                    # (bench_visibility_live.py: a third of the GIL while polled)
                    current = self._snapshot = replace(current, round=last, order=order)
                    return current
                if max(len(self._static), len(self._lines)) > slack(len(order)):
                    keep = {unit.uid for unit in order.units}
                    self._static = {k: v for k, v in self._static.items() if k in keep}
                    self._lines = {k: v for k, v in self._lines.items() if k in keep}
                queues: dict[str, int] = {}
                for queue, start, end in order.runs:
                    queues[queue] = end - start
                for queue in order.queues[order.tried :]:
                    queues[queue] = queues.get(queue, 0) + 1
                positions = own_quota_positions(order, paths, _breathe)
                if len(self._rendered) > len(order.runs):
                    self._rendered = {q: self._rendered[q] for q, _, _ in order.runs
                                      if q in self._rendered}
                current = self._snapshot = Snapshot(last, order, positions, queues)
            return current

    # --- answers --------------------------------------------------------------------------
    def pending(self, snap: Snapshot, query: Query, name: str = "") -> Parts:
        """pendingunits (every queue) or queues/NAME/queueunits (`name`: the queue)."""
        key: AnswerKey = ("pending", name, query)
        answer = self._kept(snap, key)
        if answer is None:
            queue = name or query.queue
            rows = _rows(snap.order, query, queue)
            if query.namespace or query.phase or 2 * min(query.limit, len(rows)) < len(rows):
                page = self._page(snap, rows, snap.in_own_quota, query)
            else:
                page = self._page_by_runs(snap, rows, queue, query)
            answer = self._keep(snap, key, page)
        return _summary(snap, name, answer)

    def _page_by_runs(
        self, snap: Snapshot, rows: array[int], queue: str, query: Query
    ) -> tuple[int, bytes]:
        """`_page` for a page of most of the queues' units: each queue's run of items is kept
        from the last answer while the reader keeps its slice, and numbered again only where
        its place moved (a round that changed one queue renders that queue's units)."""
        order = snap.order
        items: list[bytes] = []
        for run, (name, _, _) in enumerate(order.runs):
            if not queue or name == queue:
                items.extend(self._run_items(snap, run))
        start, end = query.offset, query.offset + query.limit
        page = items[start:end]
        if end > len(items):  # the units no round tries follow the runs in `rows`
            rest = rows[len(items):][max(0, start - len(items)) : end - len(items)]
            page.extend(self._items(snap, rest, snap.in_own_quota))
        return len(rows), b",".join(page)

    def _run_items(self, snap: Snapshot, run: int) -> list[bytes]:
        order = snap.order
        queue, start, end = order.runs[run]
        key = order.slices[run]
        base = snap.in_own_quota[start] - 1 if end > start else 0
        with self._lock:
            kept = self._rendered.get(queue)
            if kept is None or kept.key is not key:
                kept = self._rendered[queue] = self._pieces(order, start, end, key)
            if kept.at != (start, base):
                numbers = zip(kept.heads, range(start + 1, end + 1), kept.mids,
                              range(base + 1, base + end - start + 1), kept.tails, strict=True)
                items: list[bytes] = []
                for _ in range(0, end - start, RUN_CHUNK):
                    items.extend(RUN_ITEM % parts for parts in islice(numbers, RUN_CHUNK))
                    _breathe()
                kept.items, kept.at = items, (start, base)
            return kept.items

    def _pieces(self, order: PendingOrder, start: int, end: int, key: object) -> _Slice:
        """A run's items cut around their three positions (callers hold the lock)."""
        kept = _Slice(key)
        for index in range(start, end):
            if index % PAUSE_EVERY == PAUSE_EVERY - 1:
                _breathe()
            fixed, line = self._fragments(order, index)
            kept.heads.append(b"{%s,\"position\":" % fixed)
            kept.mids.append(b',"positionInQueue":%d,"positionInQuota":' % order.in_queue[index])
            kept.tails.append(b",%s}" % line)
        return kept

    def _fragments(self, order: PendingOrder, index: int) -> tuple[bytes, bytes]:
        """A unit's item fragments, kept while the same unit and verdict objects come back:
        the JSON of its own fields and of its reason and message (callers hold the lock)."""
        unit = order.units[index]
        fixed = self._static.get(unit.uid)
        if fixed is None or fixed[0] is not unit:
            fixed = self._static[unit.uid] = (unit, _fixed_json(unit, order.queues[index]))
        verdict = order.verdicts[index]
        line = self._lines.get(unit.uid)
        if line is None or line[0] is not verdict:
            line = self._lines[unit.uid] = (verdict, _verdict_json(verdict))
        return fixed[1], line[1]

    def in_quota(self, snap: Snapshot, quota: str, query: Query) -> Parts:
        """elasticquotas/NAME/queueunits: the quota's subtree, positions within it."""
        key: AnswerKey = ("quota", quota, query)
        answer = self._kept(snap, key)
        if answer is None:
            indexes, positions = in_quota(snap.order, quota, snap.paths)
            order = snap.order
            by_index = array("l", [0]) * len(order)
            rows = array("l")
            for index, position in zip(indexes, positions, strict=True):
                if _matches(order, index, query, query.queue):
                    rows.append(index)
                    by_index[index] = position
            answer = self._keep(snap, key, self._page(snap, rows, by_index, query))
        return _summary(snap, quota, answer)

    def _kept(self, snap: Snapshot, key: AnswerKey) -> tuple[int, bytes] | None:
        with self._lock:  # (an LRUCache reorders itself on reads)
            return snap.answers.get(key)

    def _keep(
        self, snap: Snapshot, key: AnswerKey, answer: tuple[int, bytes]
    ) -> tuple[int, bytes]:
        with self._lock:
            snap.answers[key] = answer
        return answer

    def _page(
        self, snap: Snapshot, rows: array[int], in_quota: array[int], query: Query
    ) -> tuple[int, bytes]:
        """(how many match, the JSON of the asked page's items)."""
        page = rows[query.offset : query.offset + query.limit]
        return len(rows), b",".join(self._items(snap, page, in_quota))

    def _items(self, snap: Snapshot, page: array[int], in_quota: array[int]) -> list[bytes]:
        order = snap.order
        out: list[bytes] = []
        with self._lock:
            for n, index in enumerate(page, start=1):
                if n % PAUSE_EVERY == 0:
                    _breathe()
                fixed, line = self._fragments(order, index)
                out.append(ITEM % (fixed, _number(order.position(index)),
                                   _number(order.in_queue[index] or None),
                                   _number(in_quota[index] or None), line))
        return out

    def queue_list(self, snap: Snapshot) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": "QueueList",
            "metadata": {},
            "items": [self.queue(snap, name) for name in sorted(snap.queues) if name],
        }

    def quota_list(self, snap: Snapshot) -> dict[str, Any]:
        quotas = sorted({q for path in snap.paths.values() for q in path})
        return {
            "apiVersion": API_VERSION,
            "kind": "ElasticQuotaList",
            "metadata": {},
            "items": [self.quota(snap, name) for name in quotas],
        }

    def quota(self, snap: Snapshot, name: str) -> dict[str, Any]:
        """A quota with the pending units counted against it (its subtree's)."""
        return {
            "apiVersion": API_VERSION,
            "kind": "ElasticQuota",
            "metadata": {"name": name},
            "pending": len(in_quota(snap.order, name, snap.paths)[0]),
            "round": _round(snap.round),
        }

    def queue(self, snap: Snapshot, name: str) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": "Queue",
            "metadata": {"name": name},
            "pending": snap.queues.get(name, 0),
            "round": _round(snap.round),
        }


@dataclass(slots=True)
class _Slice:
    """A queue's run of items as last rendered: each item cut around its position in the
    round, in its queue and in its quota (`RUN_ITEM`), and the items as numbered `at`."""

    key: object
    """The reader's slice these pieces were cut from (`PendingOrder.slices`)."""
    heads: list[bytes] = field(default_factory=list)
    mids: list[bytes] = field(default_factory=list)
    tails: list[bytes] = field(default_factory=list)
    at: tuple[int, int] = (-1, -1)
    """(the run's start in the order, its quota's count before it) `items` are numbered from."""
    items: list[bytes] = field(default_factory=list)


RUN_ITEM: Final = b"%s%d%s%d%s"
"""head, position, mid, position in its quota, tail: `ITEM` of a tried unit."""
RUN_CHUNK: Final = 1024
"""Items numbered between two breaths (~0.3 ms)."""


@dataclass(frozen=True, slots=True)
class Parts:
    """An answer as pieces sent one after another: its items are a kept blob of megabytes,
    which joining into one buffer per answer copied twice with the interpreter held."""

    chunks: tuple[bytes, ...]

    def __len__(self) -> int:
        return sum(len(chunk) for chunk in self.chunks)

    def __bytes__(self) -> bytes:
        return b"".join(self.chunks)


def _summary(snap: Snapshot, name: str, answer: tuple[int, bytes]) -> Parts:
    total, items = answer
    head = orjson.dumps({
        "apiVersion": API_VERSION,
        "kind": names.VISIBILITY_SUMMARY_KIND,
        "metadata": {"name": name} if name else {},
        "round": _round(snap.round),
        "total": total,
    })
    return Parts((head[:-1] + b',"items":[', items, b"]}"))


ITEM: Final = b'{%s,"position":%s,"positionInQueue":%s,"positionInQuota":%s,%s}'


def _number(value: int | None) -> bytes:
    return b"null" if value is None else str(value).encode()


def _fixed_json(unit: QueueUnit, queue: str) -> bytes:
    """An item's fields that change only with the unit object, as JSON without its braces."""
    metadata: dict[str, Any] = {"name": unit.name, "namespace": unit.namespace, "uid": unit.uid}
    if unit.created:
        metadata["creationTimestamp"] = _timestamp(unit.created)
    return orjson.dumps({
        "metadata": metadata,
        "queueName": queue,
        "quotaName": queue,
        "priority": unit.priority,
        "request": unit.resource.to_quantities(),
        "phase": unit.phase.value,
    })[1:-1]


def _verdict_json(verdict: Verdict) -> bytes:
    return orjson.dumps({"reason": verdict[1].value, "message": verdict[2]})[1:-1]


def _rows(order: PendingOrder, query: Query, queue: str) -> array[int]:
    """The indexes of the units matching: by slices of the order where only the queue is
    asked (a poll of everything walks no unit)."""
    if query.namespace or query.phase:
        rows = array("l")
        for i in range(len(order)):
            if _matches(order, i, query, queue):
                rows.append(i)
            if i % PAUSE_EVERY == PAUSE_EVERY - 1:
                _breathe()
        return rows
    if not queue:
        return array("l", range(len(order)))
    rows = array("l")
    for name, start, end in order.runs:
        if name == queue:
            rows.extend(range(start, end))
    queues = order.queues
    rows.extend(i for i in range(order.tried, len(order)) if queues[i] == queue)
    return rows


def _matches(order: PendingOrder, index: int, query: Query, queue: str) -> bool:
    unit = order.units[index]
    return (
        (not queue or order.queues[index] == queue)
        and (not query.namespace or unit.namespace == query.namespace)
        and (not query.phase or unit.phase.value == query.phase)
    )


def _round(published: PublishedRound) -> dict[str, Any]:
    return {"number": published.number, "time": _timestamp(published.at)}


def _timestamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


