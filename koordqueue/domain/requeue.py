"""status.requeueState: a unit's structured back-off (issue 35 point 4, QueueUnitRequeueState).

Koord-Queue's pkg/utils/requeue.go: each back-off counts one more attempt and waits base
(10 s when the caller has none), doubling per attempt, capped at 15 min, ±10 % jitter (its
numbers, not Kueue's 60 s / 1 h); the schedule is written on the unit, so it survives a
restart and `kubectl` shows it. It is cleared when the unit runs, so a later failure starts
from the first attempt again. Without a recorded state the caller's flat back-off applies
(units that backed off before the gate was turned on still recover).

Any eviction that re-queues a unit after a wait records here: today the SchedFailed back-off
and the running timeout; an admission check's Retry or Rejected (point 5) plugs in the same way.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Final

from koordqueue.domain.backoff import Backoff

DEFAULT_BASE: Final = 10.0
MAX_DELAY: Final = 15 * 60.0
JITTER: Final = 0.10


@dataclass(frozen=True, slots=True)
class RequeueState:
    count: int
    """Back-offs so far (1 after the first)."""
    requeue_at: float
    """Epoch seconds from which the unit may be tried again (a whole second, rounded up, as
    the API stores times to the second)."""


def delay(base: float, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait before attempt `attempt` (1-based) is re-queued."""
    base = base if base > 0 else DEFAULT_BASE
    seconds = Backoff(base, MAX_DELAY, JITTER).delay(max(attempt, 1) - 1, rng)
    return seconds if seconds > 0 else base


def record(
    previous: RequeueState | None, base: float, now: float, rng: random.Random | None = None
) -> RequeueState:
    """The state after one more back-off at `now` (`base`: the caller's back-off time)."""
    attempt = 1 if previous is None else previous.count + 1
    # rounded up, and at least the second after `now`'s: after the lastUpdateTime written with it
    at = max(math.ceil(now + delay(base, attempt, rng)), math.floor(now) + 1)
    return RequeueState(attempt, float(at))


def remaining(
    state: RequeueState | None, flat: float, last_update: float | None, now: float
) -> float:
    """Seconds left to wait (<= 0: elapsed): until requeueAt, or the flat back-off since the
    last status update when no state is recorded."""
    if state is not None:
        return state.requeue_at - now
    return flat - (now - (last_update or 0.0))


def state_of(count: int, requeue_at: float | None) -> RequeueState | None:
    """The recorded state (a QueueUnit's requeue_count / requeue_at), None when there is none."""
    if count <= 0 or requeue_at is None:
        return None
    return RequeueState(count, requeue_at)
