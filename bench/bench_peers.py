"""koordqueue side by side with the real peers, on the same API server build, in one run.

    python bench/bench_peers.py [--what placement,admission] [--sizes 2000x100,5000x500]
                                [--jobs 1000] [--quotas 50] [--runs 1]
    python bench/bench_peers.py --what volcano [--volcano-scenarios all|gang,preempt,...]

`--what volcano` (opt-in, issue 24) runs bench/bench_volcano.py: koordqueue beside vc-scheduler
on Volcano's own CRDs and configuration (its docstring says how).

Each measurement runs on a fresh etcd + kube-apiserver (tests/controlplane), koordqueue first,
then the peer, with the same creators (`--clients` threads) and the same watch (bench/burst.py):

- placement: P single pods (100m / 128Mi, schedulerName `volcano`) on M Ready Node objects (no
  kubelet). `koordqueue schedule` vs kube-scheduler v1.37.2 built from the pinned
  k8s.io/kubernetes (a KubeSchedulerConfiguration whose one profile is named `volcano`, client
  qps = burst = 5000, no leader election, the harness's admin kubeconfig). Creation -> bind
  (`spec.nodeName` seen on the watch) p50/p99, throughput and scheduler CPU per bound pod.
  With `--floor` (the default) bench/binder.py runs too: it binds each pod to a fixed node as
  it is created, deciding nothing; its p99 and the API server's CPU per pod are this API
  server's floor on this box, and both schedulers are printed as multiples of it (issue 28).
- admission: N suspended Jobs over Q quotas, every Job fits. koordqueue `run` with one
  ElasticQuota per quota (as bench_controller.py) vs Kueue v0.17.0 with one ClusterQueue +
  LocalQueue per quota (same nominal quota, one ResourceFlavor), Jobs created suspended with the
  `kueue.x-k8s.io/queue-name` label (no webhook configuration is installed: none is needed).
  Kueue runs with internal cert management off, its webhook server on a loopback port with a
  cert made here with openssl, metrics off, client qps = burst = 5000 and VisibilityOnDemand off
  (its extension API server is not part of admission). Kueue reads a metrics cert from the fixed
  path /etc/kueue/metrics/certs even with metrics off; it is given one in a private mount
  namespace (`unshare -m`), so nothing on the machine is written. Kueue runs once per
  `--kueue-profiles` entry, interleaved with koordqueue in every run (KUEUE_PROFILES: `shipped`,
  qps 50 / burst 100 and 5 Job / 5 Workload workers as v0.17.0 ships it; `best`, qps 2000 /
  burst 4000 and 50 / 50 workers, the best found on this box); each row names its profile.
  Creation -> un-suspend p50/p99,
  controller CPU per admission and the controller's peak RSS (VmHWM of its process, read once
  the run's writes settled: `peak_rss_mb`, and `rss_mb` its VmRSS then, bench/burst.py
  `rss_mb`); the controller's API writes per Job by verb and resource
  (the API server's apiserver_request_total, less the benchmark's own Job creates), printed
  for both under the table.

`--release` (admission only, issue 36 point 4; bench/release.py): the normal mode's wall is
the creators' create phase, so it measures the creator as much as admission. Here the Jobs are
created while every quota admits nothing (ElasticQuota max 0 / ClusterQueue nominalQuota 0),
the script waits until each has its QueueUnit Enqueued / Workload QuotaReserved=False and the
controller is quiet, reads the controller's and the API server's CPU and the write counts, and
raises every quota with one merge patch (8 at a time): p50 / p99 release -> un-suspend, the
wall until the last, CPU per admitted Job and API writes per Job (less the edits), all over the
release window only. The table then adds wall and writes per Job.

Peers are built (then cached) by tests/controlplane/peers.py on first use. CPU is user + system
time from /proc of the component's own process. Prints the calibration yardstick, one JSON
line per run, then a table of medians over `--runs` with the ratios koordqueue / peer.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_scheduler import make_node, pod  # noqa: E402
from bench.burst import (  # noqa: E402
    WRITE_VERBS,
    Burst,
    api_writes,
    component,
    cpu_seconds,
    rss_mb,
    run_burst,
    summary,
    writes_per_job,
)
from bench.calibration import calibrate  # noqa: E402
from bench.release import (  # noqa: E402
    ZERO_QUOTA,
    Edit,
    Released,
    elastic_quota_plan,
    fitting_quota,
    release_plan,
    release_summary,
    run_release,
    unit_pending,
    workload_pending,
)
from koordqueue.kube.api import (  # noqa: E402
    ELASTIC_QUOTA,
    JOB,
    POD,
    QUEUE_UNIT,
    Kind,
    KubeApi,
    load_api_client,
)

SCHEDULER_NAME = "volcano"
PEER_CLIENT_QPS = 5000
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"  # the storage version of every Kueue CRD in v0.17.0
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_FLAVOR = "default"
KUEUE_METRICS_CERT_DIR = "/etc/kueue/metrics/certs"  # fixed in cmd/kueue/main.go
KUEUE_SHIPPED_CONCURRENCY = {
    "Job.batch": 5,
    "Pod": 5,
    "Workload.kueue.x-k8s.io": 5,
    "LocalQueue.kueue.x-k8s.io": 1,
    "Cohort.kueue.x-k8s.io": 1,
    "ClusterQueue.kueue.x-k8s.io": 1,
    "ResourceFlavor.kueue.x-k8s.io": 1,
}

KUEUE_PROFILES: dict[str, dict[str, Any]] = {
    # config/components/manager/controller_manager_config.yaml as Kueue v0.17.0 ships it
    "shipped": {"qps": 50, "burst": 100, "concurrency": dict(KUEUE_SHIPPED_CONCURRENCY)},
    # the best found on this box (issue 36): above 20 workers and qps 500 it plateaus, and
    # rate limiting off is no better
    "best": {"qps": 2000, "burst": 4000, "concurrency": {
        **KUEUE_SHIPPED_CONCURRENCY, "Job.batch": 50, "Workload.kueue.x-k8s.io": 50}},
}
"""Kueue configurations bench_peers runs (`--kueue-profiles`); every row names its own."""


def kueue_profile_line(name: str) -> str:
    """`best (qps 2000 / burst 4000, Job 50 / Workload 50 workers)`: what a row ran."""
    profile = KUEUE_PROFILES[name]
    workers = profile["concurrency"]
    return (f"{name} (qps {profile['qps']} / burst {profile['burst']}, Job "
            f"{workers['Job.batch']} / Workload {workers['Workload.kueue.x-k8s.io']} workers)")


CLUSTER_QUEUE = Kind(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "ClusterQueue", False)
LOCAL_QUEUE = Kind(KUEUE_GROUP, KUEUE_VERSION, "localqueues", "LocalQueue")
RESOURCE_FLAVOR = Kind(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", "ResourceFlavor", False)
WORKLOAD = Kind(KUEUE_GROUP, KUEUE_VERSION, "workloads", "Workload")


# --------------------------------------------------------------------------- pure helpers


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """`"2000x100,5000x500"` -> [(2000, 100), (5000, 500)] (pods x nodes)."""
    sizes = []
    for part in text.split(","):
        pods, _, nodes = part.strip().partition("x")
        if not nodes:
            raise ValueError(f"size {part!r} is not PODSxNODES")
        sizes.append((int(pods), int(nodes)))
    return sizes


def scheduler_config(kubeconfig: str, qps: int = PEER_CLIENT_QPS) -> dict[str, Any]:
    """kube-scheduler's KubeSchedulerConfiguration: one profile named like ours, no election."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig, "qps": qps, "burst": qps},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": SCHEDULER_NAME}],
    }


