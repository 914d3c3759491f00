"""KubeApi through libcurl (curl_transport.py) on a real loopback socket: the leader-election
fence is asked once the connection is open and before a byte of the request is sent (issue 12's
rule, kept), on every write including one on a kept-alive connection; a refusal sends nothing;
lost answers are retried only for idempotent verbs (urllib3.Retry(3)'s rule); an error
answer's headers (Retry-After) reach the error."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from kubernetes import client as k8s

from koordqueue.kube.api import JOB, QUEUE_UNIT, ApiError, KubeApi
from koordqueue.kube.curl_transport import UPLOAD_BUFFER, CurlTransport, usable

ANSWER = b'{"metadata": {"name": "x", "resourceVersion": "7"}}'


@dataclass
class Server:
    """A one-thread-per-connection HTTP/1.1 server recording connections and requests.

    `mode` per request, in turn: "ok" answers 200, "drop" closes without answering, "429"
    answers Too Many Requests with Retry-After: 0, "gzip" answers 200 gzip-encoded.
    """

    sock: socket.socket
    connections: int = 0
    received: list[bytes] = field(default_factory=list)
    modes: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, rest = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(rest) < length:
                    rest += conn.recv(65536)
                buf = rest[length:]
                with self.lock:
                    self.received.append(head + b"\r\n\r\n" + rest[:length])
                    mode = self.modes.pop(0) if self.modes else "ok"
                if mode == "drop":
                    return
                if mode == "429":
                    body = b'{"kind": "Status", "message": "too many requests"}'
                    conn.sendall(
                        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\n"
                        b"X-Kubernetes-PF-FlowSchema-UID: fs-1\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                    continue
                if mode == "gzip":
                    body = gzip.compress(ANSWER)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Encoding: gzip\r\n"
                                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                    continue
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))


@pytest.fixture
def server() -> Iterator[Server]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    served = Server(sock)
    threading.Thread(target=served.serve, daemon=True).start()
    yield served
    sock.close()


def kube_api(server: Server, fence: object = None, timeout: float = 5.0) -> KubeApi:
    config = k8s.Configuration()
    config.host = server.url
    config.api_key = {"authorization": "secret"}
    config.api_key_prefix = {"authorization": "Bearer"}
    return KubeApi(k8s.ApiClient(config), timeout=timeout, fence=fence)  # type: ignore[arg-type]


def test_a_direct_connection_goes_through_libcurl_and_a_proxied_one_does_not(
    server: Server,
) -> None:
    api = kube_api(server)
    api.get(JOB, "j", "ns")
    assert isinstance(api._transport, CurlTransport)
    proxied = k8s.Configuration()
    proxied.host, proxied.proxy = server.url, "http://proxy.invalid:3128"
    assert not usable(k8s.ApiClient(proxied))


def test_the_fence_is_asked_with_the_connection_open_and_nothing_sent(server: Server) -> None:
    seen: list[tuple[int, int]] = []

    def fence() -> bool:
        # the server's accept may lag the client's connect: wait for it (were the connection
        # not open yet, libcurl waiting in this call, it would never come)
        for _ in range(200):
            if server.connections or not seen:
                break
            time.sleep(0.01)
        seen.append((server.connections, len(server.received)))
        return True

    api = kube_api(server, fence)
    answer = api.merge_patch(QUEUE_UNIT, "u1", {"status": {"phase": "Dequeued"}}, "ns", "status")
    assert answer["metadata"]["resourceVersion"] == "7"
    # the early look (no connection yet), then libcurl's last one: connected, nothing received
    assert seen == [(0, 0), (1, 0)]
    [request] = server.received
    assert request.startswith(b"PATCH /apis/") and b"authorization: Bearer secret" in request
    assert request.endswith(b'{"status":{"phase":"Dequeued"}}')


def test_a_refusal_at_the_last_look_sends_nothing_and_reads_still_go_out(server: Server) -> None:
    answers = [True, True, True, False]  # early, last; early, last
    api = kube_api(server, lambda: answers.pop(0))
    api.merge_patch(QUEUE_UNIT, "u1", {"status": {"phase": "Dequeued"}}, "ns", "status")
    with pytest.raises(ApiError) as raised:
        api.merge_patch(QUEUE_UNIT, "u2", {"status": {"phase": "Dequeued"}}, "ns", "status")
    assert raised.value.fenced and answers == []
    assert api.get(JOB, "j", "ns") is not None  # reads are never fenced
    assert [r.split(b" ")[0] for r in server.received] == [b"PATCH", b"GET"]
    assert b"/u2/" not in b"".join(server.received)


def test_every_write_on_a_kept_alive_connection_is_asked_again(server: Server) -> None:
    asked: list[int] = []
    api = kube_api(server, lambda: asked.append(len(server.received)) is None)
    for name in ("a", "b", "c"):
        api.create(JOB, {"metadata": {"name": name}}, "ns")
    assert server.connections == 1 and len(server.received) == 3
    assert asked == [0, 0, 1, 1, 2, 2]  # early and last look before each write's bytes


def test_a_body_larger_than_the_upload_buffer_arrives_whole(server: Server) -> None:
    api = kube_api(server)
    label = "v" * (5 * UPLOAD_BUFFER)  # a pod template's worth of annotations, and more
    api.create(JOB, {"metadata": {"name": "big", "annotations": {"a": label}}}, "ns")
    request = server.received[0]
    head, _, body = request.partition(b"\r\n\r\n")
    assert body.count(b"v") == 5 * UPLOAD_BUFFER and body.endswith(b"}")
    assert b"content-length: %d" % len(body) in head.lower()


def test_a_lost_answer_on_a_new_connection_is_not_retried_for_a_create(server: Server) -> None:
    api = kube_api(server)
    server.modes[:] = ["drop"]
    with pytest.raises(ApiError) as raised:
        api.create(JOB, {"metadata": {"name": "once"}}, "ns")
    assert raised.value.retryable and raised.value.status == 0
    assert len(server.received) == 1  # the caller decides (AdmitUnit reads back first)


def test_a_lost_answer_is_retried_for_a_get(server: Server) -> None:
    api = kube_api(server)
    server.modes[:] = ["drop", "drop"]
    assert api.get(JOB, "j", "ns") is not None
    assert len(server.received) == 3 and server.connections == 3


def test_an_error_answers_headers_reach_the_error(server: Server) -> None:
    api = kube_api(server)
    server.modes[:] = ["429"] * 11  # past KubeApi's ten Retry-After retries
    with pytest.raises(ApiError) as raised:
        api.create(JOB, {"metadata": {"name": "j"}}, "ns")
    error = raised.value
    assert error.status == 429 and error.retry_after == 0
    assert "fs-1" in str(error)  # APF's flow schema, from a header Go spells its own way
    assert len(server.received) == 11


def test_an_unreachable_server_is_a_retryable_error_naming_curls_reason() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there
    config = k8s.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    api = KubeApi(k8s.ApiClient(config), timeout=2.0)
    with pytest.raises(ApiError) as raised:
        api.get(JOB, "j", "ns")
    assert raised.value.retryable and "curl error 7" in str(raised.value)


class FakeMulti:
    """A multi handle whose transfers end after `rounds` performs; `waits` libcurl's
    deadlines (ms, -1: none) in turn."""

    def __init__(self, waits: list[int]) -> None:
        self.waits = waits
        self.selects: list[float] = []
        self.performs = 0

    def perform(self) -> tuple[int, int]:
        self.performs += 1
        return 0, int(self.performs <= len(self.waits))

    def info_read(self) -> tuple[int, list[object], list[object]]:
        return 0, [], []

    def timeout(self) -> int:
        return self.waits[self.performs - 1]

    def select(self, seconds: float) -> int:
        self.selects.append(seconds)
        return 0


def test_a_batch_waits_as_long_as_libcurl_asks_never_a_blind_second() -> None:
    """select() with no socket to watch waits out its whole timeout: a 1 s one held a batch
    that long. The wait is libcurl's deadline, at most 0.1 s without one, none when due."""
    from koordqueue.kube.curl_transport import MAX_WAIT, _Multi

    runner = _Multi.__new__(_Multi)
    runner.multi = FakeMulti([5, -1, 0, 4000])  # type: ignore[assignment]
    assert runner.run() == {}
    assert runner.multi.selects == [0.005, MAX_WAIT, 1.0]  # type: ignore[attr-defined]
    assert MAX_WAIT <= 0.1


def test_gzip_is_asked_for_and_decoded_only_where_a_request_asks(server: Server) -> None:
    """The next request on the same handle (kept alive) asks for no encoding again."""
    api = kube_api(server)
    server.modes[:] = ["gzip", "ok"]
    assert api.request("GET", "/apis/x", gzip=True)["metadata"]["name"] == "x"
    assert api.request("GET", "/apis/x")["metadata"]["name"] == "x"
    asked = [r.split(b"\r\n\r\n")[0].lower() for r in server.received]
    assert b"accept-encoding: gzip" in asked[0]
    assert b"accept-encoding" not in asked[1]
    assert server.connections == 1
