"""Issue 12, HA, urllib3's transport (transport.py; kept for proxied connections and a TLS
server name, which libcurl's transport leaves to it; its own tests: test_curl_transport.py):
the leader-election fence is asked on the pooled connection itself, after it is
open (TCP, TLS) and the request is serialised, immediately before its one `sendall`; so a
pause anywhere before that (a handshake, a wait for a pooled connection, serialising) refuses
the write on waking instead of letting an already-checked write out. A fake socket records
the order of connect, header serialisation, fence and send; nothing touches the network."""

from __future__ import annotations

import io
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3.connection
from kubernetes import client as k8s
from urllib3.exceptions import NewConnectionError

from koordqueue.kube.api import EVENT, FENCED, JOB, ApiError, KubeApi

ANSWER = b'{"metadata": {"name": "x", "resourceVersion": "7"}}'
RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
)
Event = tuple[Any, ...]


class Wire:
    """The fake network: what happened, in order; hooks run inside connect() or sendall()."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.on_connect: Callable[[int], None] = lambda attempt: None
        self.on_send: Callable[[int], None] = lambda attempt: None
        self.connects = 0

    def kinds(self) -> list[str]:
        return [event[0] for event in self.events]

    def sent(self) -> list[bytes]:
        return [event[1] for event in self.events if event[0] == "send"]


class FakeSocket:
    """Answers every request with RESPONSE; fileno() is a quiet socketpair end, so urllib3's
    dropped-connection probe sees a live keep-alive connection."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.pair = socket.socketpair()
        self.sends = 0

    def sendall(self, data: bytes) -> None:
        self.sends += 1
        self.wire.on_send(self.wire.connects)
        self.wire.events.append(("send", bytes(data)))

    def makefile(self, *args: Any, **kwargs: Any) -> io.BytesIO:
        return io.BytesIO(RESPONSE)

    def fileno(self) -> int:
        return self.pair[0].fileno()

    def settimeout(self, timeout: float | None) -> None:
        pass

    def setsockopt(self, *args: Any) -> None:
        pass

    def close(self) -> None:
        for end in self.pair:
            end.close()


class Fence:
    """Answers from `answers` in turn (then `open`), logging each question on the wire."""

    def __init__(self, wire: Wire, answers: tuple[bool, ...] = ()) -> None:
        self.wire = wire
        self.answers = list(answers)
        self.open = True
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        answer = self.answers.pop(0) if self.answers else self.open
        self.wire.events.append(("fence", answer))
        return answer


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Iterator[Wire]:
    monkeypatch.setattr("koordqueue.kube.api.usable", lambda client: False)  # urllib3's path
    wire = Wire()
    sockets: list[FakeSocket] = []

    def connect(self: urllib3.connection.HTTPConnection) -> None:
        wire.connects += 1
        wire.events.append(("connect",))
        wire.on_connect(wire.connects)
        sock = FakeSocket(wire)
        sockets.append(sock)
        self.sock = sock
        self.is_verified = True  # (the HTTPS pool warns about unverified connections)

    putheader = urllib3.connection.HTTPConnection.putheader

    def logged_putheader(self: urllib3.connection.HTTPConnection, header: str,
                         *values: str) -> None:
        wire.events.append(("header", header))
        putheader(self, header, *values)

    monkeypatch.setattr(urllib3.connection.HTTPConnection, "connect", connect)
    monkeypatch.setattr(urllib3.connection.HTTPSConnection, "connect", connect)
    monkeypatch.setattr(urllib3.connection.HTTPConnection, "putheader", logged_putheader)
    yield wire
    for sock in sockets:
        sock.close()


def kube_api(fence: Fence, scheme: str = "https") -> KubeApi:
    config = k8s.Configuration()
    config.host = f"{scheme}://kube.invalid:6443"
    config.verify_ssl = False
    return KubeApi(k8s.ApiClient(config), timeout=5.0, fence=fence)


