"""Queue policies (SPEC 2.3, 2.4): which waiting units a queue offers for admission, in order.

A policy is a small state machine over rounds: `candidates()` yields units to try; after each
try the engine calls `feedback()`, so Block and Intelligent can block a quota at its first
failure, and the engine reports units that join the queue or give quota back (`unit_added`,
`unit_released`), the events that lift a block in Koord-Queue. Policies see only plain data
and a clock value, which keeps them deterministic under test.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from koordqueue.domain.names import (
    BLOCK_TIMEOUT_ANNOTATION,
    DEFAULT_MAX_DEPTH,
    DEFAULT_PRIORITY_THRESHOLD,
    ENABLE_PREEMPTION_ANNOTATION,
    MAX_DEPTH_ANNOTATION,
    PRIORITY_THRESHOLD_ANNOTATION,
    QUOTA_NAME_LABEL,
    REGISTERED_POLICIES,
    STOP_POLICY_ANNOTATION,
    STOP_POLICY_HOLD,
    WAIT_FOR_PODS_RUNNING_ANNOTATION,
)
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.round import (
    BeyondMaxDepth,
    BlockedByHead,
    HighPriorityWaiting,
    LazyOutcomes,
    NotOffered,
    Outcome,
    Skip,
)

DEFAULT_BLOCK_TIMEOUT = 0.0
"""Off: a Block head holds its quota until it fits (Koord-Queue). > 0 is the opt-in pass-through."""

BLOCKED_IDLE_RETRY = 180.0
"""Seconds with no unit tried after which blocked quotas are cleared and the head retried
(Koord-Queue: 3 minutes since the last scheduled unit)."""


class UnknownPolicyError(ValueError):
    """The queue asks for a policy the factory has not registered (-> AddQueueFail)."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        super().__init__(
            f"queue policy {policy!r} is not registered "
            f"(registered: {', '.join(REGISTERED_POLICIES)})"
        )


def _int_annotation(annotations: Mapping[str, str], key: str, default: int) -> int:
    raw = annotations.get(key)
    if raw is None:
        return default
    try:
        return int(str(raw).strip())
    except ValueError:
        return default


def _seconds_annotation(annotations: Mapping[str, str], key: str) -> float:
    """A duration in seconds; absent, unparsable, negative or not finite means off (0)."""
    raw = annotations.get(key)
    if raw is None:
        return DEFAULT_BLOCK_TIMEOUT
    try:
        value = float(str(raw).strip())
    except ValueError:
        return DEFAULT_BLOCK_TIMEOUT
    return value if math.isfinite(value) and value > 0 else DEFAULT_BLOCK_TIMEOUT


INTELLIGENT = "Intelligent"


def quota_of(unit: QueueUnit) -> str:
    """The quota a unit counts against, as the blocked-quota key ("" if unlabelled)."""
    value = unit.labels.get(QUOTA_NAME_LABEL)
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """Per-queue knobs read from the Queue's annotations (synced from its quota)."""

    max_depth: int = DEFAULT_MAX_DEPTH
    wait_for_pods_running: bool = False
    enable_preemption: bool = False
    priority_threshold: int = DEFAULT_PRIORITY_THRESHOLD
    block_timeout: float = DEFAULT_BLOCK_TIMEOUT
    held: bool = False
    """`koord-queue/stop-policy: Hold`, on any policy: the round offers nothing of the queue."""

    @classmethod
    def from_annotations(
        cls, annotations: Mapping[str, str], policy: str | None = None
    ) -> QueueSettings:
        """Booleans are on only when exactly "true"; unparsable integers keep the default.

        An Intelligent queue reads only the priority threshold (SPEC 2.4): Koord-Queue's
        IntelligentQueue takes no max-depth, never preempts, and its base queue looks for
        wait-for-pods-running under another prefix, so none of them applies there.
        """
        threshold = _int_annotation(
            annotations, PRIORITY_THRESHOLD_ANNOTATION, DEFAULT_PRIORITY_THRESHOLD
        )
        held = annotations.get(STOP_POLICY_ANNOTATION) == STOP_POLICY_HOLD
        if policy == INTELLIGENT:
            return cls(priority_threshold=threshold, held=held)
        return cls(
            held=held,
            max_depth=_int_annotation(annotations, MAX_DEPTH_ANNOTATION, DEFAULT_MAX_DEPTH),
            wait_for_pods_running=annotations.get(WAIT_FOR_PODS_RUNNING_ANNOTATION) == "true",
            enable_preemption=annotations.get(ENABLE_PREEMPTION_ANNOTATION) == "true",
            priority_threshold=threshold,
            block_timeout=_seconds_annotation(annotations, BLOCK_TIMEOUT_ANNOTATION),
        )

    @property
    def preemption(self) -> bool:
        """Preemption needs both annotations on (SPEC 2.4)."""
        return self.wait_for_pods_running and self.enable_preemption


