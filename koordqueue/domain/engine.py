"""The admission engine: quotas, queues and units in memory, one admission round at a time.

Both the live controller and the simulator drive this class; it does no I/O. The adapter
feeds it what the API says (quotas, queues, units), calls `run_round`, persists the outcome,
and calls `rollback` for any admission it failed to persist. Admission state only changes by
the engine's own decisions, a finished/deleted unit, or a rebuild from admitted phases — so a
stale watch event can never undo an admission, and a restart can never repeat one.

Rounds cost what changed, not what waits (issue 11, part 4). The engine keeps its units
indexed by queue (sorted in offer order) and remembers, per unit CheckUsage refused, the usage
of the quota chain it was checked against; per queue, the record of its last round. A round
re-checks a unit only if its chain's usage (up to the level that refused it), the chain's
shape (path, maxes, where it ends) or the unit changed, and reuses whole runs of the last
record when nothing they depend on changed, so a round with 16,000 parked units and one
release checks a handful (Kueue's inadmissible set, made exact). The record is the one a full
scan writes, entry for entry: test_incremental_rounds.py (tests/unit/admission) drives both
with the same random event streams; the full scan stays behind
`AdmissionEngine(skip_unchanged=False)` for that proof.

A Block or Intelligent queue stops at its blocked head (its units all share one quota, so the
policy need not walk the held ones), and the skips behind it are recorded as one lazy run
(`round.LazyOutcomes`, built from the policy's state captured then, on first read): a release
round costs the units it tries. The record (`round.Record`) carries earlier rounds' lists
instead of copying them, and tells which entries are new this round (`Record.new`): the
others were planned by an earlier round already, so the controller plans only those.
"""

from __future__ import annotations

import copy
from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import NamedTuple

from koordqueue.domain.admission import (
    AdmissionRejected,
    Admitted,
    Decision,
    EmptyQuotaSpec,
    QuotaCycle,
    QuotaExceeded,
    QuotaMissing,
    Rejection,
    ReserveQuotaMissing,
)
from koordqueue.domain.mapping import QuotaName, Unresolved, queue_name_for
from koordqueue.domain.names import (
    DEFAULT_POLICY,
    MSG_QUEUE_NOT_FOUND,
    MSG_UNKNOWN_POLICY,
    QUOTA_NAME_LABEL,
)
from koordqueue.domain.policies import (
    QueuePolicy,
    QueueSettings,
    UnknownPolicyError,
    make_policy,
    order_key,
)
from koordqueue.domain.queue_unit import (
    ADMITTED_PHASES,
    FINISHED_PHASES,
    NOT_YET_RUNNING,
    Phase,
    QueueUnit,
)
from koordqueue.domain.quota import QuotaSpec, is_oversold
from koordqueue.domain.quota_tree import DuplicateCallback, QuotaTree
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import (
    Admit,
    BackingOff,
    Finished,
    Holding,
    Outcome,
    Part,
    Preempted,
    QueueNotFound,
    QueueUnserved,
    Record,
    Reject,
    Unmapped,
    WaitingForPodsRunning,
)


@dataclass(slots=True)
class _Queue:
    name: str
    policy_name: str
    settings: QueueSettings
    policy: QueuePolicy | None
    error: str | None = None


_WAITING = 0
_ADMITTED = 1
_UNMAPPED = 2

OrderKey = tuple[int, bool, float, str, int]
"""`order_key` plus the unit's arrival number: a full scan sorts the units in arrival order
with a stable sort, so arrival breaks the ties."""

UsagePrefix = tuple[Resources, ...]
"""Usage of the first quotas of a chain (from the unit's own quota up), as CheckUsage read it."""


class _Order:
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


ChainShape = tuple[tuple[str, ...], tuple[tuple[tuple[str, int], ...], ...], str | None]
"""What CheckUsage reads of a chain besides usage: its path, each quota's max (in order: the
first resource over its limit is the one reported) and the parent after the path (the root,
or where the chain breaks: a missing quota or a cycle)."""


class _Checked(NamedTuple):
    """A rejection and what it depended on: the unit, its chain's shape and the usage of the
    chain up to the level that refused it (levels above were never read)."""

    unit: QueueUnit
    shape: ChainShape
    usage: UsagePrefix
    decision: Rejection


@dataclass(slots=True)
class _Tail:
    """The last units a Priority-ordered round rejected after its last admission, with the
    usage they were checked against (up to the highest level that refused one of them).

    `suffix`: the tail was the end of the queue's whole index (no max-depth cut, no unit
    backing off), so `_Order.stable` says how much of it is still the end of the queue
    without comparing units."""

    units: list[QueueUnit]
    outcomes: list[Outcome]
    rejected: list[tuple[QueueUnit, Rejection]]
    usage: UsagePrefix
    shape: ChainShape
    suffix: bool = False


@dataclass(slots=True)
class _Memo:
    """A queue's last round, as far as a later round may reuse it (see `_serve_queue`)."""

    policy: QueuePolicy
    tail: _Tail | None = None
    skipped_order: object = None
    skipped: list[Outcome] = field(default_factory=list)
    quiet_order: object = None
    quiet_key: Hashable | None = None
    quiet_outcomes: list[Part] = field(default_factory=list)
    quiet_waiting: list[QueueUnit] = field(default_factory=list)


