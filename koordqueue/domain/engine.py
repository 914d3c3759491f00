"""The admission engine: quotas, queues and units in memory, one admission round at a time.

Both the live controller and the simulator drive this class; it does no I/O. The adapter
feeds it what the API says (quotas, queues, units), calls `run_round`, persists the outcome,
and calls `rollback` for any admission it failed to persist. Admission state only changes by
the engine's own decisions, a finished/deleted unit, or a rebuild from admitted phases — so a
stale watch event can never undo an admission, and a restart can never repeat one.

Rounds cost what changed, not what waits (issue 11, part 4). The engine keeps its units
indexed by queue, sorted in offer order (`unit_index.py`), and remembers, per unit CheckUsage
refused, the usage of the quota chain it was checked against; per queue, the record of its
last round (`round_memo.py`). A round (`round_runner.py`) re-checks a unit only if its
chain's usage (up to the level that refused it), the chain's shape (path, maxes, where it
ends) or the unit changed, and reuses whole runs of the last record when nothing they depend
on changed, so a round with 16,000 parked units and one release checks a handful (Kueue's
inadmissible set, made exact). The record is the one a full scan writes, entry for entry:
test_incremental_rounds.py (tests/unit/admission) drives both with the same random event
streams; the full scan stays behind `AdmissionEngine(skip_unchanged=False)` for that proof.

A Block or Intelligent queue stops at its blocked head (its units all share one quota, so the
policy need not walk the held ones), and the skips behind it are recorded as one lazy run
(`round.LazyOutcomes`, built from the policy's state captured then, on first read): a release
round costs the units it tries. The record (`round.Record`) carries earlier rounds' lists
instead of copying them, and tells which entries are new this round (`Record.new`): the
others were planned by an earlier round already, so the controller plans only those.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace

from koordqueue.domain.admission import AdmissionRejected, Admitted, ReserveQuotaMissing
from koordqueue.domain.mapping import QuotaName, queue_name_for
from koordqueue.domain.names import DEFAULT_POLICY, MSG_UNKNOWN_POLICY, QUOTA_NAME_LABEL
from koordqueue.domain.policies import (
    QueuePolicy,
    QueueSettings,
    UnknownPolicyError,
    make_policy,
)
from koordqueue.domain.queue_preemption import VictimRules
from koordqueue.domain.queue_unit import (
    ADMITTED_PHASES,
    FINISHED_PHASES,
    NOT_YET_RUNNING,
    AdmissionCount,
    Phase,
    QueueUnit,
)
from koordqueue.domain.quota import QuotaSpec, is_oversold
from koordqueue.domain.quota_tree import DuplicateCallback, QuotaTree
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import Finished, Holding, Outcome, Preemption, Record, RoundResult
from koordqueue.domain.round_memo import Memo, Rejections
from koordqueue.domain.round_runner import RoundRunner, ServedQueue
from koordqueue.domain.unit_index import ADMITTED, WAITING, UnitIndex

__all__ = ["AdmissionEngine", "Preemption", "RoundResult"]
# (Preemption and RoundResult live in round.py with the record; re-exported: callers take
# the engine's result type from the engine)


class AdmissionEngine:
    """Everything admission needs, kept consistent; see the module docstring for the rules."""

    def __init__(
        self,
        oversell_rate: float | int | str = 1,
        on_duplicate_quota: DuplicateCallback | None = None,
        clock: Callable[[], float] | None = None,
        *,
        skip_unchanged: bool = True,
        honour_inactive: bool = True,
        honour_budget: bool = True,
        victim_rules: VictimRules | None = None,
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
        # live (unfinished) uids by quota label value: the fast path looks at one queue's
        # live units, not every unit, nor the finished ones a queue gathers for as long as
        # their Jobs are kept (with 10,000 finished ones: 1.49 -> 0.03 ms per new unit)
        self._by_label: dict[str | None, set[str]] = {}
        self._queues: dict[str, ServedQueue] = {}
        self._first_attempt: dict[str, float] = {}
        self._not_before: dict[str, float] = {}
        self._honour_inactive = honour_inactive
        """The QueueUnitActive gate: spec.active=false keeps a unit out (and evicts it)."""
        self._inactive: dict[str, None] = {}
        self._honour_budget = honour_budget
        """The MaximumExecutionTime gate: a unit that ran its budget is deactivated."""
        self._budgeted: dict[str, None] = {}
        self._reclaiming: dict[str, None] = {}
        """Admitted units a queue-level preemption marked (queue_preemption.py)."""
        # --- incremental rounds (see the module docstring) ---
        self._skip_unchanged = skip_unchanged
        self._seq: dict[str, int] = {}
        """Arrival number of each unit: its position in `_units`, which a full scan walks."""
        self._next_seq = 0
        self._index = UnitIndex()
        self._rejections = Rejections()
        self._memos: dict[str, Memo] = {}
        self._counts_taken: dict[str, tuple[int, int]] = {}
        """The full scan's counts as `count_changes` last reported them."""
        self._rounds = RoundRunner(
            tree=self.tree, units=self._units, queues=self._queues,
            first_attempt=self._first_attempt, not_before=self._not_before, seq=self._seq,
            index=self._index, rejections=self._rejections, reindex=self._reindex,
            released=self._released, held=self._held,
            count_admitted=self._count_admitted, memos=self._memos, seen_usage={}, seen_shapes={},
            inactive=self._inactive, deactivate=self._deactivate,
            budgeted=self._budgeted, spend=self._spend,
            reclaiming=self._reclaiming, mark=self._mark, reclaim=self._reclaim,
            victim_rules=victim_rules or VictimRules(),
        )

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
                self._reindex(uid)  # held or not may have changed: the queue counts follow

    def _held(self, uid: str) -> bool:
        """Whether the unit holds an admission: counted in the tree, or waiting for its
        quota to appear to be counted (`_uncounted`)."""
        return self.tree.is_admitted(uid) or uid in self._uncounted

    def _count_admitted(self, unit: QueueUnit, quota: str, oversold: bool | None = None) -> None:
        """Reserve an already admitted unit (no check: a rebuild after a restart, an undone
        preemption, a smaller request given back); one whose quota is not there (yet, or any
        more) is counted when it arrives. `oversold`: as it was held (else its annotation)."""
        if oversold is None:
            oversold = is_oversold(unit.annotations)
        try:
            self.tree.admit(unit.uid, quota, unit.resource, oversold=oversold, unit=unit.key)
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
        self._queues[name] = ServedQueue(name, policy, settings, instance, error)
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
        if unit.phase not in FINISHED_PHASES:
            self._by_label.setdefault(_label_key(unit), set()).add(unit.uid)
        self._units[unit.uid] = unit
        if previous is None and unit.phase is Phase.BACKOFF and unit.requeue_at is not None:
            # first seen backing off (a restart, explain): status.requeueState says until when
            self._not_before[unit.uid] = max(self._not_before.get(unit.uid, 0.0), unit.requeue_at)
        live = unit.phase not in FINISHED_PHASES
        was_inactive = unit.uid in self._inactive
        if self._honour_inactive and not unit.active and live:
            self._inactive[unit.uid] = None
        else:
            self._inactive.pop(unit.uid, None)
        if was_inactive != (unit.uid in self._inactive) and not self._held(unit.uid):
            # a waiting unit left the offer (a Block head lets its quota go) or came back
            self._tell_policy(unit, added=was_inactive)
        if unit.reclaiming and unit.phase in ADMITTED_PHASES:
            self._reclaiming[unit.uid] = None
        else:
            self._reclaiming.pop(unit.uid, None)
        if self._honour_budget and unit.max_exec_seconds is not None and unit.active and live:
            self._budgeted[unit.uid] = None
        else:
            self._budgeted.pop(unit.uid, None)
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
        elif previous is not None and unit.resource != previous.resource:
            self._give_back(unit)
        if (
            previous is not None
            and previous.phase in NOT_YET_RUNNING
            and unit.phase is Phase.RUNNING
            and (policy := self._policy_of(unit)) is not None
        ):
            policy.unit_started(unit)
        self._reindex(unit.uid)

    def _give_back(self, unit: QueueUnit) -> None:
        """An admitted unit now needs less (its reclaimable pods, reclaimable.py): it holds
        only that, and its policy hears of the freed room (a Block quota unblocks). A unit
        that asks for more keeps what it holds: more would need CheckUsage."""
        tree = self.tree
        quota, held = tree.reserved_quota(unit.uid), tree.reserved_request(unit.uid)
        if quota is None or held is None or not unit.resource.less_equal(held):
            return
        oversold = tree.is_oversold(unit.uid)
        tree.release(unit.uid)
        self._count_admitted(unit, quota, oversold)  # (a deleted quota: counted if it returns)
        self._tell_policy(unit, added=False)

    def remove_unit(self, uid: str) -> QueueUnit | None:
        """The unit (or its Job) is gone: release its quota and forget it."""
        unit = self._units.pop(uid, None)
        self.tree.release(uid)
        self._uncounted.pop(uid, None)
        self._inactive.pop(uid, None)
        self._budgeted.pop(uid, None)
        self._reclaiming.pop(uid, None)
        self._first_attempt.pop(uid, None)
        self._not_before.pop(uid, None)
        if unit is not None:
            self._unindex(unit)
            self._tell_policy(unit, added=False)
        self._reindex(uid)
        self._seq.pop(uid, None)
        self._rejections.checked.pop(uid, None)
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
        self._index.reindex(
            uid, self._units.get(uid), admitted=self._held(uid),
            first_attempt=self._first_attempt.get(uid, 0.0), seq=self._seq.get(uid, 0),
        )

    def defer(self, uid: str, until: float) -> None:
        """Keep a unit out of rounds until `until` (exponential backoff after a failure)."""
        self._not_before[uid] = until

    def requeue(self, uid: str, until: float) -> None:
        """A unit failed downstream (SchedFailed): give its quota back, retry after `until`."""
        self.tree.release(uid)
        self._uncounted.pop(uid, None)
        unit = self._units.get(uid)
        if unit is not None:
            self._units[uid] = replace(unit, phase=Phase.BACKOFF)
            self._tell_policy(unit, added=False)
        self._not_before[uid] = until
        self._reindex(uid)

    def rollback(self, uid: str) -> None:
        """An admission could not be persisted: give the quota back, keep the unit waiting."""
        self.tree.release(uid)
        self._uncounted.pop(uid, None)
        unit = self._units.get(uid)
        if unit is not None and unit.phase in ADMITTED_PHASES:
            self._units[uid] = replace(unit, phase=Phase.ENQUEUED)
        self._reindex(uid)

    def _deactivate(self, uid: str) -> None:
        """A round evicts an admitted unit whose spec.active turned false: its quota back,
        its policy told, the unit waiting (inactive) in its place."""
        self.tree.release(uid)
        self._uncounted.pop(uid, None)
        unit = self._units.get(uid)
        if unit is not None:
            self._units[uid] = replace(unit, phase=Phase.ENQUEUED)
            self._tell_policy(unit, added=False)
        self._reindex(uid)

    def _mark(self, uid: str, admissions: tuple[AdmissionCount, ...]) -> None:
        """A round marked the unit a preemption victim: it keeps its quota until reclaimed."""
        unit = self._units.get(uid)
        if unit is not None:
            self._units[uid] = replace(unit, reclaiming=True, admissions=admissions)
            self._reclaiming[uid] = None
            self._reindex(uid)

    def _reclaim(self, uid: str) -> int:
        """A round takes a marked victim's replicas not running back (what Koord-Queue's job
        extension does): none running, it leaves its quota and waits in its queue again;
        some running, it keeps their share only. Returns the replicas taken back."""
        self._reclaiming.pop(uid, None)
        unit = self._units.get(uid)
        if unit is None:
            return 0
        taken = sum(a.reclaim for a in unit.admissions)
        total = sum(a.replicas for a in unit.admissions)
        left = tuple(
            AdmissionCount(a.name, a.replicas - a.reclaim, a.running) for a in unit.admissions
        )
        if total and taken < total:
            share = Resources({k: v * (total - taken) // total for k, v in unit.resource.items()})
            kept = replace(unit, reclaiming=False, admissions=left, resource=share)
            self._units[uid] = kept
            self._give_back(kept)
        else:
            self.tree.release(uid)
            self._uncounted.pop(uid, None)
            self._units[uid] = replace(
                unit, phase=Phase.ENQUEUED, reclaiming=False, admissions=()
            )
            self._tell_policy(unit, added=False)
        self._reindex(uid)
        return taken

    def _spend(self, uid: str) -> None:
        """Its budget is spent: inactive from now (its spec.active=false write follows)."""
        self._budgeted.pop(uid, None)
        self._inactive[uid] = None
        unit = self._units.get(uid)
        if unit is not None:
            self._units[uid] = replace(unit, active=False)

    def is_inactive(self, uid: str) -> bool:
        return uid in self._inactive

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
                tally[ADMITTED if self._held(unit.uid) else WAITING] += 1
            now = {q: (c[0], c[1]) for q, c in counts.items()}
            taken = self._counts_taken
            changed = {q: now.get(q, (0, 0)) for q in set(now) | set(taken)
                       if now.get(q, (0, 0)) != taken.get(q, (0, 0))}
            self._counts_taken = now
            return changed
        return self._index.count_changes()

    def renew(self, uid: str) -> None:
        """The unit's entry in the next record must be new (`Record.new`), not carried over:
        its executor forgot, or overwrote, what it last wrote for it."""
        place = self._index.where.get(uid)
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

    def _released(self, unit: QueueUnit) -> None:
        """A round took the unit's admission back (preempted): its policy is told."""
        self._tell_policy(unit, added=False)

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
        if uid in self._inactive:
            return None
        resolution = queue_name_for(unit.labels)
        if not isinstance(resolution, QuotaName):
            return None
        queue = self._queues.get(resolution.name)
        if queue is None or queue.policy is None or resolution.name not in self.tree:
            return None
        if queue.settings.held:
            return None  # stopped: nothing new is admitted from it
        if resolution.name in queue.policy.blocked_quotas:
            return None  # its policy holds the quota: only a round may retry it
        if not self._others_admitted(unit, resolution.name, queue.settings.wait_for_pods_running):
            return None  # someone is waiting: the policy decides the order in a round
        decision = self.tree.try_admit(
            uid, unit.key, resolution.name, unit.resource, oversold=is_oversold(unit.annotations)
        )
        if not isinstance(decision, Admitted):
            return None
        queue.policy.feedback(unit, True, now)
        self._units[uid] = replace(unit, phase=Phase.DEQUEUED)
        self._reindex(uid)
        return decision

    def _others_admitted(self, unit: QueueUnit, queue: str, running_too: bool) -> bool:
        """Every other unit of `unit`'s quota label holds its admission (`running_too`: and
        none of them is still to run). From the index when kept: a walk of every unit of the
        queue cost each arrival as many steps as the queue had admitted units (10 % of the
        controller's GIL samples in bench_visibility_live's later windows)."""
        group = self._by_label.get(_label_key(unit), ())
        if self._skip_unchanged:
            admitted = self._index.admitted_in.get(queue, {})
            # the queue's admitted units are group members; a finished one holds nothing
            if len(group) - (unit.uid in group) != len(admitted):
                return False
            return not running_too or all(
                self._units[uid].phase not in NOT_YET_RUNNING for uid in admitted
            )
        for other_uid in group:
            if other_uid == unit.uid:
                continue
            if not self._held(other_uid):
                return False
            if running_too and self._units[other_uid].phase in NOT_YET_RUNNING:
                return False
        return True

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
            quota = self.tree.reserved_quota(uid) or self._uncounted.get(uid)
            if quota is not None:  # (uncounted: admitted before its quota was seen)
                out.append(Holding(unit, quota))
        return out

    def run_round(self, now: float) -> RoundResult:
        """Offer every served queue's waiting units to CheckUsage, in policy order.

        Incremental unless built with `skip_unchanged=False` (module docstring): the record
        and every decision are those of the full scan."""
        if self._skip_unchanged:
            result = self._rounds.run_incremental(now)
        else:
            result = self._rounds.run_full(now)
        path = self.tree.path  # (cached per chain: one lookup per queue)
        result.paths = {name: path(name) for name in result.waiting}
        return result


def _label_key(unit: QueueUnit) -> str | None:
    """The quota label as an index key (None when absent or not a string: never served)."""
    value = unit.labels.get(QUOTA_NAME_LABEL)
    return value if isinstance(value, str) else None
