"""Stopped during its start-up, an operator still cleans up; a standby's refused listing fails
its start-up to kopf (issue 30).

kopf runs no clean-up handler when it is stopped (SIGTERM) before every start-up handler has
finished: "Startup activity is only partially executed due to cancellation", then it returns.
A start-up can take long: the controller's resync retrying a 503 without leader election, a
standby scheduler's first listing retrying (now in the start-up itself, below), kopf waiting
60 s to retry a failed start-up handler. A stop then left the Lease held until it expired,
the owner loop retrying in its thread and the queued writes unsent. Now every clean-up is
registered with `kopf_support.on_shutdown` and `run_operator` runs the ones kopf skipped.

These tests run the real kopf (`run_operator` in a thread, its stop flag standing for
SIGTERM; kopf needs no API server for start-up and clean-up handlers) with in-memory APIs.
The first two fail without `run_operator`'s clean-up pass (with kopf.operator alone: the
owner loop and the writers still run, the Lease is still held); the 403 tests fail with the
standby's listing back in a background task (the handler returns, kopf logs nothing).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import kopf
import pytest

from koordqueue.domain.backoff import Backoff
from koordqueue.kube import kopf_support, leader
from koordqueue.kube import operator as controller_operator
from koordqueue.kube.api import JOB, POD, ApiError, Kind
from koordqueue.kube.controller import Controller, loop
from koordqueue.kube.leader import LeaderElector, Leadership, LeaseConfig
from koordqueue.kube.scheduler import operator as scheduler_operator
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_leader_election import LeaseServer
from tests.unit.kube.test_scheduler_startup_retry import StubInformer, no_sessions


class Failing(MemoryApi):
    """Every list of `kind` is answered `status` (counted)."""

    def __init__(self, kind: Kind, status: int) -> None:
        super().__init__()
        self.kind, self.status, self.lists = kind, status, 0

    def list_with_version(self, kind: Kind, *args: Any, **kwargs: Any) -> Any:
        if kind == self.kind:
            self.lists += 1
            raise ApiError(self.status, "injected", "by the test", "GET", kind.path())
        return super().list_with_version(kind, *args, **kwargs)


@pytest.fixture(autouse=True)
def fast_and_stubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop, "STARTUP_RETRY", Backoff(0.02, cap=0.05))
    monkeypatch.setattr(scheduler_operator, "STARTUP_RETRY", Backoff(0.02, cap=0.05))
    monkeypatch.setattr(scheduler_operator, "Informer", StubInformer)
    monkeypatch.setattr(scheduler_operator, "scheduling_loop", no_sessions)
    monkeypatch.setattr(controller_operator, "Informer", StubInformer)


class Kopf:
    """The real kopf running `registry` in a thread; `stop()` is its SIGTERM."""

    def __init__(self, registry: kopf.OperatorRegistry) -> None:
        @kopf.on.login(registry=registry)
        def login(**_: Any) -> kopf.ConnectionInfo:
            return kopf.ConnectionInfo(server="https://127.0.0.1:1", insecure=True)

        self._stop = threading.Event()
        self.error: BaseException | None = None

        def run() -> None:
            try:
                asyncio.run(kopf_support.run_operator(
                    registry, clusterwide=True, standalone=True, stop_flag=self._stop))
            except BaseException as exc:  # reported by the test
                self.error = exc

        self._thread = threading.Thread(target=run, name="test-kopf", daemon=True)
        self._thread.start()

    def stop(self, within: float = 10.0) -> float:
        """Stop it; the seconds kopf and the clean-ups took."""
        t0 = time.monotonic()
        self._stop.set()
        self._thread.join(within)
        assert not self._thread.is_alive(), "the operator did not return after its stop"
        assert self.error is None, self.error
        return time.monotonic() - t0


def wait_for(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def alive(prefix: str) -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(prefix) and t.is_alive()]


@pytest.fixture
def no_strays() -> Iterator[None]:
    """The owner loop and writer threads of an earlier test must not count here."""
    wait_for(lambda: not alive("kq-controller") and not alive("kq-write"), "earlier threads")
    yield


def test_stopped_while_the_resync_retries_the_controller_still_stops_its_loop_and_writers(
    no_strays: None,
) -> None:
    """No election: the start-up resync runs inside kopf's start-up activity, retrying the
    503 on the Jobs list. Before: kopf returned without clean-up, the owner loop retried on
    in its thread and the writers were never closed."""
    api = Failing(JOB, 503)
    controller = Controller(api, ControllerSettings(admission_period=0.2), writers=2)
    registry = controller_operator.build_registry(controller, api)  # type: ignore[arg-type]
    operator = Kopf(registry)
    wait_for(lambda: api.lists >= 3, "the resync retrying")
    wait_for(lambda: bool(alive("kq-write")), "the writers started")
    took = operator.stop()
    lists = api.lists
    time.sleep(0.2)  # three retry steps
    assert api.lists == lists, "the start-up resync still retries after the stop"
    assert not alive("kq-controller"), "the owner loop outlived the stop"
    assert not alive("kq-write"), "the writers were not closed (their queue not flushed)"
    assert took < 5.0


def test_stopped_while_a_start_up_retries_the_leader_still_releases_its_lease(
    no_strays: None,
) -> None:
    """`koordqueue run` with leader election: the controller leads and holds the Lease while
    the scheduler's start-up (a standby's first listing, then the leader's) retries the 503
    on the pods list. Before: kopf skipped every clean-up, so the Lease stayed held (a
    successor waited out its duration) and the controller's writers were never closed."""
    server = LeaseServer()
    config = LeaseConfig("ns", "lease", "me", lease_duration=3, renew_deadline=2,
                         retry_period=0.1)
    leadership = Leadership(LeaderElector(server, config))  # type: ignore[arg-type]
    controller = Controller(MemoryApi(), ControllerSettings(admission_period=0.2), writers=2)
    registry = controller_operator.build_registry(
        controller, controller.api, leadership)  # type: ignore[arg-type]
    pods = Failing(POD, 503)
    scheduler_operator.register_scheduler(
        registry, Scheduler(pods, ControllerSettings()), leadership)  # type: ignore[arg-type]
    operator = Kopf(registry)
    wait_for(controller.ready.is_set, "the controller leading")
    wait_for(lambda: pods.lists >= 3, "the scheduler's start-up retrying")
    assert server.lease is not None and server.lease["spec"]["holderIdentity"] == "me"
    operator.stop()
    assert server.lease["spec"]["holderIdentity"] == "", "the Lease was not released"
    assert not alive("kq-write"), "the controller's writers were not closed"
    assert not leadership.leading.is_set()


