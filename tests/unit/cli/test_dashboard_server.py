"""`koordqueue dashboard`'s server and feed: GET only, local hosts only, states pushed live."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from koordqueue.cli.dashboard import DashboardServer, make_explainer
from koordqueue.cli.dashboard_feed import VISIBILITY_PATH, VISIBILITY_QUOTAS_PATH, DashboardFeed
from koordqueue.cli.main import build_parser
from koordqueue.domain import names
from koordqueue.kube.api import ApiError
from tests.unit.kube.quiet_server_checks import check_gone_clients_are_debug_lines


class FakeInformer:
    """Stands in for kube.informer.Informer: the test hands events to its handler."""

    made: ClassVar[list[FakeInformer]] = []

    def __init__(self, api: Any, kind: Any, handler: Any, workers: int = 1) -> None:
        self.kind, self.handler = kind, handler
        self.synced = threading.Event()
        self.synced.set()
        FakeInformer.made.append(self)

    def start(self) -> None:
        pass

    def stop(self, timeout: float = 0.0) -> None:
        pass


class FakeApi:
    """Answers the visibility API's GET; records every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.pending: dict[str, Any] | None = {"round": {"number": 1, "time": "t"},
                                               "total": 0, "items": []}

    def request(self, method: str, path: str, body: object = None,
                query: Any = (), content_type: str = "", gzip: bool = False) -> dict[str, Any]:
        self.requests.append((method, path))
        if self.pending is None:
            raise ApiError(503, "ServiceUnavailable", "no admission round yet", method, path)
        if path == VISIBILITY_QUOTAS_PATH:
            return {"items": [{"metadata": {"name": "team"}, "pending": 4}]}
        return self.pending


def quota_obj(name: str, max_cpu: str = "4") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {}},
            "spec": {"max": {"cpu": max_cpu}}}


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def feed(api: FakeApi) -> Iterator[DashboardFeed]:
    FakeInformer.made = []
    f = DashboardFeed(api, interval=0.05, cluster="https://cluster",  # type: ignore[arg-type]
                      informer=FakeInformer)
    f.start()
    yield f
    f.stop()


def handler(kind_plural: str) -> Any:
    return next(i.handler for i in FakeInformer.made if i.kind.plural == kind_plural)


@pytest.fixture
def server(feed: DashboardFeed) -> Iterator[DashboardServer]:
    srv = DashboardServer(("127.0.0.1", 0), feed, make_explainer(feed, names.QUEUE_NAMESPACE, "1"))
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def get(server: DashboardServer, path: str, method: str = "GET",
        host: str | None = None) -> tuple[int, bytes, str]:
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=5)  # type: ignore[misc]
    headers = {"Host": host} if host else {}
    conn.request(method, path, headers=headers)
    answer = conn.getresponse()
    body = answer.read()
    conn.close()
    return answer.status, body, answer.getheader("Content-Type") or ""


def test_the_page_and_its_script_are_served_from_the_package(server: DashboardServer) -> None:
    status, body, kind = get(server, "/")
    assert status == 200 and kind.startswith("text/html")
    assert b'<script src="dashboard.js">' in body
    status, script, kind = get(server, "/dashboard.js")
    assert status == 200 and kind.startswith("text/javascript")
    assert b"EventSource" in script
    status, style, kind = get(server, "/dashboard.css")
    assert status == 200 and kind.startswith("text/css")
    for text in (body, script, style):  # nothing from elsewhere: the machine may be offline
        assert b"://" not in text


def test_only_get_is_answered(server: DashboardServer) -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        status, body, _ = get(server, "/api/state", method)
        assert status == 405 and b"read-only" in body


def test_a_request_for_another_host_is_refused(server: DashboardServer) -> None:
    status, _, _ = get(server, "/api/state", host="evil.example:8087")
    assert status == 403
    assert get(server, "/api/state", host=f"localhost:{server.server_address[1]}")[0] == 200


