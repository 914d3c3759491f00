"""A throttled or failing answer's `Retry-After` is waited out before the retry (issue 30).

client-go's rest client (rest/with_retry.go) retries a request whose answer, a 429 or 5xx,
carries the header, after max(back-off, Retry-After), up to 10 times, and quotes APF's
`X-Kubernetes-PF-FlowSchema-UID` in the retry's reason. Before, KubeApi left that to urllib3
(GET, PUT and DELETE only, then MaxRetryError without the status), and every retry loop here
ignored the header: `with_retries` asked again after 0.1 s, the informer and the start-ups
after 0.5 s, adding to the load the server was shedding. Each test below but the two about
what is not retried fails with the header ignored (checked by reverting api.py's `wait_hint`
to 0, KubeApi.request to one attempt and urllib3's retries to its default: the waits come out
0.1 / 0.5 s, the request raises, and the message lacks the flow schema).

The answers come from a real HTTP server on loopback, through KubeApi's own transport.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from koordqueue.domain.backoff import Backoff
from koordqueue.kube.api import (
    FLOW_SCHEMA_UID,
    JOB,
    MAX_RETRIES,
    PRIORITY_LEVEL_UID,
    RETRY_AFTER,
    RETRY_AFTER_CAP,
    ApiError,
    KubeApi,
    retry_after,
    retry_transient,
    with_retries,
)
from koordqueue.kube.informer import Informer

FLOW = "5b8e-flow"
LEVEL = "9c1d-level"


class _Handler(BaseHTTPRequestHandler):
    """Answers the first `failures` requests `code` with the given headers, then 200."""

    answers: list[tuple[int, dict[str, str]]]
    seen: list[str]

    def do_GET(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.seen.append(self.path)
        code, headers = self.answers.pop(0) if self.answers else (200, {})
        body = (
            {"metadata": {"name": "x", "resourceVersion": "7"}} if code == 200 else
            {"kind": "Status", "code": code, "message": "too many requests, please try again"}
        )
        data = json.dumps(body).encode()
        self.send_response(code)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_PATCH = do_GET  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


class Served:
    def __init__(self, timeout: float = 30.0) -> None:
        self.answers: list[tuple[int, dict[str, str]]] = []
        self.seen: list[str] = []
        self.waits: list[float] = []
        handler = type("Handler", (_Handler,), {"answers": self.answers, "seen": self.seen})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True).start()
        config = k8s.Configuration()
        config.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.api = KubeApi(k8s.ApiClient(config), timeout=timeout, sleep=self.waits.append)

    def answer(self, code: int = 429, **headers: str) -> None:
        self.answers.append((code, headers))


@pytest.fixture
def served() -> Iterator[Served]:
    s = Served()
    try:
        yield s
    finally:
        s.server.shutdown()
        s.server.server_close()


APF = {RETRY_AFTER: "3", FLOW_SCHEMA_UID: FLOW, PRIORITY_LEVEL_UID: LEVEL}


@pytest.mark.parametrize("verb", ["GET", "PATCH"])
def test_a_429s_retry_after_is_waited_out_and_the_request_retried(
    served: Served, verb: str
) -> None:
    """Before: the PATCH raised the 429 at once; the GET was retried inside urllib3 (GET,
    PUT and DELETE only), sleeping the header's 3 s for real, up to three times."""
    served.answer(429, **APF)
    t0 = time.monotonic()
    if verb == "GET":
        answer = served.api.get(JOB, "x", "ns")
    else:
        answer = served.api.merge_patch(JOB, "x", {"metadata": {"labels": {"a": "b"}}}, "ns")
    assert answer is not None and answer["metadata"]["name"] == "x"
    assert served.waits == [3.0]
    assert len(served.seen) == 2
    assert time.monotonic() - t0 < 2.0  # our (fake) wait, not urllib3's own sleep


def test_an_answer_without_retry_after_is_not_retried_by_the_request(served: Served) -> None:
    served.answer(429)  # client-go retries a request only when told when to
    with pytest.raises(ApiError) as info:
        served.api.get(JOB, "x", "ns")
    assert info.value.status == 429 and info.value.retry_after is None
    assert served.waits == [] and len(served.seen) == 1