class _ChainUsage:
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


def _levels(decision: Rejection, path: tuple[str, ...]) -> int | None:
    """How many quotas of the chain a rejection read (None: not a CheckUsage verdict)."""
    if isinstance(decision, QuotaExceeded | EmptyQuotaSpec):
        try:
            return path.index(decision.quota) + 1
        except ValueError:
            return None
    if isinstance(decision, QuotaMissing | QuotaCycle):
        return len(path)
    return None


@dataclass(frozen=True, slots=True)
class Preemption:
    """`victims` lose their admission so that `unit` fits; they go back to the queue."""

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
    """Per queue, units still waiting after the round, in queue order (for positions)."""

    @staticmethod
    def queue_not_found_message(unit: QueueUnit, queue: str) -> str:
        return MSG_QUEUE_NOT_FOUND.format(queue=queue, namespace=unit.namespace, name=unit.name)


class AdmissionEngine:
    """Everything admission needs, kept consistent; see the module docstring for the rules."""

    def __init__(
        self,
        oversell_rate: float | int | str = 1,
        on_duplicate_quota: DuplicateCallback | None = None,
        clock: Callable[[], float] | None = None,
        *,
        skip_unchanged: bool = True,
    ) -> None:
        """`skip_unchanged=False` runs every round as a full scan that offers every waiting
        unit to CheckUsage again: the reference the incremental rounds are proved against
        (same records, same admissions); for tests, or to rule the incremental rounds out."""
        self.tree = QuotaTree(oversell_rate, on_duplicate_quota)
        self._units: dict[str, QueueUnit] = {}
        self._uncounted: dict[str, str] = {}
        """Admitted units whose quota the tree has not seen (uid -> quota name): the tree
        refuses a reservation into a missing quota, as Koord-Queue's Reserve does, so a
        rebuild that meets the unit before its quota counts it when the quota arrives."""
        # uids by quota label value: the fast path looks at one queue, not every unit
        self._by_label: dict[str | None, set[str]] = {}
        self._queues: dict[str, _Queue] = {}
        self._first_attempt: dict[str, float] = {}
        self._not_before: dict[str, float] = {}
        # --- incremental rounds (see the module docstring) ---
        self._skip_unchanged = skip_unchanged
        self._seq: dict[str, int] = {}
        """Arrival number of each unit: its position in `_units`, which a full scan walks."""
        self._next_seq = 0
        self._where: dict[str, tuple[int, str]] = {}
        """Each unit's place: (_WAITING or _ADMITTED, queue) or (_UNMAPPED, "")."""
        self._okey: dict[str, tuple[OrderKey, QueueUnit]] = {}
        self._waiting: dict[str, _Order] = {}
        self._admitted_in: dict[str, dict[str, None]] = {}
        self._unmapped: dict[str, None] = {}
        self._versions = 0
        self._checked: dict[str, _Checked] = {}
        self._memos: dict[str, _Memo] = {}
        self._seen_usage: dict[str, UsagePrefix] = {}
        self._seen_shapes: dict[str, ChainShape] = {}
        self._counts: dict[str, list[int]] = {}
        """Per queue: [units waiting, units admitted], kept by `_reindex` (metrics)."""
        self._counts_changed: set[str] = set()
        self._counts_taken: dict[str, tuple[int, int]] = {}
        """The full scan's counts as `count_changes` last reported them."""

    # --- quotas and queues ----------------------------------------------------------------
    def upsert_quota(self, quota: QuotaSpec) -> None:
        self.tree.upsert(quota)
        if self._uncounted:
            for uid, name in list(self._uncounted.items()):
                if name != quota.name:
                    continue
                del self._uncounted[uid]
                unit = self._units.get(uid)
                if (
                    unit is not None
                    and unit.phase in ADMITTED_PHASES
                    and not self.tree.is_admitted(uid)
                    and queue_name_for(unit.labels) == QuotaName(name)
                ):
                    self._count_admitted(unit, name)

    def _held(self, uid: str) -> bool:
        """Whether the unit holds an admission: counted in the tree, or waiting for its
        quota to appear to be counted (`_uncounted`)."""
        return self.tree.is_admitted(uid) or uid in self._uncounted

    def _count_admitted(self, unit: QueueUnit, quota: str) -> None:
        """Reserve an already admitted unit (no check: a rebuild after a restart, an undone
        preemption); one whose quota is not there yet is counted when it arrives."""
        try:
            self.tree.admit(
                unit.uid, quota, unit.resource, oversold=is_oversold(unit.annotations),
                unit=unit.key,
            )
        except AdmissionRejected as exc:
            if not isinstance(exc.rejection, ReserveQuotaMissing):
                raise
            self._uncounted[unit.uid] = quota

    def remove_quota(self, name: str, namespace: str | None = None) -> None:
        self.tree.remove(name, namespace)

    def upsert_queue(
        self, name: str, policy: str = DEFAULT_POLICY, annotations: dict[str, str] | None = None
    ) -> str | None:
        """Register or update a queue; returns the AddQueueFail message if it cannot be served."""
        settings = QueueSettings.from_annotations(annotations or {}, policy)
        current = self._queues.get(name)
        if current is not None and current.policy_name == policy and current.settings == settings:
            return current.error
        try:
            instance: QueuePolicy | None = make_policy(policy, settings)
            error = None
        except UnknownPolicyError:
            instance = None
            error = MSG_UNKNOWN_POLICY.format(queue=name, policy=policy)
        self._queues[name] = _Queue(name, policy, settings, instance, error)
        return error

    def remove_queue(self, name: str) -> None:
        self._queues.pop(name, None)

    def has_queue(self, name: str) -> bool:
        return name in self._queues

    def queue_policy(self, name: str) -> QueuePolicy | None:
        """The policy instance serving queue `name` (None if absent or unserved)."""
        queue = self._queues.get(name)
        return None if queue is None else queue.policy

    def queue_settings(self, name: str) -> QueueSettings | None:
        queue = self._queues.get(name)
        return None if queue is None else queue.settings

    def not_before(self, uid: str) -> float:
        """When a backed-off unit may be tried again (0: now)."""
        return self._not_before.get(uid, 0.0)

    # --- units ----------------------------------------------------------------------------
    def upsert_unit(self, unit: QueueUnit) -> None:
        """Track a unit as the API shows it (level-triggered, idempotent)."""
        previous = self._units.get(unit.uid)
        if previous is not None:
            self._unindex(previous)
        else:
            self._seq[unit.uid] = self._next_seq
            self._next_seq += 1
        self._by_label.setdefault(_label_key(unit), set()).add(unit.uid)
        self._units[unit.uid] = unit
        self._first_attempt.setdefault(unit.uid, unit.created)
        moved = False
        if previous is not None and _label_key(previous) != _label_key(unit):
            moved = True
            self._tell_policy(previous, added=False)  # it left its old queue
        if unit.phase in FINISHED_PHASES:
            self._uncounted.pop(unit.uid, None)
            released = self.tree.release(unit.uid)
            if released or (previous is not None and previous.phase not in FINISHED_PHASES):
                self._tell_policy(unit, added=False)  # it left its queue: lifts a block
        elif unit.phase in ADMITTED_PHASES and not self.tree.is_admitted(unit.uid):
            resolution = queue_name_for(unit.labels)
            if isinstance(resolution, QuotaName):
                # Rebuild after a restart (or an admission by a previous leader): count it.
                self._count_admitted(unit, resolution.name)
        elif (previous is None or moved) and not self.tree.is_admitted(unit.uid):
            self._tell_policy(unit, added=True)
        if (
            previous is not None
            and previous.phase in NOT_YET_RUNNING
            and unit.phase is Phase.RUNNING
            and (policy := self._policy_of(unit)) is not None
        ):
            policy.unit_started(unit)
        self._reindex(unit.uid)

    def remove_unit(self, uid: str) -> QueueUnit | None:
        """The unit (or its Job) is gone: release its quota and forget it."""
        unit = self._units.pop(uid, None)
        self.tree.release(uid)
        self._uncounted.pop(uid, None)
        self._first_attempt.pop(uid, None)
        self._not_before.pop(uid, None)
        if unit is not None:
            self._unindex(unit)
            self._tell_policy(unit, added=False)
        self._reindex(uid)
        self._seq.pop(uid, None)
        self._checked.pop(uid, None)
        return unit

    def _unindex(self, unit: QueueUnit) -> None:
        label = _label_key(unit)
        same = self._by_label.get(label)
        if same is not None:
            same.discard(unit.uid)
            if not same:
                del self._by_label[label]

    def _reindex(self, uid: str) -> None:
        """Put a unit where a round looks for it after any change to it or its admission."""
        if not self._skip_unchanged:
            return
        unit = self._units.get(uid)
        place: tuple[int, str] | None = None
        if unit is not None and unit.phase not in FINISHED_PHASES:
            resolution = queue_name_for(unit.labels)
            admitted = self._held(uid)
            if isinstance(resolution, Unresolved):
                if not admitted:
                    place = (_UNMAPPED, "")
            else:
                place = (_ADMITTED if admitted else _WAITING, resolution.name)
        old = self._where.get(uid)
        if old == place and (place is None or place[0] != _WAITING or self._okey[uid][1] is unit):
            return
        if old is not None:
            kind, queue = old
            if kind != _UNMAPPED:
                self._counts[queue][kind] -= 1
                self._counts_changed.add(queue)
            if kind == _WAITING:
                key, _ = self._okey.pop(uid)
                order = self._waiting[queue]
                i = bisect_left(order.keys, key)
                order.stable = min(order.stable, len(order.keys) - i - 1)
                del order.keys[i], order.units[i]
                self._versions += 1
                order.version = self._versions
                if not order.units:
                    del self._waiting[queue]
            elif kind == _ADMITTED:
                members = self._admitted_in[queue]
                del members[uid]
                if not members:
                    del self._admitted_in[queue]
            else:
                del self._unmapped[uid]
        if place is None:
            self._where.pop(uid, None)
            return
        assert unit is not None
        self._where[uid] = place
        kind, queue = place
        if kind != _UNMAPPED:
            (self._counts.get(queue) or self._counts.setdefault(queue, [0, 0]))[kind] += 1
            self._counts_changed.add(queue)
        if kind == _WAITING:
            key = (*order_key(unit, self._first_attempt[uid]), self._seq[uid])
            self._okey[uid] = (key, unit)
            order = self._waiting.get(queue) or self._waiting.setdefault(queue, _Order())
            i = bisect_left(order.keys, key)
            order.stable = min(order.stable, len(order.keys) - i)
            order.keys.insert(i, key)
            order.units.insert(i, unit)
            self._versions += 1
            order.version = self._versions
        elif kind == _ADMITTED:
            self._admitted_in.setdefault(queue, {})[uid] = None
        else:
            self._unmapped[uid] = None

    def defer(self, uid: str, until: float) -> None:
        """Keep a unit out of rounds until `until` (exponential backoff after a failure)."""
        self._not_before[uid] = until

    def requeue(self, uid: str, until: float) -> None:
        """A unit failed downstream (SchedFailed): give its quota back, retry after `until`."""
        self.tree.release(uid)
        unit = self._units.get(uid)
        if unit is not None:
            self._units[uid] = replace(unit, phase=Phase.BACKOFF)
            self._tell_policy(unit, added=False)
        self._not_before[uid] = until
        self._reindex(uid)

    def rollback(self, uid: str) -> None:
        """An admission could not be persisted: give the quota back, keep the unit waiting."""
        self.tree.release(uid)
        unit = self._units.get(uid)
        if unit is not None and unit.phase in ADMITTED_PHASES:
            self._units[uid] = replace(unit, phase=Phase.ENQUEUED)
        self._reindex(uid)

    def unit(self, uid: str) -> QueueUnit | None:
        return self._units.get(uid)

    def count_changes(self) -> dict[str, tuple[int, int]]:
        """Per queue whose counts changed since the last call: (units waiting, backing off
        included; units admitted), counting units not finished whose quota label names a
        queue. Kept as units change (incremental engine), so a caller exporting them per
        round pays for what changed, not for every unit."""
        if not self._skip_unchanged:
            counts: dict[str, list[int]] = {}
            for unit in self._units.values():
                resolution = queue_name_for(unit.labels)
                if unit.phase in FINISHED_PHASES or not isinstance(resolution, QuotaName):
                    continue
                tally = counts.setdefault(resolution.name, [0, 0])
                tally[_ADMITTED if self._held(unit.uid) else _WAITING] += 1
            now = {q: (c[0], c[1]) for q, c in counts.items()}
            taken = self._counts_taken
            changed = {q: now.get(q, (0, 0)) for q in set(now) | set(taken)
                       if now.get(q, (0, 0)) != taken.get(q, (0, 0))}
            self._counts_taken = now
            return changed
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

    def renew(self, uid: str) -> None:
        """The unit's entry in the next record must be new (`Record.new`), not carried over:
        its executor forgot, or overwrote, what it last wrote for it."""
        place = self._where.get(uid)
        memo = None if place is None else self._memos.get(place[1])
        if memo is not None:
            memo.tail = None
            memo.quiet_order = memo.quiet_key = None

    def units(self) -> list[QueueUnit]:
        return list(self._units.values())

    def is_admitted(self, uid: str) -> bool:
        return self._held(uid)

    def _policy_of(self, unit: QueueUnit) -> QueuePolicy | None:
        resolution = queue_name_for(unit.labels)
        if isinstance(resolution, QuotaName):
            queue = self._queues.get(resolution.name)
            if queue is not None:
                return queue.policy
        return None

    def _tell_policy(self, unit: QueueUnit, *, added: bool) -> None:
        """Report a unit joining its queue, or leaving it / giving quota back (lifts blocks)."""
        policy = self._policy_of(unit)
        if policy is not None:
            if added:
                policy.unit_added(unit)
            else:
                policy.unit_released(unit)

    def admit_if_queue_idle(self, uid: str, now: float) -> Admitted | None:
        """Fast path for a newly arrived unit: admit it at once if nothing waits before it.

        With no other unit waiting in its queue, every policy would offer this unit first,
        so admitting it outside a round changes no decision; it only saves a round trip.
        Returns None (and changes nothing) whenever a round must decide instead.
        """
        unit = self._units.get(uid)
        if unit is None or self._held(uid) or self._not_before.get(uid, 0.0) > now:
            return None
        resolution = queue_name_for(unit.labels)
        if not isinstance(resolution, QuotaName):
            return None
        queue = self._queues.get(resolution.name)
        if queue is None or queue.policy is None or resolution.name not in self.tree:
            return None
        if resolution.name in queue.policy.blocked_quotas:
            return None  # its policy holds the quota: only a round may retry it
        for other_uid in self._by_label.get(_label_key(unit), ()):
            other = self._units[other_uid]
            if other_uid == uid:
                continue
            if other.phase in FINISHED_PHASES:
                continue
            admitted = self._held(other.uid)
            if not admitted:
                return None  # someone is waiting: the policy decides the order in a round
            if queue.settings.wait_for_pods_running and other.phase in NOT_YET_RUNNING:
                return None
        decision = self.tree.try_admit(
            uid, unit.key, resolution.name, unit.resource, oversold=is_oversold(unit.annotations)
        )
        if not isinstance(decision, Admitted):
            return None
        queue.policy.feedback(unit, True, now)
        self._units[uid] = replace(unit, phase=Phase.DEQUEUED)
        self._reindex(uid)
        return decision

    # --- the round ------------------------------------------------------------------------
    def dry_round(self, now: float) -> RoundResult:
        """The record of the round `run_round(now)` would run, leaving this engine untouched.

        Runs on a deep copy (policy state included), so `explain` reads the real rules'
        answer rather than a re-derivation. Not for the hot path: it copies everything.
        """
        callback = self.tree._on_duplicate
        memo: dict[int, object] = {} if callback is None else {id(callback): callback}
        twin: AdmissionEngine = copy.deepcopy(self, memo)
        result = twin.run_round(now)
        result.outcomes.extend(twin._settled(result.outcomes))
        return result

    def _settled(self, record: Record) -> list[Outcome]:
        """The units the round did not look at, and why: finished, or admitted before and
        holding their quota (in arrival order), so a dry round's record has one verdict per
        unit (explain reads it instead of classifying units again)."""
        seen = {outcome.unit.uid for outcome in record}
        out: list[Outcome] = []
        for uid, unit in self._units.items():
            if uid in seen:
                continue
            if unit.phase in FINISHED_PHASES:
                out.append(Finished(unit))
                continue
            quota = self.tree.reserved_quota(uid)
            if quota is not None:
                out.append(Holding(unit, quota))
        return out

    def run_round(self, now: float) -> RoundResult:
        """Offer every served queue's waiting units to CheckUsage, in policy order.

        Incremental unless built with `skip_unchanged=False` (module docstring): the record
        and every decision are those of the full scan."""
        if self._skip_unchanged:
            return self._run_round_incremental(now)
        return self._run_round_full(now)

    def _run_round_full(self, now: float) -> RoundResult:
        """The reference round: classify every unit, sort every queue, check every candidate."""
        result = RoundResult()
        outcomes = result.outcomes
        by_queue: dict[str, list[QueueUnit]] = {}
        admitted_by_queue: dict[str, list[QueueUnit]] = {}
        for unit in self._units.values():
            if unit.phase in FINISHED_PHASES:
                continue
            resolution = queue_name_for(unit.labels)
            if isinstance(resolution, Unresolved):
                if not self._held(unit.uid):
                    result.unmapped.append((unit, resolution))
                    outcomes.append(Unmapped(unit, resolution))
                continue
            if self._held(unit.uid):
                admitted_by_queue.setdefault(resolution.name, []).append(unit)
                continue
            until = self._not_before.get(unit.uid, 0.0)
            if until > now:
                outcomes.append(BackingOff(unit, until))
                continue
            by_queue.setdefault(resolution.name, []).append(unit)

        for queue_name in sorted(by_queue):
            waiting = by_queue[queue_name]
            queue = self._queues.get(queue_name)
            if queue is None or queue_name not in self.tree:
                result.queue_not_found.extend((u, queue_name) for u in waiting)
                outcomes.extend(QueueNotFound(u, queue_name) for u in waiting)
                continue
            if queue.policy is None:
                error = queue.error or "not served"
                result.unserved_queues[queue_name] = error
                outcomes.extend(QueueUnserved(u, queue_name, error) for u in waiting)
                continue
            ordered = sorted(waiting, key=lambda u: order_key(u, self._first_attempt[u.uid]))
            admitted_here = admitted_by_queue.get(queue_name, [])
            not_running = tuple(u.key for u in admitted_here if u.phase in NOT_YET_RUNNING)
            paused = queue.settings.wait_for_pods_running and bool(not_running)
            if paused and not queue.settings.enable_preemption:
                result.waiting[queue_name] = ordered
                outcomes.extend(WaitingForPodsRunning(u, not_running) for u in ordered)
                continue
            self._serve(
                queue, ordered, admitted_here, now, result,
                not_running=not_running if paused else (),
            )
        return result

    def _run_round_incremental(self, now: float) -> RoundResult:
        """The full scan's round from the indexes, reusing what did not change."""
        result = RoundResult()
        outcomes = result.outcomes
        units, seq, where = self._units, self._seq, self._where
        first: list[tuple[int, Outcome]] = []
        for uid in self._unmapped:
            unit = units[uid]
            resolution = queue_name_for(unit.labels)
            assert isinstance(resolution, Unresolved)
            first.append((seq[uid], Unmapped(unit, resolution)))
        backing: dict[str, set[str]] = {}
        for uid, until in self._not_before.items():
            if until > now:
                place = where.get(uid)
                if place is not None and place[0] == _WAITING:
                    first.append((seq[uid], BackingOff(units[uid], until)))
                    backing.setdefault(place[1], set()).add(uid)
        if first:
            first.sort(key=itemgetter(0))
            for _, outcome in first:
                outcomes.append(outcome)
                if isinstance(outcome, Unmapped):
                    result.unmapped.append((outcome.unit, outcome.unresolved))
        touched: list[str] = []
        for name in sorted(self._waiting):
            self._serve_queue(name, backing.get(name), now, result, touched)
            for uid in touched:
                self._reindex(uid)
            touched.clear()
        return result

    def _serve_queue(
        self,
        name: str,
        backing: set[str] | None,
        now: float,
        result: RoundResult,
        touched: list[str],
    ) -> None:
        """One queue's turn in an incremental round: what the full scan does for it.

        `ordered` is the live index (not copied): the units whose state the turn changes
        are re-indexed after it, through `touched`. Two reuses make a round cost what
        changed: a Priority queue's trailing rejections whose chain usage is back where it
        was (`_serve_in_order`), and a Block/Intelligent queue whose policy offers nothing
        (`quiet_key`) and whose units did not change.
        """
        order = self._waiting.get(name)
        if order is None:
            return
        ordered = order.units
        order_id: object = order.version
        if backing:
            ordered = [u for u in ordered if u.uid not in backing]
            if not ordered:
                return
            order_id = (order.version, frozenset(backing))
        outcomes = result.outcomes
        queue = self._queues.get(name)
        if queue is None or name not in self.tree or queue.policy is None:
            # the queue's entries are written differently this round: a memo kept from
            # before would carry entries whose messages are no longer the last ones written
            self._memos.pop(name, None)
            in_arrival = sorted(ordered, key=lambda u: self._seq[u.uid])
            if queue is None or name not in self.tree:
                result.queue_not_found.extend((u, name) for u in in_arrival)
                outcomes.extend(QueueNotFound(u, name) for u in in_arrival)
            else:
                error = queue.error or "not served"
                result.unserved_queues[name] = error
                outcomes.extend(QueueUnserved(u, name, error) for u in in_arrival)
            return
        policy = queue.policy
        settings = queue.settings
        admitted_here: list[QueueUnit] = []
        not_running: tuple[str, ...] = ()
        if settings.wait_for_pods_running:
            members = self._admitted_in.get(name, {})
            admitted_here = [self._units[uid] for uid in sorted(members, key=self._seq.__getitem__)]
            not_running = tuple(u.key for u in admitted_here if u.phase in NOT_YET_RUNNING)
        paused = settings.wait_for_pods_running and bool(not_running)
        if paused and not settings.enable_preemption:
            self._memos.pop(name, None)  # (as above)
            result.waiting[name] = list(ordered)
            outcomes.extend(WaitingForPodsRunning(u, not_running) for u in ordered)
            return
        memo = self._memos.get(name)
        if memo is None or memo.policy is not policy:
            memo = self._memos[name] = _Memo(policy)
        usage = _ChainUsage(self.tree, name, self._seen_usage, self._seen_shapes)
        if policy.offers_in_order(ordered) and not settings.preemption:
            memo.quiet_order = memo.quiet_key = None  # (kept by the other path only)
            self._serve_in_order(
                queue, ordered, order=order if ordered is order.units else None,
                order_id=order_id, memo=memo, usage=usage, now=now, result=result,
                touched=touched,
            )
            return
        memo.tail = None  # written otherwise this round: not to be carried later
        quiet = policy.quiet_key(ordered, now)
        if quiet is not None and memo.quiet_order == order_id and memo.quiet_key == quiet:
            outcomes.carry_parts(memo.quiet_outcomes)
            result.waiting[name] = list(memo.quiet_waiting)
            return
        start = outcomes.mark()
        tried = self._serve(
            queue, ordered, admitted_here, now, result,
            not_running=not_running if paused else (), usage=usage, touched=touched,
        )
        if quiet is not None and not tried:
            memo.quiet_order, memo.quiet_key = order_id, quiet
            memo.quiet_outcomes = outcomes.since(start)
            memo.quiet_waiting = list(result.waiting[name])
        else:
            memo.quiet_order = memo.quiet_key = None

    def _serve_in_order(
        self,
        queue: _Queue,
        ordered: list[QueueUnit],
        *,
        order: _Order | None,
        order_id: object,
        memo: _Memo,
        usage: _ChainUsage,
        now: float,
        result: RoundResult,
        touched: list[str],
    ) -> None:
        """`_serve` for a policy that offers its max-depth window in order whatever the answers
        (`QueuePolicy.offers_in_order`: Priority without preemption, an Intelligent queue with
        only low units). `order`: the index `ordered` is (None: a filtered copy).

        Rejections after the last admission form the queue's tail. Next round, once the
        units still to offer are the end of that tail and the chain's usage (up to the
        highest level that refused one of them) is what they were checked against, their
        decisions and record entries are the tail's: reused in one step. After one release,
        the round checks the units up to the one that fills the quota again, then reuses.
        """
        policy = queue.policy
        assert policy is not None
        outcomes, rejected = result.outcomes, result.rejected
        depth = queue.settings.max_depth
        window = ordered[:depth] if 0 < depth < len(ordered) else ordered
        whole = order is not None and window is ordered
        shape = usage.shape
        tail = memo.tail if memo.tail is not None and memo.tail.shape == shape else None
        stable = order.stable if whole and order is not None and tail and tail.suffix else -1
        failed_usage: UsagePrefix | None = None
        run_units: list[QueueUnit] = []
        run_outcomes: list[Outcome] = []
        run_rejected: list[tuple[QueueUnit, Rejection]] = []
        run_levels = 0
        still_waiting: list[QueueUnit] = []
        new_tail: _Tail | None = None
        n = len(window)
        i = 0
        while i < n:
            unit = window[i]
            if tail is not None:
                j = len(tail.units) - (n - i)  # where window[i:] would start in the tail
                if j >= 0 and (n - i <= stable or tail.units[j] is unit):
                    current = usage.prefix(len(tail.usage))
                    if current is not failed_usage:
                        if current != tail.usage:
                            failed_usage = current
                        elif n - i <= stable or tail.units[j:] == window[i:]:
                            policy.rejected_run(tail.units[j:] if j else tail.units, now)
                            new_tail = self._reuse_tail(
                                tail, j, still_waiting=still_waiting, result=result,
                                run=(run_units, run_outcomes, run_rejected),
                                usage=usage.prefix(max(run_levels, len(tail.usage))),
                            )
                            break
                        else:
                            tail = None  # the queue changed within: no second try
            decision = self._decide(unit, queue.name, usage, admit=True)
            policy.feedback(unit, decision.admitted, now)
            if isinstance(decision, Admitted):
                admitted = replace(unit, phase=Phase.DEQUEUED)
                self._units[unit.uid] = admitted
                result.admitted.append((admitted, decision))
                outcomes.append(Admit(admitted, decision))
                touched.append(unit.uid)
                run_units, run_outcomes, run_rejected, run_levels = [], [], [], 0
            else:
                outcome = Reject(unit, decision)
                rejected.append((unit, decision))
                outcomes.append(outcome)
                still_waiting.append(unit)
                run_units.append(unit)
                run_outcomes.append(outcome)
                run_rejected.append((unit, decision))
                levels = _levels(decision, usage.path)
                run_levels = max(run_levels, len(usage.path) if levels is None else levels)
            i += 1
        if new_tail is None and run_units:
            new_tail = _Tail(
                run_units, run_outcomes, run_rejected, usage.prefix(run_levels), shape
            )
        if new_tail is not None:
            new_tail.shape = shape
            new_tail.suffix = whole
        memo.tail = new_tail
        if order is not None:
            order.stable = len(order.units)
        if window is ordered:
            result.waiting[queue.name] = still_waiting
            return
        if memo.skipped_order != order_id:
            untried = [(k, u) for k, u in enumerate(ordered) if k >= n]
            memo.skipped = list[Outcome]()
            memo.skipped.extend(policy.skipped(untried, ordered[n:]))
            memo.skipped_order = order_id
        result.waiting[queue.name] = still_waiting + ordered[n:]
        outcomes.carry(memo.skipped)

    @staticmethod
    def _reuse_tail(
        tail: _Tail,
        j: int,
        *,
        still_waiting: list[QueueUnit],
        result: RoundResult,
        run: tuple[list[QueueUnit], list[Outcome], list[tuple[QueueUnit, Rejection]]],
        usage: UsagePrefix,
    ) -> _Tail:
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
            return _Tail(units, outcomes, rejected, usage, tail.shape)
        run_units.extend(units)
        run_outcomes.extend(outcomes)
        run_rejected.extend(rejected)
        return _Tail(run_units, run_outcomes, run_rejected, usage, tail.shape)

    def _serve(
        self,
        queue: _Queue,
        ordered: list[QueueUnit],
        admitted_here: list[QueueUnit],
        now: float,
        result: RoundResult,
        *,
        not_running: Sequence[str] = (),
        usage: _ChainUsage | None = None,
        touched: list[str] | None = None,
    ) -> set[str]:
        """Offer the queue's candidates to CheckUsage, and record why the others were skipped.

        `not_running` non-empty (wait-for-pods-running with admitted units not running yet):
        a unit that fits keeps waiting; only one that needs preemption may get in, by
        preempting. With `usage` (incremental rounds), a rejection whose chain did not change
        is reused instead of checked again, and the uids whose state changed are added to
        `touched` (re-indexed after the queue's turn). Returns the uids offered.
        """
        assert queue.policy is not None
        policy = queue.policy
        outcomes = result.outcomes
        paused = bool(not_running)
        preempted_this_round = False
        still_waiting: list[QueueUnit] = []
        tried: set[str] = set()
        # (the incremental engine's queues hold only units of the queue's own quota)
        for unit in policy.candidates(ordered, now, one_quota=usage is not None):
            tried.add(unit.uid)
            if usage is not None:
                decision = self._decide(unit, queue.name, usage, admit=not paused)
                if paused and decision.admitted:
                    still_waiting.append(unit)  # room, but its queue waits for pods to run
                    outcomes.append(WaitingForPodsRunning(unit, tuple(not_running)))
                    continue
            elif paused:
                decision = self.tree.check(unit.key, queue.name, unit.resource)
                if decision.admitted:
                    still_waiting.append(unit)  # room, but its queue waits for pods to run
                    outcomes.append(WaitingForPodsRunning(unit, tuple(not_running)))
                    continue
            else:
                decision = self.tree.try_admit(
                    unit.uid, unit.key, queue.name, unit.resource,
                    oversold=is_oversold(unit.annotations),
                )
            if (
                not decision.admitted
                and isinstance(decision, QuotaExceeded)
                and queue.settings.preemption
                and not preempted_this_round
            ):
                preemption = self._preempt_for(unit, admitted_here)
                if usage is not None:
                    usage.changed()
                if preemption is not None:
                    preempted_this_round = True
                    result.preempted.append(preemption)
                    outcomes.extend(Preempted(v, unit) for v in preemption.victims)
                    if touched is not None:
                        touched.extend(v.uid for v in preemption.victims)
                    decision = self.tree.try_admit(
                        unit.uid, unit.key, queue.name, unit.resource,
                        oversold=is_oversold(unit.annotations),
                    )
            policy.feedback(unit, decision.admitted, now)
            if isinstance(decision, Admitted):
                admitted = replace(unit, phase=Phase.DEQUEUED)
                self._units[unit.uid] = admitted
                result.admitted.append((admitted, decision))
                outcomes.append(Admit(admitted, decision))
                if touched is not None:
                    touched.append(unit.uid)
            else:
                result.rejected.append((unit, decision))
                outcomes.append(Reject(unit, decision))
                still_waiting.append(unit)
        if len(tried) == len(ordered):
            result.waiting[queue.name] = still_waiting
            return tried
        count = len(tried)
        if usage is not None and all(u.uid in tried for u in ordered[:count]):
            # the tried units lead the queue (a Block head): the rest is one run of skips,
            # recorded without building its entries (nobody but a reader needs them)
            rest = ordered[count:]
            waiting = still_waiting + rest
            result.waiting[queue.name] = waiting
            outcomes.lazy(policy.skipped_lazily(rest, count, waiting))
            return tried
        untried = [(i, u) for i, u in enumerate(ordered) if u.uid not in tried]
        waiting = still_waiting + [u for _, u in untried]
        result.waiting[queue.name] = waiting
        outcomes.extend(policy.skipped(untried, waiting))
        return tried

    def _decide(
        self, unit: QueueUnit, quota: str, usage: _ChainUsage, *, admit: bool
    ) -> Decision:
        """CheckUsage for a waiting unit (recording the admission when `admit`), or its last
        rejection when nothing it read has changed since: the unit itself, the quota
        structure, and the usage of its chain up to the level that refused it."""
        uid = unit.uid
        last = self._checked.get(uid)
        if (
            last is not None
            and last.unit is unit
            and last.shape == usage.shape
            and last.usage == usage.prefix(len(last.usage))
        ):
            return last.decision
        if admit:
            decision = self.tree.try_admit(
                uid, unit.key, quota, unit.resource, oversold=is_oversold(unit.annotations)
            )
        else:
            decision = self.tree.check(unit.key, quota, unit.resource)
        if isinstance(decision, Admitted):
            if admit:
                usage.changed()
                self._checked.pop(uid, None)
        else:
            levels = _levels(decision, usage.path)
            if levels is not None:
                self._checked[uid] = _Checked(unit, usage.shape, usage.prefix(levels), decision)
        return decision

    def _preempt_for(self, unit: QueueUnit, admitted_here: list[QueueUnit]) -> Preemption | None:
        """Free quota from admitted, not-yet-running units that sort after `unit`, lowest first."""
        key = order_key(unit, self._first_attempt.get(unit.uid, unit.created))
        candidates = sorted(
            (
                u
                for u in admitted_here
                if u.phase in NOT_YET_RUNNING
                and self.tree.is_admitted(u.uid)
                and order_key(u, self._first_attempt.get(u.uid, u.created)) > key
            ),
            key=lambda u: order_key(u, self._first_attempt.get(u.uid, u.created)),
            reverse=True,
        )
        if not candidates:
            return None
        released: list[QueueUnit] = []
        for victim in candidates:
            self.tree.release(victim.uid)
            released.append(victim)
            quota = queue_name_for(unit.labels)
            assert isinstance(quota, QuotaName)
            if self.tree.check(unit.key, quota.name, unit.resource).admitted:
                for v in released:
                    self._units[v.uid] = replace(v, phase=Phase.ENQUEUED)
                    admitted_here.remove(v)
                    self._tell_policy(v, added=False)
                return Preemption(unit, tuple(released))
        for victim in released:  # not enough even with every victim gone: undo
            victim_quota = queue_name_for(victim.labels)
            assert isinstance(victim_quota, QuotaName)
            self._count_admitted(victim, victim_quota.name)
        return None


def _label_key(unit: QueueUnit) -> str | None:
    """The quota label as an index key (None when absent or not a string: never served)."""
    value = unit.labels.get(QUOTA_NAME_LABEL)
    return value if isinstance(value, str) else None
