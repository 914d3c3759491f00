"""`backoff.retry`: the start-up retry loop the controller and the scheduler share."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from koordqueue.domain.backoff import Backoff, retry


class Transient(Exception):
    pass


def flaky(failures: int, exc: Exception) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        if len(calls) <= failures:
            raise exc
        return "ok"

    return calls, attempt


def never_stopped(waits: list[float]) -> Callable[[float], bool]:
    """A wait that records its length and reports no shutdown."""

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        return False

    return wait


def test_transient_failures_are_retried_on_the_schedule_until_success() -> None:
    calls, attempt = flaky(3, Transient())
    waits: list[float] = []
    told: list[float] = []
    result = retry(
        attempt, Backoff(0.5, cap=1.0), lambda e: isinstance(e, Transient),
        never_stopped(waits), lambda e, d: told.append(d),
    )
    assert result == "ok"
    assert len(calls) == 4
    assert waits == told == [0.5, 1.0, 1.0]


def test_a_failure_that_is_not_retryable_goes_up_at_once() -> None:
    calls, attempt = flaky(1, ValueError("no"))
    waits: list[float] = []
    with pytest.raises(ValueError):
        retry(attempt, Backoff(0.5), lambda e: isinstance(e, Transient),
              never_stopped(waits))
    assert len(calls) == 1
    assert waits == []


def test_stopping_during_a_wait_raises_the_last_failure() -> None:
    last = Transient("second")
    errors = iter([Transient("first"), last])

    def attempt() -> str:
        raise next(errors)

    waits: list[float] = []

    def stopped(seconds: float) -> bool:
        waits.append(seconds)
        return len(waits) == 2  # shutdown arrives during the second wait

    with pytest.raises(Transient) as info:
        retry(attempt, Backoff(0.5), lambda e: isinstance(e, Transient), stopped)
    assert info.value is last
    assert waits == [0.5, 1.0]