def order_key(unit: QueueUnit, first_attempt: float) -> tuple[int, bool, float, str]:
    """Priority desc, non-preemptible first, first attempt asc, then name (SPEC 2.4)."""
    return (-unit.priority, unit.preemptible, first_attempt, unit.key)


class QueuePolicy(ABC):
    """Order and gate the waiting units of one queue."""

    name: ClassVar[str]

    offers_window_in_order: ClassVar[bool] = False
    """True when `candidates` yields exactly the max-depth window of `ordered`, in order, and
    `feedback` changes nothing: the engine may then reuse the last round's decisions for a
    run of units whose quota chain did not change, without asking the policy."""

    def __init__(self, settings: QueueSettings) -> None:
        self.settings = settings

    def offers_in_order(self, ordered: Sequence[QueueUnit]) -> bool:
        """True when `candidates(ordered, ...)` yields its max-depth window in order whatever
        each try's answer, and `feedback` changes nothing the offers depend on (so a run of
        rejections whose chain did not change may be reused, told with `rejected_run`)."""
        return self.offers_window_in_order

    def rejected_run(self, units: Sequence[QueueUnit], now: float) -> None:
        """`feedback(u, False, now)` for each of `units`, in order (units of one quota)."""
        for unit in units:
            self.feedback(unit, False, now)

    def quiet_key(self, ordered: Sequence[QueueUnit], now: float) -> Hashable | None:
        """A key of the state `skipped()` reads, if `candidates(ordered, now)` would offer no
        unit and change no state; None otherwise (or when the policy cannot tell).

        The engine reuses a queue's last record while the key and the queue's units stay
        the same, instead of walking thousands of blocked units every round. It relies on
        the engine's invariant that all units of a queue carry the queue's quota label.
        """
        return None

    @abstractmethod
    def candidates(
        self, ordered: Sequence[QueueUnit], now: float, *, one_quota: bool = False
    ) -> Iterator[QueueUnit]:
        """Units to try this round; `ordered` is already sorted by `order_key`.

        `one_quota`: every unit of `ordered` counts against the same quota (the engine's
        queues, whose units all carry the queue's quota label), so a policy may stop at
        the first unit its block holds back instead of walking the rest: the same offers."""

    def feedback(self, unit: QueueUnit, admitted: bool, now: float) -> None:  # noqa: B027
        """Told after each try; policies with memory override it."""

    def unit_added(self, unit: QueueUnit) -> None:  # noqa: B027
        """A unit joined the queue."""

    def unit_released(self, unit: QueueUnit) -> None:  # noqa: B027
        """A unit of the queue left it (deleted, finished) or gave its quota back."""

    def unit_started(self, unit: QueueUnit) -> None:  # noqa: B027
        """An admitted unit of the queue has its pods running now."""

    @property
    def blocked_quotas(self) -> frozenset[str]:
        """Quotas whose units this policy holds back for now (none for Priority)."""
        return frozenset()

    def skipped(
        self, untried: Sequence[tuple[int, QueueUnit]], waiting: Sequence[QueueUnit]
    ) -> list[Skip]:
        """Why `candidates` did not offer these units (index in the ordered queue, unit).

        Asked after the round, so it sees the blocks the round itself set; `waiting` is the
        queue's units still waiting after the round, in order. One call per queue and round:
        a blocked queue may skip thousands of units, so this stays a tight loop.
        """
        return [self._beyond_depth(u, i) or NotOffered(u) for i, u in untried]

    def skipped_lazily(
        self, untried: Sequence[QueueUnit], start: int, waiting: Sequence[QueueUnit]
    ) -> LazyOutcomes:
        """`skipped` for `untried`, the queue's units from position `start` (0-based) on, as
        a run built on first read. The default builds it now; a policy whose skips read
        little state captures that state instead (every later round changes it)."""
        built: list[Outcome] = list(self.skipped(list(enumerate(untried, start)), waiting))
        return LazyOutcomes(len(built), lambda: built)

    def _beyond_depth(self, unit: QueueUnit, index: int) -> BeyondMaxDepth | None:
        depth = self.settings.max_depth
        return BeyondMaxDepth(unit, index + 1, depth) if 0 < depth <= index else None

    def _depth_limited(self, ordered: Sequence[QueueUnit]) -> Sequence[QueueUnit]:
        depth = self.settings.max_depth
        return ordered[:depth] if depth > 0 else ordered


