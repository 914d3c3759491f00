"""A round whose `execute` raises partway: the chains never handed to the writer are planned
again next round (issue 11 follow-up). Rounds plan only the record's new entries, so without
a renew the missed entries would be carried, their effects never written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.controller.admission import EffectChain
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import controller, quota, unit


def _ready(api: MemoryApi, cpu: str, units: list[tuple[str, str]]) -> Controller:
    api.create(ELASTIC_QUOTA, quota("q", cpu=cpu), "default")
    for name, request in units:
        api.create(QUEUE_UNIT, unit(name, "q", cpu=request), "ns")
    c = controller(api)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    return c


def _fail_chain(c: Controller, number: int) -> list[int]:
    """Make the writer raise on the `number`th effect chain submitted (1-based), once."""
    real: Callable[..., None] = c.writer.submit
    seen = [0]

    def submit(write: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(write, EffectChain):
            seen[0] += 1
            if seen[0] == number:
                raise RuntimeError("injected")
        real(write, *args, **kwargs)

    c.writer.submit = submit  # type: ignore[method-assign]
    return seen


def _message(api: MemoryApi, name: str) -> str | None:
    obj = api.get(QUEUE_UNIT, name, "ns") or {}
    return (obj.get("status") or {}).get("message")


def _phase(api: MemoryApi, name: str) -> str | None:
    obj = api.get(QUEUE_UNIT, name, "ns") or {}
    return (obj.get("status") or {}).get("phase")


def test_rejections_not_written_when_execute_raised_are_written_next_round() -> None:
    api = MemoryApi()
    c = _ready(api, "1", [("a", "2"), ("b", "2"), ("c", "2")])  # none fits: three rejections
    _fail_chain(c, 2)
    with pytest.raises(RuntimeError, match="injected"):
        c.admission_round()
    written = [n for n in "abc" if _message(api, n)]
    assert len(written) == 1, "the first chain ran, the rest were never submitted"
    c.admission_round()
    assert all(_message(api, n) for n in "abc"), {n: _message(api, n) for n in "abc"}
    c.close()


def test_admissions_not_written_when_execute_raised_are_decided_and_written_next_round() -> None:
    api = MemoryApi()
    c = _ready(api, "3", [("a", "1"), ("b", "1"), ("c", "1")])  # all three fit
    _fail_chain(c, 2)
    with pytest.raises(RuntimeError, match="injected"):
        c.admission_round()
    admitted = [n for n in "abc" if _phase(api, n) == "Dequeued"]
    assert len(admitted) == 1
    for name in "abc":  # the engine holds quota only for what was written
        uid = (api.get(QUEUE_UNIT, name, "ns") or {})["metadata"]["uid"]
        assert c.engine.is_admitted(uid) == (name in admitted)
    c.admission_round()
    assert [_phase(api, n) for n in "abc"] == ["Dequeued"] * 3
    assert not c.round_writes_pending
    c.close()