def kueue_config(
    *,
    cert_dir: str,
    webhook_port: int,
    health_port: int,
    qps: int = PEER_CLIENT_QPS,
    burst: int | None = None,
    concurrency: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Kueue's Configuration for a bare API server: no cert manager, no webhook config, Jobs only.

    `internalCertManagement.enable: false` skips the cert bootstrap (which needs webhook
    configurations and a Secret); the webhook server still starts and serves `cert_dir`'s
    tls.crt / tls.key; `metrics.bindAddress: "0"` turns the metrics server off.
    """
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": cert_dir},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": qps, "burst": qps if burst is None else burst},
        "integrations": {"frameworks": ["batch/job"]},
        "featureGates": {"VisibilityOnDemand": False},
        # as Kueue's shipped config/components/manager/controller_manager_config.yaml (without
        # it controller-runtime runs one worker per controller)
        "controller": {"groupKindConcurrency": dict(concurrency or KUEUE_SHIPPED_CONCURRENCY)},
    }


def resource_flavor() -> dict[str, Any]:
    return {
        "apiVersion": RESOURCE_FLAVOR.api_version,
        "kind": "ResourceFlavor",
        "metadata": {"name": KUEUE_FLAVOR},
    }


def cluster_queue(name: str, cpu: str, memory: str) -> dict[str, Any]:
    """One ClusterQueue per quota: nominal = the ElasticQuota's max, no cohort (no borrowing)."""
    return {
        "apiVersion": CLUSTER_QUEUE.api_version,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},  # every namespace (a missing selector matches none)
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": KUEUE_FLAVOR,
                            "resources": [
                                {"name": "cpu", "nominalQuota": cpu},
                                {"name": "memory", "nominalQuota": memory},
                            ],
                        }
                    ],
                }
            ],
        },
    }


def local_queue(name: str, namespace: str, cluster_queue_name: str) -> dict[str, Any]:
    return {
        "apiVersion": LOCAL_QUEUE.api_version,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue_name},
    }


def cluster_queue_plan(jobs: int, quotas: int) -> list[Edit]:
    """Kueue's release: raise each ClusterQueue `cq<q>`'s nominalQuota from 0 to what its Jobs
    need. A merge patch replaces a list whole, so the edit carries all of resourceGroups."""
    fit = fitting_quota(jobs, quotas)
    groups = cluster_queue("", fit["cpu"], fit["memory"])["spec"]["resourceGroups"]
    names = [f"cq{q}" for q in range(quotas)]
    return release_plan(CLUSTER_QUEUE, names, None, lambda _q: {"spec": {
        "resourceGroups": groups}}, jobs)  # fmt: skip


