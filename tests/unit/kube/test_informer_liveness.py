"""The informer's watch liveness: randomised server-side timeouts, bookmarks, and a client-side
deadline that gives up a silent watch and resumes it from the last version it delivered.

The first tests use a fake stream; the last ones run the informer's real HTTP path (the
kubernetes client, urllib3) against a small HTTP server on loopback that answers a watch and
then goes silent, so the socket read timeout is shown to fire mid-stream.
"""

from __future__ import annotations

import json
import random
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client as k8s
from urllib3.exceptions import ReadTimeoutError

from koordqueue.domain.backoff import Backoff
from koordqueue.kube import metrics
from koordqueue.kube.api import JOB, KubeApi
from koordqueue.kube.informer import (
    MIN_WATCH_TIMEOUT,
    MIN_WATCH_TIMEOUT_ENV,
    WATCH_END_GRACE,
    WATCH_IDLE_TIMEOUT,
    WATCH_IDLE_TIMEOUT_ENV,
    Informer,
)


def _obj(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


def _bookmark(version: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": version}}}


class _Rng(random.Random):
    """random() returns the given values in turn."""

    def __init__(self, values: list[float]) -> None:
        super().__init__(0)
        self._values = iter(values)

    def random(self) -> float:
        return next(self._values)


# --- timeouts -----------------------------------------------------------------------------
def test_each_watch_timeout_is_random_between_the_minimum_and_twice_it() -> None:
    informer = Informer(None, JOB, lambda t, o: None, rng=_Rng([0.0, 0.5, 0.9999]))  # type: ignore[arg-type]
    assert informer.watch_timeout == MIN_WATCH_TIMEOUT == 300
    assert [informer.next_watch_timeout() for _ in range(3)] == [300, 450, 599]


def test_watch_timeouts_spread_out_over_many_watches() -> None:
    informer = Informer(None, JOB, lambda t, o: None, watch_timeout=60, rng=random.Random(7))  # type: ignore[arg-type]
    drawn = [informer.next_watch_timeout() for _ in range(200)]
    assert min(drawn) >= 60 and max(drawn) < 120
    assert len(set(drawn)) > 30  # not all reconnecting in step


def test_the_read_timeout_is_the_idle_deadline_or_the_server_timeout_plus_grace() -> None:
    informer = Informer(None, JOB, lambda t, o: None)  # type: ignore[arg-type]
    assert informer.idle_timeout == WATCH_IDLE_TIMEOUT == 70.0
    assert informer.read_timeout(450) == 70.0  # the usual case: the liveness deadline
    assert informer.read_timeout(1) == 1 + WATCH_END_GRACE  # a watch the server should end


def test_defaults_come_from_the_environment_and_arguments_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(WATCH_IDLE_TIMEOUT_ENV, "4.5")
    monkeypatch.setenv(MIN_WATCH_TIMEOUT_ENV, "20")
    from_env = Informer(None, JOB, lambda t, o: None)  # type: ignore[arg-type]
    assert (from_env.idle_timeout, from_env.watch_timeout) == (4.5, 20.0)
    given = Informer(None, JOB, lambda t, o: None, idle_timeout=9, watch_timeout=30)  # type: ignore[arg-type]
    assert (given.idle_timeout, given.watch_timeout) == (9, 30)
    monkeypatch.setenv(WATCH_IDLE_TIMEOUT_ENV, "soon")
    monkeypatch.setenv(MIN_WATCH_TIMEOUT_ENV, "-1")
    invalid = Informer(None, JOB, lambda t, o: None)  # type: ignore[arg-type]
    assert (invalid.idle_timeout, invalid.watch_timeout) == (WATCH_IDLE_TIMEOUT, MIN_WATCH_TIMEOUT)


class _FakeClient:
    """param_serialize / call_api of kubernetes' ApiClient, recording what the watch asks."""

    def __init__(self) -> None:
        self.query: list[tuple[str, str]] = []
        self.request_timeout: Any = None

    def param_serialize(self, method: str, path: str, **kw: Any) -> tuple[Any, ...]:
        self.query = list(kw["query_params"])
        return (method, path, {}, None, None)

    def call_api(self, *args: Any, _request_timeout: Any = None) -> Any:
        self.request_timeout = _request_timeout

        class Answer:
            response = _Stream([_bookmark("18")], None)

        return Answer()


class _FakeApi:
    def __init__(self) -> None:
        self.api_client = _FakeClient()
        self.lists = 0

    def list_with_version(self, kind: Any) -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        return [], "1"


def test_a_watch_asks_for_bookmarks_and_a_timeout_and_reads_with_the_idle_deadline() -> None:
    api = _FakeApi()
    informer = Informer(api, JOB, lambda t, o: None, idle_timeout=42, rng=_Rng([0.11]))  # type: ignore[arg-type]
    assert informer._watch_from("17") == "18"
    assert api.api_client.query == [
        ("watch", "1"), ("resourceVersion", "17"), ("timeoutSeconds", "333"),
        ("allowWatchBookmarks", "true"),
    ]
    assert api.api_client.request_timeout == (10, 42)


# --- the watch loop with a fake stream ----------------------------------------------------
class _Stream:
    """A urllib3-like streamed response: these events, then `then` raised (or the end)."""

    def __init__(self, events: list[dict[str, Any]], then: BaseException | None) -> None:
        self.status = 200
        self.events = events
        self.then = then

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        for event in self.events:
            yield json.dumps(event).encode() + b"\n"
        if self.then is not None:
            raise self.then

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def _run_watches(
    informer: Informer, streams: list[_Stream], until: int
) -> list[dict[str, Any]]:
    """Run the watch loop over `streams` (one per watch) until `until` watches were opened."""
    opened: list[dict[str, Any]] = []
    done = threading.Event()

    def open_watch(**kwargs: Any) -> _Stream:
        opened.append(kwargs)
        if len(opened) >= until:
            done.set()
            informer._stop.wait(5)
            return _Stream([], None)
        return streams[len(opened) - 1]

    informer._open_watch = open_watch  # type: ignore[method-assign]
    informer._first_version = "10"
    thread = threading.Thread(target=informer._run, daemon=True)
    thread.start()
    assert done.wait(5), f"only {len(opened)} watches were opened"
    informer._stop.set()
    thread.join(10)
    return opened


def _idle_restarts() -> float:
    value = metrics.REGISTRY.get_sample_value(
        "koordqueue_watch_restarts_total", {"kind": JOB.plural, "reason": "idle"}
    )
    return value or 0.0


def test_a_silent_watch_is_resumed_at_once_from_the_last_version_it_delivered() -> None:
    api = _FakeApi()
    received: list[str] = []
    # a back-off long enough to time the test out: an idle restart must not wait for it
    informer = Informer(api, JOB, lambda t, o: received.append(o["metadata"]["name"]),  # type: ignore[arg-type]
                        workers=1, backoff=Backoff(60.0))
    silent = ReadTimeoutError(None, None, "Read timed out.")  # type: ignore[arg-type]
    before = _idle_restarts()
    opened = _run_watches(informer, [
        _Stream([{"type": "ADDED", "object": _obj("a", "11")}, _bookmark("15")], silent),
        _Stream([{"type": "ADDED", "object": _obj("b", "16")}], silent),
    ], until=3)
    assert [w["resource_version"] for w in opened] == ["10", "15", "16"]
    assert api.lists == 0, "a silent watch is resumed, not re-listed"
    assert _idle_restarts() - before == 2
    informer._queue.close()
    informer._work()
    assert received == ["a", "b"]


def test_a_watch_broken_midway_resumes_from_its_last_version_after_the_backoff() -> None:
    api = _FakeApi()
    informer = Informer(api, JOB, lambda t, o: None, workers=1, backoff=Backoff(0.01))  # type: ignore[arg-type]
    opened = _run_watches(informer, [
        _Stream([{"type": "MODIFIED", "object": _obj("a", "12")}], ConnectionResetError("gone")),
    ], until=2)
    assert [w["resource_version"] for w in opened] == ["10", "12"]
    assert api.lists == 0


def test_a_410_after_a_silent_watch_still_relists() -> None:
    api = _FakeApi()
    informer = Informer(api, JOB, lambda t, o: None, workers=1, backoff=Backoff(0.01))  # type: ignore[arg-type]
    silent = ReadTimeoutError(None, None, "Read timed out.")  # type: ignore[arg-type]
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                        "message": "too old resource version"}}
    opened = _run_watches(informer, [_Stream([_bookmark("15")], silent), _Stream([gone], None)],
                          until=3)
    assert [w["resource_version"] for w in opened] == ["10", "15", "1"]  # "1": the re-list's
    assert api.lists == 1


