"""One Queue's usage patch that never gets an answer holds neither the others nor the next sync
for long (bench/soak.py, seed 3, --ci: the half-open fault left a patch waiting out the client's
30 s timeout; every Queue's annotations stayed stale meanwhile, syncs being single-flight, and
the checker's usage-annotation invariant fired 25 s after the last fault).

A real HTTP server on loopback, through KubeApi's own transport: it takes the patch of Queue
`stuck` and never answers it (as a half-open connection does). Fails without the fix (checked:
the sync takes the 30 s timeout and the Queues after `stuck` are not written).
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
from structlog.testing import capture_logs

from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.quota_tree import QuotaTree
from koordqueue.domain.resources import Resources
from koordqueue.kube import quota_status
from koordqueue.kube.api import ApiError, KubeApi
from koordqueue.kube.quota_status import QueueUsageWriter

NAMES = ("stuck", "b", "c")
STALL_LISTS: list[bool] = []
"""Each entry: one list of Queues the server takes and never answers."""


class _Handler(BaseHTTPRequestHandler):
    patched: list[str]
    release: threading.Event

    def _answer(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if STALL_LISTS:
            STALL_LISTS.pop()
            self.release.wait(60)  # the first list: no answer (a half-open connection)
            return
        items = [{"metadata": {"name": n, "namespace": "koord-queue"}} for n in NAMES]
        self._answer({"metadata": {"resourceVersion": "1"}, "items": items})

    def do_PATCH(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        name = self.path.split("?")[0].rsplit("/", 1)[1]
        self.patched.append(name)
        if name == "stuck":
            self.release.wait(60)  # no answer: the request waits out its timeout
            return
        self._answer({"metadata": {"name": name}})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[KubeApi, list[str]]]:
    patched: list[str] = []
    release = threading.Event()
    handler = type("Handler", (_Handler,), {"patched": patched, "release": release})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True).start()
    config = k8s.Configuration()
    config.host = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield KubeApi(k8s.ApiClient(config), timeout=30.0), patched
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()


def test_a_patch_without_an_answer_stalls_the_sync_briefly_and_not_the_other_queues(
    server: tuple[KubeApi, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quota_status, "USAGE_WRITE_TIMEOUT", 1.0)  # (5 s in production)
    api, patched = server
    tree = QuotaTree()
    for name in NAMES:
        tree.upsert(QuotaSpec(name=name, max=Resources.of(cpu=10)))
        tree.admit(f"u-{name}", name, Resources.of(cpu=1))
    rows = sorted(tree.report(), key=lambda row: NAMES.index(row.name))
    writer = QueueUsageWriter(api, "koord-queue")
    started = time.monotonic()
    with capture_logs() as logs, pytest.raises(ApiError):  # raised once the others went
        writer.sync(rows)
    assert time.monotonic() - started < 6  # the API's own timeout is 30 s
    # a slow sync says so, and where it was (the skipped syncs leave no other trace)
    assert [(e["event"], e["last"]) for e in logs if e["log_level"] == "warning"] == [
        ("queue usage sync was slow", "c")]
    assert sorted(set(patched)) == ["b", "c", "stuck"]
    # the next sync tries only the one not written
    patched.clear()
    with pytest.raises(ApiError):
        writer.sync(rows)
    assert set(patched) == {"stuck"}


def test_a_new_leaders_first_list_of_queues_without_an_answer_stalls_the_sync_briefly(
    server: tuple[KubeApi, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/soak.py, seed 3, after 07c1a71: a new leader's first sync lists the Queues, and
    that list went into a half-open connection with the API's 30 s timeout (the patches had
    the short one): every annotation stale for 30 s after the fault. Fails without the short
    timeout on the list (checked: the sync takes the 30 s)."""
    monkeypatch.setattr(quota_status, "USAGE_WRITE_TIMEOUT", 1.0)  # (5 s in production)
    api, patched = server
    STALL_LISTS[:] = [True]
    tree = QuotaTree()
    for name in NAMES:
        tree.upsert(QuotaSpec(name=name, max=Resources.of(cpu=10)))
        tree.admit(f"u-{name}", name, Resources.of(cpu=1))
    writer = QueueUsageWriter(api, "koord-queue")
    started = time.monotonic()
    with pytest.raises(ApiError):  # (`stuck`'s patch)
        writer.sync(tree.report())
    assert time.monotonic() - started < 6  # the API's own timeout is 30 s
    assert STALL_LISTS == []  # the list was asked again, answered, and the Queues written
    assert sorted(set(patched)) == ["b", "c", "stuck"]
