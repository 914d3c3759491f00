"""The informer's work queue and watch loop, with plain objects (no server)."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException

from koordqueue.domain.backoff import Backoff
from koordqueue.kube.api import JOB
from koordqueue.kube.informer import Informer, KeyedQueue


def _obj(name: str, version: str, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": version}}


# --- KeyedQueue ---------------------------------------------------------------------------
operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from("abcd")),
        st.tuples(st.just("take"), st.none()),
        st.tuples(st.just("done"), st.integers(0, 3)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_keyed_queue_delivers_each_key_in_order_and_never_twice_at_once(ops: list[Any]) -> None:
    """Any interleaving of puts, takes and dones: per-key FIFO, one holder per key, nothing lost."""
    q = KeyedQueue()
    sent: dict[str, list[int]] = defaultdict(list)
    got: dict[str, list[int]] = defaultdict(list)
    held: list[str] = []
    seq = 0
    for op, arg in ops:
        if op == "put":
            seq += 1
            sent[arg].append(seq)
            q.put(arg, (None, {"seq": seq}))
        elif op == "take":
            if not q._ready:  # take() would block: nothing is ready
                continue
            item = q.take()
            assert item is not None
            key, events = item
            assert key not in held, "a key was handed to a second worker"
            assert events, "a key became ready without events"
            held.append(key)
            got[key] += [obj["seq"] for _, obj in events]
        elif held:
            q.done(held.pop(arg % len(held)))
    for key in held:
        q.done(key)
    q.close()
    while (item := q.take()) is not None:
        key, events = item
        got[key] += [obj["seq"] for _, obj in events]
        q.done(key)
    assert got == sent
    assert len(q) == 0


def test_keyed_queue_a_slow_key_does_not_hold_up_others() -> None:
    q = KeyedQueue()
    q.put("slow", (None, {}))
    q.put("fast", (None, {}))
    first = q.take()
    assert first is not None and first[0] == "slow"  # held, not done
    q.put("slow", ("MODIFIED", {}))
    second = q.take()
    assert second is not None and second[0] == "fast"
    q.done("fast")
    q.done("slow")
    third = q.take()
    assert third == ("slow", [("MODIFIED", {})])


def test_keyed_queue_with_threads_keeps_order_and_exclusivity() -> None:
    q = KeyedQueue()
    inflight: set[str] = set()
    lock = threading.Lock()
    seen: dict[str, list[int]] = defaultdict(list)
    overlaps: list[str] = []

    def worker() -> None:
        while (item := q.take()) is not None:
            key, events = item
            with lock:
                if key in inflight:
                    overlaps.append(key)
                inflight.add(key)
            time.sleep(0.0005)
            with lock:
                seen[key] += [obj["i"] for _, obj in events]
                inflight.discard(key)
            q.done(key)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for i in range(2000):
        q.put(f"k{i % 37}", (None, {"i": i}))
    q.close()
    for t in threads:
        t.join(30)
    assert not overlaps
    assert sum(len(v) for v in seen.values()) == 2000
    for key, values in seen.items():
        assert values == sorted(values), key


# --- the watch loop -----------------------------------------------------------------------
class FakeApi:
    """list_with_version only; the watch is replaced per test."""

    def __init__(self, pages: list[tuple[list[dict[str, Any]], str]]) -> None:
        self.pages = pages
        self.lists = 0

    def list_with_version(self, kind: Any) -> tuple[list[dict[str, Any]], str]:
        page = self.pages[min(self.lists, len(self.pages) - 1)]
        self.lists += 1
        return page


class FakeResponse:
    """What kubernetes.watch.Watch reads: a urllib3-like streamed response."""

    def __init__(self, events: list[dict[str, Any]], status: int = 200) -> None:
        self.status = status
        self.body = b"".join(json.dumps(e).encode() + b"\n" for e in events)

    def stream(self, amt: Any = None, decode_content: bool = False) -> Any:
        half = len(self.body) // 2  # split mid-line: the reader must reassemble lines
        yield self.body[:half]
        yield self.body[half:]

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def _informer(api: Any, handler: Any) -> Informer:
    return Informer(api, JOB, handler, workers=2, backoff=Backoff(0.0))


def test_watch_dispatches_changes_skips_bookmarks_and_returns_the_last_version() -> None:
    calls: list[dict[str, Any]] = []
    received: list[tuple[str | None, str]] = []
    informer = _informer(FakeApi([]), lambda t, o: received.append((t, o["metadata"].get("name"))))
    stream = [
        {"type": "ADDED", "object": _obj("a", "11")},
        {"type": "MODIFIED", "object": _obj("a", "12")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
        {"type": "DELETED", "object": _obj("b", "13")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}},
    ]

    def open_watch(**kwargs: Any) -> FakeResponse:
        calls.append(kwargs)
        return FakeResponse(stream)

    informer._open_watch = open_watch  # type: ignore[method-assign]
    assert informer._watch_from("10") == "20"
    assert calls[0]["resource_version"] == "10"
    assert calls[0]["allow_watch_bookmarks"] is True
    # client-go's reflector: a random server-side timeout in [min, 2 x min] whole seconds
    assert informer.watch_timeout <= calls[0]["timeout_seconds"] <= 2 * informer.watch_timeout
    informer._queue.close()
    informer._work()  # drain in this thread
    assert sorted(received) == [("ADDED", "a"), ("DELETED", "b"), ("MODIFIED", "a")]
    assert [t for t, n in received if n == "a"] == ["ADDED", "MODIFIED"]


def test_watch_error_410_is_raised_as_gone() -> None:
    informer = _informer(FakeApi([]), lambda t, o: None)
    gone = {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "code": 410,
            "reason": "Expired",
            "message": "too old resource version: 1 (99)",
        },
    }
    informer._open_watch = lambda **kw: FakeResponse([gone])  # type: ignore[method-assign]
    with pytest.raises(ApiException) as info:
        informer._watch_from("1")
    assert info.value.status == 410


def _run_until(informer: Informer, done: threading.Event) -> None:
    thread = threading.Thread(target=informer._run, daemon=True)
    thread.start()
    assert done.wait(10), "the watch loop did not get there"
    informer._stop.set()
    thread.join(10)
    assert not thread.is_alive()


def test_run_relists_after_410_and_resumes_after_other_errors() -> None:
    api = FakeApi([([_obj("a", "5")], "5"), ([_obj("a", "9"), _obj("b", "9")], "9")])
    received: list[tuple[str | None, str]] = []
    informer = _informer(api, lambda t, o: received.append((t, o["metadata"]["name"])))
    watched_from: list[str] = []
    done = threading.Event()

    def watch_from(version: str) -> str:
        watched_from.append(version)
        step = len(watched_from)
        if step == 1:
            raise ApiException(status=410, reason="Expired")  # -> re-list
        if step == 2:
            raise ConnectionResetError("peer went away")  # -> same version again
        if step == 3:
            return "12"  # the server ended the watch normally -> resume from 12
        done.set()
        return version

    informer._watch_from = watch_from  # type: ignore[method-assign]
    _run_until(informer, done)
    assert api.lists == 2
    assert watched_from[:4] == ["5", "9", "9", "12"]
    assert informer.synced.is_set()
    informer._queue.close()
    informer._work()
    assert sorted(received) == [(None, "a"), (None, "a"), (None, "b")]


def test_run_backs_off_while_the_list_keeps_failing() -> None:
    class Failing(FakeApi):
        def list_with_version(self, kind: Any) -> tuple[list[dict[str, Any]], str]:
            self.lists += 1
            if self.lists < 4:
                raise ApiException(status=503, reason="Service Unavailable")
            done.set()
            return [], "1"

    done = threading.Event()
    api = Failing([])
    informer = _informer(api, lambda t, o: None)
    informer._watch_from = lambda version: (informer._stop.wait(5), version)[1]  # type: ignore[method-assign]
    _run_until(informer, done)
    assert api.lists == 4
    assert informer.synced.is_set()


def test_a_failing_handler_does_not_stop_the_worker() -> None:
    received: list[str] = []

    def handler(event_type: str | None, obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("boom")
        received.append(obj["metadata"]["name"])

    informer = _informer(FakeApi([]), handler)
    for name in ("bad", "good", "bad", "fine"):
        informer._dispatch("ADDED", _obj(name, "1"))
    informer._queue.close()
    informer._work()
    assert received == ["good", "fine"]


def test_stop_ends_workers_and_watch() -> None:
    api = FakeApi([([], "1")])
    informer = _informer(api, lambda t, o: None)
    informer._watch_from = lambda version: (informer._stop.wait(5), version)[1]  # type: ignore[method-assign]
    informer.start()
    assert informer.synced.wait(5)
    started = time.monotonic()
    informer.stop(timeout=5)
    assert time.monotonic() - started < 5
    assert not any(t.is_alive() for t in informer._threads)


def _with_uid(name: str, uid: str, version: str = "1") -> dict[str, Any]:
    obj = _obj(name, version)
    obj["metadata"]["uid"] = uid
    return obj


def test_relist_reports_objects_deleted_or_recreated_while_not_watching() -> None:
    first = [_with_uid("a", "u1"), _with_uid("b", "u2"), _with_uid("c", "u3")]
    second = [_with_uid("a", "u1"), _with_uid("b", "u9")]  # c deleted, b re-created
    api = FakeApi([(first, "5"), (second, "9")])
    received: list[tuple[str | None, str, str]] = []
    informer = _informer(
        api, lambda t, o: received.append((t, o["metadata"]["name"], o["metadata"]["uid"]))
    )
    informer._list()
    informer._list()
    informer._queue.close()
    informer._work()
    by_name: dict[str, list[tuple[str | None, str]]] = defaultdict(list)
    for event_type, name, uid in received:
        by_name[name].append((event_type, uid))
    assert by_name == {
        "a": [(None, "u1"), (None, "u1")],
        "b": [(None, "u2"), ("DELETED", "u2"), (None, "u9")],
        "c": [(None, "u3"), ("DELETED", "u3")],
    }


def test_a_deletion_seen_on_the_watch_is_not_reported_again_by_a_relist() -> None:
    api = FakeApi([([_with_uid("a", "u1")], "5"), ([], "9")])
    received: list[tuple[str | None, str]] = []
    informer = _informer(api, lambda t, o: received.append((t, o["metadata"]["name"])))
    informer._list()
    informer._dispatch("DELETED", _with_uid("a", "u1", "6"))  # as the watch would
    informer._list()
    informer._queue.close()
    informer._work()
    assert received == [(None, "a"), ("DELETED", "a")]


def test_backlog_gauge_counts_events_not_yet_taken() -> None:
    from koordqueue.kube import metrics

    informer = _informer(FakeApi([]), lambda t, o: None)
    gauge = metrics.REGISTRY.get_sample_value
    for name in ("a", "a", "b"):
        informer._dispatch("ADDED", _obj(name, "1"))
    assert len(informer._queue) == 3
    assert gauge("koordqueue_informer_backlog", {"kind": "jobs"}) == 3
    item = informer._queue.take()
    assert item is not None and item[0] == "ns/a"
    assert gauge("koordqueue_informer_backlog", {"kind": "jobs"}) == 1
    informer._queue.done("ns/a")
    informer._queue.close()
    informer._work()
    assert gauge("koordqueue_informer_backlog", {"kind": "jobs"}) == 0


def test_a_listing_handed_to_start_is_not_listed_or_handled_again() -> None:
    api = FakeApi([([_with_uid("b", "u2")], "9")])  # the re-list, after a 410
    received: list[tuple[str | None, str]] = []
    informer = _informer(api, lambda t, o: received.append((t, o["metadata"]["name"])))
    watched_from: list[str] = []
    done = threading.Event()

    def watch_from(version: str) -> str:
        watched_from.append(version)
        if len(watched_from) == 1:
            raise ApiException(status=410, reason="Expired")
        done.set()
        informer._stop.wait(5)
        return version

    informer._watch_from = watch_from  # type: ignore[method-assign]
    informer.start(([_with_uid("a", "u1"), _with_uid("b", "u2")], "5"))
    assert informer.synced.is_set()  # at once: the caller handled that listing
    assert done.wait(10)
    informer.stop()
    assert watched_from[:2] == ["5", "9"]
    assert api.lists == 1  # only the re-list after the 410
    # nothing of the handed-over listing is handled again; a's deletion is noticed
    assert sorted(received, key=str) == [("DELETED", "a"), (None, "b")]


def test_without_workers_the_watch_thread_handles_each_event_in_order_and_survives_errors(
) -> None:
    received: list[tuple[str | None, str, str]] = []

    def handler(event_type: str | None, obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("boom")
        received.append((event_type, obj["metadata"]["name"], threading.current_thread().name))

    informer = Informer(FakeApi([]), JOB, handler, workers=0, backoff=Backoff(0.0))
    stream = [
        {"type": "ADDED", "object": _obj("a", "11")},
        {"type": "ADDED", "object": _obj("bad", "12")},
        {"type": "MODIFIED", "object": _obj("a", "13")},
        {"type": "DELETED", "object": _obj("b", "14")},
    ]
    informer._open_watch = lambda **_: FakeResponse(stream)  # type: ignore[method-assign]
    assert informer._watch_from("10") == "14"
    here = threading.current_thread().name
    # handled before _watch_from returned, by the thread reading the watch: nothing queued
    assert received == [("ADDED", "a", here), ("MODIFIED", "a", here), ("DELETED", "b", here)]
    assert len(informer._queue) == 0


def test_without_workers_start_runs_only_the_watch_thread() -> None:
    informer = Informer(FakeApi([([], "1")]), JOB, lambda t, o: None, workers=0,
                        backoff=Backoff(0.0))
    informer._watch_from = lambda version: (informer._stop.wait(5), version)[1]  # type: ignore[method-assign]
    informer.start()
    assert informer.synced.wait(5)
    assert [t.name for t in informer._threads] == ["kq-jobs-watch"]
    informer.stop(timeout=5)
    assert not any(t.is_alive() for t in informer._threads)
