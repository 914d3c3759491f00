"""Leader takeover time on a real API server: kill -9 the leader in the middle of a Job burst.

    python bench/bench_takeover.py [--runs 3] [--jobs 300] [--quotas 10] [--capacity 10]
        [--lease-duration 15] [--renew-deadline 10] [--retry-period 2]

Starts etcd + kube-apiserver (tests/controlplane) once; each run then starts two
`koordqueue run --leader-elect` processes on a fresh Lease, creates `--jobs` suspended Jobs
(1 CPU each) over `--quotas` quotas of `--capacity` CPUs, plays the kubelet (every resumed Job
is marked Complete, which frees its quota for the next), and SIGKILLs the leader once
`--kill-after` units have been admitted. Measured from the kill, on this script's own clock:

- `acquired_s`: the standby is seen holding the Lease (polled every 50 ms);
- `first_admission_s`: the first QueueUnit admitted after that (the standby's first admission:
  a leader that is gone cannot write, and the old one died a lease before);
- `completed_s`: every Job of the burst admitted and finished;

and the ratios `acquired / lease duration` and `first admission / lease duration`. client-go's
rules put the takeover between lease - retry and lease + retry after the last renewal; the
first admission adds the standby's takeover: it is warm (its informers run while standing by),
so it folds its caches (no re-list of QueueUnits and Jobs), lists quotas and Queues, and
creates the units of the Jobs the dead leader had not reached before its first round. Each
run also replays the QueueUnits' history (as the failover e2e test does) and reports units
admitted twice and quota peaks over capacity (both must be 0).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.calibration import calibrate  # noqa: E402
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, KubeApi, load_api_client  # noqa: E402
from koordqueue.kube.leader import LEASE  # noqa: E402
from tests.controlplane.harness import ControlPlane  # noqa: E402
from tests.e2e import kq  # noqa: E402
from tests.e2e.conftest import Kubectl, install_crds  # noqa: E402
from tests.e2e.replay import (  # noqa: E402
    ADMITTED,
    History,
    Kubelet,
    admitted_peaks,
    start_controller,
    stop_controller,
)

LEASE_NAMESPACE = "koord-queue"


class LeaseWatcher:
    """Polls the Lease's holder; remembers when each new holder was first seen."""

    def __init__(self, api: KubeApi, name: str, period: float = 0.05) -> None:
        self.api, self.name, self.period = api, name, period
        self.seen: list[tuple[float, str]] = []  # (time.monotonic(), holder) per change
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> LeaseWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def holder(self) -> str:
        return self.seen[-1][1] if self.seen else ""

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                lease = self.api.get(LEASE, self.name, LEASE_NAMESPACE)
                holder = str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
                if holder != self.holder():
                    self.seen.append((time.monotonic(), holder))
            except Exception:  # the API busy: try again next tick
                pass
            self._stop.wait(self.period)


def admissions_after(history: History, after: float) -> list[float]:
    """Times at which a unit went into an admitted phase from a non-admitted one, after `after`."""
    last: dict[str, str] = {}
    times = []
    with history.lock:
        changes = list(zip(history.changes, history.times, strict=True))
    for (unit, _, phase), at in changes:
        if phase in ADMITTED and last.get(unit) not in ADMITTED and at > after:
            times.append(at)
        last[unit] = phase
    return times


