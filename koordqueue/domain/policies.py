"""Queue policies (SPEC 2.3, 2.4): which waiting units a queue offers for admission, in order.

A policy is a small state machine over rounds: `candidates()` yields units to try; after each
try the engine calls `feedback()`, so Block can stop the scan at the first failure. Policies see
only plain data and a clock value, which keeps them deterministic under test.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from koordqueue.domain.names import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_PRIORITY_THRESHOLD,
    ENABLE_PREEMPTION_ANNOTATION,
    MAX_DEPTH_ANNOTATION,
    PRIORITY_THRESHOLD_ANNOTATION,
    REGISTERED_POLICIES,
    WAIT_FOR_PODS_RUNNING_ANNOTATION,
)
from koordqueue.domain.queue_unit import QueueUnit

DEFAULT_BLOCK_TIMEOUT = 60.0
"""Seconds a Block head may hold its queue before the others get one round."""


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


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """Per-queue knobs read from the Queue's annotations (synced from its quota)."""

    max_depth: int = DEFAULT_MAX_DEPTH
    wait_for_pods_running: bool = False
    enable_preemption: bool = False
    priority_threshold: int = DEFAULT_PRIORITY_THRESHOLD
    block_timeout: float = DEFAULT_BLOCK_TIMEOUT

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str]) -> QueueSettings:
        """Booleans are on only when exactly "true"; unparsable integers keep the default."""
        return cls(
            max_depth=_int_annotation(annotations, MAX_DEPTH_ANNOTATION, DEFAULT_MAX_DEPTH),
            wait_for_pods_running=annotations.get(WAIT_FOR_PODS_RUNNING_ANNOTATION) == "true",
            enable_preemption=annotations.get(ENABLE_PREEMPTION_ANNOTATION) == "true",
            priority_threshold=_int_annotation(
                annotations, PRIORITY_THRESHOLD_ANNOTATION, DEFAULT_PRIORITY_THRESHOLD
            ),
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

    def __init__(self, settings: QueueSettings) -> None:
        self.settings = settings

    @abstractmethod
    def candidates(self, ordered: Sequence[QueueUnit], now: float) -> Iterator[QueueUnit]:
        """Units to try this round; `ordered` is already sorted by `order_key`."""

    def feedback(self, unit: QueueUnit, admitted: bool, now: float) -> None:  # noqa: B027
        """Told after each try; policies with memory override it."""

    def forget(self, uid: str) -> None:  # noqa: B027
        """The unit left the queue (admitted elsewhere, deleted)."""

    def _depth_limited(self, ordered: Sequence[QueueUnit]) -> Sequence[QueueUnit]:
        depth = self.settings.max_depth
        return ordered[:depth] if depth > 0 else ordered


class PriorityPolicy(QueuePolicy):
    """Try every unit in order; one that does not fit never blocks later ones."""

    name = "Priority"

    def candidates(self, ordered: Sequence[QueueUnit], now: float) -> Iterator[QueueUnit]:
        yield from self._depth_limited(ordered)


class BlockPolicy(QueuePolicy):
    """Head-of-line: the first unit that cannot be admitted holds back the rest of its quota.

    The hold is bounded: after `block_timeout` seconds the others get one round past it, and
    the clock restarts, so a permanently oversized unit cannot starve its queue forever.
    """

    name = "Block"

    def __init__(self, settings: QueueSettings) -> None:
        super().__init__(settings)
        self.blocker: str | None = None
        self.blocked_since = 0.0
        self._stop = False
        self._pass_blocker = False

    def candidates(self, ordered: Sequence[QueueUnit], now: float) -> Iterator[QueueUnit]:
        self._stop = False
        self._pass_blocker = (
            self.blocker is not None and now - self.blocked_since >= self.settings.block_timeout
        )
        for unit in self._depth_limited(ordered):
            yield unit
            if self._stop:
                return

    def feedback(self, unit: QueueUnit, admitted: bool, now: float) -> None:
        if admitted:
            if unit.uid == self.blocker:
                self.blocker = None
            return
        if unit.uid == self.blocker and self._pass_blocker:
            self.blocked_since = now  # let the others through once, then hold again
            return
        if unit.uid != self.blocker:
            self.blocker, self.blocked_since = unit.uid, now
        self._stop = True

    def forget(self, uid: str) -> None:
        if uid == self.blocker:
            self.blocker = None

    @property
    def blocked(self) -> bool:
        return self.blocker is not None


class IntelligentPolicy(QueuePolicy):
    """High-priority units (>= threshold) first, Block-style; the rest Priority-style, round robin.

    The low sub-queue's scan starts one place further each round, so when something stops a
    scan early (a full quota), every low unit still gets its turn at the front.
    """

    name = "Intelligent"

    def __init__(self, settings: QueueSettings) -> None:
        super().__init__(settings)
        self._high_failed = False
        self._cursor = 0

    def candidates(self, ordered: Sequence[QueueUnit], now: float) -> Iterator[QueueUnit]:
        threshold = self.settings.priority_threshold
        high = [u for u in ordered if u.priority >= threshold]
        low = [u for u in ordered if u.priority < threshold]
        self._high_failed = False
        for unit in high:
            yield unit
            if self._high_failed:
                break
        if low:
            start = self._cursor % len(low)
            self._cursor = start + 1
            yield from low[start:] + low[:start]

    def feedback(self, unit: QueueUnit, admitted: bool, now: float) -> None:
        if not admitted and unit.priority >= self.settings.priority_threshold:
            self._high_failed = True


PolicyFactory = Callable[[QueueSettings], QueuePolicy]

_REGISTRY: dict[str, PolicyFactory] = {
    PriorityPolicy.name: PriorityPolicy,
    BlockPolicy.name: BlockPolicy,
    IntelligentPolicy.name: IntelligentPolicy,
}


def registered_policies() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def make_policy(policy: str, settings: QueueSettings) -> QueuePolicy:
    """The queue factory: a policy instance, or UnknownPolicyError (Round, FIFO, ...)."""
    factory = _REGISTRY.get(policy)
    if factory is None:
        raise UnknownPolicyError(policy)
    return factory(settings)
