"""Job creation -> un-suspend latency of the live controller on a real API server.

    python bench/bench_controller.py [--jobs 1000] [--quotas 50] [--period 1.0] [--dump F]

Starts etcd + kube-apiserver (tests/controlplane), runs `koordqueue run` as a subprocess (so
its CPU time can be read from /proc), creates the quotas, then the Jobs from a thread pool,
and watches the Jobs until every one that fits is resumed. Prints p50/p90/p99/max latency,
the throughput, the controller's CPU seconds per admission and its thread count after the
burst, and where the time goes (the create call; the API server's watch delivery, seen by
this script's own watch; the controller up to the resume), and the controller's API writes
per Job by verb and resource (the API server's apiserver_request_total, read before the burst
and `--settle-s` after it, less the benchmark's own Job creates). `--dump` writes every Job's
timestamps for a closer look; `--profile-s S` records the controller with py-spy (GIL samples,
collapsed stacks, sampled without stopping the process) for the burst's first S seconds;
`--profile-threads` samples every thread py-spy thinks busy instead (it counts threads
blocked in libcurl or on a queue as busy: a map of where threads wait, not of CPU), and
`--profile-rate` sets the samples per second. Read GIL samples with care: at 200/s a
1,000-Job burst gave ~450, and 18 % of them landed on `orjson.loads` of write answers that
take 3 us each (timeit), so a sample's line is where a thread took the GIL back, not
always where CPU went.
`--release` (issue 36, bench/release.py) measures admission without the creator: the Jobs
are created under quotas of max 0, and once every one has its QueueUnit Enqueued and the
controller is quiet, one merge patch per quota raises its max; latency, wall, CPU (the
controller's and the API server's) and writes count from that edit (`--profile-s` still
starts with the controller, so it covers the hold too).
Target (issue 4): p99 < 2 s with a 1 s admission period for 1,000 Jobs over 50 quotas.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.burst import api_writes, component, run_burst, summary, writes_per_job  # noqa: E402
from bench.calibration import calibrate  # noqa: E402
from bench.release import (  # noqa: E402
    ZERO_QUOTA,
    elastic_quota_plan,
    fitting_quota,
    release_summary,
    run_release,
    unit_pending,
)
from koordqueue.kube.api import (  # noqa: E402
    ELASTIC_QUOTA,
    JOB,
    QUEUE_UNIT,
    KubeApi,
    load_api_client,
)
from tests.controlplane.harness import ControlPlane  # noqa: E402
from tests.e2e import kq  # noqa: E402
from tests.e2e.conftest import Kubectl, install_crds  # noqa: E402


def _threads(pid: int) -> int:
    """The controller process's thread count (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


