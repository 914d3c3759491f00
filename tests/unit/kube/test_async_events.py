"""The scheduler's event recorder: asynchronous, aggregating, rate-limited, never blocking."""

from __future__ import annotations

import threading
from typing import Any

from koordqueue.kube.api import ApiError
from koordqueue.kube.event_correlator import AGGREGATE_PREFIX, EventCorrelator
from koordqueue.kube.events import AsyncEventRecorder, EventRecorder

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u"}}


class FakeApi:
    def __init__(self, gate: threading.Event | None = None) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []
        self.gate = gate

    def create(self, kind: Any, body: dict[str, Any], namespace: str | None = None) -> Any:
        if self.gate is not None:
            self.gate.wait(10)
        self.created.append(body)
        return {"metadata": {"name": f"e{len(self.created)}"}}

    def merge_patch(self, kind: Any, name: str, patch: dict[str, Any],
                    namespace: str | None = None, subresource: str | None = None) -> Any:
        self.patched.append((name, patch))
        return {}


def test_events_are_written_by_the_background_writer() -> None:
    api = FakeApi()
    events = AsyncEventRecorder(EventRecorder(api))  # type: ignore[arg-type]
    assert events.record(POD, "Normal", "Scheduled", "Successfully assigned ns/p to n1")
    events.flush()
    [body] = api.created
    assert (body["reason"], body["message"], body["type"]) == (
        "Scheduled", "Successfully assigned ns/p to n1", "Normal")
    events.close()


def test_record_returns_at_once_while_the_api_is_slow() -> None:
    gate = threading.Event()
    api = FakeApi(gate)
    events = AsyncEventRecorder(EventRecorder(api), maxsize=10)  # type: ignore[arg-type]
    assert events.record(POD, "Normal", "Scheduled", "a")  # would block if written inline
    assert api.created == []
    gate.set()
    events.flush()
    assert len(api.created) == 1
    events.close()


def test_a_full_queue_drops_the_event_instead_of_blocking() -> None:
    gate = threading.Event()
    api = FakeApi(gate)
    events = AsyncEventRecorder(  # type: ignore[arg-type]
        EventRecorder(api), EventCorrelator(burst=100), maxsize=2)
    results = [events.record(POD, "Normal", "R", f"m{i}") for i in range(6)]
    assert results[:2] == [True, True] and results.count(False) >= 3
    gate.set()
    events.flush()
    events.close()


def test_aggregated_events_are_one_event_whose_message_and_count_move() -> None:
    api = FakeApi()
    events = AsyncEventRecorder(EventRecorder(api))  # type: ignore[arg-type]
    for i in range(12):
        events.record(POD, "Warning", "FailedScheduling", f"0/{i} nodes are available")
    events.flush()
    assert len(api.created) == 10  # 9 distinct ones, then one aggregate
    assert api.created[-1]["message"] == AGGREGATE_PREFIX + "0/9 nodes are available"
    assert [p["count"] for _, p in api.patched] == [2, 3]
    assert api.patched[-1][1]["message"] == AGGREGATE_PREFIX + "0/11 nodes are available"
    events.close()


def test_rate_limited_events_are_dropped() -> None:
    api = FakeApi()
    events = AsyncEventRecorder(  # type: ignore[arg-type]
        EventRecorder(api), EventCorrelator(burst=2))
    assert [events.record(POD, "Normal", "R", "same") for _ in range(4)] == [
        True, True, False, False]
    events.flush()
    assert len(api.created) == 1 and [p["count"] for _, p in api.patched] == [2]
    events.close()


def test_record_all_creates_new_events_in_one_batch_in_the_callers_thread() -> None:
    api = FakeApi()
    events = AsyncEventRecorder(EventRecorder(api))  # type: ignore[arg-type]
    batches: list[list[tuple[str, dict[str, Any]]]] = []

    def post_all(posts: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        batches.append(posts)
        return [{"metadata": {"name": f"made-{i}"}} for i in range(len(posts))]

    pods = [{**POD, "metadata": {**POD["metadata"], "name": f"p{i}", "uid": f"u{i}"}}
            for i in range(3)]
    written = events.record_all(
        [(p, "Normal", "Scheduled", f"assigned {i}") for i, p in enumerate(pods)], post_all)
    assert written == [True, True, True]
    [batch] = batches
    assert [path for path, _ in batch] == ["/api/v1/namespaces/ns/events"] * 3
    assert [b["involvedObject"]["name"] for _, b in batch] == ["p0", "p1", "p2"]
    assert {b["reason"] for _, b in batch} == {"Scheduled"} and api.created == []
    # a repeat of a written one is a count bump on the name the server gave, not a create
    assert events.record_all([(pods[1], "Normal", "Scheduled", "assigned 1")], post_all) == [True]
    assert len(batches[-1]) == 0 and api.patched == [("made-1", api.patched[0][1])]
    assert api.patched[0][1]["count"] == 2
    events.close()


def test_record_all_writes_a_refused_create_again_one_at_a_time() -> None:
    api = FakeApi()
    events = AsyncEventRecorder(EventRecorder(api))  # type: ignore[arg-type]

    def post_all(posts: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        return [ApiError(409, "Conflict", "exists", "POST", p) for p, _ in posts]

    assert events.record_all([(POD, "Normal", "Scheduled", "a")], post_all) == [True]
    assert [b["reason"] for b in api.created] == ["Scheduled"]  # through `record`
    events.close()


def test_record_all_keeps_the_rate_limit() -> None:
    api = FakeApi()
    events = AsyncEventRecorder(  # type: ignore[arg-type]
        EventRecorder(api), EventCorrelator(burst=1))
    sent: list[int] = []

    def post_all(posts: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        sent.append(len(posts))
        return [{"metadata": {"name": "e"}} for _ in posts]

    assert events.record_all([(POD, "Normal", "R", "a"), (POD, "Normal", "R", "b")],
                             post_all) == [True, False]
    assert sent == [1]
    events.close()
