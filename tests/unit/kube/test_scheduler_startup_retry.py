"""The scheduler's start-up retries a transient API failure itself, after a short back-off.

Found by a fault-injection run (6 of 8 seeds): a 429/5xx or a lost connection on the
scheduler's start-up listings or its default-queue check went up to kopf, which retries a
failed start-up activity only after 60 s, so nothing was scheduled for a minute. The
controller's start-up resync already retried (tests/unit/kube/test_startup_resync_retry.py);
both now share `domain.backoff.retry`. The tests drive the registered kopf start-up handler
itself, with the informers and the session loop stubbed out.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import kopf
import pytest
import structlog
from structlog.testing import capture_logs

from koordqueue.domain.backoff import Backoff
from koordqueue.kube import leader
from koordqueue.kube.api import POD, VOLCANO_QUEUE, ApiError, Kind, Listing
from koordqueue.kube.leader import Leadership
from koordqueue.kube.scheduler import names, operator
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi

REAL_RETRY: Backoff | None = getattr(operator, "STARTUP_RETRY", None)


class Failing(MemoryApi):
    """The first `failures` calls of `kind` (its lists, or its gets) are answered `status`."""

    def __init__(self, failures: int, status: int, kind: Kind = POD) -> None:
        super().__init__()
        self.failures, self.status, self.kind, self.calls = failures, status, kind, 0

    def _maybe_fail(self, kind: Kind) -> None:
        if kind == self.kind:
            self.calls += 1
            if self.calls <= self.failures:
                raise ApiError(self.status, "injected", "by the test", "GET", kind.path())

    def list_with_version(self, kind: Kind, *args: Any, **kwargs: Any) -> Any:
        if self.kind != VOLCANO_QUEUE:
            self._maybe_fail(kind)
        return super().list_with_version(kind, *args, **kwargs)

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        if self.kind == VOLCANO_QUEUE:
            self._maybe_fail(kind)
        return super().get(kind, name, namespace)


class StubInformer:
    """The pod/node/namespace watches: only what start-up and the probe touch."""

    def __init__(self, api: Any, kind: Kind, *_: Any, **__: Any) -> None:
        self.kind = kind
        self.started: Listing | None = None
        self.synced = threading.Event()

    def start(self, listing: Listing | None = None) -> None:
        self.started = listing
        self.synced.set()

    def stop(self, timeout: float = 5.0) -> None:
        pass


async def no_sessions(scheduler: Scheduler) -> None:
    pass


@pytest.fixture(autouse=True)
def fast_and_stubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The schedule's first step is asserted below; the tests wait 10 ms, not 0.5 s."""
    monkeypatch.setattr(operator, "STARTUP_RETRY", Backoff(0.01, cap=0.05), raising=False)
    monkeypatch.setattr(operator, "Informer", StubInformer)
    monkeypatch.setattr(operator, "scheduling_loop", no_sessions)


