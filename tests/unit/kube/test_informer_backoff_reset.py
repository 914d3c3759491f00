"""The informer's back-off starts over after a healthy period, as client-go's reflector's does.

client-go's reflector resets its back-off when it has not backed off for 2 minutes
(defaultBackoffReset). Before, the informer's failure count went back to 0 only when a watch
ended cleanly: a watch that ran for an hour and was then cut (a proxy closing long
connections, an API server restart) still counted every failure since start-up, and after a
few such cuts each one cost the full 30 s. The loop below is the informer's own (`_run`),
with the list and the watch replaced and the clock and the waits faked. Fails without the
reset (the waits after the long healthy watch come out 8 s and 16 s, not 0.5 s and 1 s).
"""

from __future__ import annotations

from koordqueue.kube.api import JOB, ApiError
from koordqueue.kube.informer import BACKOFF, HEALTHY_RESET, Informer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Script(Informer):
    """Each watch runs for the next number of seconds (on the fake clock), then fails."""

    def __init__(self, clock: Clock, lifetimes: list[float]) -> None:
        super().__init__(None, JOB, lambda t, o: None, clock=clock)  # type: ignore[arg-type]
        self.clock = clock
        self.lifetimes = lifetimes
        self.waits: list[float] = []
        informer = self

        class Waits:  # the stop event: records each back-off wait and lets the time pass
            def is_set(self) -> bool:
                return not informer.lifetimes

            def wait(self, seconds: float) -> bool:
                informer.waits.append(seconds)
                clock.now += seconds
                return not informer.lifetimes

        self._stop = Waits()  # type: ignore[assignment]

    def _list(self) -> str:
        return "1"

    def _watch_from(self, version: str) -> str:
        self.clock.now += self.lifetimes.pop(0)
        raise ApiError(0, "ProtocolError", "connection reset by peer", "GET", "/watch")


def test_a_failure_after_two_healthy_minutes_waits_the_first_step_again() -> None:
    informer = Script(Clock(), [0, 0, 0, 0, HEALTHY_RESET + 60, 0, 0])
    informer._run()
    first = BACKOFF.delay(0)
    assert informer.waits[:4] == [first, 2 * first, 4 * first, 8 * first]  # failing fast
    # then a watch healthy for three minutes is cut: the count starts over
    assert informer.waits[4:] == [first, 2 * first, 4 * first]


def test_failures_closer_together_than_the_reset_keep_growing() -> None:
    informer = Script(Clock(), [0, 30, 60, 90, 0])
    informer._run()
    first = BACKOFF.delay(0)
    assert informer.waits == [first * 2**i for i in range(5)]


def test_a_throttled_failure_after_a_healthy_period_still_waits_its_retry_after() -> None:
    clock = Clock()
    informer = Informer(None, JOB, lambda t, o: None, clock=clock)  # type: ignore[arg-type]
    for _ in range(5):
        informer.next_delay(ApiError(500, "x", "y", "GET", "/"))
    clock.now += HEALTHY_RESET + 1
    assert informer.next_delay(ApiError(429, "x", "y", "GET", "/", retry_after=2.0)) == 2.0
    assert informer.next_delay(ApiError(500, "x", "y", "GET", "/")) == 2 * BACKOFF.delay(0)
