"""Pod creation -> bind latency of the live scheduler on a real API server.

    python bench/bench_scheduler.py [--pods 2000] [--nodes 50] [--period 1.0] [--dump F]

Starts etcd + kube-apiserver (tests/controlplane), creates N Node objects (Ready, no kubelet:
bound pods stay Pending, which is all a scheduler benchmark needs), runs `koordqueue
schedule` as a subprocess (its CPU time is read from /proc), creates the pods from a thread
pool and watches them until every one has a node. Prints p50/p90/p99/max latency, the
throughput, the scheduler's CPU per bound pod, and where the time goes: the create call, the
API server's watch delivery (this script's own watch), and the scheduler up to the bind.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.watching import cpu_seconds, percentile, stage, watch_objects  # noqa: E402
from koordqueue.kube.api import NODE, POD, KubeApi, load_api_client  # noqa: E402
from tests.controlplane.harness import ControlPlane  # noqa: E402
from tests.e2e import kq  # noqa: E402
from tests.e2e.conftest import Kubectl, install_crds  # noqa: E402


@dataclass
class Seen:
    """Wall times from the benchmark's own watch: each pod's ADDED event, and its bind."""

    added: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)

    def on_event(self, event_type: str, obj: dict[str, Any], at: float) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            return
        if event_type == "ADDED":
            self.added.setdefault(name, at)
        if (obj.get("spec") or {}).get("nodeName"):
            self.bound.setdefault(name, at)


def make_node(api: KubeApi, name: str) -> None:
    api.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    resources = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench"}
    api.merge_patch(
        NODE,
        name,
        {"status": {"capacity": resources, "allocatable": resources, "conditions": [ready]}},
        subresource="status",
    )
    # the TaintNodesByCondition admission taints a new node not-ready; no kubelet clears it
    api.merge_patch(NODE, name, {"spec": {"taints": None}})


def pod(name: str, ns: str) -> dict[str, Any]:
    requests = {"cpu": "100m", "memory": "128Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": requests}}
            ],
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--period", type=float, default=1.0, help="--schedule-period")
    parser.add_argument("--clients", type=int, default=8, help="parallel pod creators")
    parser.add_argument("--log", default="/tmp/bench_scheduler.log", help="scheduler log file")
    parser.add_argument("--dump", default="", help="write per-pod wall times (JSON) here")
    args = parser.parse_args()

    with ControlPlane() as cp:
        assert cp.kubeconfig is not None
        install_crds(Kubectl(cp.binaries.kubectl, cp.kubeconfig))
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        ns = kq.namespace(Kubectl(cp.binaries.kubectl, cp.kubeconfig), "bench")
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(lambda i: make_node(api, f"node{i:04d}"), range(args.nodes)))

        log = open(Path(args.log), "w")  # noqa: SIM115
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "koordqueue.cli.main",
                "schedule",
                f"--kubeconfig={cp.kubeconfig}",
                f"--schedule-period={args.period}",
                "--metrics-port=0",
                "--health-port=0",
                "--log-level=info",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            cwd=ROOT,
        )
        try:
            time.sleep(3)  # start-up listing
            if proc.poll() is not None:
                raise SystemExit(f"scheduler exited: see {log.name}")
            cpu_before = cpu_seconds(proc.pid)
            created: dict[str, float] = {}
            accepted: dict[str, float] = {}

            def create(i: int) -> None:
                name = f"pod{i:05d}"
                created[name] = time.time()
                api.create(POD, pod(name, ns), ns)
                accepted[name] = time.time()

            seen = Seen()
            watcher = threading.Thread(
                target=watch_objects,
                args=(api, POD, ns, seen.on_event),
                kwargs={
                    "done": lambda: len(seen.bound) >= args.pods,
                    "deadline": time.time() + 600,
                },
                daemon=True,
            )
            watcher.start()
            time.sleep(1)
            t0 = time.time()
            with ThreadPoolExecutor(args.clients) as pool:
                list(pool.map(create, range(args.pods)))
            create_s = time.time() - t0
            watcher.join(620)
            total_s = max(seen.bound.values(), default=time.time()) - t0
            cpu = cpu_seconds(proc.pid) - cpu_before
        finally:
            proc.terminate()
            proc.wait(30)
            log.close()

    bound = seen.bound
    latencies = [bound[n] - created[n] for n in bound if n in created]
    if args.dump:
        times = {"created": created, "accepted": accepted, "added": seen.added, "bound": bound}
        Path(args.dump).write_text(json.dumps(times))
    result = {
        "pods": args.pods,
        "nodes": args.nodes,
        "schedule_period_s": args.period,
        "bound": len(bound),
        "create_phase_s": round(create_s, 2),
        "total_s": round(total_s, 2),
        "throughput_pods_per_s": round(len(bound) / total_s, 1),
        "latency_s": {
            "p50": round(statistics.median(latencies), 3),
            "p90": round(percentile(latencies, 90), 3),
            "p99": round(percentile(latencies, 99), 3),
            "max": round(max(latencies), 3),
        },
        "stages_s": {
            "create_call": stage(created, accepted),
            "watch_delivery": stage(accepted, seen.added),
            "scheduler_to_bind": stage(seen.added, bound),
        },
        "p99_over_period": round(percentile(latencies, 99) / args.period, 2),
        "scheduler_cpu_s": round(cpu, 2),
        "scheduler_cpu_ms_per_pod": round(1000 * cpu / max(len(bound), 1), 2),
    }
    print(json.dumps(result, indent=2))
    return 0 if len(bound) == args.pods else 1


if __name__ == "__main__":
    sys.exit(main())
