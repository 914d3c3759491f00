"""A QueueUnit watch event older than a version the controller already holds is ignored.

Found by bench/bench_scale.py under load: the watch delivered a unit's Dequeued version after
the unit had gone Succeed, the controller folded it in, and the finished unit was admitted a
second time, holding quota nobody used until the next resync.
"""

from __future__ import annotations

import copy

from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import quota, unit


def _started(api: MemoryApi) -> Controller:
    c = Controller(api, ControllerSettings(), writers=1)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    return c


def _phase(api: MemoryApi, name: str) -> str | None:
    return ((api.get(QUEUE_UNIT, name, "ns") or {}).get("status") or {}).get("phase")


def test_a_late_event_does_not_admit_a_finished_unit_again() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="1"), "default")
    api.create(QUEUE_UNIT, unit("first", "q", phase="Enqueued"), "ns")
    c = _started(api)
    c.admission_round()
    assert _phase(api, "first") == "Dequeued"
    dequeued = copy.deepcopy(api.get(QUEUE_UNIT, "first", "ns"))
    assert dequeued is not None
    c.on_unit("MODIFIED", dequeued)

    # the workload finished: its unit is written Succeed and the watch reports it
    api.merge_patch(QUEUE_UNIT, "first", {"status": {"phase": "Succeed"}}, "ns", "status")
    c.on_unit("MODIFIED", copy.deepcopy(api.get(QUEUE_UNIT, "first", "ns")))
    second = api.create(QUEUE_UNIT, unit("second", "q", phase="Enqueued"), "ns")
    c.on_unit("ADDED", second)

    c.on_unit("MODIFIED", dequeued)  # the late event, from before Succeed
    result = c.admission_round()

    assert [u.name for u, *_ in result.admitted] == ["second"]
    assert not c.engine.is_admitted(dequeued["metadata"]["uid"])
    assert _phase(api, "second") == "Dequeued"
    c.close()


def test_an_event_at_a_newer_version_is_still_folded_in() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="1"), "default")
    first = api.create(QUEUE_UNIT, unit("first", "q", phase="Enqueued"), "ns")
    c = _started(api)
    c.on_unit("ADDED", first)
    api.merge_patch(QUEUE_UNIT, "first", {"status": {"phase": "Succeed"}}, "ns", "status")
    c.on_unit("MODIFIED", copy.deepcopy(api.get(QUEUE_UNIT, "first", "ns")))
    known = c.engine.unit(first["metadata"]["uid"])
    assert known is not None and known.phase.value == "Succeed"
    c.close()
