"""The controller writes each Queue's status.queueItemDetails from the round's record: at
once, then per its refresh interval, only when the list changed; a disabled Queue keeps its
last value (issue 35 point 8)."""

from __future__ import annotations

import copy
from typing import Any

from koordqueue.domain import names
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import quota, unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _ready(**annotations: str) -> tuple[MemoryApi, Controller, Clock]:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="1"), "default")
    clock = Clock()
    c = Controller(api, ControllerSettings(), writers=1, clock=clock)
    c.resync()
    queue = api.get(QUEUE, "q", "koord-queue")
    assert queue is not None
    queue["metadata"].setdefault("annotations", {}).update(annotations)
    c.on_queue("MODIFIED", copy.deepcopy(queue))
    return api, c, clock


def _add(api: MemoryApi, c: Controller, name: str, priority: int = 0) -> None:
    obj = unit(name, "q")
    obj["spec"]["priority"] = priority
    created = api.create(QUEUE_UNIT, obj, "ns")
    c.on_unit("ADDED", created)


def _details(api: MemoryApi) -> Any:
    queue = api.get(QUEUE, "q", "koord-queue")
    assert queue is not None
    return (queue.get("status") or {}).get("queueItemDetails")


def _echo(api: MemoryApi, c: Controller) -> None:
    """The Queue's watch event after our write (the controller sees what it wrote)."""
    c.on_queue("MODIFIED", copy.deepcopy(api.get(QUEUE, "q", "koord-queue")))


def test_waiting_units_are_published_in_queue_order_with_koord_queues_shape() -> None:
    api, c, _ = _ready()
    for name, priority in (("a", 0), ("b", 0), ("c", 7)):
        _add(api, c, name, priority)
    c.admission_round()
    # c (priority 7) is admitted into the 1-cpu quota; a and b wait in arrival order
    assert _details(api) == {
        "active": [
            {"name": "a", "namespace": "ns", "position": 1},
            {"name": "b", "namespace": "ns", "position": 2},
        ]
    }
    c.close()


def test_the_list_is_refreshed_only_when_due_and_changed() -> None:
    api, c, clock = _ready()
    _add(api, c, "a")
    _add(api, c, "b")
    c.admission_round()
    _echo(api, c)
    before = api.get(QUEUE, "q", "koord-queue")["metadata"]["resourceVersion"]  # type: ignore[index]
    _add(api, c, "c")
    clock.now += 14.0
    c.admission_round()
    assert [i["name"] for i in _details(api)["active"]] == ["b"], "not due yet: old list stays"
    clock.now += 1.0
    c.admission_round()
    assert [i["name"] for i in _details(api)["active"]] == ["b", "c"]
    _echo(api, c)
    after = api.get(QUEUE, "q", "koord-queue")["metadata"]["resourceVersion"]  # type: ignore[index]
    clock.now += 15.0
    c.admission_round()
    assert api.get(QUEUE, "q", "koord-queue")["metadata"]["resourceVersion"] == after, (  # type: ignore[index]
        "unchanged list: no write"
    )
    assert before != after
    c.close()


def test_the_refresh_interval_annotation_is_read_from_the_queue() -> None:
    api, c, clock = _ready(**{names.QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION: "2s"})
    _add(api, c, "a")
    _add(api, c, "b")
    c.admission_round()
    _echo(api, c)
    _add(api, c, "c")
    clock.now += 2.0
    c.admission_round()
    assert [i["name"] for i in _details(api)["active"]] == ["b", "c"]
    c.close()


def test_a_disabled_queue_keeps_its_last_published_list() -> None:
    api, c, clock = _ready()
    _add(api, c, "a")
    _add(api, c, "b")
    c.admission_round()
    _echo(api, c)
    api.merge_patch(
        QUEUE, "q",
        {"metadata": {"annotations": {names.DISABLE_SHOW_QUEUE_ITEMS_ANNOTATION: "true"}}},
        "koord-queue",
    )
    _echo(api, c)
    _add(api, c, "c")
    clock.now += 60.0
    c.admission_round()
    assert [i["name"] for i in _details(api)["active"]] == ["b"]
    c.close()


def test_a_queue_with_nothing_waiting_publishes_an_empty_active_list() -> None:
    api, c, _ = _ready()
    c.admission_round()
    assert _details(api) == {"active": []}
    c.close()
