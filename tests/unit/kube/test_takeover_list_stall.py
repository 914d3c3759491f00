"""A takeover's lists that never get an answer hold the new leader briefly, not for the API's
30 s (bench/soak.py `--ci --seed 3` on 41c9014: the leader that took the Lease during a
half-open-connection fault sent its list of ElasticQuotas into it and waited 30 s; no
admission and no usage annotation meanwhile, and the checker's usage-annotation invariant
fired 20 s after the fault had ended, three Queues stale for 45 s).

A real HTTP server on loopback, through KubeApi's own transport: it takes the first list of
ElasticQuotas and never answers it (as a half-open connection does); every list after that is
answered, empty. Fails without Resync's short list timeout (checked: the resync takes 30 s).
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

from koordqueue.kube.api import JOB, QUEUE_UNIT, KubeApi
from koordqueue.kube.controller import Controller, resync
from koordqueue.kube.settings import ControllerSettings


class _Handler(BaseHTTPRequestHandler):
    stall: list[str]
    asked: list[str]
    release: threading.Event

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        self.asked.append(path)
        if self.stall and path.endswith(self.stall[0]):
            self.stall.pop(0)
            self.release.wait(60)  # no answer: the request waits out its timeout
            return
        data = json.dumps({"metadata": {"resourceVersion": "5"}, "items": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[KubeApi, list[str], list[str]]]:
    stall: list[str] = []
    asked: list[str] = []
    release = threading.Event()
    handler = type("Handler", (_Handler,), {"stall": stall, "asked": asked, "release": release})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True).start()
    config = k8s.Configuration()
    config.host = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield KubeApi(k8s.ApiClient(config), timeout=30.0), stall, asked
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("kind", ["elasticquotas", "queues", "queueunits"])
def test_a_takeover_list_without_an_answer_holds_the_new_leader_briefly(
    server: tuple[KubeApi, list[str], list[str]], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setattr(resync, "LIST_TIMEOUT", 1.0)  # (10 s in production)
    api, stall, asked = server
    stall.append(f"/{kind}")
    c = Controller(api, ControllerSettings(), writers=1)
    try:
        started = time.monotonic()
        c.resync({QUEUE_UNIT: ([], "1"), JOB: ([], "1")})  # a warm standby's caches
        took = time.monotonic() - started
    finally:
        c.close()
    assert took < 6, f"the resync took {took:.1f} s (the API's own timeout is 30 s)"
    assert stall == []  # the stalled list was asked again and answered
    assert sum(1 for path in asked if path.endswith(f"/{kind}")) == 2
