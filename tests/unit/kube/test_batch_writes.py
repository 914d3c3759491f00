"""The scheduler's batch of POSTs (kube/scheduler/batch_writes.py over curl_transport.send_all)
on a real loopback socket: every request of a batch in flight together, each answer in order;
the fence asked before the batch and per request on its connection before its bytes leave; a
Retry-After answer sent again through KubeApi.request; a lost answer to a POST not sent again;
a client libcurl cannot serve (a test double) gets the same answers one at a time."""

from __future__ import annotations

import threading
from typing import Any

from koordqueue.kube.api import ApiError
from koordqueue.kube.scheduler.batch_writes import BatchWriter
from tests.unit.kube.test_curl_transport import Server, kube_api, server  # noqa: F401

PATHS = [f"/api/v1/namespaces/ns/pods/p{i}/binding" for i in range(5)]


def body(i: int) -> dict[str, Any]:
    return {"kind": "Binding", "metadata": {"name": f"p{i}"}, "target": {"name": "n1"}}


def test_a_batch_goes_out_together_and_answers_in_order(server: Server) -> None:  # noqa: F811
    writer = BatchWriter(kube_api(server), http2=False)
    assert writer.transport is not None
    answers = writer.post_all([(p, body(i)) for i, p in enumerate(PATHS)])
    assert [a["metadata"]["resourceVersion"] for a in answers  # type: ignore[index]
            ] == ["7"] * 5
    assert len(server.received) == 5
    heads = sorted(r.split(b"\r\n", 1)[0] for r in server.received)
    assert heads == sorted(b"POST %s HTTP/1.1" % p.encode() for p in PATHS)
    assert all(b"authorization: Bearer secret" in r for r in server.received)
    assert all(b"content-type: application/json" in r.lower() for r in server.received)
    assert server.connections == 5  # HTTP/1.1: one connection per request in flight
    writer.post_all([(p, body(i)) for i, p in enumerate(PATHS)])
    assert server.connections == 5  # and kept alive for the next batch of this thread


def test_the_fence_is_asked_before_the_batch_and_per_request(server: Server) -> None:  # noqa: F811
    asked: list[str] = []
    writer = BatchWriter(kube_api(server, lambda: asked.append("x") is None), http2=False)
    writer.post_all([(p, body(i)) for i, p in enumerate(PATHS[:3])])
    assert len(asked) == 1 + 3 and len(server.received) == 3


def test_a_shut_fence_sends_nothing(server: Server) -> None:  # noqa: F811
    writer = BatchWriter(kube_api(server, lambda: False), http2=False)
    answers = writer.post_all([(p, body(i)) for i, p in enumerate(PATHS[:2])])
    assert all(isinstance(a, ApiError) and a.fenced for a in answers)
    assert server.received == []


def test_a_refusal_on_the_connection_sends_nothing_of_that_request(
    server: Server,  # noqa: F811
) -> None:
    lock = threading.Lock()
    looks = [True, True, False]  # the early look, then one per request's connection

    def fence() -> bool:
        with lock:
            return looks.pop(0)

    writer = BatchWriter(kube_api(server, fence), http2=False)
    answers = writer.post_all([(p, body(i)) for i, p in enumerate(PATHS[:2])])
    assert sorted(isinstance(a, ApiError) and a.fenced for a in answers) == [False, True]
    assert len(server.received) == 1


def test_a_retry_after_answer_is_sent_again_by_request(server: Server) -> None:  # noqa: F811
    server.modes[:] = ["429"]
    writer = BatchWriter(kube_api(server), http2=False)
    answers = writer.post_all([(p, body(i)) for i, p in enumerate(PATHS[:2])])
    assert all(not isinstance(a, ApiError) for a in answers)
    assert len(server.received) == 3  # two, and the refused one once more


def test_a_lost_answer_to_a_post_is_a_retryable_error_not_a_resend(
    server: Server,  # noqa: F811
) -> None:
    server.modes[:] = ["drop"]
    writer = BatchWriter(kube_api(server), http2=False)
    answers = writer.post_all([(p, body(i)) for i, p in enumerate(PATHS[:2])])
    errors = [a for a in answers if isinstance(a, ApiError)]
    assert len(errors) == 1 and errors[0].status == 0 and errors[0].retryable
    assert len(server.received) == 2


def test_an_error_answer_is_the_api_error_request_would_raise(server: Server) -> None:  # noqa: F811
    server.modes[:] = ["429"] * 30  # past KubeApi's own retries of each one sent again
    writer = BatchWriter(kube_api(server), http2=False)
    answers = writer.post_all([(PATHS[0], body(0)), (PATHS[1], body(1))])
    assert all(isinstance(a, ApiError) and a.status == 429 and a.retry_after == 0
               for a in answers)
    assert len(server.received) == 2 + 2 * 11  # the batch, then request's own attempts


def test_a_client_libcurl_cannot_serve_gets_one_request_at_a_time() -> None:
    calls: list[tuple[str, str]] = []

    class Fake:
        def request(self, method: str, path: str, body: object = None) -> dict[str, Any]:
            calls.append((method, path))
            if path.endswith("p1/binding"):
                raise ApiError(409, "Conflict", "bound", method, path)
            return {"ok": path}

    writer = BatchWriter(Fake())
    assert writer.transport is None
    answers = writer.post_all([(p, body(i)) for i, p in enumerate(PATHS[:3])])
    assert answers[0] == {"ok": PATHS[0]} and answers[2] == {"ok": PATHS[2]}
    assert isinstance(answers[1], ApiError) and answers[1].status == 409
    assert calls == [("POST", p) for p in PATHS[:3]]


def test_http2_is_the_default_the_environment_turns_it_off_and_plain_http_still_answers(
    server: Server, monkeypatch: Any,  # noqa: F811
) -> None:
    monkeypatch.delenv("KOORDQUEUE_BATCH_HTTP2", raising=False)
    writer = BatchWriter(kube_api(server))
    assert writer.http2
    # CURL_HTTP_VERSION_2TLS: HTTP/2 over TLS only; a cleartext server is spoken HTTP/1.1
    answers = writer.post_all([(p, body(i)) for i, p in enumerate(PATHS[:3])])
    assert [a["metadata"]["name"] for a in answers] == ["x"] * 3  # type: ignore[index]
    monkeypatch.setenv("KOORDQUEUE_BATCH_HTTP2", "0")
    assert not BatchWriter(kube_api(server)).http2
    monkeypatch.setenv("KOORDQUEUE_BATCH_HTTP2", "1")
    assert BatchWriter(kube_api(server)).http2
