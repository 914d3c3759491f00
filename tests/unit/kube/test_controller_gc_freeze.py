"""The controller keeps the collector off its decoded objects (kube/gcfreeze.py).

Under a burst of 1,500 Jobs perf put ~11 % of `koordqueue run`'s CPU in the cyclic
collector's full passes over the informers' objects; the controller now freezes after each
resync's fold (a full collection first, at most every ten minutes) and after rounds (a young
one), as the scheduler does after relists and sessions. In memory, with the `gc` module
recorded, then once for real.
"""

from __future__ import annotations

import gc

import pytest

from koordqueue.kube import gcfreeze
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import quota, unit
from tests.unit.kube.test_scheduler_binds_gc import RecordingGc

FULL = [("unfreeze", ()), ("collect", ()), ("freeze", ())]
YOUNG = [("collect", (1,)), ("freeze", ())]


@pytest.fixture
def fake_gc(monkeypatch: pytest.MonkeyPatch) -> RecordingGc:
    """The `gc` module inside gcfreeze, recorded (test_scheduler_binds_gc's stand-in)."""
    recording = RecordingGc()
    monkeypatch.setattr(gcfreeze, "gc", recording)
    return recording


def cluster() -> MemoryApi:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="2"), "default")
    api.create(QUEUE_UNIT, unit("a", "q"), "ns")
    return api


def test_the_start_up_resync_collects_fully_then_freezes(fake_gc: RecordingGc) -> None:
    c = Controller(cluster(), ControllerSettings(), writers=1, gc_freeze=True)
    c.resync()
    assert fake_gc.calls == FULL
    c.close()


def test_a_round_freezes_what_a_young_collection_left_at_most_every_second(
    fake_gc: RecordingGc,
) -> None:
    c = Controller(cluster(), ControllerSettings(), writers=1, gc_freeze=True)
    now = [100.0]
    c.gc.clock = lambda: now[0]
    c.resync()
    fake_gc.calls.clear()
    now[0] += 2.0
    c.admission_round()
    assert fake_gc.calls == YOUNG
    c.admission_round()  # the same second: no second freeze
    assert fake_gc.calls == YOUNG
    c.close()


def test_the_periodic_resync_freezes_once_folded_and_reclaims_every_ten_minutes(
    fake_gc: RecordingGc,
) -> None:
    api = cluster()
    c = Controller(api, ControllerSettings(), writers=1, gc_freeze=True)
    now = [100.0]
    c.gc.clock = lambda: now[0]
    c.resync()
    for minutes, expected in ((1, YOUNG), (9, YOUNG), (10, FULL), (11, YOUNG)):
        fake_gc.calls.clear()
        now[0] = 100.0 + 60 * minutes
        c.resyncer.start_resync()
        assert fake_gc.calls == expected, minutes
    c.close()


def test_an_embedded_controller_leaves_the_collector_alone(fake_gc: RecordingGc) -> None:
    c = Controller(cluster(), ControllerSettings(), writers=1)  # gc_freeze off: tests, e2e
    c.resync()
    c.admission_round()
    assert fake_gc.calls == []
    c.close()


def test_a_real_freeze_loses_no_unit_and_the_next_round_still_admits() -> None:
    api = cluster()
    c = Controller(api, ControllerSettings(), writers=1, gc_freeze=True)
    try:
        c.resync()
        assert gc.get_freeze_count() > 0
        c.admission_round()
        admitted = api.get(QUEUE_UNIT, "a", "ns") or {}
        assert (admitted.get("status") or {}).get("phase") in {"Reserved", "Dequeued"}
        api.create(QUEUE_UNIT, unit("b", "q"), "ns")
        c.on_unit("ADDED", api.get(QUEUE_UNIT, "b", "ns") or {})
        c.gc.clock = lambda: 1e12  # the freeze interval is over
        c.admission_round()
        assert ((api.get(QUEUE_UNIT, "b", "ns") or {}).get("status") or {}).get("phase") in {
            "Reserved", "Dequeued"}  # fmt: skip
        assert {u.name for u in c.engine.units()} == {"a", "b"}
    finally:
        gc.unfreeze()  # give the test process its collector back
        c.close()
