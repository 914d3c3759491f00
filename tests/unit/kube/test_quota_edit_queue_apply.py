"""A quota edit that leaves its Queue as it is applies nothing (issue 36 point 3: at 1,000
quotas each `spec.max` edit re-applied an unchanged Queue, one write per edit); one that
changes the Queue (its policy label) still applies it, and so does an edit whose Queue has
not been seen yet."""

from __future__ import annotations

from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import quota


def started(api: MemoryApi) -> Controller:
    c = Controller(api, ControllerSettings(), writers=1)
    c.resync()
    queue = api.get(QUEUE, "a", "koord-queue")
    assert queue is not None
    c.on_queue("ADDED", queue)  # the informer's event of the Queue the resync applied
    api.applied.clear()
    return c


def test_a_max_edit_applies_no_queue() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("a", cpu="2"), "default")
    c = started(api)
    c.on_quota("MODIFIED", quota("a", cpu="8"))
    assert api.applied == []
    assert str(c.engine.tree.get("a").max) == "cpu:8"  # type: ignore[union-attr]
    c.close()


def test_a_policy_edit_applies_the_queue() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("a"), "default")
    c = started(api)
    c.on_quota("MODIFIED", quota("a", policy="Block"))
    assert api.applied == ["a"]
    queue = api.get(QUEUE, "a", "koord-queue") or {}
    assert queue["spec"]["queuePolicy"] == "Block"
    c.close()


def test_an_edit_whose_queue_was_never_seen_applies_it() -> None:
    api = MemoryApi()
    c = Controller(api, ControllerSettings(), writers=1)
    c.on_quota("ADDED", quota("a", cpu="4"))  # no Queue seen (listed or watched): apply
    assert api.applied == ["a"]
    c.close()
