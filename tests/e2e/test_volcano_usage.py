"""usage on the real API server, fed by a Prometheus: the scheduler's conf names the usage
plugin and a `metrics` section pointing at an HTTP server on loopback that answers
Prometheus' /api/v1/query as node-exporter series would (cpu and memory percent by the
`instance` label). A pod is bound to the cool node although the hot one comes first by
name; a pod that only the hot node would take stays Pending with a FailedScheduling event
naming the load, and is bound once the hot node's reading falls, as kubectl shows. With
usage left out of the conf the first pod is bound to the hot node (checked).

The module's scheduler runs on the shared control plane; its nodes are tainted and its pods
tolerate the taint, so no other test's pod lands on them.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.scheduler.runner import SchedulerRunner
from tests.e2e.conf_scheduler import scheduler_with_conf
from tests.e2e.kq import events_for, namespace, unique, wait_for
from tests.e2e.test_scheduler_binding import make_node, node_of

TAINT = "kq-e2e/usage"
LOAD: dict[str, tuple[float, float]] = {}
"""Node name -> (cpu %, memory %) the stub Prometheus reports."""


class _Prometheus(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)["query"][0]
        found = re.search(r'instance="([^"]+)"', query)
        load = LOAD.get(found.group(1) if found else "")
        result = [] if load is None else [
            {"metric": {}, "value": [time.time(), str(load[0 if "cpu" in query else 1])]}]
        body = json.dumps({"status": "success",
                           "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def scheduler(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[SchedulerRunner]:  # fmt: skip
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    conf = f"""\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: usage
    arguments:
      usage.weight: 5
      thresholds: {{cpu: 80, mem: 80}}
metrics:
  type: prometheus
  address: http://127.0.0.1:{server.server_address[1]}
  interval: 1s
"""
    with scheduler_with_conf(kubeconfig, tmp_path_factory.mktemp("conf"), conf) as runner:
        yield runner
    server.shutdown()
    server.server_close()


def _pod(kubectl: Any, ns: str, name: str, selector: dict[str, str]) -> None:
    kubectl.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"schedulerName": "volcano", "nodeSelector": selector,
                             "tolerations": [{"key": TAINT, "operator": "Exists"}],
                             "containers": [{"name": "main", "image": "busybox",
                                             "resources": {"requests": {"cpu": "1"}}}]}})


def test_pods_keep_off_a_node_prometheus_reports_hot(kubectl: Any,
                                                     scheduler: SchedulerRunner) -> None:
    pool = unique("use")
    hot, cool = f"{pool}-a-hot", f"{pool}-b-cool"
    LOAD[hot], LOAD[cool] = (95.0, 40.0), (10.0, 20.0)
    for name, role in ((hot, "hot"), (cool, "cool")):
        make_node(kubectl, name, "4", labels={"kq-test": pool, "kq-role": role})
        kubectl("taint", "node", name, f"{TAINT}=x:NoSchedule")
    # the poller reads the node list at each pull: wait for the first pull that has both
    cache = scheduler.scheduler.cache
    wait_for(lambda: {hot, cool} <= set(cache.build().snapshot.node_usage), timeout=30,
             what="readings of both nodes")
    ns = namespace(kubectl, unique("use"))
    _pod(kubectl, ns, "anywhere", {"kq-test": pool})
    assert wait_for(lambda: node_of(kubectl, ns, "anywhere"), timeout=30,
                    what="anywhere bound") == cool

    _pod(kubectl, ns, "only-hot", {"kq-test": pool, "kq-role": "hot"})
    events = wait_for(lambda: events_for(kubectl, ns, "only-hot", "FailedScheduling"),
                      timeout=30, what="only-hot's FailedScheduling event")
    message = str(events[0]["message"])
    assert "the CPU load of the node exceeds the upper limit." in message, message
    assert node_of(kubectl, ns, "only-hot") is None

    LOAD[hot] = (30.0, 40.0)  # the next pull (1 s) lets it in
    assert wait_for(lambda: node_of(kubectl, ns, "only-hot"), timeout=30,
                    what="only-hot bound once the node cooled") == hot
