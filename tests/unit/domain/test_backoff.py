"""The one exponential back-off schedule and the three parameter sets that use it (issue 15)."""

from __future__ import annotations

import random

from koordqueue.domain.backoff import Backoff
from koordqueue.domain.job_extension import UNIT_BACKOFF, backoff_delay
from koordqueue.kube.informer import BACKOFF as WATCH_BACKOFF


def test_delay_doubles_from_base_and_stops_at_the_cap() -> None:
    schedule = Backoff(0.5, cap=30.0)
    assert [schedule.delay(n) for n in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]


def test_negative_and_huge_failure_counts_stay_in_range() -> None:
    assert Backoff(1.0, cap=10.0).delay(-3) == 1.0
    assert Backoff(1.0, cap=10.0).delay(10_000) == 10.0


def test_jitter_stays_within_its_fraction() -> None:
    rng = random.Random(7)
    delays = [Backoff(10.0, jitter=0.1).delay(0, rng) for _ in range(200)]
    assert all(9.0 <= d <= 11.0 for d in delays) and len(set(delays)) > 1


def test_unit_backoff_is_ten_seconds_doubling_to_fifteen_minutes() -> None:
    assert (UNIT_BACKOFF.base, UNIT_BACKOFF.cap, UNIT_BACKOFF.jitter) == (10.0, 900.0, 0.1)
    no_jitter = random.Random(0)
    no_jitter.uniform = lambda a, b: 0.0  # type: ignore[method-assign]
    assert [backoff_delay(n, no_jitter) for n in (1, 2, 7, 20)] == [10.0, 20.0, 640.0, 900.0]


def test_watch_backoff_reaches_thirty_seconds() -> None:
    assert WATCH_BACKOFF.delay(0) == 0.5 and WATCH_BACKOFF.delay(20) == 30.0
