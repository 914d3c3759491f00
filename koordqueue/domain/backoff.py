"""One exponential back-off schedule, with the parameters each retry loop needs.

Three loops wait after failures: an API call retried a few times (`kube.api.with_retries`),
a list/watch reconnecting for as long as it takes (`kube.informer`), and a unit that failed
downstream waiting to be offered again (`job_extension.backoff_delay`, Koord-Queue's unit
back-off). They differ in how long and how often they try, not in how the wait grows: base,
doubling per failure, an optional cap and jitter. `retry` is the loop the start-ups of the
controller and the scheduler share: a transient failure of their first listings is retried
here, not left to kopf.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Backoff:
    """`base * 2**failures` seconds, at most `cap`, then ± `jitter` (a fraction) at random."""

    base: float
    cap: float = math.inf
    jitter: float = 0.0

    def delay(self, failures: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after `failures` earlier failures (0: the first wait is `base`)."""
        seconds = min(self.base * 2 ** min(max(failures, 0), 64), self.cap)
        if self.jitter:
            seconds *= 1 + (rng or random.Random()).uniform(-self.jitter, self.jitter)
        return float(seconds)


STARTUP: Final = Backoff(0.5, cap=30.0)
"""A start-up list's retry: client-go's reflector retries a failed list after 0.8 s doubling
to 30 s; kopf would retry a failed start-up activity only after 60 s."""


def retry(
    attempt: Callable[[], T],
    schedule: Backoff,
    retryable: Callable[[Exception], bool],
    stopped: Callable[[float], bool],
    on_retry: Callable[[Exception, float], None] | None = None,
    *,
    at_least: Callable[[Exception], float] | None = None,
) -> T:
    """`attempt()` until it succeeds, waiting `schedule`'s delays between failures.

    An exception that is not `retryable` goes up at once. `stopped(seconds)` waits (for
    instance `threading.Event.wait`) and returns True when the caller is shutting down; the
    last failure then goes up. `on_retry(error, delay)` is told before each wait (a log line).
    `at_least(error)`: a floor for that wait (the server's Retry-After).
    """
    failures = 0
    while True:
        try:
            return attempt()
        except Exception as exc:
            if not retryable(exc):
                raise
            delay = schedule.delay(failures)
            if at_least is not None:
                delay = max(delay, at_least(exc))
            failures += 1
            if on_retry is not None:
                on_retry(exc, delay)
            if stopped(delay):
                raise