class PriorityPolicy(QueuePolicy):
    """Try every unit in order; one that does not fit never blocks later ones."""

    name = "Priority"
    offers_window_in_order = True

    def candidates(
        self, ordered: Sequence[QueueUnit], now: float, *, one_quota: bool = False
    ) -> Iterator[QueueUnit]:
        yield from self._depth_limited(ordered)

    def rejected_run(self, units: Sequence[QueueUnit], now: float) -> None:
        """(Priority keeps no state.)"""


class _Hold(NamedTuple):
    """A blocked quota: since when, and the unit whose failure blocked it."""

    since: float
    head: str


class _QuotaBlockingPolicy(QueuePolicy):
    """Koord-Queue's blocked-quota bookkeeping, shared by Block and Intelligent.

    A unit that does not fit marks its quota blocked; later rounds skip the quota's units
    until a unit of it leaves or gives quota back (and, for Block, until one is added). When
    a round finds nothing to try and no unit was tried for `BLOCKED_IDLE_RETRY` seconds, the
    blocks are cleared and the scan restarts at the head, which blocks again if it still does
    not fit (`schedulingqueuev2.go` and `intelligentqueue/methods.go`, Next).
    """

    def __init__(self, settings: QueueSettings) -> None:
        super().__init__(settings)
        self._blocked: dict[str, _Hold] = {}
        """Blocked quota -> when its current hold started and by which unit."""
        self._last_tried = float("-inf")
        self._last_admitted = False

    @property
    def blocked_quotas(self) -> frozenset[str]:
        return frozenset(self._blocked)

    def feedback(self, unit: QueueUnit, admitted: bool, now: float) -> None:
        self._last_tried = now
        self._last_admitted = admitted
        if not admitted:
            self._blocked.setdefault(quota_of(unit), _Hold(now, unit.key))

    def unit_released(self, unit: QueueUnit) -> None:
        self._blocked.pop(quota_of(unit), None)

    def rejected_run(self, units: Sequence[QueueUnit], now: float) -> None:
        """The state `feedback` leaves after these rejections: the first blocks its quota
        unless it is blocked already (every unit of the run has the same quota)."""
        if units:
            self._last_tried = now
            self._last_admitted = False
            self._blocked.setdefault(quota_of(units[0]), _Hold(now, units[0].key))

    def unit_started(self, unit: QueueUnit) -> None:
        """With wait-for-pods-running, a unit whose pods now run lifts every block (Koord-Queue
        Update: an assumed unit turning dequeued clears all blocked quotas)."""
        if self.settings.wait_for_pods_running:
            self._blocked.clear()

    def _offer(self, unit: QueueUnit, now: float) -> QueueUnit:
        """Note the try before handing the unit out (a try without feedback counts as waiting)."""
        self._last_tried = now
        self._last_admitted = False
        return unit

    def _idle_clear(self, now: float) -> bool:
        """Clear every block after an idle spell; True when the caller should scan again."""
        if self._blocked and now - self._last_tried > BLOCKED_IDLE_RETRY:
            self._blocked.clear()
            return True
        return False