def test_the_state_is_the_watched_objects_and_the_visibility_answer(
    server: DashboardServer, feed: DashboardFeed, api: FakeApi
) -> None:
    handler("elasticquotas")(None, quota_obj("team"))
    assert feed.refresh()
    status, body, _ = get(server, "/api/state")
    state = json.loads(body)
    assert status == 200 and [(q["name"], q["pending"]) for q in state["quotas"]] == [
        ("team", 4)]
    assert state["round"] == {"number": 1, "time": "t"} and state["cluster"] == "https://cluster"
    assert all(m == "GET" for m, _ in api.requests)
    assert {p for _, p in api.requests} == {VISIBILITY_PATH, VISIBILITY_QUOTAS_PATH}


def test_an_unchanged_state_is_not_published_again(feed: DashboardFeed) -> None:
    version, _ = feed.state()
    assert not feed.refresh()
    assert feed.state()[0] == version


def test_the_stream_pushes_a_new_state_when_a_watched_object_changes(
    server: DashboardServer,
) -> None:
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=5)  # type: ignore[misc]
    conn.request("GET", "/api/stream")
    answer = conn.getresponse()
    assert answer.getheader("Content-Type") == "text/event-stream"

    def next_state() -> dict[str, Any]:
        while True:
            line = answer.fp.readline()
            if line.startswith(b"data: "):
                return dict(json.loads(line[6:]))

    first = next_state()
    handler("elasticquotas")(None, quota_obj("team", max_cpu="4"))  # no refresh called here:
    second = next_state()  # the feed's own loop notices the change
    handler("elasticquotas")("MODIFIED", quota_obj("team", max_cpu="6"))
    third = next_state()
    conn.close()
    assert first["quotas"] == [] and second["version"] > first["version"]
    assert second["quotas"][0]["resources"][0]["max"] == "4"
    assert third["quotas"][0]["resources"][0]["max"] == "6"


def test_without_the_visibility_api_the_state_says_why(
    feed: DashboardFeed, api: FakeApi
) -> None:
    api.pending = None
    assert feed.refresh()
    state = json.loads(feed.state()[1])
    assert "no admission round yet" in state["visibilityError"] and state["pending"] == []


def test_explain_reads_the_watched_objects(server: DashboardServer) -> None:
    handler("elasticquotas")(None, quota_obj("team", max_cpu="1"))
    handler("queueunits")(None, {
        "metadata": {"name": "big", "namespace": "ns", "uid": "u1",
                     "labels": {names.QUOTA_NAME_LABEL: "team"}},
        "spec": {"resource": {"cpu": "2"}}, "status": {"phase": "Enqueued"}})
    status, body, _ = get(server, "/api/explain?namespace=ns&name=big")
    doc = json.loads(body)
    assert status == 200 and doc["unit"] == "ns/big"
    assert doc["reason"] in doc["text"] and "team" in doc["text"]
    assert get(server, "/api/explain?namespace=ns&name=nothing")[0] == 404
    assert get(server, "/api/explain?name=big")[0] == 400


def test_the_command_takes_kubectls_flags_and_a_port() -> None:
    args = build_parser().parse_args(["dashboard", "--kubeconfig", "k", "--context", "c",
                                      "--port", "0"])
    assert (args.kubeconfig, args.context, args.port, args.address) == ("k", "c", 0,
                                                                        "127.0.0.1")


def test_a_bad_interval_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["dashboard", "--interval", "0"])
    assert args.func(args) == 2
    assert "--interval must be > 0" in capsys.readouterr().err


def test_only_the_controllers_events_are_kept(feed: DashboardFeed) -> None:
    from koordqueue.kube.api import EVENT

    def event(name: str, component: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns"}, "reason": "R",
                "source": {"component": component}}

    handler("events")(None, event("ours", "koord-queue"))
    handler("events")(None, event("kubelets", "kubelet"))
    assert [e["metadata"]["name"] for e in feed.objects(EVENT)] == ["ours"]
    handler("events")("DELETED", event("ours", "koord-queue"))
    assert feed.objects(EVENT) == []


def test_a_page_gone_mid_answer_is_a_debug_line_not_a_traceback(
    server: DashboardServer, capsys: pytest.CaptureFixture[str],
) -> None:
    """The e2e dashboard test met a browser that dropped a request while its JSON answer was
    written: socketserver's default printed the BrokenPipeError's traceback on stderr."""
    check_gone_clients_are_debug_lines(server, "dashboard", capsys)
