"""Event names as client-go makes them: `<object>.<hex of Unix ns>`, unique per process."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from koordqueue.kube import events as events_module
from koordqueue.kube.api import ApiError
from koordqueue.kube.events import EventRecorder, event_name

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u"}}


class FakeApi:
    def __init__(self, clashes: int = 0) -> None:
        self.created: list[dict[str, Any]] = []
        self.clashes = clashes

    def create(self, kind: Any, body: dict[str, Any], namespace: str | None = None) -> Any:
        self.created.append(body)
        if self.clashes:
            self.clashes -= 1
            raise ApiError(409, "AlreadyExists", "exists", "POST", "/events")
        meta = body["metadata"]
        return {"metadata": {"name": meta.get("name") or meta["generateName"] + "x1y2z"}}

    def merge_patch(self, *args: Any, **kwargs: Any) -> Any:
        return {}


def test_an_event_name_is_the_object_and_the_hex_of_now_in_unix_ns() -> None:
    before = time.time_ns()
    name = event_name("pod-1")
    after = time.time_ns()
    match = re.fullmatch(r"pod-1\.([0-9a-f]+)", name)
    assert match is not None
    assert before <= int(match.group(1), 16) <= after + 1_000


def test_event_names_are_unique_across_threads_and_a_clock_standing_still(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names: list[str] = []
    lock = threading.Lock()

    def burst() -> None:
        mine = [event_name("p") for _ in range(2_000)]
        with lock:
            names.extend(mine)

    threads = [threading.Thread(target=burst) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    monkeypatch.setattr(events_module.time, "time_ns", lambda: 1)  # stuck (or stepped back)
    names.extend(event_name("p") for _ in range(100))
    assert len(set(names)) == len(names) == 8_100


def test_the_recorder_names_the_event_itself() -> None:
    api = FakeApi()
    assert EventRecorder(api).record(POD, "Normal", "Scheduled", "m")  # type: ignore[arg-type]
    [body] = api.created
    assert re.fullmatch(r"p\.[0-9a-f]+", body["metadata"]["name"])
    assert "generateName" not in body["metadata"]


def test_a_name_taken_by_another_process_falls_back_to_a_server_drawn_one() -> None:
    api = FakeApi(clashes=1)
    recorder = EventRecorder(api)  # type: ignore[arg-type]
    assert recorder.record(POD, "Normal", "Scheduled", "m")
    _first, second = api.created
    assert second["metadata"] == {"generateName": "p.", "namespace": "ns"}
    assert recorder.record(POD, "Normal", "Scheduled", "m")  # the repeat patches that one
    assert len(api.created) == 2
