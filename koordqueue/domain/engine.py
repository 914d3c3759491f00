"""The admission engine: quotas, queues and units in memory, one admission round at a time.

Both the live controller and the simulator drive this class; it does no I/O. The adapter
feeds it what the API says (quotas, queues, units), calls `run_round`, persists the outcome,
and calls `rollback` for any admission it failed to persist. Admission state only changes by
the engine's own decisions, a finished/deleted unit, or a rebuild from admitted phases — so a
stale watch event can never undo an admission, and a restart can never repeat one.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from koordqueue.domain.admission import Admitted, QuotaExceeded, Rejection
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
from koordqueue.domain.round import (
    Admit,
    BackingOff,
    Outcome,
    Preempted,
    QueueNotFound,
    QueueUnserved,
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


@dataclass(frozen=True, slots=True)
class Preemption:
    """`victims` lose their admission so that `unit` fits; they go back to the queue."""

    unit: QueueUnit
    victims: tuple[QueueUnit, ...]


@dataclass(slots=True)
class RoundResult:
    """What one admission round decided; `effects()` turns it into writes and events.

    `outcomes` is the record: one typed outcome per unit the round looked at, in the order
    decided (a preemption's victims come right before the unit they make room for). The
    lists below are the same decisions grouped by kind, for metrics and callers that only
    need one kind.
    """

    outcomes: list[Outcome] = field(default_factory=list)
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
    ) -> None:
        self.tree = QuotaTree(oversell_rate, on_duplicate_quota)
        self._units: dict[str, QueueUnit] = {}
        # uids by quota label value: the fast path looks at one queue, not every unit
        self._by_label: dict[str | None, set[str]] = {}
        self._queues: dict[str, _Queue] = {}
        self._first_attempt: dict[str, float] = {}
        self._not_before: dict[str, float] = {}

    # --- quotas and queues ----------------------------------------------------------------
    def upsert_quota(self, quota: QuotaSpec) -> None:
        self.tree.upsert(quota)

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
        self._by_label.setdefault(_label_key(unit), set()).add(unit.uid)
        self._units[unit.uid] = unit
        self._first_attempt.setdefault(unit.uid, unit.created)
        moved = False
        if previous is not None and _label_key(previous) != _label_key(unit):
            moved = True
            self._tell_policy(previous, added=False)  # it left its old queue
        if unit.phase in FINISHED_PHASES:
            released = self.tree.release(unit.uid)
            if released or (previous is not None and previous.phase not in FINISHED_PHASES):
                self._tell_policy(unit, added=False)  # it left its queue: lifts a block
        elif unit.phase in ADMITTED_PHASES and not self.tree.is_admitted(unit.uid):
            resolution = queue_name_for(unit.labels)
            if isinstance(resolution, QuotaName):
                # Rebuild after a restart (or an admission by a previous leader): count it.
                self.tree.admit(
                    unit.uid, resolution.name, unit.resource,
                    oversold=is_oversold(unit.annotations), unit=unit.key,
                )
        elif (previous is None or moved) and not self.tree.is_admitted(unit.uid):
            self._tell_policy(unit, added=True)
        if (
            previous is not None
            and previous.phase in NOT_YET_RUNNING
            and unit.phase is Phase.RUNNING
            and (policy := self._policy_of(unit)) is not None
        ):
            policy.unit_started(unit)

    def remove_unit(self, uid: str) -> QueueUnit | None:
        """The unit (or its Job) is gone: release its quota and forget it."""
        unit = self._units.pop(uid, None)
        self.tree.release(uid)
        self._first_attempt.pop(uid, None)
        self._not_before.pop(uid, None)
        if unit is not None:
            self._unindex(unit)
            self._tell_policy(unit, added=False)
        return unit

    def _unindex(self, unit: QueueUnit) -> None:
        label = _label_key(unit)
        same = self._by_label.get(label)
        if same is not None:
            same.discard(unit.uid)
            if not same:
                del self._by_label[label]

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

    def rollback(self, uid: str) -> None:
        """An admission could not be persisted: give the quota back, keep the unit waiting."""
        self.tree.release(uid)
        unit = self._units.get(uid)
        if unit is not None and unit.phase in ADMITTED_PHASES:
            self._units[uid] = replace(unit, phase=Phase.ENQUEUED)

    def unit(self, uid: str) -> QueueUnit | None:
        return self._units.get(uid)

    def units(self) -> list[QueueUnit]:
        return list(self._units.values())

    def is_admitted(self, uid: str) -> bool:
        return self.tree.is_admitted(uid)

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
        if unit is None or self.tree.is_admitted(uid) or self._not_before.get(uid, 0.0) > now:
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
            admitted = self.tree.is_admitted(other.uid)
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
        return twin.run_round(now)

    def run_round(self, now: float) -> RoundResult:
        """Offer every served queue's waiting units to CheckUsage, in policy order."""
        result = RoundResult()
        outcomes = result.outcomes
        by_queue: dict[str, list[QueueUnit]] = {}
        admitted_by_queue: dict[str, list[QueueUnit]] = {}
        for unit in self._units.values():
            if unit.phase in FINISHED_PHASES:
                continue
            resolution = queue_name_for(unit.labels)
            if isinstance(resolution, Unresolved):
                if not self.tree.is_admitted(unit.uid):
                    result.unmapped.append((unit, resolution))
                    outcomes.append(Unmapped(unit, resolution))
                continue
            if self.tree.is_admitted(unit.uid):
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

    def _serve(
        self,
        queue: _Queue,
        ordered: list[QueueUnit],
        admitted_here: list[QueueUnit],
        now: float,
        result: RoundResult,
        *,
        not_running: Sequence[str] = (),
    ) -> None:
        """Offer the queue's candidates to CheckUsage, and record why the others were skipped.

        `not_running` non-empty (wait-for-pods-running with admitted units not running yet):
        a unit that fits keeps waiting; only one that needs preemption may get in, by
        preempting.
        """
        assert queue.policy is not None
        policy = queue.policy
        outcomes = result.outcomes
        paused = bool(not_running)
        preempted_this_round = False
        still_waiting: list[QueueUnit] = []
        tried: set[str] = set()
        for unit in policy.candidates(ordered, now):
            tried.add(unit.uid)
            if paused:
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
                if preemption is not None:
                    preempted_this_round = True
                    result.preempted.append(preemption)
                    outcomes.extend(Preempted(v, unit) for v in preemption.victims)
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
            else:
                result.rejected.append((unit, decision))
                outcomes.append(Reject(unit, decision))
                still_waiting.append(unit)
        if len(tried) == len(ordered):
            result.waiting[queue.name] = still_waiting
            return
        untried = [(i, u) for i, u in enumerate(ordered) if u.uid not in tried]
        waiting = still_waiting + [u for _, u in untried]
        result.waiting[queue.name] = waiting
        outcomes.extend(policy.skipped(untried, waiting))

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
            self.tree.admit(
                victim.uid, victim_quota.name, victim.resource,
                oversold=is_oversold(victim.annotations),
            )
        return None


def _label_key(unit: QueueUnit) -> str | None:
    """The quota label as an index key (None when absent or not a string: never served)."""
    value = unit.labels.get(QUOTA_NAME_LABEL)
    return value if isinstance(value, str) else None