def kueue_job(job: dict[str, Any], queue: str) -> dict[str, Any]:
    """The same Job body, pointed at a Kueue LocalQueue instead of a koordqueue quota."""
    labels = {
        k: v for k, v in job["metadata"].get("labels", {}).items() if "koord" not in k.lower()
    }
    labels[KUEUE_QUEUE_LABEL] = queue
    return {**job, "metadata": {**job["metadata"], "labels": labels}}


def kueue_level(verbosity: int) -> str:
    """Kueue's --zap-log-level for a klog-style verbosity: info unless 2+ asks for reconciles."""
    return str(verbosity) if verbosity >= 2 else "info"


def ratio(ours: float, peer: float) -> str:
    return f"{ours / peer:.2f}x" if peer else "n/a"


def table(rows: list[dict[str, Any]], release: bool = False) -> str:
    """Markdown table of koordqueue vs peer figures, one row per (workload, size); `release`
    adds the wall until the last Job and the API writes per Job (release mode's window); a
    row with the controllers' memory (admission) adds their peak RSS beside CPU per item."""
    memory = any("peak_rss_mb" in row["ours"] for row in rows)
    head = (
        "| workload | size | p50 s (ours / peer, ratio) | p99 s (ours / peer, ratio) "
        "| throughput /s (ours / peer) | CPU ms per item (ours / peer, ratio) |"
    )
    if memory:
        head += " peak RSS MB (ours / peer, ratio) |"
    if release:
        head += " wall s (ours / peer, ratio) | API writes per Job (ours / peer) |"
    lines = [head, "|---|---|---|---|---|---|" + ("---|" if memory else "")
             + ("---|---|" if release else "")]  # fmt: skip
    for row in rows:
        o, p = row["ours"], row["peer"]
        line = (
            f"| {row['workload']} vs {row['peer_name']} | {row['size']} "
            f"| {o['p50']} / {p['p50']} ({ratio(o['p50'], p['p50'])}) "
            f"| {o['p99']} / {p['p99']} ({ratio(o['p99'], p['p99'])}) "
            f"| {o['throughput']} / {p['throughput']} "
            f"| {o['cpu_ms']} / {p['cpu_ms']} ({ratio(o['cpu_ms'], p['cpu_ms'])}) |"
        )
        if memory:
            ours_mb, peer_mb = o.get("peak_rss_mb", 0.0), p.get("peak_rss_mb", 0.0)
            line += f" {ours_mb or ''} / {peer_mb or ''} ({ratio(ours_mb, peer_mb)}) |"
        if release:
            line += (
                f" {o.get('wall_s')} / {p.get('wall_s')} "
                f"({ratio(o.get('wall_s', 0.0), p.get('wall_s', 0.0))}) "
                f"| {o.get('writes_total')} / {p.get('writes_total')} |"
            )
        lines.append(line)
    return "\n".join(lines)


def placement_targets(ours: dict[str, float], peer: dict[str, float]) -> dict[str, bool]:
    """Issue 19's targets, same run: p99, throughput and CPU per pod at least kube-scheduler's."""
    return {
        "p99_le_peer": ours["p99"] <= peer["p99"],
        "throughput_ge_peer": ours["throughput"] >= peer["throughput"],
        "cpu_per_pod_le_peer": ours["cpu_ms"] <= peer["cpu_ms"],
    }


def medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Median of each headline over repeated runs of one component at one size."""
    keys = ("p50", "p99", "throughput", "cpu_ms", "apiserver_cpu_ms", "wall_s", "writes_total",
            "peak_rss_mb", "rss_mb")
    return {k: round(statistics.median(r[k] for r in runs), 3) for k in keys
            if all(k in r for r in runs)}  # fmt: skip


def floor_lines(size: str, figures: dict[str, dict[str, float]]) -> list[str]:
    """Each scheduler's p99 and API server CPU per pod as multiples of the binder's (the floor:
    binding with no decision) at one size."""
    floor = figures.get("binder")
    if not floor:
        return []
    lines = []
    for who, f in figures.items():
        if who == "binder":
            continue
        lines.append(
            f"floor {size}: {who} p99 {f['p99']} s = {ratio(f['p99'], floor['p99'])} the "
            f"binder's {floor['p99']} s; API server CPU per pod {f.get('apiserver_cpu_ms')} ms = "
            f"{ratio(f.get('apiserver_cpu_ms', 0.0), floor.get('apiserver_cpu_ms', 0.0))} "
            f"the binder's {floor.get('apiserver_cpu_ms')} ms"
        )
    return lines


# --------------------------------------------------------------------------- processes


def _openssl_cert(d: Path) -> None:
    """A self-signed serving cert for 127.0.0.1 as tls.crt / tls.key (what certwatcher reads)."""
    d.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout", str(d / "tls.key"), "-out", str(d / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip


@contextmanager
def peer_process(
    argv: list[str],
    log_path: str,
    *,
    env: dict[str, str] | None = None,
    ready: Callable[[], bool] | None = None,
    startup_s: float = 3.0,
    timeout_s: float = 90.0,
) -> Iterator[int]:
    """A peer binary as a subprocess (output in `log_path`); yields its pid once it is ready.

    Ready: `ready()` returns True (then `startup_s` more for its informers), or just `startup_s`
    when there is no probe, the same start-up allowance `component()` gives koordqueue.
    """
    from tests.controlplane.harness import _set_parent_death_signal

    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            preexec_fn=_set_parent_death_signal,  # noqa: PLW1509 - a prctl only
        )
        try:
            deadline = time.time() + timeout_s
            while ready is not None and not ready():
                if proc.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"{argv[0]} did not become ready: see {log_path}")
                time.sleep(0.2)
            time.sleep(startup_s)
            if proc.poll() is not None:
                raise SystemExit(f"{argv[0]} exited: see {log_path}")
            yield proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def all_active(cluster_queues: list[dict[str, Any]]) -> bool:
    """Every ClusterQueue reports condition Active=True: Kueue can admit into all of them."""
    return bool(cluster_queues) and all(
        any(
            c.get("type") == "Active" and c.get("status") == "True"
            for c in (cq.get("status") or {}).get("conditions") or []
        )
        for cq in cluster_queues
    )


def wait_until(check: Callable[[], bool], timeout_s: float, log_path: str) -> None:
    deadline = time.time() + timeout_s
    while not check():
        if time.time() > deadline:
            raise SystemExit(f"peer not ready after {timeout_s} s: see {log_path}")
        time.sleep(0.1)


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@contextmanager
def profiled(pid: int, name: str, args: argparse.Namespace) -> Iterator[None]:
    """With `--profile-s S`: py-spy (GIL samples, raw) on koordqueue for the burst's first S s.

    py-spy stops the process to sample it, so a profiled run's figures are not comparable:
    profile in a separate run.
    """
    if not args.profile_s:
        yield
        return
    out = f"{args.log_dir}/profile-{name}.txt"
    spy = [str(Path(sys.executable).parent / "py-spy"), "record", "--gil", "-p", str(pid)]
    spy += ["-d", str(args.profile_s), "--format", "raw", "-o", out]
    proc = subprocess.Popen(spy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.wait(args.profile_s + 30)
        print(f"profile: {out}", flush=True)


@contextmanager
def apiserver_profiled(kubectl: list[str], name: str, args: argparse.Namespace) -> Iterator[None]:
    """With `--apiserver-profile-s S`: the API server's own CPU profile (Go pprof, through
    `kubectl get --raw /debug/pprof/profile`) over the burst's first S s, kept in the log dir
    with its top functions (`go tool pprof -top`): where the server's CPU per pod goes with
    each scheduler."""
    if not args.apiserver_profile_s:
        yield
        return
    out = Path(f"{args.log_dir}/apiserver-{name}.pprof")
    path = f"/debug/pprof/profile?seconds={args.apiserver_profile_s}"
    with out.open("wb") as sink:
        proc = subprocess.Popen([*kubectl, "get", "--raw", path], stdout=sink,
                                stderr=subprocess.DEVNULL)
        try:
            yield
        finally:
            proc.wait(args.apiserver_profile_s + 60)
    go = shutil.which("go") or "/usr/local/go/bin/go"
    top = subprocess.run([go, "tool", "pprof", "-top", "-nodecount=60", str(out)],
                         capture_output=True, text=True, check=False)
    Path(f"{out}.top.txt").write_text(top.stdout + top.stderr)
    print(f"apiserver profile: {out} (top: {out}.top.txt)", flush=True)


# --------------------------------------------------------------------------- workloads


def _headline(burst: Burst, count: int, stage: str, dump: str = "") -> dict[str, Any]:
    stats = summary(burst, stage, dump)
    reached = len(burst.reached)
    return {
        "reached": reached,
        "of": count,
        "p50": stats["latency_s"]["p50"],
        "p99": stats["latency_s"]["p99"],
        "throughput": stats["throughput_per_s"],
        "cpu_ms": round(1000 * burst.cpu_s / max(reached, 1), 3),
        "cpu_s": round(burst.cpu_s, 2),
        "stats": stats,
    }


def _release_headline(released: Released, count: int, dump: str = "") -> dict[str, Any]:
    """_headline's figures for a release-mode run, all from the quota edit: p50 / p99 release
    -> un-suspend, the wall until the last, and CPU per admitted Job over that window."""
    burst = released.burst
    stats = release_summary(burst, dump)
    stats["hold_s"] = vars(released.held)
    reached = max(len(burst.reached), 1)
    return {
        "mode": "release",
        "reached": len(burst.reached),
        "of": count,
        "p50": stats["latency_s"]["p50"],
        "p99": stats["latency_s"]["p99"],
        "wall_s": stats["total_s"],
        "throughput": stats["throughput_per_s"],
        "cpu_ms": round(1000 * burst.cpu_s / reached, 3),
        "cpu_s": round(burst.cpu_s, 2),
        "apiserver_cpu_ms": round(1000 * burst.apiserver_cpu_s / reached, 3),
        "stats": stats,
    }


def _dump(args: argparse.Namespace, who: str, name: str) -> str:
    """With `--dump`: where this run's per-object wall times go (JSON), else ""."""
    return f"{args.log_dir}/times-{name}-{who}.json" if args.dump else ""