# --- the real HTTP path against a loopback server -----------------------------------------
Script = Callable[[socket.socket, dict[str, list[str]]], None]


class _WatchServer:
    """Plain-HTTP loopback server; connection i (a watch) is answered by scripts[i]."""

    def __init__(self, scripts: list[Script]) -> None:
        self.queries: list[dict[str, list[str]]] = []
        self.release = threading.Event()
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = self.request.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                target = head.split(b" ", 2)[1].decode()
                query = parse_qs(urlsplit(target).query)
                with lock:
                    index = len(outer.queries)
                    outer.queries.append(query)
                script = scripts[min(index, len(scripts) - 1)]
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                     b"Transfer-Encoding: chunked\r\n\r\n")
                script(self.request, query)

        lock = threading.Lock()
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _WatchServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _send(conn: socket.socket, event: dict[str, Any]) -> None:
    line = json.dumps(event).encode() + b"\n"
    conn.sendall(f"{len(line):x}\r\n".encode() + line + b"\r\n")


def _end(conn: socket.socket) -> None:
    conn.sendall(b"0\r\n\r\n")


def _informer_on(server: _WatchServer, handler: Any, idle: float) -> Informer:
    config = k8s.Configuration(host=f"http://127.0.0.1:{server.port}")
    api = KubeApi(k8s.ApiClient(config))
    return Informer(api, JOB, handler, workers=1, idle_timeout=idle, backoff=Backoff(60.0))