class BlockPolicy(_QuotaBlockingPolicy):
    """Head-of-line: the first unit that cannot be admitted blocks its quota.

    The quota's later units are skipped, and so is the head itself, until a unit of the quota
    is added, deleted or releases quota, or `BLOCKED_IDLE_RETRY` seconds pass with nothing
    tried; then the head is tried again, so a head that never fits holds its quota for good.
    With the opt-in `koord-queue/block-timeout-seconds`, after that long blocked the quota's
    units all get one Priority-style round (those that fit pass the head), then it blocks
    again.
    """

    name = "Block"

    def candidates(
        self, ordered: Sequence[QueueUnit], now: float, *, one_quota: bool = False
    ) -> Iterator[QueueUnit]:
        window = self._depth_limited(ordered)
        timeout = self.settings.block_timeout
        passing: set[str] = set()
        if timeout > 0:
            passing = {q for q, hold in self._blocked.items() if now - hold.since >= timeout}
            for quota in passing:
                del self._blocked[quota]
        blocked = self._blocked
        if one_quota:
            only = quota_of(window[0]) if window else ""
            for _ in range(2):
                tried = False
                for unit in window:
                    if only in blocked and only not in passing:
                        break  # every later unit is held by the same block
                    tried = True
                    yield self._offer(unit, now)
                if tried or not self._idle_clear(now):
                    return
            return
        for _ in range(2):
            tried = False
            last_label: object = window  # (no label is this list) a queue's units mostly
            held = False  # share one quota: decide once per run of equal labels
            for unit in window:
                label = unit.labels.get(QUOTA_NAME_LABEL)
                if label is not last_label and label != last_label:
                    last_label = label
                    quota = label if isinstance(label, str) else ""
                    held = quota in blocked and quota not in passing
                if held:
                    continue
                tried = True
                yield self._offer(unit, now)
                last_label = window  # the try may have blocked its quota: decide again
            if tried or not self._idle_clear(now):
                return

    def skipped(
        self, untried: Sequence[tuple[int, QueueUnit]], waiting: Sequence[QueueUnit]
    ) -> list[Skip]:
        return _block_skips(untried, self.settings.max_depth, self._blocked)

    def skipped_lazily(
        self, untried: Sequence[QueueUnit], start: int, waiting: Sequence[QueueUnit]
    ) -> LazyOutcomes:
        depth, blocked = self.settings.max_depth, dict(self._blocked)

        def build() -> list[Outcome]:
            return list(_block_skips(list(enumerate(untried, start)), depth, blocked))

        return LazyOutcomes(len(untried), build)

    def unit_added(self, unit: QueueUnit) -> None:
        self._blocked.pop(quota_of(unit), None)

    def quiet_key(self, ordered: Sequence[QueueUnit], now: float) -> Hashable | None:
        """Quiet while the queue's quota stays blocked: no hold passes its block timeout
        (`candidates` would drop it) and the idle retry is not due."""
        if not ordered or quota_of(ordered[0]) not in self._blocked:
            return None
        timeout = self.settings.block_timeout
        if timeout > 0 and any(now - hold.since >= timeout for hold in self._blocked.values()):
            return None
        if now - self._last_tried > BLOCKED_IDLE_RETRY:
            return None
        return (tuple(self._blocked.items()), self._last_tried, self._last_admitted)

    @property
    def blocked(self) -> bool:
        return bool(self._blocked)


def _block_skips(
    untried: Sequence[tuple[int, QueueUnit]], depth: int, blocked: Mapping[str, _Hold]
) -> list[Skip]:
    """Block's skip entries, from its max depth and blocked quotas."""
    held = _held_skip(blocked)
    return [
        BeyondMaxDepth(u, i + 1, depth) if 0 < depth <= i else held(u) for i, u in untried
    ]


def _intelligent_skips(
    untried: Sequence[tuple[int, QueueUnit]],
    waiting: Sequence[QueueUnit],
    threshold: int,
    blocked: Mapping[str, _Hold],
) -> list[Skip]:
    """Intelligent's skip entries, from its threshold and blocked quotas."""
    high = tuple(u.key for u in waiting if u.priority >= threshold)
    held = _held_skip(blocked)
    out: list[Skip] = []
    for _, u in untried:
        if u.priority < threshold:
            out.append(HighPriorityWaiting(u, high, threshold) if high else NotOffered(u))
        else:
            out.append(held(u))
    return out


def _held_skip(blocked: Mapping[str, _Hold]) -> Callable[[QueueUnit], Skip]:
    """A unit's skip entry by its quota's hold: BlockedByHead while held, NotOffered if not.

    A queue's units mostly share one quota label, so the hold is looked up once per run of
    equal labels, not once per unit.
    """
    last_label: object = blocked  # (no label is this mapping) the first unit looks it up
    quota, hold = "", None

    def skip(u: QueueUnit) -> Skip:
        nonlocal last_label, quota, hold
        label = u.labels.get(QUOTA_NAME_LABEL)
        if label is not last_label and label != last_label:
            last_label, quota = label, quota_of(u)
            hold = blocked.get(quota)
        return NotOffered(u) if hold is None else BlockedByHead(u, quota, hold.head, hold.since)

    return skip