def create_event(api: KubeApi) -> dict[str, Any]:
    return api.create(EVENT, {"metadata": {"name": "u.17f"}, "reason": "Admitted"}, "ns")


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_the_fence_is_asked_after_connect_and_serialising_right_before_the_one_send(
    wire: Wire, scheme: str
) -> None:
    fence = Fence(wire)
    assert create_event(kube_api(fence, scheme))["metadata"]["resourceVersion"] == "7"
    kinds = wire.kinds()
    assert kinds[-2:] == ["fence", "send"]  # nothing between the last look and the bytes
    assert "connect" in kinds[: -2] and "header" in kinds[: -2]
    [data] = wire.sent()  # request line, headers and body leave in one sendall
    assert data.startswith(b"POST /api/v1/namespaces/ns/events?fieldManager=koordqueue HTTP/1.1")
    assert data.endswith(b'{"metadata":{"name":"u.17f"},"reason":"Admitted"}')


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_fence_shut_during_connect_refuses_the_write_with_nothing_sent(
    wire: Wire, scheme: str
) -> None:
    fence = Fence(wire)

    def paused_in_the_handshake(attempt: int) -> None:
        fence.open = False  # the process was stopped past its renew deadline meanwhile

    wire.on_connect = paused_in_the_handshake
    with pytest.raises(ApiError) as raised:
        create_event(kube_api(fence, scheme))
    assert raised.value.fenced and raised.value.status == FENCED
    assert raised.value.reason == "NotLeader" and not raised.value.retryable
    assert wire.sent() == []


def test_a_late_refusal_is_the_fenced_error_and_urllib3_does_not_retry_it(wire: Wire) -> None:
    fence = Fence(wire, answers=(True, False))  # shut while waiting for a pooled connection
    with pytest.raises(ApiError) as raised:
        kube_api(fence).merge_patch(JOB, "j", {"spec": {"suspend": False}}, "ns")
    assert raised.value.fenced and not raised.value.retryable
    assert wire.sent() == []
    assert fence.asked == 2 and wire.connects == 1  # not taken for a broken connection


def test_a_write_on_an_open_keep_alive_connection_is_asked_again(wire: Wire) -> None:
    fence = Fence(wire, answers=(True, True, True, False))
    api = kube_api(fence)
    create_event(api)
    with pytest.raises(ApiError) as raised:
        create_event(api)
    assert raised.value.fenced
    assert wire.connects == 1 and len(wire.sent()) == 1  # the second reused it, sent nothing
    assert fence.asked == 4


def test_gets_go_out_while_the_fence_is_shut_even_after_a_late_refusal(wire: Wire) -> None:
    fence = Fence(wire)
    wire.on_connect = lambda attempt: setattr(fence, "open", False)
    api = kube_api(fence)
    with pytest.raises(ApiError) as raised:
        create_event(api)
    assert raised.value.fenced and wire.sent() == []
    asked = fence.asked
    assert api.get(JOB, "j", "ns") == {"metadata": {"name": "x", "resourceVersion": "7"}}
    [data] = wire.sent()
    assert data.startswith(b"GET /apis/batch/v1/namespaces/ns/jobs/j HTTP/1.1")
    assert fence.asked == asked  # reads are never fenced: a standby keeps its caches current


@pytest.mark.parametrize(
    ("method", "fails_at", "asked"),
    # early + attempt 2 (attempt 1 failed before its look), or early + attempts 1 and 2
    # (urllib3 retries a failed send only for idempotent methods, DELETE here)
    [("POST", "connect", 2), ("DELETE", "send", 3)],
)
def test_each_urllib3_retry_asks_the_fence_again(
    wire: Wire, method: str, fails_at: str, asked: int
) -> None:
    fence = Fence(wire)

    def fail_first(attempt: int) -> None:
        if attempt == 1:
            fence.open = False  # the fence shuts while the first attempt fails
            if fails_at == "connect":
                raise NewConnectionError(None, "connection refused")  # type: ignore[arg-type]
            raise OSError("connection reset")

    if fails_at == "connect":
        wire.on_connect = fail_first
    else:
        wire.on_send = fail_first
    api = kube_api(fence)
    with pytest.raises(ApiError) as raised:
        if method == "POST":
            create_event(api)
        else:
            api.delete(JOB, "j", "ns")
    assert raised.value.fenced
    assert wire.connects == 2  # urllib3 retried on a new connection ...
    assert wire.events[-1] == ("fence", False)  # ... which asked again and sent nothing
    assert fence.asked == asked and wire.sent() == []


class GeneratedClient:
    """A test double with no urllib3 pool (KubeApi's `generated` branch); serialising flips
    `shut_while_serialising` into the fence, as a pause there would."""

    def __init__(self, fence: Fence) -> None:
        self.fence = fence
        self.called: list[Any] = []

    def param_serialize(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        self.fence.open = False
        return ("POST", "/url", {}, None, None)

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        self.called.append(args)
        raise AssertionError("the request went out")


def test_a_test_double_client_is_asked_again_after_serialising(wire: Wire) -> None:
    fence = Fence(wire)
    client = GeneratedClient(fence)
    api = KubeApi(client, fence=fence)  # type: ignore[arg-type]
    with pytest.raises(ApiError) as raised:
        create_event(api)
    assert raised.value.fenced and client.called == []
    assert fence.asked == 2
