"""The debug API's HTTP edge: GET only, one path, the owner thread reads the engine, and a
busy owner gets a 503 rather than a hung request."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from koordqueue.kube.debug_api import ELASTIC_QUOTA_PATH, DebugApi, on_owner


@pytest.fixture
def served() -> Iterator[Callable[[Callable[[], dict[str, object]]], str]]:
    servers: list[DebugApi] = []

    def serve(view: Callable[[], dict[str, object]]) -> str:
        server = DebugApi(0, view, host="127.0.0.1")
        server.start()
        servers.append(server)
        return f"http://127.0.0.1:{server.port}"

    yield serve
    for server in servers:
        server.stop()


def _get(url: str, method: str = "GET") -> tuple[int, object]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_quota_view_is_served_as_json(served: Callable[..., str]) -> None:
    base = served(lambda: {"q": {"Count": 1}})
    assert _get(base + ELASTIC_QUOTA_PATH) == (200, {"q": {"Count": 1}})


def test_another_path_is_404_and_a_write_is_405(served: Callable[..., str]) -> None:
    base = served(lambda: {})
    assert _get(base + "/apis/v1/queue")[0] == 404
    assert _get(base + ELASTIC_QUOTA_PATH, "DELETE")[0] == 405
    assert _get(base + ELASTIC_QUOTA_PATH, "POST")[0] == 405


def test_the_read_runs_on_the_owner_thread() -> None:
    ran_on: list[str] = []
    owner = threading.Thread(target=lambda: None)

    def post(action: Callable[[], None]) -> None:
        nonlocal owner
        owner = threading.Thread(target=action, name="owner")
        owner.start()

    answer = on_owner(post, lambda: ran_on.append(threading.current_thread().name) or 7)
    assert answer == 7 and ran_on == ["owner"]


def test_an_owner_that_does_not_answer_gives_503(served: Callable[..., str]) -> None:
    base = served(lambda: on_owner(lambda action: None, dict, timeout=0.05))
    status, body = _get(base + ELASTIC_QUOTA_PATH)
    assert status == 503 and "did not answer" in str(body)
