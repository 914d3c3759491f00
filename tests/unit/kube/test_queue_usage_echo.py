"""The controller's own Queue usage-annotation writes come back as Queue events (issue 11
follow-up: 50 Queues every 5 s during a burst). Such an echo is skipped: no drift check, no
engine update, no round woken; any other change is still folded or reverted."""

from __future__ import annotations

import copy
from typing import Any

from koordqueue.domain import names
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE
from koordqueue.kube.controller import Controller
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import controller, quota


def _ready() -> tuple[MemoryApi, Controller, dict[str, Any]]:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q"), "default")
    c = controller(api)
    c.resync()
    queue = api.get(QUEUE, "q", "koord-queue")
    assert queue is not None
    c.on_queue("ADDED", queue)
    api.applied.clear()
    c.wake.clear()
    return api, c, queue


def _edited(queue: dict[str, Any], version: str, **annotations: str) -> dict[str, Any]:
    obj = copy.deepcopy(queue)
    obj["metadata"]["resourceVersion"] = version
    obj["metadata"].setdefault("annotations", {}).update(annotations)
    return obj


def test_an_echo_of_our_usage_annotations_wakes_nothing_and_touches_no_engine_state() -> None:
    api, c, queue = _ready()
    upserts: list[str] = []
    real = c.engine.upsert_queue
    c.engine.upsert_queue = lambda name, *a, **k: upserts.append(name) or real(name, *a, **k)  # type: ignore[method-assign]
    echo = _edited(queue, "9001", **{names.QUEUE_USED_ANNOTATION: '{"cpu":1}',
                                     names.QUEUE_SELF_USED_ANNOTATION: '{"cpu":1}'})
    c.on_queue("MODIFIED", echo)
    assert upserts == [] and not c.wake.is_set() and api.applied == []
    c.close()


def test_a_changed_queue_annotation_next_to_an_echo_is_still_folded() -> None:
    _, c, queue = _ready()
    c.on_queue("MODIFIED", _edited(queue, "9001", **{names.QUEUE_USED_ANNOTATION: "{}"}))
    edited = _edited(queue, "9002", **{names.QUEUE_USED_ANNOTATION: '{"cpu":2}',
                                       "koord-queue/some-setting": "x"})
    c.on_queue("MODIFIED", edited)
    assert c.wake.is_set(), "a change the engine may read is folded (and wakes a round)"
    c.close()


def test_a_hand_edit_of_the_policy_after_an_echo_is_reverted() -> None:
    api, c, queue = _ready()
    c.on_queue("MODIFIED", _edited(queue, "9001", **{names.QUEUE_USED_ANNOTATION: "{}"}))
    drifted = _edited(queue, "9002")
    assert queue["spec"]["queuePolicy"] == "Priority"
    drifted["spec"]["queuePolicy"] = "Block"
    c.on_queue("MODIFIED", drifted)
    assert api.applied == ["q"]
    c.close()


def test_an_echo_after_the_quota_changed_is_checked_against_the_new_quota() -> None:
    api, c, queue = _ready()
    changed = quota("q", policy="Block")
    changed["metadata"]["uid"] = (c.quota_object("q") or {})["metadata"].get("uid")
    c.on_quota("MODIFIED", changed, apply=False)  # the quota's own Queue apply not yet seen
    api.applied.clear()
    c.on_queue("MODIFIED", _edited(queue, "9001", **{names.QUEUE_USED_ANNOTATION: "{}"}))
    assert api.applied == ["q"], "the Queue now differs from its quota: reverted"
    c.close()