def placement(who: str, pods: int, nodes: int, args: argparse.Namespace) -> dict[str, Any]:
    from tests.controlplane import peers
    from tests.controlplane.harness import ControlPlane
    from tests.e2e import kq
    from tests.e2e.conftest import Kubectl, install_crds

    binary = peers.ensure_peer(peers.KUBE_SCHEDULER).binary if who == "kube-scheduler" else None
    events_after: float | None = None  # (the binder writes none)
    with ControlPlane() as cp, tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        apiserver = cp.procs["kube-apiserver"].pid
        assert cp.kubeconfig is not None
        kubectl = Kubectl(cp.binaries.kubectl, cp.kubeconfig)
        install_crds(kubectl)
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        ns = kq.namespace(kubectl, "bench")
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(lambda i: make_node(api, f"node{i:04d}"), range(nodes)))
        bodies = [pod(f"pod{i:05d}", ns) for i in range(pods)]
        log = f"{args.log_dir}/placement-{who}-{pods}x{nodes}.log"
        bound = lambda p: bool((p.get("spec") or {}).get("nodeName"))  # noqa: E731
        raw = [str(cp.binaries.kubectl), f"--kubeconfig={cp.kubeconfig}"]
        apiserver_before = cpu_seconds(apiserver)
        requests_before = api_writes(api, writes_only=False)
        if who == "binder":
            argv = [sys.executable, str(ROOT / "bench" / "binder.py"),
                    f"--kubeconfig={cp.kubeconfig}", f"--namespace={ns}",
                    f"--scheduler-name={SCHEDULER_NAME}"]  # fmt: skip
            with peer_process(argv, log, env={"PYTHONPATH": str(ROOT)}) as pid, \
                    apiserver_profiled(raw, f"{who}-{pods}x{nodes}", args):
                burst = run_burst(
                    api, POD, ns, bodies, reached=bound, pid=pid, clients=args.clients
                )
                requests_after = settled_requests(api)
        elif binary is None:
            run = [
                "schedule",
                f"--kubeconfig={cp.kubeconfig}",
                "--metrics-port=0",
                "--health-port=0",
                "--log-level=info",
                *shlex.split(args.koordqueue_schedule_flags),
            ]
            with component(run, log) as pid, profiled(pid, f"placement-{pods}x{nodes}", args), \
                    apiserver_profiled(raw, f"{who}-{pods}x{nodes}", args):
                burst = run_burst(
                    api, POD, ns, bodies, reached=bound, pid=pid, clients=args.clients
                )
                events_after = events_written(api, requests_before, pods, pid, burst)
                requests_after = settled_requests(api)
        else:
            config = Path(tmp) / "kube-scheduler.yaml"
            config.write_text(json.dumps(scheduler_config(str(cp.kubeconfig))))
            argv = [str(binary), f"--config={config}", "--secure-port=0", f"--v={args.peer_v}"]
            with peer_process(argv, log) as pid, \
                    apiserver_profiled(raw, f"{who}-{pods}x{nodes}", args):
                burst = run_burst(
                    api, POD, ns, bodies, reached=bound, pid=pid, clients=args.clients
                )
                events_after = events_written(api, requests_before, pods, pid, burst)
                requests_after = settled_requests(api)
        apiserver_s = cpu_seconds(apiserver) - apiserver_before
        requests = requests_after - requests_before
    dump = _dump(args, who, f"placement-{pods}x{nodes}")
    headline = _headline(burst, pods, "scheduler_to_bind", dump)
    writes = writes_per_pod(only_writes(requests_before), only_writes(requests_after), pods,
                            len(burst.created))
    return {"workload": "placement", "who": who, "size": f"{pods}/{nodes}", **headline,
            "apiserver_cpu_ms": round(1000 * apiserver_s / max(pods, 1), 3),
            **({} if events_after is None else {"events_after_s": events_after}),
            "writes_per_job": writes, "writes_total": writes["total"],
            # every request the API server counted, reads and watches too, the benchmark's own
            # creates, watch and metrics reads included (the same for each scheduler)
            "requests_per_pod": {k: round(v / max(pods, 1), 3)
                                 for k, v in sorted(requests.items()) if v}}  # fmt: skip


EVENTS_TIMEOUT_S = 60.0
"""How long a placement run waits for the scheduler's `Scheduled` events after the burst."""


