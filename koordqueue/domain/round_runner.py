"""One admission round: each served queue (queue_order.py) offers its waiting units to
CheckUsage in policy order, every decision recorded (`round.Record`).

Two ways to the same record: `run_full` classifies every unit and sorts every queue (the
reference), `run_incremental` reads the engine's indexes (`unit_index.py`) and reuses what did
not change since the last round (`round_memo.py`); see `engine.py` for the rules. The runner
holds the engine's own state (the same objects, shared), never a copy. Just past
600 lines on purpose: both rounds stay side by side in one class, so a reader sees they agree."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from operator import itemgetter

from koordqueue.domain.activation import budget_left
from koordqueue.domain.admission import Admitted, QuotaExceeded, Rejection
from koordqueue.domain.mapping import Unresolved, queue_name_for
from koordqueue.domain.policies import QueuePolicy, QueueSettings, order_key
from koordqueue.domain.queue_order import offered_heads, serve_order
from koordqueue.domain.queue_preemption import (
    Mark,
    Proposal,
    VictimRules,
    fit_victims,
    is_assumed,
    released,
    reserve_victims,
)
from koordqueue.domain.queue_unit import FINISHED_PHASES, AdmissionCount, Phase, QueueUnit
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
    Reclaimed,
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
    reclaiming: dict[str, None]
    """uids of admitted units marked by a queue-level preemption, in arrival order."""
    mark: Callable[[str, tuple[AdmissionCount, ...]], None]
    """Marks a victim for reclaim: it keeps its quota until reclaimed (the engine's, bound)."""
    reclaim: Callable[[str], int]
    """Takes a marked victim's pods not running back; returns how many (the engine's)."""
    victim_rules: VictimRules
    """The reclaim protect time and the default-preemptible switch."""
    proposals: list[Proposal] = field(default_factory=list)
    """This round's preemptions, settled after every queue's turn: a queue served later in
    the round can take the room a preemptor counted on (a child quota's unit taking a share
    reclaimed this round), and a victim must not be taken for a preemptor that cannot fit."""

    def _spent(self, unit: QueueUnit, now: float) -> BudgetSpent | None:
        left = budget_left(unit, now)
        if left is None or left > 0 or unit.max_exec_seconds is None:
            return None
        self.spend(unit.uid)
        return BudgetSpent(unit, unit.max_exec_seconds)

    def _reclaimed(self, unit: QueueUnit) -> Reclaimed:
        """A victim marked by an earlier round: its pods not running are taken back now."""
        return Reclaimed(unit, self.reclaim(unit.uid))

    def _key(self, unit: QueueUnit) -> tuple[int, bool, float, str]:
        return order_key(unit, self.first_attempt.get(unit.uid, unit.created))

    def _mark(
        self,
        preemptor: QueueUnit,
        marks: tuple[Mark, ...],
        result: RoundResult,
        touched: list[str] | None,
    ) -> None:
        """Record a preemption: the victims keep their quota until a later round reclaims them."""
        for mark in marks:
            self.mark(mark.unit.uid, mark.admissions)
            result.outcomes.append(Preempted(mark.unit, preemptor, mark.admissions))
            if touched is not None:
                touched.append(mark.unit.uid)
        result.preempted.append(Preemption(preemptor, tuple(m.unit for m in marks)))

    def _settle(self, result: RoundResult, touched: list[str] | None) -> None:
        """Mark the victims of each preemption whose preemptor still fits once they are
        reclaimed, now that every queue has had its turn (see `proposals`)."""
        for p in self.proposals:
            if self.tree.check(p.preemptor.key, p.queue, p.needs).admitted:
                self._mark(p.preemptor, p.marks, result, touched)
        self.proposals.clear()

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
                if unit.uid in self.reclaiming:
                    outcomes.append(self._reclaimed(unit))  # waits again from the next round
                    continue
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

        ordered_in = {name: sorted(units, key=self._key) for name, units in by_queue.items()}
        heads = {name: self._key(ordered[0])[:3] for name, ordered in ordered_in.items()}
        for queue_name in serve_order(self.tree, by_queue, heads):
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
            ordered = ordered_in[queue_name]
            if queue.settings.held:
                result.waiting[queue_name] = ordered
                outcomes.extend(QueueHeld(u, queue_name) for u in ordered)
                continue
            admitted_here = admitted_by_queue.get(queue_name, [])
            assumed = [u for u in admitted_here if is_assumed(u)]
            if queue.settings.wait_for_pods_running and assumed:
                if not queue.settings.enable_preemption:
                    self._serve_reserve_only(queue, ordered, assumed, now, result, touched=None)
                    continue
                self._serve(queue, ordered, assumed, now, result)
                continue
            self._serve(queue, ordered, [], now, result)
        self._settle(result, None)
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
        reclaimed: set[str] = set()
        for uid in sorted(self.reclaiming, key=seq.__getitem__):  # the full scan's order
            place = where.get(uid)
            if place is not None and place[0] == ADMITTED:
                first.append((seq[uid], self._reclaimed(units[uid])))
                backing.setdefault(place[1], set()).add(uid)  # waits again from the next round
                reclaimed.add(uid)
        held_out = set(reclaimed)  # admitted by the index, not in the full scan's admitted_by_queue
        for uid in list(self.inactive):
            place = where.get(uid)
            if place is None or uid in reclaimed:
                continue
            if place[0] == ADMITTED:
                first.append((seq[uid], self._deactivated(units[uid])))
                held_out.add(uid)
                # waiting now (unless reclaimed first), but not offered until the next round
                backing.setdefault(place[1], set()).add(uid)
            elif place[0] == WAITING:
                first.append((seq[uid], Inactive(units[uid])))
                backing.setdefault(place[1], set()).add(uid)
        for uid in list(self.budgeted):
            place = where.get(uid)
            if place is not None and place[0] == ADMITTED and uid not in reclaimed:
                spent = self._spent(units[uid], now)
                if spent is not None:
                    first.append((seq[uid], spent))
                    held_out.add(uid)
        for uid, until in self.not_before.items():
            if until > now and uid not in self.inactive and uid not in reclaimed:
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
        heads = offered_heads(self.index.waiting, backing)
        for name in serve_order(self.tree, self.index.waiting, heads):
            self._serve_queue(name, backing.get(name), now, result, touched, held_out=held_out)
            for uid in touched:
                self.reindex(uid)
            touched.clear()
        self._settle(result, touched)
        for uid in touched:
            self.reindex(uid)
        return result

    def _serve_queue(
        self,
        name: str,
        backing: set[str] | None,
        now: float,
        result: RoundResult,
        touched: list[str],
        *,
        held_out: set[str],
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
        assumed: list[QueueUnit] = []
        if settings.wait_for_pods_running:
            members = self.index.admitted_in.get(name, {})
            assumed = [
                u for u in (self.units[uid] for uid in sorted(members, key=self.seq.__getitem__))
                if is_assumed(u) and u.uid not in held_out
            ]
        paused = bool(assumed)
        if paused and not settings.enable_preemption:
            self.memos.pop(name, None)  # (as above)
            self._serve_reserve_only(queue, ordered, assumed, now, result, touched=touched)
            return
        memo = self.memos.get(name)
        if memo is None or memo.policy is not policy:
            memo = self.memos[name] = Memo(policy)
        usage = ChainUsage(self.tree, name, self.seen_usage, self.seen_shapes)
        if policy.offers_in_order(ordered) and not paused:
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
        tried = self._serve(queue, ordered, assumed, now, result, usage=usage, touched=touched)
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

    def _serve_reserve_only(
        self,
        queue: ServedQueue,
        ordered: list[QueueUnit],
        assumed: list[QueueUnit],
        now: float,
        result: RoundResult,
        *,
        touched: list[str] | None,
    ) -> None:
        """A queue waiting for its admitted units' pods to run, without
        enable-queueunit-preemption: nothing is admitted; the first unit in order that fits
        marks the reclaimable assumed units after it (the reserve path), or the queue waits."""
        not_running = tuple(u.key for u in assumed)
        for unit in ordered:
            if self.tree.check(unit.key, queue.name, unit.resource).admitted:
                marks = reserve_victims(unit, assumed, self._key, self.victim_rules, now)
                if marks:
                    self.proposals.append(Proposal(queue.name, unit, marks, unit.resource))
                break
        result.waiting[queue.name] = list(ordered)
        result.outcomes.extend(WaitingForPodsRunning(u, not_running) for u in ordered)

    def _serve(
        self,
        queue: ServedQueue,
        ordered: list[QueueUnit],
        assumed: list[QueueUnit],
        now: float,
        result: RoundResult,
        *,
        usage: ChainUsage | None = None,
        touched: list[str] | None = None,
    ) -> set[str]:
        """Offer the queue's candidates to CheckUsage, and record why the others were skipped.

        `assumed` non-empty (wait-for-pods-running with admitted units not all running):
        nothing is admitted. The first unit that fits marks the reclaimable assumed units
        after it (the reserve path); a unit that does not fit marks them lowest first until
        they would free its request (enable-queueunit-preemption). One preemption per queue
        and round; the preemptor gets in once a later round has reclaimed its victims. With
        `usage` (incremental rounds), a rejection whose chain did not change is reused
        instead of checked again, and the uids whose state changed are added to `touched`
        (re-indexed after the queue's turn). Returns the uids offered.
        """
        assert queue.policy is not None
        policy = queue.policy
        outcomes = result.outcomes
        paused = bool(assumed)
        not_running = tuple(u.key for u in assumed)
        preempted = False
        still_waiting: list[QueueUnit] = []
        tried: set[str] = set()
        # (the incremental engine's queues hold only units of the queue's own quota)
        for unit in policy.candidates(ordered, now, one_quota=usage is not None):
            tried.add(unit.uid)
            if usage is not None:
                decision = self.rejections.decide(
                    self.tree, unit, queue.name, usage, admit=not paused
                )
            elif paused:
                decision = self.tree.check(unit.key, queue.name, unit.resource)
            else:
                decision = self.tree.try_admit(
                    unit.uid, unit.key, queue.name, unit.resource,
                    oversold=is_oversold(unit.annotations),
                )
            if paused and decision.admitted:
                if not preempted:  # the reserve path: only the first unit that fits
                    preempted = True
                    marks = reserve_victims(unit, assumed, self._key, self.victim_rules, now)
                    if marks:
                        self.proposals.append(Proposal(queue.name, unit, marks, unit.resource))
                still_waiting.append(unit)  # room, but its queue waits for pods to run
                outcomes.append(WaitingForPodsRunning(unit, not_running))
                continue
            if (
                paused
                and isinstance(decision, QuotaExceeded)
                and queue.settings.preemption
                and not preempted
            ):
                marks = fit_victims(unit, assumed, self._key, self.victim_rules, now)
                # Koord-Queue marks what its dry run found even when that cannot make room;
                # here only when the unit would fit once they are reclaimed (no reclaim that
                # helps nobody, and no loop of re-admitting and reclaiming the same victims)
                needs = (unit.resource - released(marks)).clamp_nonnegative()
                if marks and self.tree.check(unit.key, queue.name, needs).admitted:
                    preempted = True
                    self.proposals.append(Proposal(queue.name, unit, marks, needs))
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
