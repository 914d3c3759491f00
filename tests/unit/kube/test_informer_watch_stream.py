"""The informer's watch reader (WatchStream, issue 11/19: orjson instead of kubernetes' Watch)
yields what kubernetes.watch.Watch yields and raises what it raises, over any cutting of the
stream into chunks; and stop() unblocks a read."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.client.exceptions import ApiException, ForbiddenException
from kubernetes.watch import Watch
from urllib3.exceptions import ReadTimeoutError

from koordqueue.kube.informer import WatchStream

MARK = "\u00a7\u00a7"
"""Replaced by an invalid UTF-8 byte in the stream's bytes (both readers must cope alike)."""


class _Response:
    """A urllib3-like streamed response over these chunks, then `then` raised (or the end)."""

    def __init__(
        self, chunks: list[bytes], status: int = 200, then: BaseException | None = None
    ) -> None:
        self.chunks, self.status, self.reason, self.then = chunks, status, "Gone", then
        self.data = b'{"kind": "Status"}'
        self.headers: dict[str, str] = {}
        self.closed = False

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        yield from self.chunks
        if self.then is not None:
            raise self.then

    def close(self) -> None:
        self.closed = True

    def release_conn(self) -> None:
        pass


def _watch(response: _Response) -> list[dict[str, Any]]:
    """What kubernetes' Watch yields for it (the informer asks for a server-side timeout)."""
    return list(Watch().stream(lambda **kw: response, timeout_seconds=60))  # type: ignore[no-untyped-call]


def _ours(response: _Response) -> list[dict[str, Any]]:
    return list(WatchStream().events(response))


def _outcome(read: Any, response: _Response) -> tuple[Any, ...]:
    events: list[dict[str, Any]] = []
    try:
        for event in read(response):
            events.append(event)
    except ApiException as exc:
        return events, type(exc), exc.status, exc.reason
    return events, None, None, None


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False) | st.text(max_size=8) | st.just(MARK),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_EVENT = st.builds(
    lambda kind, name, version, extra: {
        "type": kind,
        "object": {"metadata": {"name": name, "resourceVersion": str(version)}, "x": extra},
    },
    st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]),
    st.text(max_size=6),
    st.integers(0, 10**6),
    _VALUE,
)
_ERROR = st.sampled_from([410, 500]).map(
    lambda code: {
        "type": "ERROR",
        "object": {"kind": "Status", "code": code, "reason": "Expired", "message": "too old"},
    }
)


@settings(max_examples=120, deadline=None)
@given(
    events=st.lists(_EVENT, max_size=6),
    error=st.none() | _ERROR,
    ascii_only=st.booleans(),
    final_newline=st.booleans(),
    cuts=st.lists(st.integers(0, 10**5), max_size=8),
)
def test_the_reader_yields_and_raises_what_kubernetes_watch_does(
    events: list[dict[str, Any]],
    error: dict[str, Any] | None,
    ascii_only: bool,
    final_newline: bool,
    cuts: list[int],
) -> None:
    lines = [json.dumps(e, ensure_ascii=ascii_only) for e in events]
    if error is not None:
        lines.insert(len(lines) // 2, json.dumps(error))
    data = "\n".join(lines).encode().replace(MARK.encode(), b"\xff")
    if final_newline and data:
        data += b"\n"
    chunks = _cut(data, cuts)
    expected = _outcome(_watch, _Response(chunks))
    assert _outcome(_ours, _Response(chunks)) == expected


def _line(event: dict[str, Any]) -> bytes:
    return json.dumps(event).encode() + b"\n"


def _added(name: str, version: str) -> dict[str, Any]:
    return {"type": "ADDED", "object": {"metadata": {"name": name, "resourceVersion": version}}}


def test_an_error_410_raises_api_exception_gone_after_the_events_before_it() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                        "message": "too old resource version: 1 (99)"}}
    response = _Response([_line(_added("a", "5")), _line(gone), _line(_added("b", "6"))])
    seen: list[str] = []
    with pytest.raises(ApiException) as info:
        for event in WatchStream().events(response):
            seen.append(event["raw_object"]["metadata"]["name"])
    assert seen == ["a"]
    assert info.value.status == 410
    assert info.value.reason == "Expired: too old resource version: 1 (99)"
    assert response.closed


def test_a_line_split_across_chunks_is_reassembled_and_a_partial_last_line_dropped() -> None:
    data = _line(_added("a", "5")) + _line(_added("b", "6"))
    partial = json.dumps(_added("c", "7")).encode()  # no newline: the stream was cut
    chunks = [data[:7], data[7:30], data[30:], partial[:10], partial[10:]]
    events = _ours(_Response(chunks))
    assert [e["object"]["metadata"]["name"] for e in events] == ["a", "b"]
    assert all(e["raw_object"] is e["object"] for e in events)


def test_blank_lines_are_skipped() -> None:
    events = _ours(_Response([b"\n", _line(_added("a", "5")), b"  \r\n"]))
    assert [e["object"]["metadata"]["name"] for e in events] == ["a"]


def test_a_non_2xx_answer_raises_the_generated_clients_exception() -> None:
    with pytest.raises(ApiException) as info:
        _ours(_Response([], status=410))
    assert info.value.status == 410
    with pytest.raises(ForbiddenException):
        _ours(_Response([], status=403))


def test_the_read_timeout_passes_through() -> None:
    timeout = ReadTimeoutError(None, "/", "Read timed out.")  # type: ignore[arg-type]
    response = _Response([_line(_added("a", "5"))], then=timeout)
    stream = WatchStream().events(response)
    assert next(stream)["type"] == "ADDED"
    with pytest.raises(ReadTimeoutError):
        next(stream)
    assert response.closed


class _Socket:
    def __init__(self) -> None:
        self.down = threading.Event()

    def shutdown(self, how: int) -> None:
        self.down.set()


class _Blocking(_Response):
    """One event, then a read that blocks until the socket is shut down."""

    def __init__(self) -> None:
        super().__init__([_line(_added("a", "5"))])
        self.connection = type("Conn", (), {"sock": _Socket()})()

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        yield from self.chunks
        assert self.connection.sock.down.wait(10), "stop() did not shut the socket down"


def test_stop_unblocks_an_idle_read_and_closes_the_response() -> None:
    response = _Blocking()
    watch = WatchStream()
    seen: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: seen.extend(watch.events(response)))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive()  # blocked on the idle stream
    watch.stop()
    reader.join(5)
    assert not reader.is_alive()
    assert [e["type"] for e in seen] == ["ADDED"]
    assert response.closed


def test_stop_ends_the_stream_after_the_current_event() -> None:
    response = _Response([_line(_added("a", "5")) + _line(_added("b", "6"))])
    watch = WatchStream()
    seen = []
    for event in watch.events(response):
        seen.append(event)
        watch.stop()
    assert len(seen) == 1
    assert response.closed