def events_written(
    api: KubeApi, before: Counter[str], pods: int, pid: int, burst: Burst
) -> float:
    """Wait until the scheduler has written an Event per pod: ours holds them through a
    burst of binds (event_lane.py) and writes them after it, and kube-scheduler's broadcaster
    writes them behind its binds. The scheduler's CPU meanwhile is added to the burst's, so
    CPU per pod counts every Event. Seconds from the last bind seen to the last Event
    counted (`events_after_s`; the wait itself polls the API server's /metrics 4 times a
    second, for both schedulers alike)."""
    cpu_before = cpu_seconds(pid)
    deadline = time.time() + EVENTS_TIMEOUT_S
    while time.time() < deadline:
        if api_writes(api)["POST events"] - before["POST events"] >= pods:
            break
        time.sleep(0.25)
    else:
        print(f"events: fewer than {pods} written after {EVENTS_TIMEOUT_S:.0f} s", flush=True)
    burst.cpu_s += cpu_seconds(pid) - cpu_before
    return round(time.time() - max(burst.reached.values(), default=time.time()), 3)


PLACEMENT_SETTLE_S = 1.0
"""After a placement burst, how long the trailing writes (Scheduled events) get to land before
the API server's write counts are read, the scheduler still running."""


def settled_requests(api: KubeApi) -> Counter[str]:
    """Every request the API server counted so far, read after the trailing writes settle."""
    time.sleep(PLACEMENT_SETTLE_S)
    return api_writes(api, writes_only=False)


def only_writes(requests: Counter[str]) -> Counter[str]:
    """The writes of `api_writes(api, writes_only=False)`'s counts ("VERB resource")."""
    return Counter({k: v for k, v in requests.items() if k.split(" ", 1)[0] in WRITE_VERBS})


def writes_per_pod(
    before: Counter[str], after: Counter[str], pods: int, created: int
) -> dict[str, float]:
    """A placement run's API writes per pod by verb and resource (apiserver_request_total),
    the benchmark's own pod creates taken out: the scheduler's binds, events and any other
    write it made while the component ran (its stop included)."""
    writes = writes_per_job(before, after, pods, 0, own={"POST pods": created})
    writes.pop("POST jobs", None)
    return writes


def memory_of(pid: int) -> dict[str, float]:
    """The controller's resident memory once its run is over (the writes settled), in MB:
    `peak_rss_mb` the most it held at any time (VmHWM), `rss_mb` what it holds then."""
    return {"peak_rss_mb": rss_mb(pid, "VmHWM"), "rss_mb": rss_mb(pid)}


WRITES_SETTLE_S = 5.0
"""After an admission burst, how long the background writes (events, statuses) get to land
before the API server's write counts are read (bench_controller.api_writes)."""


def admission(who: str, jobs: int, quotas: int, args: argparse.Namespace) -> dict[str, Any]:
    from tests.controlplane import peers
    from tests.controlplane.harness import ControlPlane
    from tests.e2e import kq
    from tests.e2e.conftest import Kubectl, install_crds

    profile = who.removeprefix("kueue-") if who.startswith("kueue-") else None
    kueue = peers.ensure_peer(peers.KUEUE) if profile is not None else None
    # every Job fits: latency, not waiting, is measured (--release: once the quotas are raised)
    fit = ZERO_QUOTA if args.release else fitting_quota(jobs, quotas)
    cpu, memory = fit["cpu"], fit["memory"]
    with ControlPlane() as cp, tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        assert cp.kubeconfig is not None
        kubectl = Kubectl(cp.binaries.kubectl, cp.kubeconfig)
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        log = f"{args.log_dir}/admission-{who}-{jobs}x{quotas}.log"
        apiserver = cp.procs["kube-apiserver"].pid
        resumed = lambda job: (job.get("spec") or {}).get("suspend") is False  # noqa: E731

        def measure(
            ns: str, bodies: list[dict[str, Any]], pid: int, plan: list[Edit],
            *, pending_kind: Kind, pending: Callable[[dict[str, Any]], bool],
        ) -> tuple[Burst, dict[str, float], Released | None, dict[str, float]]:
            """The burst (or, with --release, the held Jobs released by `plan`), the writes
            per Job, the release's record and the controller's memory (memory_of): the same
            for both controllers."""
            if args.release:
                held = run_release(
                    api, JOB, ns, bodies, plan, pending_kind=pending_kind, pending=pending,
                    reached=resumed, pid=pid, apiserver_pid=apiserver, clients=args.clients,
                    settle_s=WRITES_SETTLE_S,
                )
                return held.burst, held.writes, held, memory_of(pid)
            before = api_writes(api)
            burst = run_burst(api, JOB, ns, bodies, reached=resumed, pid=pid,
                              clients=args.clients)  # fmt: skip
            time.sleep(WRITES_SETTLE_S)
            writes = writes_per_job(before, api_writes(api), jobs, len(burst.created))
            return burst, writes, None, memory_of(pid)
        if kueue is None:
            install_crds(kubectl)
            kubectl.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koord-queue"}}
            )
            ns = kq.namespace(kubectl, "bench")
            for i in range(quotas):
                quota = kq.quota(f"bq{i}", max_={"cpu": cpu, "memory": memory})
                api.create(ELASTIC_QUOTA, quota, "default")
            bodies = [
                kq.job(f"job{i:05d}", ns, f"bq{i % quotas}", cpu="1", memory="1Gi")
                for i in range(jobs)
            ]
            run = [
                "run",
                f"--kubeconfig={cp.kubeconfig}",
                "--metrics-port=0",
                "--health-port=0",
                "--log-level=info",
                *shlex.split(args.koordqueue_run_flags),
            ]
            with component(run, log) as pid, profiled(pid, f"admission-{jobs}x{quotas}", args):
                burst, writes, released, memory = measure(
                    ns, bodies, pid, elastic_quota_plan(jobs, quotas),
                    pending_kind=QUEUE_UNIT, pending=unit_pending)
        else:
            assert kueue.crds is not None
            install_crds(kubectl, kueue.crds)
            for name in ("kueue-system", "bench"):
                kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            ns = "bench"
            api.create(RESOURCE_FLAVOR, resource_flavor())
            for i in range(quotas):
                api.create(CLUSTER_QUEUE, cluster_queue(f"cq{i}", cpu, memory))
                api.create(LOCAL_QUEUE, local_queue(f"lq{i}", ns, f"cq{i}"), ns)
            bodies = [
                kueue_job(kq.job(f"job{i:05d}", ns, None, cpu="1", memory="1Gi"), f"lq{i % quotas}")
                for i in range(jobs)
            ]
            with kueue_process(kueue, str(cp.kubeconfig), Path(tmp), log, args.peer_v,
                               profile=profile) as pid:
                wait_until(lambda: all_active(api.list_objects(CLUSTER_QUEUE)), 60, log)
                burst, writes, released, memory = measure(
                    ns, bodies, pid, cluster_queue_plan(jobs, quotas),
                    pending_kind=WORKLOAD, pending=workload_pending)
    dump = _dump(args, who, f"admission-{jobs}x{quotas}")
    if released is None:
        headline = _headline(burst, jobs, "controller_to_resume", dump)
    else:
        headline = _release_headline(released, jobs, dump)
    return {"workload": "admission", "who": who, "size": f"{jobs}/{quotas}", **headline,
            **memory, "writes_per_job": writes, "writes_total": writes["total"]}  # fmt: skip