class IntelligentPolicy(_QuotaBlockingPolicy):
    """High-priority units (>= threshold) first, Block-style; low ones in order after them.

    No low unit is tried while any high unit waits, even one whose quota is blocked. Low units
    are tried in order by a cursor that moves forward on each failure within one pass and
    returns to the head when a pass ends (found nothing more) and on any add, delete or
    release, so a later low unit is never tried before an earlier one
    (`intelligentqueue/methods.go`: findNextQueueUnit, Next, AddUnschedulableIfNotPresent).
    Unlike Block, adding a unit does not lift a block (AddQueueUnitInfo keeps it).
    """

    name = INTELLIGENT

    def __init__(self, settings: QueueSettings) -> None:
        super().__init__(settings)
        self._low_cursor = 0

    def candidates(
        self, ordered: Sequence[QueueUnit], now: float, *, one_quota: bool = False
    ) -> Iterator[QueueUnit]:
        threshold = self.settings.priority_threshold
        high: Sequence[QueueUnit]
        low: Sequence[QueueUnit]
        if one_quota:  # (`ordered` is by priority, highest first: the high units lead)
            split = bisect_left(ordered, True, key=lambda u: u.priority < threshold)
            high, low = ordered[:split], ordered[split:]
        else:
            high = [u for u in ordered if u.priority >= threshold]
            low = [u for u in ordered if u.priority < threshold]
        for _ in range(2):
            tried = False
            high_waiting = False
            for unit in high:
                if quota_of(unit) in self._blocked:
                    high_waiting = True
                    if one_quota:
                        break  # every later high unit is held by the same block
                    continue
                tried = True
                yield self._offer(unit, now)
                high_waiting = high_waiting or not self._last_admitted
            if not high_waiting:
                while self._low_cursor < len(low):
                    tried = True
                    yield self._offer(low[self._low_cursor], now)
                    self._low_cursor += 1
                self._low_cursor = 0  # the pass found nothing more: back to the head
            if tried or not self._idle_clear(now):
                return

    def offers_in_order(self, ordered: Sequence[QueueUnit]) -> bool:
        """With no high unit waiting (`ordered[0]` has the highest priority), a round is one
        pass over the low units in order from the head (the cursor is back at the head
        after every round), each offered whatever the others' answers."""
        return bool(ordered) and ordered[0].priority < self.settings.priority_threshold

    def skipped(
        self, untried: Sequence[tuple[int, QueueUnit]], waiting: Sequence[QueueUnit]
    ) -> list[Skip]:
        return _intelligent_skips(
            untried, waiting, self.settings.priority_threshold, self._blocked
        )

    def skipped_lazily(
        self, untried: Sequence[QueueUnit], start: int, waiting: Sequence[QueueUnit]
    ) -> LazyOutcomes:
        threshold, blocked = self.settings.priority_threshold, dict(self._blocked)

        def build() -> list[Outcome]:
            pairs = list(enumerate(untried, start))
            return list(_intelligent_skips(pairs, waiting, threshold, blocked))

        return LazyOutcomes(len(untried), build)

    def unit_added(self, unit: QueueUnit) -> None:
        self._low_cursor = 0

    def quiet_key(self, ordered: Sequence[QueueUnit], now: float) -> Hashable | None:
        """Quiet while a high unit waits (`ordered[0]` has the highest priority) and the
        queue's quota is blocked, so no high unit is offered and no low one either, and the
        idle retry is not due."""
        if not ordered or ordered[0].priority < self.settings.priority_threshold:
            return None
        if quota_of(ordered[0]) not in self._blocked:
            return None
        if now - self._last_tried > BLOCKED_IDLE_RETRY:
            return None
        return (
            tuple(self._blocked.items()), self._last_tried, self._last_admitted, self._low_cursor
        )

    def unit_released(self, unit: QueueUnit) -> None:
        super().unit_released(unit)
        self._low_cursor = 0


PolicyFactory = Callable[[QueueSettings], QueuePolicy]

_REGISTRY: dict[str, PolicyFactory] = {
    PriorityPolicy.name: PriorityPolicy,
    BlockPolicy.name: BlockPolicy,
    IntelligentPolicy.name: IntelligentPolicy,
}


def make_policy(policy: str, settings: QueueSettings) -> QueuePolicy:
    """The queue factory: a policy instance, or UnknownPolicyError (Round, FIFO, ...)."""
    factory = _REGISTRY.get(policy)
    if factory is None:
        raise UnknownPolicyError(policy)
    return factory(settings)
