"""KubeApi's requests go straight to the urllib3 pool (issue 11 part 3): the same method, path,
query, headers, body and error mapping as through the generated client, on a local server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import client as k8s

from koordqueue.kube.api import JOB, QUEUE_UNIT, ApiError, KubeApi

Seen = list[dict[str, Any]]


class _Handler(BaseHTTPRequestHandler):
    seen: Seen
    status = 200

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append({
            "method": self.command,
            "path": self.path,
            "headers": dict(self.headers),
            "body": json.loads(body) if body else None,
        })
        if self.path.split("?")[0].endswith("/missing"):
            code, answer = 404, {"kind": "Status", "message": 'jobs "missing" not found'}
        else:
            code, answer = 200, {"metadata": {"name": "x", "resourceVersion": "7"}}
        data = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = _answer  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def served() -> Iterator[tuple[KubeApi, Seen]]:
    seen: Seen = []
    handler = type("Handler", (_Handler,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    config = k8s.Configuration()
    config.host = f"http://127.0.0.1:{server.server_address[1]}"
    config.api_key = {"authorization": "secret"}
    config.api_key_prefix = {"authorization": "Bearer"}
    try:
        yield KubeApi(k8s.ApiClient(config), timeout=5.0), seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_merge_patch_carries_its_path_query_headers_and_body(
    served: tuple[KubeApi, Seen],
) -> None:
    api, seen = served
    answer = api.merge_patch(QUEUE_UNIT, "u1", {"status": {"phase": "Dequeued"}}, "ns", "status")
    assert answer["metadata"]["resourceVersion"] == "7"
    [request] = seen
    assert request["method"] == "PATCH"
    assert request["path"] == (
        "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/queueunits/u1/status"
        "?fieldManager=koordqueue"
    )
    assert request["headers"]["Content-Type"] == "application/merge-patch+json"
    assert request["headers"]["Accept"] == "application/json"
    assert request["headers"]["authorization"] == "Bearer secret"
    assert request["body"] == {"status": {"phase": "Dequeued"}}


def test_a_label_selector_is_percent_encoded(served: tuple[KubeApi, Seen]) -> None:
    api, seen = served
    api.list_objects(JOB, "ns", label_selector="a=b,c!=d")
    query = "limit=500&labelSelector=a%3Db%2Cc%21%3Dd"
    assert seen[0]["path"] == f"/apis/batch/v1/namespaces/ns/jobs?{query}"
    assert seen[0]["body"] is None


def test_an_error_answer_is_a_typed_api_error_with_the_servers_message(
    served: tuple[KubeApi, Seen],
) -> None:
    api, _ = served
    assert api.get(JOB, "missing", "ns") is None  # 404 on a get: absent
    with pytest.raises(ApiError) as raised:
        api.merge_patch(JOB, "missing", {"spec": {"suspend": False}}, "ns")
    assert raised.value.not_found
    assert raised.value.message == 'jobs "missing" not found'


def test_an_unreachable_server_is_a_retryable_api_error() -> None:
    config = k8s.Configuration()
    config.host = "http://127.0.0.1:9"  # discard port: nothing listens
    config.retries = 0
    api = KubeApi(k8s.ApiClient(config), timeout=2.0)
    with pytest.raises(ApiError) as raised:
        api.create(JOB, {"metadata": {"name": "j"}}, "ns")
    assert raised.value.retryable


def test_a_fenced_write_goes_out_whole_and_one_refused_at_the_last_look_never_arrives(
    served: tuple[KubeApi, Seen],
) -> None:
    """Issue 12: the fence's last look is on the connection (after the early one in
    `request`); over a real socket the write still arrives intact, and a refusal there sends
    nothing, and a read still goes out afterwards."""
    plain, seen = served
    answers = [True, True, True, False]  # early, last; early, last
    api = KubeApi(plain.api_client, timeout=5.0, fence=lambda: answers.pop(0))
    api.merge_patch(QUEUE_UNIT, "u1", {"status": {"phase": "Dequeued"}}, "ns", "status")
    [request] = seen
    assert request["body"] == {"status": {"phase": "Dequeued"}}
    assert request["headers"]["Content-Type"] == "application/merge-patch+json"
    with pytest.raises(ApiError) as raised:
        api.merge_patch(QUEUE_UNIT, "u2", {"status": {"phase": "Dequeued"}}, "ns", "status")
    assert raised.value.fenced and answers == []
    assert api.get(JOB, "j", "ns") is not None  # reads are not fenced
    assert [r["method"] for r in seen] == ["PATCH", "GET"]
