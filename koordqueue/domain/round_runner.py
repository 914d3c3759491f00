"""One admission round: each served queue's waiting units offered to CheckUsage in policy
order, every decision recorded (`round.Record`).

Two ways to the same record: `run_full` classifies every unit and sorts every queue (the
reference), `run_incremental` reads the engine's indexes (`unit_index.py`) and reuses what
did not change since the last round (`round_memo.py`); see `engine.py` for the rules. The
runner holds the engine's own state (the same objects, shared), never a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from operator import itemgetter

from koordqueue.domain.activation import budget_left
from koordqueue.domain.admission import Admitted, QuotaExceeded, Rejection
from koordqueue.domain.mapping import QuotaName, Unresolved, queue_name_for
from koordqueue.domain.policies import QueuePolicy, QueueSettings, order_key
from koordqueue.domain.queue_unit import FINISHED_PHASES, NOT_YET_RUNNING, Phase, QueueUnit
from koordqueue.domain.quota import is_oversold
from koordqueue.domain.quota_tree import QuotaTree
from koordqueue.domain.round import (
    Admit,
    BackingOff,
    BudgetSpent,
    Deactivated,
    Inactive,
    Outcome,
    Preempted,
    Preemption,
    QueueHeld,
    QueueNotFound,
    QueueUnserved,
    Reject,
    RoundResult,
    Unmapped,
    WaitingForPodsRunning,
)
from koordqueue.domain.round_memo import (
    ChainShape,
    ChainUsage,
    Memo,
    Rejections,
    Tail,
    UsagePrefix,
    levels_read,
    reuse_tail,
)
from koordqueue.domain.unit_index import ADMITTED, WAITING, Order, UnitIndex


@dataclass(slots=True)
class ServedQueue:
    """A queue as the engine serves it: its policy (None when it cannot be served, with the
    AddQueueFail message in `error`)."""

    name: str
    policy_name: str
    settings: QueueSettings
    policy: QueuePolicy | None
    error: str | None = None


@dataclass(slots=True)
class RoundRunner:
    """Runs rounds over the admission engine's state (shared with it, not copied)."""

    tree: QuotaTree
    units: dict[str, QueueUnit]
    queues: dict[str, ServedQueue]
    first_attempt: dict[str, float]
    not_before: dict[str, float]
    seq: dict[str, int]
    """Arrival number of each unit: its position in `units`, which a full scan walks."""
    index: UnitIndex
    rejections: Rejections
    reindex: Callable[[str], None]
    """Re-indexes a unit after the round changed it (the engine's, bound: see `released`)."""
    released: Callable[[QueueUnit], None]
    """Tells the unit's policy it left its queue (a bound method of the engine, so that a
    deep copy of the engine calls its own copy)."""
    held: Callable[[str], bool]
    """Whether a unit holds an admission (counted, or waiting for its quota to be)."""
    count_admitted: Callable[[QueueUnit, str], None]
    """Reserves an already admitted unit without a check (an undone preemption)."""
    memos: dict[str, Memo]
    seen_usage: dict[str, UsagePrefix]
    seen_shapes: dict[str, ChainShape]
    inactive: dict[str, None]
    """uids of units whose spec.active is false (QueueUnitActive on), in arrival order."""
    deactivate: Callable[[str], None]
    """Takes an admitted unit's admission back (the engine's, bound: see `released`)."""
    budgeted: dict[str, None]
    """uids of active units with an execution budget (MaximumExecutionTime on)."""
    spend: Callable[[str], None]
    """Marks a unit whose budget is spent inactive (the engine's, bound)."""

    def _spent(self, unit: QueueUnit, now: float) -> BudgetSpent | None:
        left = budget_left(unit, now)
        if left is None or left > 0 or unit.max_exec_seconds is None:
            return None
        self.spend(unit.uid)
        return BudgetSpent(unit, unit.max_exec_seconds)

    def _deactivated(self, unit: QueueUnit) -> Deactivated:
        """An admitted, inactive unit: evicted now, unless a preemption still reclaims it."""
        if unit.reclaiming:
            return Deactivated(unit, reclaiming=True)
        self.deactivate(unit.uid)
        return Deactivated(unit)

    def run_full(self, now: float) -> RoundResult:
        """The reference round: classify every unit, sort every queue, check every candidate."""
        result = RoundResult()
        outcomes = result.outcomes
        by_queue: dict[str, list[QueueUnit]] = {}
        admitted_by_queue: dict[str, list[QueueUnit]] = {}
        for unit in self.units.values():
            if unit.phase in FINISHED_PHASES:
                continue
            resolution = queue_name_for(unit.labels)
            if isinstance(resolution, Unresolved):
                if not self.held(unit.uid):
                    result.unmapped.append((unit, resolution))
                    outcomes.append(Unmapped(unit, resolution))
                continue
            if self.held(unit.uid):
                if unit.uid in self.inactive:
                    outcomes.append(self._deactivated(unit))
                    continue
                if unit.uid in self.budgeted and (spent := self._spent(unit, now)) is not None:
                    outcomes.append(spent)  # deactivated now, evicted by the next round
                    continue
                admitted_by_queue.setdefault(resolution.name, []).append(unit)
                continue
            if unit.uid in self.inactive:
                outcomes.append(Inactive(unit))
                continue
            until = self.not_before.get(unit.uid, 0.0)
            if until > now:
                outcomes.append(BackingOff(unit, until))
                continue
            by_queue.setdefault(resolution.name, []).append(unit)

        for queue_name in sorted(by_queue):
            waiting = by_queue[queue_name]
            queue = self.queues.get(queue_name)
            if queue is None or queue_name not in self.tree:
                result.queue_not_found.extend((u, queue_name) for u in waiting)
                outcomes.extend(QueueNotFound(u, queue_name) for u in waiting)
                continue
            if queue.policy is None:
                error = queue.error or "not served"
                result.unserved_queues[queue_name] = error
                outcomes.extend(QueueUnserved(u, queue_name, error) for u in waiting)
                continue
            ordered = sorted(waiting, key=lambda u: order_key(u, self.first_attempt[u.uid]))
            if queue.settings.held:
                result.waiting[queue_name] = ordered
                outcomes.extend(QueueHeld(u, queue_name) for u in ordered)
                continue
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

    def run_incremental(self, now: float) -> RoundResult:
        """The full scan's round from the indexes, reusing what did not change."""
        result = RoundResult()
        outcomes = result.outcomes
        units, seq, where = self.units, self.seq, self.index.where
        first: list[tuple[int, Outcome]] = []
        for uid in self.index.unmapped:
            unit = units[uid]
            resolution = queue_name_for(unit.labels)
            assert isinstance(resolution, Unresolved)
            first.append((seq[uid], Unmapped(unit, resolution)))
        backing: dict[str, set[str]] = {}
        for uid in list(self.inactive):
            place = where.get(uid)
            if place is None:
                continue
            if place[0] == ADMITTED:
                first.append((seq[uid], self._deactivated(units[uid])))
                # waiting now (unless reclaimed first), but not offered until the next round
                backing.setdefault(place[1], set()).add(uid)
            elif place[0] == WAITING:
                first.append((seq[uid], Inactive(units[uid])))
                backing.setdefault(place[1], set()).add(uid)
        for uid in list(self.budgeted):
            place = where.get(uid)
            if place is not None and place[0] == ADMITTED:
                spent = self._spent(units[uid], now)
                if spent is not None:
                    first.append((seq[uid], spent))
        for uid, until in self.not_before.items():
            if until > now and uid not in self.inactive:
                place = where.get(uid)
                if place is not None and place[0] == WAITING:
                    first.append((seq[uid], BackingOff(units[uid], until)))
                    backing.setdefault(place[1], set()).add(uid)
        if first:
            first.sort(key=itemgetter(0))
            for _, outcome in first:
                outcomes.append(outcome)
                if isinstance(outcome, Unmapped):
                    result.unmapped.append((outcome.unit, outcome.unresolved))
        touched: list[str] = []
        for name in sorted(self.index.waiting):
            self._serve_queue(name, backing.get(name), now, result, touched)
            for uid in touched:
                self.reindex(uid)
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
        order = self.index.waiting.get(name)
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
        queue = self.queues.get(name)
        if queue is None or name not in self.tree or queue.policy is None:
            # the queue's entries are written differently this round: a memo kept from
            # before would carry entries whose messages are no longer the last ones written
            self.memos.pop(name, None)
            in_arrival = sorted(ordered, key=lambda u: self.seq[u.uid])
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
        if settings.held:  # stopped: waits in order, nothing offered (what runs stays)
            self.memos.pop(name, None)  # (as above)
            result.waiting[name] = list(ordered)
            outcomes.extend(QueueHeld(u, name) for u in ordered)
            return
        admitted_here: list[QueueUnit] = []
        not_running: tuple[str, ...] = ()
        if settings.wait_for_pods_running:
            members = self.index.admitted_in.get(name, {})
            admitted_here = [self.units[uid] for uid in sorted(members, key=self.seq.__getitem__)]
            not_running = tuple(u.key for u in admitted_here if u.phase in NOT_YET_RUNNING)
        paused = settings.wait_for_pods_running and bool(not_running)
        if paused and not settings.enable_preemption:
            self.memos.pop(name, None)  # (as above)
            result.waiting[name] = list(ordered)
            outcomes.extend(WaitingForPodsRunning(u, not_running) for u in ordered)
            return
        memo = self.memos.get(name)
        if memo is None or memo.policy is not policy:
            memo = self.memos[name] = Memo(policy)
        usage = ChainUsage(self.tree, name, self.seen_usage, self.seen_shapes)
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
        queue: ServedQueue,
        ordered: list[QueueUnit],
        *,
        order: Order | None,
        order_id: object,
        memo: Memo,
        usage: ChainUsage,
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
        new_tail: Tail | None = None
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
                            new_tail = reuse_tail(
                                tail, j, still_waiting=still_waiting, result=result,
                                run=(run_units, run_outcomes, run_rejected),
                                usage=usage.prefix(max(run_levels, len(tail.usage))),
                            )
                            break
                        else:
                            tail = None  # the queue changed within: no second try
            decision = self.rejections.decide(self.tree, unit, queue.name, usage, admit=True)
            policy.feedback(unit, decision.admitted, now)
            if isinstance(decision, Admitted):
                admitted = replace(unit, phase=Phase.DEQUEUED)
                self.units[unit.uid] = admitted
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
                levels = levels_read(decision, usage.path)
                run_levels = max(run_levels, len(usage.path) if levels is None else levels)
            i += 1
        if new_tail is None and run_units:
            new_tail = Tail(
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

    def _serve(
        self,
        queue: ServedQueue,
        ordered: list[QueueUnit],
        admitted_here: list[QueueUnit],
        now: float,
        result: RoundResult,
        *,
        not_running: Sequence[str] = (),
        usage: ChainUsage | None = None,
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
                decision = self.rejections.decide(
                    self.tree, unit, queue.name, usage, admit=not paused
                )
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
                self.units[unit.uid] = admitted
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

    def _preempt_for(self, unit: QueueUnit, admitted_here: list[QueueUnit]) -> Preemption | None:
        """Free quota from admitted, not-yet-running units that sort after `unit`, lowest first."""
        key = order_key(unit, self.first_attempt.get(unit.uid, unit.created))
        candidates = sorted(
            (
                u
                for u in admitted_here
                if u.phase in NOT_YET_RUNNING
                and self.tree.is_admitted(u.uid)
                and order_key(u, self.first_attempt.get(u.uid, u.created)) > key
            ),
            key=lambda u: order_key(u, self.first_attempt.get(u.uid, u.created)),
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
                    self.units[v.uid] = replace(v, phase=Phase.ENQUEUED)
                    admitted_here.remove(v)
                    self.released(v)
                return Preemption(unit, tuple(released))
        for victim in released:  # not enough even with every victim gone: undo
            victim_quota = queue_name_for(victim.labels)
            assert isinstance(victim_quota, QuotaName)
            self.count_admitted(victim, victim_quota.name)
        return None