@contextmanager
def kueue_process(
    kueue: Any, kubeconfig: str, tmp: Path, log: str, peer_v: int, *, profile: str | None = None
) -> Iterator[int]:
    """Kueue (`peers.ensure_peer(KUEUE)`) on the API server of `kubeconfig`; yields its pid.

    Its certs and config go in `tmp`; ready once /readyz answers. The caller waits for its
    ClusterQueues to be Active (bench_scale.py shares this start-up). `profile`: a name of
    KUEUE_PROFILES (None: client qps = burst = PEER_CLIENT_QPS, the shipped concurrency).
    """
    from tests.controlplane.harness import free_port

    certs = tmp / "certs"
    _openssl_cert(certs)
    health = free_port()
    config = tmp / "kueue.yaml"
    tuned: dict[str, Any] = {}
    if profile is not None:
        chosen = KUEUE_PROFILES[profile]
        tuned = {"qps": chosen["qps"], "burst": chosen["burst"],
                 "concurrency": chosen["concurrency"]}  # fmt: skip
    config.write_text(json.dumps(kueue_config(
        cert_dir=str(certs), webhook_port=free_port(), health_port=health, **tuned)))  # fmt: skip
    argv = [str(kueue.binary), f"--config={config}", f"--zap-log-level={kueue_level(peer_v)}"]
    if not Path(KUEUE_METRICS_CERT_DIR, "tls.crt").is_file():
        argv = metrics_cert_namespace(argv, certs)
    with peer_process(
        argv,
        log,
        env={"KUBECONFIG": kubeconfig},
        ready=lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"),
        startup_s=0.0,
    ) as pid:
        yield pid