@pytest.fixture
def fresh_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An earlier test's logging set-up (a level filter, cached loggers) would hide the line
    from capture_logs: a plain configuration and a fresh logger, restored afterwards."""
    old = structlog.get_config()
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        cache_logger_on_first_use=False,
    )
    monkeypatch.setattr(operator, "log", structlog.get_logger(operator.__name__))
    yield
    structlog.configure(**old)


def handler(registry: kopf.OperatorRegistry, name: str) -> Any:
    (found,) = [h for h in registry._activities.get_all_handlers() if name in str(h.id)]
    return found.fn


def startup_handler(api: MemoryApi) -> tuple[Scheduler, Any]:
    scheduler = Scheduler(api, ControllerSettings())  # type: ignore[arg-type]
    registry = kopf.OperatorRegistry()
    operator.register_scheduler(registry, scheduler)
    return scheduler, handler(registry, "start_scheduler")


def start(api: MemoryApi, timeout: float = 5.0) -> Scheduler:
    scheduler, fn = startup_handler(api)

    async def run() -> None:
        await asyncio.wait_for(fn(settings=kopf.OperatorSettings()), timeout)

    try:
        asyncio.run(run())
    finally:
        scheduler.close()
    return scheduler


def test_the_first_retry_comes_within_a_second_not_kopfs_minute() -> None:
    assert REAL_RETRY is not None, "no start-up retry: kopf's 60 s activity back-off"
    assert REAL_RETRY.delay(0) <= 1.0
    assert REAL_RETRY.delay(10) <= 30.0  # and never waits longer than the reflector's cap


@pytest.mark.parametrize("status", [429, 500, 0])
def test_a_transient_failure_of_the_startup_list_is_retried_after_a_back_off(
    status: int,
) -> None:
    api = Failing(failures=1, status=status)
    t0 = time.monotonic()
    scheduler = start(api)  # before: raised the ApiError (kopf: again 60 s later)
    assert time.monotonic() - t0 < 2.0
    assert api.calls == 2
    assert scheduler.ready.is_set()
    assert api.get(VOLCANO_QUEUE, names.DEFAULT_QUEUE) is not None


def test_a_transient_failure_of_the_default_queue_check_is_retried() -> None:
    api = Failing(failures=1, status=503, kind=VOLCANO_QUEUE)
    scheduler = start(api)
    assert api.calls == 2
    assert scheduler.ready.is_set()
    assert api.get(VOLCANO_QUEUE, names.DEFAULT_QUEUE) is not None


@pytest.mark.usefixtures("fresh_log")
def test_each_retry_is_logged_with_the_error_and_the_delay() -> None:
    with capture_logs() as logs:
        start(Failing(failures=2, status=500))
    retries = [entry for entry in logs if entry["event"] == "start-up failed; retrying"]
    assert [entry["in_s"] for entry in retries] == [0.01, 0.02]
    assert "500 injected" in retries[0]["error"]


def test_a_refusal_that_retrying_cannot_fix_still_fails_the_startup() -> None:
    api = Failing(failures=1, status=403)
    with pytest.raises(ApiError) as info:
        start(api)
    assert info.value.status == 403
    assert api.calls == 1


def test_shutdown_during_the_back_off_ends_the_retries_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(operator, "STARTUP_RETRY", Backoff(60.0))
    api = Failing(failures=10**6, status=503)
    scheduler, fn = startup_handler(api)
    threads_before = set(threading.enumerate())

    async def run() -> float:
        task = asyncio.create_task(fn(settings=kopf.OperatorSettings()))
        deadline = time.monotonic() + 5
        while api.calls < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.02)  # now in its 60 s wait
        t0 = time.monotonic()
        task.cancel()  # kopf's shutdown cancels the start-up activity
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - t0

    try:
        took = asyncio.run(asyncio.wait_for(run(), 10))
    finally:
        scheduler.close()
    assert took < 1.0
    assert api.calls == 1  # not tried again after the shutdown
    assert not scheduler.ready.is_set()
    worker_threads = set(threading.enumerate()) - threads_before
    for thread in worker_threads:
        thread.join(1.0)  # the retry ends at its next look at the stop
    assert not [t for t in worker_threads
                if t.is_alive() and ("asyncio" in t.name or "kq-startup" in t.name)]


def test_a_standbys_first_listing_is_retried_and_it_takes_over_when_leading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def until_leading(leadership: Leadership) -> None:  # no Lease: the test decides
        while not leadership.leading.is_set():
            await asyncio.sleep(0.005)

    monkeypatch.setattr(leader, "wait_until_leading", until_leading)
    api = Failing(failures=1, status=500)
    scheduler = Scheduler(api, ControllerSettings())  # type: ignore[arg-type]
    leadership = Leadership()
    leadership.leading.clear()  # a standby
    registry = kopf.OperatorRegistry()
    operator.register_scheduler(registry, scheduler, leadership)

    async def run() -> bool:
        await handler(registry, "start_scheduler")(settings=kopf.OperatorSettings())
        deadline = time.monotonic() + 2
        while api.calls < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        leadership.leading.set()
        while not scheduler.ready.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        ready = scheduler.ready.is_set()
        await handler(registry, "stop_scheduler")()  # closes the scheduler
        return ready

    assert asyncio.run(asyncio.wait_for(run(), 10))  # before: the standby's 500 killed it
    assert api.calls == 2