# --- a standby whose first listing is refused ------------------------------------------------
def standby(monkeypatch: pytest.MonkeyPatch, api: MemoryApi) -> kopf.OperatorRegistry:
    async def never(leadership: Leadership) -> None:  # another replica holds the Lease
        await asyncio.Event().wait()

    monkeypatch.setattr(leader, "wait_until_leading", never)
    leadership = Leadership()
    leadership.leading.clear()
    registry = kopf.OperatorRegistry()
    scheduler_operator.register_scheduler(
        registry, Scheduler(api, ControllerSettings()), leadership)  # type: ignore[arg-type]
    return registry


def test_a_standbys_refused_first_listing_fails_its_start_up_handler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = Failing(POD, 403)
    registry = standby(monkeypatch, api)
    (start,) = [h.fn for h in registry._activities.get_all_handlers()
                if "start_scheduler" in str(h.id)]

    async def run() -> None:
        await asyncio.wait_for(start(settings=kopf.OperatorSettings()), 5)

    with pytest.raises(ApiError) as info:  # before: returned; the error died in a task
        asyncio.run(run())
    assert info.value.status == 403 and api.lists == 1


def test_kopf_reports_a_standbys_refused_listing_and_a_stop_still_cleans_up(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    api = Failing(POD, 403)
    registry = standby(monkeypatch, api)
    stopped: list[bool] = []

    async def record() -> None:
        stopped.append(True)

    kopf_support.on_shutdown(registry, record)
    caplog.set_level(logging.ERROR, logger="kopf")
    operator = Kopf(registry)
    wait_for(lambda: any("start_scheduler" in r.getMessage() for r in caplog.records),
             "kopf's report of the failed start-up")
    [report] = [r for r in caplog.records if "start_scheduler" in r.getMessage()]
    assert "failed with an exception" in report.getMessage()
    assert report.exc_info is not None and "403" in str(report.exc_info[1])
    took = operator.stop()  # kopf waits 60 s to retry the start-up: stopped meanwhile
    assert stopped == [True] and took < 5.0


def test_a_start_up_call_hung_in_a_request_does_not_hold_the_exit() -> None:
    """A standby's first listing hung behind a half-open connection (the soak saw it): with
    asyncio.to_thread, asyncio.run waited for that worker thread at exit, so SIGTERM took
    the request's timeout times urllib3's retries (30 s x 4)."""
    hung = threading.Event()
    finished = threading.Event()

    async def start_up() -> None:
        task = asyncio.create_task(kopf_support.in_daemon_thread(lambda: hung.wait(30), "t"))
        await asyncio.sleep(0.1)
        task.cancel()  # kopf's stop
        with pytest.raises(asyncio.CancelledError):
            await task

    def run() -> None:
        asyncio.run(start_up())
        finished.set()

    threading.Thread(target=run, daemon=True).start()
    try:
        assert finished.wait(5), "asyncio.run waited for the hung call"
    finally:
        hung.set()
