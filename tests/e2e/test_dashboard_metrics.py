"""Issue 35 point 8 on the real API server: every panel of deploy/monitoring/grafana-dashboard.json
queries a metric that `koordqueue run`, as shipped, exports on its /metrics port after real
rounds (Koord-Queue's dashboard has 3 panels on 4 metrics nothing exports). The controller is
its own process here, as deployed, so /metrics is the HTTP endpoint a PodMonitor scrapes; the
unit test (tests/unit/kube/test_dashboard.py) checks the same against the in-process registry."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path
from typing import Any

from tests.e2e import kq
from tests.e2e.replay import start_controller, stop_controller
from tests.unit.kube.test_dashboard import (
    DASHBOARD,
    exported_samples,
    named_metrics,
    panel_queries,
)

QU = "queueunits.scheduling.x-k8s.io"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        return str(answer.read().decode())


def test_every_panels_metric_is_served_by_a_running_controller(
    kubectl: Any, kubeconfig: Path, tmp_path: Path
) -> None:
    ns = kq.namespace(kubectl, kq.unique("dash"))
    quota = kq.unique("dash")
    kubectl.apply(kq.quota(quota, max_={"cpu": "1", "memory": "4Gi"}))
    port = _free_port()
    with (tmp_path / "controller.log").open("w") as log:
        proc = start_controller(kubeconfig, log, f"--metrics-port={port}")
        try:
            kubectl.apply(kq.job("fits", ns, quota))
            kq.wait_for(lambda: kq.phase(kubectl, ns, "fits") == "Dequeued", what="fits admitted")
            kubectl.apply(kq.job("too-big", ns, quota))
            kubectl.apply(kq.job("lost", ns, kq.unique("nowhere")))
            kubectl.apply({
                "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "QueueUnit",
                "metadata": {"name": "stray", "namespace": ns},
                "spec": {"resource": {"cpu": "1"}, "priority": 0},
            })
            kq.wait_for(lambda: kq.events_for(kubectl, ns, "too-big", "FailedScheduling"),
                        what="too-big refused")
            queries = panel_queries(json.loads(DASHBOARD.read_text()))
            wanted = {(t, m) for t, exprs in queries.items() for e in exprs
                      for m in named_metrics(e)}
            assert wanted

            def missing() -> set[tuple[str, str]]:
                exported = exported_samples(_scrape(port))
                return {(t, m) for t, m in wanted if m not in exported}

            # (metrics follow the rounds: wait until every panel's metric has a sample)
            kq.wait_for(lambda: not missing(), timeout=30, what="every panel's metric",
                        state=missing)
        finally:
            stop_controller(proc)
