"""The start-up resync retries a transient API failure itself, after a short back-off.

Found by tests/e2e/test_faults.py[429-and-500]: one injected 500 on the start-up list of Jobs
went up to kopf, which retries a failed start-up activity only after 60 s, so nothing was
admitted for a minute (108 s in CI instead of ~12 s alone). client-go's reflector retries a
failed list after 0.8 s doubling; the controller now does the same from 0.5 s.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from koordqueue.domain.backoff import Backoff
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE_UNIT, ApiError, Kind
from koordqueue.kube.controller import Controller, OwnerLoop, loop
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import quota

REAL_RETRY: Backoff | None = getattr(loop, "STARTUP_RETRY", None)


class Failing(MemoryApi):
    """The first `failures` lists of Jobs are answered `status`."""

    def __init__(self, failures: int, status: int) -> None:
        super().__init__()
        self.failures, self.status, self.lists = failures, status, 0

    def list_with_version(self, kind: Kind, *args: Any, **kwargs: Any) -> Any:
        if kind == JOB:
            self.lists += 1
            if self.lists <= self.failures:
                raise ApiError(self.status, "injected", "by the test", "GET", kind.path())
        return super().list_with_version(kind, *args, **kwargs)


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The schedule's first step is asserted below; the tests wait 10 ms, not 0.5 s."""
    monkeypatch.setattr(loop, "STARTUP_RETRY", Backoff(0.01, cap=0.05), raising=False)


def test_the_first_retry_comes_within_a_second_not_kopfs_minute() -> None:
    assert REAL_RETRY is not None, "no start-up retry: kopf's 60 s activity back-off"
    assert REAL_RETRY.delay(0) <= 1.0
    assert REAL_RETRY.delay(10) <= 30.0  # and never waits longer than the reflector's cap


def owner_for(api: MemoryApi) -> tuple[Controller, OwnerLoop]:
    api.create(ELASTIC_QUOTA, quota("q", cpu="2"), "default")
    controller = Controller(api, ControllerSettings(admission_period=0.2), writers=1)
    return controller, OwnerLoop(controller, controller.writers)


@pytest.mark.parametrize("status", [429, 500, 0])
def test_a_transient_failure_of_the_startup_list_is_retried_after_a_back_off(
    status: int,
) -> None:
    api = Failing(failures=1, status=status)
    controller, owner = owner_for(api)
    t0 = time.monotonic()
    try:
        listings = owner.start().result(5)  # before: raised the ApiError (kopf: 60 s later)
        waited = time.monotonic() - t0
    finally:
        owner.stop()
        controller.close()
    assert api.lists == 2
    assert set(listings) >= {QUEUE_UNIT, JOB}
    assert controller.ready.is_set()
    assert waited < 2.0, waited


def test_a_refusal_that_retrying_cannot_fix_still_fails_the_startup() -> None:
    api = Failing(failures=1, status=403)
    controller, owner = owner_for(api)
    try:
        with pytest.raises(ApiError) as info:
            owner.start().result(5)
    finally:
        owner.stop()
        controller.close()
    assert info.value.status == 403
    assert api.lists == 1
    assert not controller.ready.is_set()


def test_stopping_ends_the_retries_with_the_last_error() -> None:
    api = Failing(failures=10**6, status=503)
    controller, owner = owner_for(api)
    started = owner.start()
    deadline = time.monotonic() + 5
    while api.lists < 2 and time.monotonic() < deadline:  # retrying, on its back-off
        time.sleep(0.01)
    assert api.lists >= 2, "the failed list was not tried again"
    owner.stop(timeout=5)
    controller.close()
    with pytest.raises(ApiError) as info:
        started.result(1)
    assert info.value.status == 503