def one_run(
    index: int, api: KubeApi, api_client: Any, kubectl: Kubectl, *, kubeconfig: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    ns = kq.namespace(kubectl, f"takeover-{index}-{int(time.time())}")
    lease = f"kq-takeover-{index}-{int(time.time())}"
    quotas = [f"tk{index}-{int(time.time()) % 100000}-{q}" for q in range(args.quotas)]
    for name in quotas:
        api.create(ELASTIC_QUOTA, kq.quota(name, max_={"cpu": str(args.capacity),
                                                        "memory": "1Ti"}), "default")
    timing = [f"--leader-elect-lease-duration={args.lease_duration}",
              f"--leader-elect-renew-deadline={args.renew_deadline}",
              f"--leader-elect-retry-period={args.retry_period}",
              f"--admission-period={args.period}"]
    logs = [open(f"{args.log_prefix}-{index}-{i}.log", "w") for i in range(2)]  # noqa: SIM115
    watcher = LeaseWatcher(api, lease).start()
    history = History(api_client, ns).start()
    kubelet = Kubelet(api, ns, history)
    procs: list[subprocess.Popen[str]] = []
    try:
        procs.append(start_controller(kubeconfig, logs[0], *timing, lease=lease))
        first = kq.wait_for(watcher.holder, timeout=60, what="a leader")
        assert first.rsplit("_", 1)[1] == str(procs[0].pid), (first, procs[0].pid)
        procs.append(start_controller(kubeconfig, logs[1], *timing, lease=lease))
        time.sleep(args.retry_period * 2 + 3)  # the standby is up and polling the Lease
        assert watcher.holder() == first, "the standby took the Lease from a live leader"

        bodies = [kq.job(f"job-{i:04d}", ns, quotas[i % args.quotas], cpu="1", memory="1Mi")
                  for i in range(args.jobs)]
        creator = ThreadPoolExecutor(8)
        created = creator.map(lambda b: api.create(JOB, b, ns), bodies)
        kq.wait_for(lambda: (kubelet.tick(), history.admitted_seen >= args.kill_after)[1],
                    timeout=180, what=f"{args.kill_after} admissions before the kill")
        killed_at = time.monotonic()
        os.kill(procs[0].pid, signal.SIGKILL)
        procs[0].wait(10)

        def standby_leads() -> bool:
            return watcher.holder() not in ("", first)

        kq.wait_for(lambda: (kubelet.tick(), standby_leads())[1], timeout=args.lease_duration * 4
                    + 30, interval=0.05, what="the standby holding the Lease")
        acquired_at = next(t for t, h in watcher.seen if h not in ("", first) and t > killed_at)
        assert watcher.holder().rsplit("_", 1)[1] == str(procs[1].pid)
        kq.wait_for(lambda: (kubelet.tick(), admissions_after(history, acquired_at))[1],
                    timeout=120, interval=0.05, what="the standby's first admission")
        first_admission = admissions_after(history, acquired_at)[0]
        list(created)

        def all_done() -> bool:
            kubelet.tick()
            final = history.final()
            return len(final) == args.jobs and all(p == "Succeed" for p in final.values())

        kq.wait_for(all_done, timeout=600, interval=0.2, what="every Job admitted and finished",
                    state=lambda: sorted(set(history.final().values())))
        completed = time.monotonic()
        creator.shutdown(wait=True)
    finally:
        for proc in procs:
            stop_controller(proc)
        kubelet.close()
        history.stop()
        watcher.stop()
        for log in logs:
            log.close()
    admissions, peak = admitted_peaks(history.changes)
    lease_s = args.lease_duration
    return {
        "run": index,
        "admitted_before_kill": sum(1 for t in admissions_after(history, 0.0) if t <= killed_at),
        "acquired_s": round(acquired_at - killed_at, 2),
        "first_admission_s": round(first_admission - killed_at, 2),
        "completed_s": round(completed - killed_at, 2),
        "acquired_over_lease": round((acquired_at - killed_at) / lease_s, 2),
        "first_admission_over_lease": round((first_admission - killed_at) / lease_s, 2),
        "admitted_twice": sum(1 for n in admissions.values() if n != 1),
        "peak_over_capacity": sum(1 for p in peak.values() if p > args.capacity),
        "admitted": len(admissions),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--quotas", type=int, default=10)
    parser.add_argument("--capacity", type=int, default=10, help="CPUs per quota (1 per Job)")
    parser.add_argument("--kill-after", type=int, default=0,
                        help="admissions seen before the kill (default: a third of the Jobs)")
    parser.add_argument("--lease-duration", type=float, default=15.0)
    parser.add_argument("--renew-deadline", type=float, default=10.0)
    parser.add_argument("--retry-period", type=float, default=2.0)
    parser.add_argument("--period", type=float, default=1.0, help="--admission-period")
    parser.add_argument("--log-prefix", default="/tmp/bench_takeover",
                        help="controller logs: PREFIX-RUN-{0,1}.log")
    args = parser.parse_args()
    args.kill_after = args.kill_after or args.jobs // 3
    cal = calibrate()  # before the control plane starts: the yardstick of an idle box

    runs = []
    with ControlPlane() as cp:
        assert cp.kubeconfig is not None
        kubectl = Kubectl(cp.binaries.kubectl, cp.kubeconfig)
        install_crds(kubectl)
        kubectl.apply({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": LEASE_NAMESPACE}})
        api_client = load_api_client(str(cp.kubeconfig))
        api = KubeApi(api_client)
        for index in range(args.runs):
            result = one_run(index, api, api_client, kubectl, kubeconfig=cp.kubeconfig, args=args)
            print(json.dumps(result), flush=True)
            runs.append(result)

    def spread(key: str) -> dict[str, float]:
        values = [r[key] for r in runs]
        return {"min": min(values), "median": round(statistics.median(values), 2),
                "max": max(values)}

    summary = {
        "jobs": args.jobs, "quotas": args.quotas, "capacity": args.capacity,
        "kill_after": args.kill_after, "runs": args.runs,
        "lease_duration_s": args.lease_duration, "renew_deadline_s": args.renew_deadline,
        "retry_period_s": args.retry_period, "admission_period_s": args.period,
        **{key: spread(key) for key in ("acquired_s", "first_admission_s", "completed_s",
                                          "acquired_over_lease",
                                          "first_admission_over_lease")},
        "admitted_twice": sum(r["admitted_twice"] for r in runs),
        "peak_over_capacity": sum(r["peak_over_capacity"] for r in runs),
        "calibration": cal.as_dict(),
    }
    print(json.dumps(summary, indent=2))
    return 0 if summary["admitted_twice"] == 0 and summary["peak_over_capacity"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