def metrics_cert_namespace(argv: list[str], certs: Path) -> list[str]:
    """Run `argv` in a private mount namespace where /etc/kueue/metrics/certs holds `certs`.

    Inside the namespace a tmpfs covers /etc and holds only that directory, so the host's /etc
    is never written (the static Go binary talks to 127.0.0.1 and needs nothing else from
    /etc). `unshare` and `sh` both exec, so the Popen pid is the peer's own (its /proc CPU).
    """
    if not shutil.which("unshare"):
        raise SystemExit(f"Kueue needs {KUEUE_METRICS_CERT_DIR}; `unshare` is not available")
    script = (
        "set -e; mount -t tmpfs tmpfs /etc; "
        f"mkdir -p {KUEUE_METRICS_CERT_DIR}; "
        f"cp {shlex.quote(str(certs))}/tls.crt {shlex.quote(str(certs))}/tls.key "
        f'{KUEUE_METRICS_CERT_DIR}/; exec "$@"'
    )
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "kueue", *argv]


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--what", default="placement,admission")
    parser.add_argument("--sizes", default="2000x100,5000x500", help="placement PODSxNODES list")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--quotas", type=int, default=50)
    parser.add_argument("--runs", type=int, default=1, help="repeats (the table shows medians)")
    parser.add_argument("--clients", type=int, default=8, help="parallel creators")
    parser.add_argument("--koordqueue-schedule-flags", default="", help="extra flags, one string")
    parser.add_argument("--koordqueue-run-flags", default="", help="extra flags, one string")
    parser.add_argument("--log-dir", default="/tmp", help="component logs go here")
    parser.add_argument(
        "--dump", action="store_true", help="write per-object wall times to the log dir"
    )
    parser.add_argument(
        "--peer-v",
        type=int,
        default=1,
        help="kube-scheduler --v; Kueue logs at info below 2 (2: every reconcile)",
    )
    parser.add_argument(
        "--profile-s", type=int, default=0, help="py-spy koordqueue for S s (figures then skewed)"
    )
    parser.add_argument("--apiserver-profile-s", type=int, default=0,
                        help="placement: the API server's Go CPU profile over the burst's "
                             "first S s, with its top functions, in the log dir")
    parser.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                        help="placement: also run bench/binder.py (binds, decides nothing)")
    parser.add_argument("--kueue-profiles", default="shipped,best",
                        help=f"admission: Kueue configurations to run, of {sorted(KUEUE_PROFILES)}")
    parser.add_argument("--release", action="store_true",
                        help="admission: create the Jobs under quotas of 0, wait until all are "
                             "pending, release them with one edit per quota and measure from "
                             "it (bench/release.py)")
    parser.add_argument("--volcano-scenarios", default="all",
                        help="with --what volcano: scenario names (bench/volcano_scenarios.py)")
    parser.add_argument("--settle-s", type=float, default=4.0,
                        help="with --what volcano: a stage is settled after S s without change")
    parser.add_argument("--timeout-s", type=float, default=120.0,
                        help="with --what volcano: give a stage at most S s to settle")
    args = parser.parse_args()
    what = {w.strip() for w in args.what.split(",")}
    if "volcano" in what:
        from bench.bench_volcano import main as volcano_main

        cal = calibrate()
        print(cal.line(), flush=True)
        code = volcano_main(args)
        print(cal.line())
        return code
    cal = calibrate()  # before any control plane starts: the yardstick of an idle box
    print(cal.line(), flush=True)

    cases: list[tuple[str, list[str], Callable[[str], dict[str, Any]]]] = []
    if "placement" in what:
        placement_peers = ["kube-scheduler", "binder"] if args.floor else ["kube-scheduler"]
        for pods, nodes in parse_sizes(args.sizes):
            cases.append(("placement", placement_peers,
                          lambda who, p=pods, n=nodes: placement(who, p, n, args)))  # fmt: skip
    if "admission" in what:
        profiles = [p.strip() for p in args.kueue_profiles.split(",") if p.strip()]
        unknown = [p for p in profiles if p not in KUEUE_PROFILES]
        if unknown or not profiles:
            parser.error(f"--kueue-profiles: {unknown or 'none'}; known: {sorted(KUEUE_PROFILES)}")
        cases.append(("admission", [f"kueue-{p}" for p in profiles],
                      lambda who: admission(who, args.jobs, args.quotas, args)))  # fmt: skip
    rows = []
    floors: list[str] = []
    for workload, peer_names, measure in cases:
        runs: dict[str, list[dict[str, Any]]] = {"koordqueue": []}
        runs.update({name: [] for name in peer_names})
        size = ""
        for _ in range(args.runs):
            for who, done in runs.items():  # interleaved: koordqueue, then each peer
                result = measure(who)
                size = result["size"]
                print(json.dumps({k: v for k, v in result.items() if k != "stats"}), flush=True)
                print(json.dumps({"stages_s": result["stats"]["stages_s"],
                                  **({"hold_s": result["stats"]["hold_s"]}
                                     if "hold_s" in result["stats"] else {})}),
                      flush=True)  # fmt: skip
                if result["reached"] != result["of"]:
                    print(f"WARNING: {who} reached {result['reached']} of {result['of']}")
                done.append(result)
        if "binder" in runs:
            floors += floor_lines(size, {who: medians(r) for who, r in runs.items()})
        for peer_name in peer_names:
            if peer_name == "binder":
                continue
            shown = (f"Kueue {kueue_profile_line(peer_name.removeprefix('kueue-'))}"
                     if peer_name.startswith("kueue-") else peer_name)  # fmt: skip
            rows.append({
                "workload": workload, "size": size, "peer_name": shown,
                "ours": medians(runs["koordqueue"]), "peer": medians(runs[peer_name]),
                "writes": {who: runs[who][-1].get("writes_per_job") for who in
                           ("koordqueue", peer_name)},
            })  # fmt: skip
    print()
    print(cal.line())
    print(table(rows, release=args.release))
    for line in floors:
        print(line)
    for row in rows:
        if row.get("writes"):
            item = "pod" if row["workload"] == "placement" else "Job"
            print(f"API writes per {item} by verb and resource, {row['workload']} {row['size']} "
                  f"(last run): {json.dumps(row['writes'], sort_keys=True)}")
    for row in rows:
        if row["workload"] == "placement":
            print(
                f"issue 19 targets at {row['size']}: {placement_targets(row['ours'], row['peer'])}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
