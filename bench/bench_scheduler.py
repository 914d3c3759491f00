"""Pod creation -> bind latency of the live scheduler on a real API server.

    python bench/bench_scheduler.py [--pods 2000] [--nodes 50] [--period 1.0] [--dump F]
                                    [--scheduler-conf bench/placement-plugins.conf]

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
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.burst import component, run_burst, summary  # noqa: E402
from bench.calibration import calibrate  # noqa: E402
from koordqueue.kube.api import NODE, POD, KubeApi, load_api_client  # noqa: E402
from tests.controlplane.harness import ControlPlane  # noqa: E402
from tests.e2e import kq  # noqa: E402
from tests.e2e.conftest import Kubectl, install_crds  # noqa: E402


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


@contextmanager
def profiled(pid: int, args: argparse.Namespace) -> Iterator[None]:
    """With `--profile-s S`: py-spy `record --gil` on the scheduler for the burst's first S s."""
    if not args.profile_s:
        yield
        return
    spy = [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid)]
    if args.profile_nonblocking:
        spy.append("--nonblocking")  # no pause per sample: less skew, some torn stacks
    if not args.profile_threads:
        spy.append("--gil")  # else every running thread's samples (C work without the GIL too)
    spy += ["-r", str(args.profile_rate), "-d", str(args.profile_s)]
    spy += ["--format", "raw", "-o", args.profile_out]
    proc = subprocess.Popen(spy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.wait(args.profile_s + 30)
        print(f"profile: {args.profile_out}", flush=True)


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, from /proc (system: syscalls, lock waits)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


def context_switches(pid: int) -> int:
    """Voluntary + involuntary context switches of a process's live threads (a thread
    handing the GIL or a lock to another switches; each switch is kernel time)."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            text = status.read_text()
        except OSError:  # the thread ended meanwhile
            continue
        for line in text.splitlines():
            if "ctxt_switches:" in line:
                total += int(line.split()[-1])
    return total


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sessions(port: int) -> tuple[float, float]:
    """(sessions run, their seconds in total) from the scheduler's metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found = {"count": 0.0, "sum": 0.0}
    for line in text.splitlines():
        for what in found:
            if line.startswith(f"koordqueue_scheduler_session_duration_seconds_{what} "):
                found[what] = float(line.split()[-1])
    return found["count"], found["sum"]


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
    parser.add_argument(
        "--profile-s", type=int, default=0,
        help="py-spy (GIL samples, raw) the scheduler for the burst's first S s (skews figures)",
    )
    parser.add_argument("--profile-out", default="/tmp/bench_scheduler.profile.txt")
    parser.add_argument(
        "--profile-rate", type=int, default=100, help="py-spy samples per second",
    )
    parser.add_argument(
        "--profile-nonblocking", action="store_true",
        help="py-spy --nonblocking: sample without pausing the scheduler",
    )
    parser.add_argument(
        "--profile-threads", action="store_true",
        help="sample every running thread, not only the GIL's holder",
    )
    parser.add_argument(
        "--scheduler-conf", default="",
        help="a volcano-scheduler.conf for the scheduler (default: koordqueue's built-in conf)",
    )
    parser.add_argument(
        "--period-default", action="store_true",
        help="leave --schedule-period at koordqueue's default (as bench_peers does)",
    )
    args = parser.parse_args()
    cal = calibrate()  # before the control plane starts: the yardstick of an idle box

    with ControlPlane() as cp:
        assert cp.kubeconfig is not None
        install_crds(Kubectl(cp.binaries.kubectl, cp.kubeconfig))
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        ns = kq.namespace(Kubectl(cp.binaries.kubectl, cp.kubeconfig), "bench")
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(lambda i: make_node(api, f"node{i:04d}"), range(args.nodes)))

        bodies = [pod(f"pod{i:05d}", ns) for i in range(args.pods)]
        port = free_port()
        schedule = [
            "schedule",
            f"--kubeconfig={cp.kubeconfig}",
            f"--metrics-port={port}",
            "--health-port=0",
            "--log-level=info",
        ]
        if not args.period_default:
            schedule.insert(2, f"--schedule-period={args.period}")
        if args.scheduler_conf:
            schedule.append(f"--scheduler-conf={Path(args.scheduler_conf).resolve()}")
        with component(schedule, args.log) as pid, profiled(pid, args):
            split_before = cpu_split(pid)
            switches_before = context_switches(pid)
            sessions_before = sessions(port)
            burst = run_burst(
                api,
                POD,
                ns,
                bodies,
                reached=lambda p: bool((p.get("spec") or {}).get("nodeName")),
                pid=pid,
                clients=args.clients,
            )
            user_s, system_s = (b - a for a, b in zip(split_before, cpu_split(pid), strict=True))
            switches = context_switches(pid) - switches_before
            count, seconds = (b - a for a, b in zip(sessions_before, sessions(port), strict=True))

    bound = len(burst.reached)
    stats = summary(burst, "scheduler_to_bind", args.dump)
    result = {
        "pods": args.pods,
        "nodes": args.nodes,
        "schedule_period_s": args.period,
        "bound": bound,
        **stats,
        "p99_over_period": round(stats["latency_s"]["p99"] / args.period, 2),
        "scheduler_cpu_s": round(burst.cpu_s, 2),
        "scheduler_user_s": round(user_s, 2),
        "scheduler_system_s": round(system_s, 2),
        "sessions": int(count),
        "pods_per_session": round(bound / max(count, 1), 1),
        "session_ms_mean": round(1000 * seconds / max(count, 1), 2),
        "scheduler_switches_per_pod": round(switches / max(bound, 1), 1),
        "scheduler_cpu_ms_per_pod": round(1000 * burst.cpu_s / max(bound, 1), 2),
        "scheduler_cpu_py_ref_per_pod": round(
            cal.in_py_refs(burst.cpu_s / max(bound, 1)), 3
        ),
        "calibration": cal.as_dict(),
    }
    print(json.dumps(result, indent=2))
    return 0 if bound == args.pods else 1


if __name__ == "__main__":
    sys.exit(main())
