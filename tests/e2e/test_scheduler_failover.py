"""The scheduler's standby is warm: after kill -9 of the leader, the standby that takes the
Lease binds new pods without listing the cluster first.

Two `koordqueue run` processes (controller + scheduler) compete for one Lease on short
timings. The standby watches pods, nodes, namespaces, PodGroups and Queues from start-up
(its log says so) but binds nothing while the leader lives; once the leader is killed, pods
created for the test's scheduler name are bound by the survivor, with `Scheduled` events an
operator sees with `kubectl describe pod`.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from tests.e2e import kq
from tests.e2e.replay import start_controller, stop_controller
from tests.e2e.test_failover import holder
from tests.e2e.test_scheduler_binding import make_node

PODS = 4


def _pod(ns: str, name: str, scheduler: str, pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {
            "schedulerName": scheduler, "nodeSelector": {"kq-test": pool},
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        },
    }


def test_the_warm_standby_binds_after_the_leader_dies(
    kubectl: Any, kubeconfig: Path, tmp_path: Path
) -> None:
    ns = kq.namespace(kubectl, kq.unique("sfo"))
    lease, sched, pool = kq.unique("kq-sfo"), kq.unique("sfo-sched"), kq.unique("pool")
    node = kq.unique("sfo-node")
    make_node(kubectl, node, "8", labels={"kq-test": pool})
    logs = [tmp_path / f"kq-{i}.log" for i in range(2)]
    extra = [f"--scheduler-name={sched}", "--schedule-period=0.2"]
    procs = []
    try:
        with open(logs[0], "w") as log:
            procs.append(start_controller(kubeconfig, log, *extra, lease=lease))
        first = kq.wait_for(lambda: holder(kubectl, lease), what="a leader", timeout=60)
        assert int(first.rsplit("_", 1)[1]) == procs[0].pid
        with open(logs[1], "w") as log:
            procs.append(start_controller(kubeconfig, log, *extra, lease=lease))
        kq.wait_for(
            lambda: "scheduler standby: watching" in logs[1].read_text(),
            what="the standby's watches", timeout=60,
        )
        os.kill(procs[0].pid, signal.SIGKILL)
        procs[0].wait(10)
        second = kq.wait_for(
            lambda: (h := holder(kubectl, lease)) and h != first and h,
            what="the standby holding the Lease", timeout=30,
        )
        assert int(str(second).rsplit("_", 1)[1]) == procs[1].pid
        for i in range(PODS):
            kubectl.create(_pod(ns, f"p{i}", sched, pool))

        def bound() -> bool:
            pods = kubectl.json("get", "pods", "-n", ns)["items"]
            return len(pods) == PODS and all(p["spec"].get("nodeName") == node for p in pods)

        kq.wait_for(bound, what="every pod bound by the new leader", timeout=30)
        scheduled = [
            e for e in kubectl.json("get", "events", "-n", ns)["items"]
            if e.get("reason") == "Scheduled"
        ]
        assert {e["involvedObject"]["name"] for e in scheduled} == {f"p{i}" for i in range(PODS)}
        assert all(e["message"].endswith(f"to {node}") for e in scheduled)
        survivor = logs[1].read_text()
        assert "scheduler ready" in survivor
    finally:
        for proc in procs:
            stop_controller(proc)
        kubectl("delete", "node", node, "--wait=false", check=False)