@contextmanager
def profiled(pid: int, seconds: int, out: str, gil: bool = True, rate: int = 100,
             ) -> Iterator[None]:
    """py-spy on the controller for `seconds` (nothing when 0); collapsed stacks in `out`.
    `gil`: only the thread holding the GIL is sampled (False: every thread not idle, which
    also shows the time spent in C without the GIL: TLS, libcurl, JSON)."""
    if not seconds:
        yield
        return
    spy = [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid)]
    spy += ["--gil", "--nonblocking"] if gil else ["--nonblocking"]
    spy += ["-r", str(rate), "-d", str(seconds), "--format", "raw", "-o", out]
    proc = subprocess.Popen(spy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.wait(seconds + 30)
        print(f"profile: {out}", flush=True)


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
    parser.add_argument("--profile-s", type=int, default=0, help="py-spy the controller S s")
    parser.add_argument("--profile-out", default="/tmp/bench_controller_profile.txt")
    parser.add_argument("--profile-threads", action="store_true",
                        help="sample every busy thread, not only the GIL holder")
    parser.add_argument("--profile-rate", type=int, default=100, help="py-spy samples per s")
    parser.add_argument("--run-flags", default="", help="extra `koordqueue run` flags, one string")
    parser.add_argument(
        "--settle-s", type=float, default=5.0, help="wait after the burst before counting writes"
    )
    parser.add_argument(
        "--release", action="store_true",
        help="create every Job under quotas of max 0, wait until all are pending, then raise "
             "each quota with one edit: latency, CPU and writes from the edit (issue 36)",
    )  # fmt: skip
    args = parser.parse_args()
    cal = calibrate()  # before the control plane starts: the yardstick of an idle box

    with ControlPlane() as cp:
        assert cp.kubeconfig is not None
        kubectl = Kubectl(cp.binaries.kubectl, cp.kubeconfig)
        install_crds(kubectl)
        kubectl.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koord-queue"}}
        )
        ns = kq.namespace(kubectl, "bench")
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        # every Job fits (the benchmark measures latency, not waiting); --release: once released
        max_ = ZERO_QUOTA if args.release else fitting_quota(args.jobs, args.quotas)
        for i in range(args.quotas):
            api.create(ELASTIC_QUOTA, kq.quota(f"bq{i}", max_=dict(max_)), "default")
        jobs = [
            kq.job(f"job{i:05d}", ns, f"bq{i % args.quotas}", cpu="1", memory="1Gi")
            for i in range(args.jobs)
        ]
        resumed = lambda job: (job.get("spec") or {}).get("suspend") is False  # noqa: E731
        run = [
            "run",
            f"--kubeconfig={cp.kubeconfig}",
            f"--admission-period={args.period}",
            "--metrics-port=0",
            "--health-port=0",
            "--log-level=info",
            *shlex.split(args.run_flags),
        ]
        with (
            component(run, args.log) as pid,
            profiled(pid, args.profile_s, args.profile_out, not args.profile_threads,
                     args.profile_rate),
        ):
            if args.release:
                released = run_release(
                    api, JOB, ns, jobs, elastic_quota_plan(args.jobs, args.quotas),
                    pending_kind=QUEUE_UNIT, pending=unit_pending, reached=resumed, pid=pid,
                    apiserver_pid=cp.procs["kube-apiserver"].pid, clients=args.clients,
                    settle_s=args.settle_s,
                )  # fmt: skip
                burst, writes = released.burst, released.writes
                threads = _threads(pid)
            else:
                writes_before = api_writes(api)
                burst = run_burst(
                    api, JOB, ns, jobs, reached=resumed, pid=pid, clients=args.clients
                )
                threads = _threads(pid)  # after the burst: every pool has grown to its size
                time.sleep(args.settle_s)  # background writes (events, usage) land
                writes = writes_per_job(
                    writes_before, api_writes(api), args.jobs, len(burst.created)
                )

    resumed_count = len(burst.reached)
    if args.release:
        stats = {"hold_s": vars(released.held), **release_summary(burst, args.dump),
                 "apiserver_cpu_ms_per_admission": round(
                     1000 * burst.apiserver_cpu_s / max(resumed_count, 1), 2)}  # fmt: skip
    else:
        stats = summary(burst, "controller_to_resume", args.dump)
    p99 = stats["latency_s"]["p99"]
    result = {
        "jobs": args.jobs,
        "quotas": args.quotas,
        "admission_period_s": args.period,
        "mode": "release" if args.release else "create",
        "resumed": resumed_count,
        **stats,
        "p99_over_period": round(p99 / args.period, 2),
        "controller_cpu_s": round(burst.cpu_s, 2),
        "controller_threads": threads,
        "api_writes_per_job": writes,
        "controller_cpu_ms_per_admission": round(1000 * burst.cpu_s / max(resumed_count, 1), 2),
        "controller_cpu_py_ref_per_admission": round(
            cal.in_py_refs(burst.cpu_s / max(resumed_count, 1)), 3
        ),
        "calibration": cal.as_dict(),
        "target_p99_lt_2s": p99 < 2.0,
    }
    print(json.dumps(result, indent=2))
    return 0 if resumed_count == args.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