def test_a_real_watch_that_goes_silent_midstream_is_given_up_and_resumed() -> None:
    """Headers, one event, then silence with the connection open: after the idle deadline
    the informer opens a new watch from that event's version and gets what follows."""
    received: list[tuple[str | None, str]] = []
    got_b = threading.Event()

    def handler(event_type: str | None, obj: dict[str, Any]) -> None:
        received.append((event_type, obj["metadata"]["name"]))
        if obj["metadata"]["name"] == "b":
            got_b.set()

    def silent_after_one(conn: socket.socket, query: dict[str, list[str]]) -> None:
        _send(conn, {"type": "ADDED", "object": _obj("a", "11")})
        server.release.wait(30)  # open and silent: a dead connection, as the client sees it

    def delivers(conn: socket.socket, query: dict[str, list[str]]) -> None:
        _send(conn, {"type": "ADDED", "object": _obj("b", "12")})
        server.release.wait(30)

    with _WatchServer([silent_after_one, delivers]) as server:
        informer = _informer_on(server, handler, idle=0.5)
        started = time.monotonic()
        informer.start(([], "10"))
        try:
            assert got_b.wait(10), f"never resumed; saw {received}"
            waited = time.monotonic() - started
        finally:
            informer.stop(timeout=2)
    assert received == [("ADDED", "a"), ("ADDED", "b")]
    assert [q["resourceVersion"] for q in server.queries[:2]] == [["10"], ["11"]]
    assert all(q["allowWatchBookmarks"] == ["true"] for q in server.queries)
    assert all(300 <= int(q["timeoutSeconds"][0]) < 600 for q in server.queries)
    assert 0.4 < waited < 5, waited


def test_a_real_watch_kept_alive_by_bookmarks_is_not_given_up() -> None:
    """Bookmarks more often than the idle deadline keep one watch open however long nothing
    else happens; its version follows them, and the next watch starts from the last one."""
    def bookmarks(conn: socket.socket, query: dict[str, list[str]]) -> None:
        if len(server.queries) > 1:  # the watch after the first: stay open until the end
            server.release.wait(30)
            return
        for i in range(10):  # 10 x 0.2 s = 2 s, twice the 1 s deadline; a loaded box
            time.sleep(0.2)  # must stall a send five intervals long to time the watch out
            _send(conn, _bookmark(str(20 + i)))
        _end(conn)  # the server ends the watch (its timeoutSeconds)

    with _WatchServer([bookmarks]) as server:
        informer = _informer_on(server, lambda t, o: None, idle=1.0)
        before = _idle_restarts()
        informer.start(([], "10"))
        try:
            deadline = time.monotonic() + 10
            while len(server.queries) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            informer.stop(timeout=2)
    assert len(server.queries) == 2, server.queries
    assert server.queries[1]["resourceVersion"] == ["29"]  # from the last bookmark
    assert _idle_restarts() == before
