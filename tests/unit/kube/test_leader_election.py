"""Lease leader election with client-go's rules, and the write fence, against an in-memory Lease."""

from __future__ import annotations

import copy
import itertools
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from koordqueue.kube.api import FENCED, ApiError, Kind, KubeApi
from koordqueue.kube.leader import LEASE, LeaderElector, Leadership, LeaseConfig


class LeaseServer:
    """One Lease with resourceVersion preconditions, shared by the candidates (the API server)."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self._rv = itertools.count(1)
        self.down = False
        self.lock = threading.Lock()

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        self._check("GET")
        with self.lock:
            return copy.deepcopy(self.lease)

    def create(self, kind: Kind, body: dict[str, Any], namespace: str | None = None) -> Any:
        self._check("POST")
        with self.lock:
            if self.lease is not None:
                raise ApiError(409, "AlreadyExists", "exists", "POST", kind.path())
            self.lease = copy.deepcopy(body)
            self.lease["metadata"]["resourceVersion"] = str(next(self._rv))
            return copy.deepcopy(self.lease)

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        self._check(method)
        assert method == "PUT" and path == LEASE.path("ns", "lease")
        with self.lock:
            assert self.lease is not None
            if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", "the object has been modified", method, path)
            self.lease = copy.deepcopy(body)
            self.lease["metadata"]["resourceVersion"] = str(next(self._rv))
            return copy.deepcopy(self.lease)

    def _check(self, method: str) -> None:
        if self.down:
            raise ApiError(0, "ConnectionRefused", "api server down", method, "/")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def candidate(server: LeaseServer, identity: str, clock: Clock, **timings: float) -> LeaderElector:
    config = LeaseConfig("ns", "lease", identity, **timings)
    return LeaderElector(server, config, clock=clock,  # type: ignore[arg-type]
                         now=lambda: datetime(2026, 12, 3, tzinfo=UTC))


def spec(server: LeaseServer) -> dict[str, Any]:
    assert server.lease is not None
    return dict(server.lease["spec"])


def test_the_first_candidate_creates_the_lease_and_leads() -> None:
    server, clock = LeaseServer(), Clock()
    a = candidate(server, "a", clock)
    assert a.try_acquire_or_renew()
    assert a.is_leader() and a.may_write()
    assert spec(server)["holderIdentity"] == "a"
    assert spec(server)["leaseDurationSeconds"] == 15 and spec(server)["leaseTransitions"] == 0


def test_a_held_lease_is_not_taken_before_it_expires_on_the_takers_own_clock() -> None:
    server, clock_a, clock_b = LeaseServer(), Clock(), Clock()
    a, b = candidate(server, "a", clock_a), candidate(server, "b", clock_b)
    assert a.try_acquire_or_renew()
    clock_b.now = 1_000_000.0  # b's clock is far ahead: skew must not matter, only what b saw
    assert not b.try_acquire_or_renew()
    clock_b.now += 14.9
    assert not b.try_acquire_or_renew()
    assert spec(server)["holderIdentity"] == "a" and not b.may_write()


def test_a_standby_takes_over_a_lease_not_renewed_for_its_duration() -> None:
    server, clock = LeaseServer(), Clock()
    a, b = candidate(server, "a", clock), candidate(server, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b observes the record now
    clock.now += 15.1
    assert b.try_acquire_or_renew()
    assert spec(server)["holderIdentity"] == "b" and spec(server)["leaseTransitions"] == 1
    assert not a.may_write()  # a's fence closed long before: 10 s after its renew


def test_renewals_keep_a_standby_waiting() -> None:
    server, clock = LeaseServer(), Clock()
    times = iter(f"2026-12-03T10:00:{s:02d}Z" for s in range(60))
    a = candidate(server, "a", clock)
    a._now = lambda: datetime.fromisoformat(next(times))  # type: ignore[method-assign]
    b = candidate(server, "b", clock)
    assert a.try_acquire_or_renew()
    for _ in range(10):  # 10 renewals 2 s apart: 20 s > the 15 s lease, never expired
        assert not b.try_acquire_or_renew()
        clock.now += 2.0
        assert a.try_acquire_or_renew()
    assert spec(server)["holderIdentity"] == "a"
    assert spec(server)["leaseTransitions"] == 0


def test_two_standbys_racing_for_an_expired_lease_cannot_both_win() -> None:
    server, clock = LeaseServer(), Clock()
    a, b, c = (candidate(server, n, clock) for n in "abc")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew() and not c.try_acquire_or_renew()
    clock.now += 16
    stale = server.get(LEASE, "lease", "ns")
    assert b.try_acquire_or_renew()
    # c read the lease before b's write: its update carries the old resourceVersion
    c.api = type("Stale", (), {"get": lambda *_a, **_k: copy.deepcopy(stale),
                               "request": server.request})()
    assert not c.try_acquire_or_renew()
    assert spec(server)["holderIdentity"] == "b"


def test_the_fence_closes_at_the_renew_deadline_before_the_lease_can_expire() -> None:
    server, clock = LeaseServer(), Clock()
    a = candidate(server, "a", clock)
    assert a.try_acquire_or_renew()
    clock.now += 9.9
    assert a.may_write()
    clock.now += 0.2  # 10.1 s without a renewal: stop writing (the lease runs to 15 s)
    assert not a.may_write() and not a.is_leader()


def test_a_released_lease_is_taken_at_once() -> None:
    server, clock = LeaseServer(), Clock()
    a, b = candidate(server, "a", clock), candidate(server, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release()
    assert not a.may_write()
    assert b.try_acquire_or_renew()  # no waiting for the 15 s
    assert spec(server)["holderIdentity"] == "b"


def test_inconsistent_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="lease duration > renew deadline > retry period"):
        LeaseConfig("ns", "lease", "a", lease_duration=10, renew_deadline=10, retry_period=2)


def test_a_fenced_client_refuses_writes_without_reaching_the_server() -> None:
    class Untouchable:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"the API client was used: {name}")

    api = KubeApi(Untouchable(), fence=lambda: False)
    with pytest.raises(ApiError) as err:
        api.create(LEASE, {"metadata": {"name": "x"}}, "ns")
    assert err.value.fenced and err.value.status == FENCED and not err.value.retryable


def test_a_leader_that_cannot_renew_steps_down_and_reports_it() -> None:
    server = LeaseServer()
    lost = threading.Event()
    elector = LeaderElector(server, LeaseConfig(  # type: ignore[arg-type]
        "ns", "lease", "a", lease_duration=0.9, renew_deadline=0.5, retry_period=0.1))
    leadership = Leadership(elector, on_lost=lost.set)
    leadership.start()
    assert leadership.leading.wait(5)
    assert leadership.may_write()
    server.down = True
    assert lost.wait(5), "leadership loss not reported"
    assert not leadership.leading.is_set() and not leadership.may_write()
    leadership.stop(release=False)


def test_a_standby_thread_leads_when_the_leader_releases() -> None:
    server = LeaseServer()
    timings = {"lease_duration": 30.0, "renew_deadline": 20.0, "retry_period": 0.05}
    first = Leadership(LeaderElector(server, LeaseConfig(  # type: ignore[arg-type]
        "ns", "lease", "a", **timings)))
    second = Leadership(LeaderElector(server, LeaseConfig(  # type: ignore[arg-type]
        "ns", "lease", "b", **timings)))
    first.start()
    assert first.leading.wait(5)
    second.start()
    time.sleep(0.3)
    assert not second.leading.is_set()  # a 30 s lease: it would wait that long
    first.stop(release=True)
    assert second.leading.wait(5)
    assert spec(server)["holderIdentity"] == "b"
    second.stop()


def test_without_election_a_process_always_leads() -> None:
    leadership = Leadership()
    assert leadership.leading.is_set() and leadership.may_write()


@pytest.mark.parametrize("command", ["run", "schedule"])
def test_the_cli_refuses_a_renew_deadline_not_below_the_lease_duration(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    from tests.unit.cli.helpers import run

    result = run(capsys, command, "--leader-elect=true", "--leader-elect-lease-duration=10",
                 "--leader-elect-renew-deadline=12", "--log-format=console")
    assert result.code == 2
    assert "lease duration > renew deadline > retry period" in result.err
