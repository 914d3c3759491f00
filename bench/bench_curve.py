"""The cost curve, both systems (issue 36 point 3): CPU per admitted Job and p99 against the
number of quotas and against the pending depth. One system at one point per invocation, so
runs can interleave with other work under a lock; `render` turns the logs into the table and
the plot.

    python bench/bench_curve.py run --system koordqueue|kueue-best --curve quotas \
        --quotas 1000 [--jobs 1000]
    python bench/bench_curve.py run --system koordqueue|kueue-best --curve depth \
        --depth 10000 [--quotas 10 --rate 20 --interval-s 0.5 --window-s 30]
    python bench/bench_curve.py render --png bench/curve.png LOG...

Each run: a fresh etcd + kube-apiserver (tests/controlplane), the three-level hierarchy of
bench/curve.py (ours: ElasticQuotas top -> mid<m> -> leaves via the parent label, the parents
marked is-parent with room for every Job; Kueue v0.17.0: Cohorts top -> mid<m> via
spec.parentName, one ClusterQueue + LocalQueue per leaf via spec.cohortName), every leaf at 0.
The Jobs (1 cpu / 1Gi, job i in leaf i % quotas) are created suspended and held as in release
mode (bench/release.py `hold`: every Job's QueueUnit Enqueued / Workload QuotaReserved=False,
then the controller quiet). Then:

- `--curve quotas`: every leaf is raised at once (8 client threads) to fit all its Jobs;
- `--curve depth`: every `--interval-s` for `--window-s`, one leaf (round robin) gets room for
  rate * interval more Jobs: `--rate` Jobs per second become admissible while the rest wait.

Latency: each un-suspend from the edit that made room for it (bench/curve.py `attribute`:
the k-th un-suspend is charged to the edit that brought the room sent so far to k). CPU: the
controller's user + system time from the first edit until the last Job it made room for is
un-suspended, per admitted Job (the API server's alike); RSS at that moment and its peak
(VmHWM); API writes per admitted Job over that window plus 3 s (the edits taken out). Kueue
runs with a profile of bench_peers.KUEUE_PROFILES (`kueue-best`: qps 2000 / burst 4000, Job
50 / Workload 50 workers); every row names it. Prints one JSON line starting `{"curve"`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import curve  # noqa: E402
from bench.bench_peers import (  # noqa: E402
    CLUSTER_QUEUE,
    KUEUE_PROFILES,
    LOCAL_QUEUE,
    RESOURCE_FLAVOR,
    WORKLOAD,
    all_active,
    kueue_job,
    kueue_process,
    kueue_profile_line,
    local_queue,
    resource_flavor,
    wait_until,
)
from bench.burst import (  # noqa: E402
    api_writes,
    component,
    cpu_seconds,
    rss_mb,
    watch_objects,
    writes_per_job,
)
from bench.calibration import calibrate  # noqa: E402
from bench.release import Held, hold, own_edits, unit_pending, workload_pending  # noqa: E402
from koordqueue.kube.api import (  # noqa: E402
    ELASTIC_QUOTA,
    JOB,
    QUEUE_UNIT,
    Kind,
    KubeApi,
    load_api_client,
)

SETTLE_S = 3.0


def stepped_release(
    api: KubeApi,
    namespace: str,
    plan: list[curve.TimedEdit],
    *,
    pid: int,
    apiserver_pid: int,
    clients: int = 8,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    """Send `plan`'s edits at their times (from `clients` threads) while watching the Jobs;
    stop once as many Jobs are un-suspended as the edits made room for (or the timeout)."""
    freed = sum(t.freed for t in plan)
    resumed: dict[str, float] = {}
    listed: set[str] = set()
    stop = threading.Event()
    listed_all = threading.Event()
    expected = len(api.list_objects(JOB, namespace))

    def on_event(event_type: str, obj: dict[str, Any], at: float) -> None:
        name = (obj.get("metadata") or {}).get("name") or ""
        if event_type == "ADDED":
            listed.add(name)
            if len(listed) >= expected:
                listed_all.set()
        if (obj.get("spec") or {}).get("suspend") is False:
            resumed.setdefault(name, at)

    def watch() -> None:
        try:
            watch_objects(
                api, JOB, namespace, on_event, done=stop.is_set, deadline=time.time() + 3600
            )
        except Exception as exc:  # the control plane goes away under it
            if not stop.is_set():
                print(f"watch failed: {exc!r}", file=sys.stderr)

    threading.Thread(target=watch, daemon=True).start()
    if not listed_all.wait(120):
        raise SystemExit(f"the watch listed {len(listed)} of {expected} Jobs")
    if resumed:
        raise SystemExit(f"{len(resumed)} Jobs resumed before the release")
    sent: list[tuple[float, int]] = []
    lock = threading.Lock()
    writes_before = api_writes(api)
    cpu_before, apiserver_before = cpu_seconds(pid), cpu_seconds(apiserver_pid)
    t0 = time.time()

    def apply(timed: curve.TimedEdit) -> None:
        delay = t0 + timed.at_s - time.time()
        if delay > 0:
            time.sleep(delay)
        at = time.time()
        api.merge_patch(timed.edit.kind, timed.edit.name, timed.edit.patch, timed.edit.namespace)
        with lock:
            sent.append((at, timed.freed))

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(apply, plan))
    edits_s = time.time() - t0
    deadline = time.time() + timeout_s
    while len(resumed) < freed and time.time() < deadline:
        time.sleep(0.02)
    cpu_s = cpu_seconds(pid) - cpu_before
    apiserver_s = cpu_seconds(apiserver_pid) - apiserver_before
    rss, peak_rss = rss_mb(pid), rss_mb(pid, "VmHWM")
    at_end = dict(resumed)
    time.sleep(SETTLE_S)  # late writes land; an over-admission would show here too
    writes = writes_per_job(
        writes_before, api_writes(api), max(len(at_end), 1), 0, own_edits([t.edit for t in plan])
    )
    stop.set()
    latencies, over = curve.attribute(sent, at_end.values())
    wall = max(at_end.values(), default=time.time()) - t0
    return {
        **curve.figures(
            latencies, cpu_s=cpu_s, apiserver_cpu_s=apiserver_s, wall_s=wall, admitted=len(at_end)
        ),
        "freed": freed,
        "resumed_after_settle": len(resumed),
        "unattributed": over,
        "before_their_edit": sum(1 for x in latencies if x < 0),
        "edits": len(plan),
        "edits_s": round(edits_s, 2),
        "rss_mb": rss,
        "peak_rss_mb": peak_rss,
        "writes_total": writes["total"],
        "writes_per_job": writes,
    }


def run_point(args: argparse.Namespace) -> dict[str, Any]:
    from tests.controlplane import peers
    from tests.controlplane.harness import ControlPlane
    from tests.e2e import kq
    from tests.e2e.conftest import Kubectl, install_crds

    system = args.system
    leaves = args.quotas
    jobs = args.jobs if args.curve == "quotas" else args.depth
    tree = curve.hierarchy(leaves)
    if args.curve == "quotas":
        plan_edits = curve.quotas_plan(system, tree, jobs)
    else:
        steps = curve.step_schedule(
            leaves, jobs // leaves, args.rate, args.interval_s, args.window_s
        )
        plan_edits = curve.depth_plan(system, tree, steps)
    kueue = peers.ensure_peer(peers.KUEUE) if system != curve.KOORDQUEUE else None
    point = leaves if args.curve == "quotas" else jobs
    log = f"{args.log_dir}/curve-{args.curve}-{point}-{system}.log"
    with ControlPlane() as cp, tempfile.TemporaryDirectory(prefix="bench-curve-") as tmp:
        assert cp.kubeconfig is not None
        kubectl = Kubectl(cp.binaries.kubectl, cp.kubeconfig)
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        apiserver = cp.procs["kube-apiserver"].pid
        pool = ThreadPoolExecutor(args.clients)

        def measured(
            ns: str, bodies: list[dict[str, Any]], pid: int, pending_kind: Kind,
            pending: Callable[[Mapping[str, Any]], bool],
        ) -> tuple[Held, dict[str, Any]]:
            """Both systems: hold every Job pending, then release step by step."""
            held = hold(api, JOB, ns, bodies, pending_kind=pending_kind, pending=pending,
                        pid=pid, clients=args.clients, timeout_s=args.hold_timeout_s)
            result = stepped_release(
                api, ns, plan_edits, pid=pid, apiserver_pid=apiserver, clients=args.clients
            )
            return held, result

        t_setup = time.time()
        if kueue is None:
            install_crds(kubectl)
            kubectl.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koord-queue"}}
            )
            ns = kq.namespace(kubectl, "bench")
            for level in curve.elastic_quotas(tree, jobs):
                list(pool.map(lambda q: api.create(ELASTIC_QUOTA, q, curve.QUOTA_NAMESPACE), level))
            bodies = [kq.job(f"job{i:05d}", ns, tree.leaves[i % leaves]) for i in range(jobs)]
            argv = [
                "run",
                f"--kubeconfig={cp.kubeconfig}",
                "--metrics-port=0",
                "--health-port=0",
                "--log-level=info",
                *shlex.split(args.run_flags),
            ]
            with component(argv, log) as pid:
                setup_s = time.time() - t_setup
                held, result = measured(ns, bodies, pid, QUEUE_UNIT, unit_pending)
        else:
            assert kueue.crds is not None
            install_crds(kubectl, kueue.crds)
            for name in ("kueue-system", "bench"):
                kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            ns = "bench"
            api.create(RESOURCE_FLAVOR, resource_flavor())
            for level in curve.kueue_objects(tree):
                list(pool.map(lambda kb: api.create(kb[0], kb[1]), level))
            list(
                pool.map(
                    lambda leaf: api.create(LOCAL_QUEUE, local_queue(leaf, ns, leaf), ns),
                    tree.leaves,
                )
            )
            bodies = [
                kueue_job(kq.job(f"job{i:05d}", ns, None), tree.leaves[i % leaves])
                for i in range(jobs)
            ]
            profile = system.removeprefix("kueue-")
            with kueue_process(
                kueue, str(cp.kubeconfig), Path(tmp), log, args.peer_v, profile=profile
            ) as pid:
                wait_until(lambda: all_active(api.list_objects(CLUSTER_QUEUE)), 120, log)
                setup_s = time.time() - t_setup
                held, result = measured(ns, bodies, pid, WORKLOAD, workload_pending)
        pool.shutdown()
    shown = system if kueue is None else f"Kueue v0.17.0 {kueue_profile_line(profile)}"
    return {
        "curve": args.curve,
        "point": point,
        "system": system,
        "shown": shown,
        "jobs": jobs,
        "quotas": leaves,
        "mids": len(tree.mids),
        "setup_s": round(setup_s, 1),
        "hold_s": vars(held),
        **(
            {"rate": args.rate, "interval_s": args.interval_s, "window_s": args.window_s}
            if args.curve == "depth"
            else {}
        ),
        **result,
    }


def render(args: argparse.Namespace) -> int:
    results = []
    for path in args.logs:
        for line in Path(path).read_text().splitlines():
            if line.startswith('{"curve"'):
                results.append(json.loads(line))
    print(curve.curve_table(results))
    if args.png:
        curve.plot(results, args.png, args.title)
        print(f"plot: {args.png}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="one system at one point")
    run.add_argument(
        "--system", required=True, help=f"koordqueue or kueue-PROFILE ({sorted(KUEUE_PROFILES)})"
    )
    run.add_argument("--curve", choices=("quotas", "depth"), required=True)
    run.add_argument("--quotas", type=int, default=10, help="leaves of the hierarchy")
    run.add_argument("--jobs", type=int, default=1000, help="--curve quotas: Jobs in all")
    run.add_argument("--depth", type=int, default=1000, help="--curve depth: Jobs held")
    run.add_argument("--rate", type=float, default=20.0, help="--curve depth: Jobs freed per s")
    run.add_argument("--interval-s", type=float, default=0.5, help="--curve depth: one edit per")
    run.add_argument("--window-s", type=float, default=30.0, help="--curve depth: steps for")
    run.add_argument("--clients", type=int, default=8)
    run.add_argument("--hold-timeout-s", type=float, default=900.0)
    run.add_argument("--run-flags", default="", help="extra `koordqueue run` flags")
    run.add_argument("--peer-v", type=int, default=1)
    run.add_argument("--log-dir", default="/tmp")
    rend = sub.add_parser("render", help="table (and --png plot) from run logs")
    rend.add_argument("logs", nargs="+")
    rend.add_argument("--png", default="")
    rend.add_argument("--title", default="")
    args = parser.parse_args()
    if args.cmd == "render":
        return render(args)
    if args.system != curve.KOORDQUEUE and args.system.removeprefix("kueue-") not in KUEUE_PROFILES:
        parser.error(f"--system {args.system}: koordqueue or kueue-{sorted(KUEUE_PROFILES)}")
    cal = calibrate()
    print(cal.line(), flush=True)
    result = run_point(args)
    print(json.dumps(result), flush=True)
    if result["admitted"] < result["freed"] or result["unattributed"]:
        print(
            f"WARNING: admitted {result['admitted']} of {result['freed']} freed, "
            f"{result['unattributed']} beyond the room"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