def test_the_request_gives_up_after_ten_retries(served: Served) -> None:
    for _ in range(12):
        served.answer(503, **{RETRY_AFTER: "0"})
    with pytest.raises(ApiError) as info:
        served.api.get(JOB, "x", "ns")
    assert info.value.status == 503 and info.value.retry_after == 0.0
    assert len(served.seen) == MAX_RETRIES + 1 == 11


def test_a_wait_past_the_requests_timeout_goes_up_to_the_caller() -> None:
    served = Served(timeout=2.0)
    try:
        served.answer(429, **APF)  # 3 s: more than the 2 s this client may take
        with pytest.raises(ApiError) as info:
            served.api.get(JOB, "x", "ns")
    finally:
        served.server.shutdown()
        served.server.server_close()
    assert served.waits == [] and info.value.retry_after == 3.0


def test_the_error_carries_apfs_classification_in_its_message(served: Served) -> None:
    served.answer(429, **{**APF, RETRY_AFTER: "60"})  # past the budget: goes up
    with pytest.raises(ApiError) as info:
        served.api.get(JOB, "x", "ns")
    error = info.value
    assert (error.status, error.retry_after) == (429, 60.0)
    assert (error.flow_schema, error.priority_level) == (FLOW, LEVEL)
    assert "retry after 60 s" in str(error)
    assert f"FlowSchema UID {FLOW!r}" in str(error)  # client-go's retry reason quotes it
    assert error.retryable


def throttled(seconds: float, times: int) -> Any:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise ApiError(429, "TooManyRequests", "slow", "GET", "/", retry_after=seconds)
        return "ok"

    return call


def test_with_retries_waits_the_longer_of_its_step_and_retry_after() -> None:
    waits: list[float] = []
    assert with_retries(throttled(1.0, 4), base_delay=0.3, sleep=waits.append) == "ok"
    assert waits == [1.0, 1.0, 1.2, 2.4]  # before: 0.3, 0.6, 1.2, 2.4


def test_a_retry_after_without_seconds_or_on_another_status_is_ignored() -> None:
    assert retry_after(429, {RETRY_AFTER: "Wed, 21 Oct 2026 07:28:00 GMT"}) is None
    assert retry_after(429, {RETRY_AFTER: "-1"}) is None
    assert retry_after(409, {RETRY_AFTER: "2"}) is None  # client-go: only 429 and 5xx
    assert retry_after(404, {RETRY_AFTER: "2"}) is None
    assert retry_after(503, {RETRY_AFTER: " 2 "}) == 2.0
    assert retry_after(429, {}) is None


def test_a_huge_retry_after_is_capped() -> None:
    error = ApiError(429, "TooManyRequests", "slow down", "GET", "/", retry_after=3600.0)
    assert error.wait_hint == RETRY_AFTER_CAP


def test_the_start_up_retry_waits_out_retry_after_too() -> None:
    waits: list[float] = []

    def stopped(delay: float) -> bool:
        waits.append(delay)
        return False

    retry_transient(throttled(3.0, 1), Backoff(0.5), stopped, lambda exc, delay: None)
    assert waits == [3.0]  # before: 0.5


def test_the_informer_waits_out_a_throttled_list_or_watchs_retry_after() -> None:
    informer = Informer(None, JOB, lambda t, o: None)  # type: ignore[arg-type]
    listed = ApiError(429, "TooManyRequests", "slow", "GET", "/", retry_after=4.0)
    watched = ApiException(status=429, reason="Too Many Requests")
    watched.headers = {RETRY_AFTER: "5"}  # as from_response sets them from a watch's answer
    assert informer.next_delay(listed) == 4.0  # not the back-off's 0.5 s
    assert informer.next_delay(watched) == 5.0
    assert informer.next_delay(ApiError(500, "x", "y", "GET", "/")) == 2.0  # the third step
