"""Job creation -> un-suspend latency of the live controller on a real API server.

    python bench/bench_controller.py [--jobs 1000] [--quotas 50] [--period 1.0] [--dump F]

Starts etcd + kube-apiserver (tests/controlplane), runs `koordqueue run` as a subprocess (so
its CPU time can be read from /proc), creates the quotas, then the Jobs from a thread pool,
and watches the Jobs until every one that fits is resumed. Prints p50/p90/p99/max latency,
the throughput, the controller's CPU seconds per admission, and where the time goes (the
create call; the API server's watch delivery, seen by this script's own watch; the
controller up to the resume). `--dump` writes every Job's timestamps for a closer look.
Target (issue 4): p99 < 2 s with a 1 s admission period for 1,000 Jobs over 50 quotas.
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
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, KubeApi, load_api_client  # noqa: E402
from tests.controlplane.harness import ControlPlane  # noqa: E402
from tests.e2e import kq  # noqa: E402
from tests.e2e.conftest import Kubectl, install_crds  # noqa: E402


@dataclass
class Seen:
    """Wall times from the benchmark's own watch: each Job's ADDED event, and its resume."""

    added: dict[str, float] = field(default_factory=dict)
    resumed: dict[str, float] = field(default_factory=dict)

    def on_event(self, event_type: str, obj: dict[str, Any], at: float) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if not name:
            return
        if event_type == "ADDED":
            self.added.setdefault(name, at)
        if (obj.get("spec") or {}).get("suspend") is False:
            self.resumed.setdefault(name, at)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--quotas", type=int, default=50)
    parser.add_argument("--period", type=float, default=1.0)
    parser.add_argument("--clients", type=int, default=8, help="parallel Job creators")
    parser.add_argument("--log", default="/tmp/bench_controller.log", help="controller log file")
    parser.add_argument(
        "--dump", default="", help="write per-Job created/resumed wall times (JSON) here"
    )
    args = parser.parse_args()

    with ControlPlane() as cp:
        assert cp.kubeconfig is not None
        kubectl = Kubectl(cp.binaries.kubectl, cp.kubeconfig)
        install_crds(kubectl)
        kubectl.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koord-queue"}}
        )
        ns = kq.namespace(kubectl, "bench")
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        per_quota = -(-args.jobs // args.quotas)
        for i in range(args.quotas):  # every Job fits: the benchmark measures latency, not waiting
            api.create(
                ELASTIC_QUOTA,
                kq.quota(f"bq{i}", max_={"cpu": str(per_quota), "memory": f"{per_quota}Gi"}),
                "default",
            )

        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        log = open(Path(args.log), "w")  # noqa: SIM115
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "koordqueue.cli.main",
                "run",
                f"--kubeconfig={cp.kubeconfig}",
                f"--admission-period={args.period}",
                "--metrics-port=0",
                "--health-port=0",
                "--log-level=info",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
        )
        try:
            time.sleep(3)  # start-up resync
            if proc.poll() is not None:
                raise SystemExit(f"controller exited: see {log.name}")
            cpu_before = cpu_seconds(proc.pid)
            created: dict[str, float] = {}
            accepted: dict[str, float] = {}

            def create(i: int) -> None:
                name = f"job{i:05d}"
                body = kq.job(name, ns, f"bq{i % args.quotas}", cpu="1", memory="1Gi")
                created[name] = time.time()
                api.create(JOB, body, ns)
                accepted[name] = time.time()

            seen = Seen()
            resumed = seen.resumed
            watcher = threading.Thread(
                target=watch_objects,
                args=(api, JOB, ns, seen.on_event),
                kwargs={"done": lambda: len(resumed) >= args.jobs, "deadline": time.time() + 600},
                daemon=True,
            )
            watcher.start()
            time.sleep(1)
            t0 = time.time()
            with ThreadPoolExecutor(args.clients) as pool:
                list(pool.map(create, range(args.jobs)))
            create_s = time.time() - t0
            watcher.join(620)
            total_s = max(resumed.values(), default=time.time()) - t0
            cpu = cpu_seconds(proc.pid) - cpu_before
        finally:
            proc.terminate()
            proc.wait(30)
            log.close()

    latencies = [resumed[n] - created[n] for n in resumed]
    if args.dump:
        times = {"created": created, "accepted": accepted, "added": seen.added, "resumed": resumed}
        Path(args.dump).write_text(json.dumps(times))

    result = {
        "jobs": args.jobs,
        "quotas": args.quotas,
        "admission_period_s": args.period,
        "resumed": len(resumed),
        "create_phase_s": round(create_s, 2),
        "total_s": round(total_s, 2),
        "throughput_jobs_per_s": round(len(resumed) / total_s, 1),
        "latency_s": {
            "p50": round(statistics.median(latencies), 3),
            "p90": round(percentile(latencies, 90), 3),
            "p99": round(percentile(latencies, 99), 3),
            "max": round(max(latencies), 3),
        },
        # where the time goes: the create call; the API server's watch delivery (this script's
        # own watch sees the Job); the controller (its watch, unit create + admit, Job patch)
        "stages_s": {
            "create_call": stage(created, accepted),
            "watch_delivery": stage(accepted, seen.added),
            "controller_to_resume": stage(seen.added, resumed),
        },
        "p99_over_period": round(percentile(latencies, 99) / args.period, 2),
        "controller_cpu_s": round(cpu, 2),
        "controller_cpu_ms_per_admission": round(1000 * cpu / max(len(resumed), 1), 2),
        "target_p99_lt_2s": percentile(latencies, 99) < 2.0,
    }
    print(json.dumps(result, indent=2))
    return 0 if len(resumed) == args.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
