"""Admission on the real controller with a large backlog, with and without a visibility poller.

    python bench/bench_visibility_live.py [--pending 15000] [--windows 6] [--jobs 400]
                                          [--quotas 10] [--poll 1.0] [--limit 15000] [--plain]

Issue 27 part 1, as an operator meets it: `koordqueue run` on the test control plane (etcd +
kube-apiserver with the aggregation layer), its visibility API registered by an APIService,
`--pending` QueueUnits waiting in a quota that admits nothing. Then windows, alternating quiet
and polled (the order flipped every pair, as bench_visibility.py, because this box's hiccups
are as large as the effect): each window creates `--jobs` suspended Jobs into quotas with room
(bench/burst.py's creators and watch) and measures create -> un-suspend. In a polled window a
client in its own process asks the API server for every pending unit (`pendingunits?limit=`)
every `--poll` seconds, as `kubectl get --raw` does (with Accept-Encoding: gzip, as kubectl
and client-go send it; `--plain`: without): through the aggregator, which
authenticates the caller and proxies to the controller, which reviews the caller's access
(TokenReview / SubjectAccessReview) and answers. Each answer is checked to hold the backlog.

bench_visibility.py measures the same question on the pure engine's rounds (milliseconds,
where any process sharing the 2 cores shows); this one measures the latency an operator's Job
sees, with the API server, etcd and the aggregator's proxying in the path.

Prints per condition p50 / p99 / max create -> un-suspend, controller CPU per Job, the API
server's and etcd's CPU per Job, the ratios polled / quiet, the poller's answer times and
sizes (decoded), and the machine yardstick.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.burst import component, cpu_seconds, latency_figures, run_burst, summary
from bench.calibration import calibrate
from bench.release import ZERO_QUOTA, fitting_quota
from koordqueue.domain import names
from koordqueue.kube.api import (
    ELASTIC_QUOTA,
    JOB,
    NAMESPACE,
    QUEUE_UNIT,
    KubeApi,
    load_api_client,
)
from tests.controlplane.harness import ControlPlane
from tests.e2e import kq
from tests.e2e.conftest import Kubectl, install_crds
from tests.e2e.deployed import free_port
from tests.e2e.visibility_served import APISERVICE, serving_cert
from tests.e2e.visibility_served import register as register_apiservice

PENDING_PATH = f"/apis/{names.VISIBILITY_GROUP}/{names.VISIBILITY_VERSION}/pendingunits"
SERVICE = "koordqueue-visibility-bench"
HELD = "held"
"""The quota of max 0 the backlog waits in."""


def poll(kubeconfig: str, every: float, limit: int, expect: int, out: str, *, gz: bool) -> None:
    """The poller process: GET every pending unit through the API server every `every` s,
    until killed; one JSON line per answer (wall time, seconds, bytes, items, total). `gz`:
    with Accept-Encoding: gzip, as kubectl and client-go ask."""
    api = KubeApi(load_api_client(kubeconfig)).with_timeout(30)
    with open(out, "a", buffering=1) as sink:
        while True:
            t0 = time.time()
            answer = api.request("GET", PENDING_PATH, query=[("limit", str(limit))], gzip=gz)
            took = time.time() - t0
            items = len(answer.get("items") or [])
            sink.write(json.dumps({"at": t0, "s": round(took, 4), "items": items,
                                   "total": answer.get("total"),
                                   "bytes": len(orjson.dumps(answer))}) + "\n")
            if items < expect:
                sink.write(json.dumps({"error": f"{items} items, expected >= {expect}"}) + "\n")
            time.sleep(max(0.0, every - (time.time() - t0)))


def register(kubectl: Kubectl, tmp: Path) -> tuple[int, Path, Path]:
    """A serving certificate, an ExternalName Service for 127.0.0.1 and the APIService."""
    cert, key, ca = serving_cert(tmp, SERVICE)
    port = free_port()
    register_apiservice(kubectl, SERVICE, port, ca)
    return port, cert, key


def backlog_unit(i: int, ns: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "QueueUnit",
            "metadata": {"name": f"held{i:05d}", "namespace": ns,
                         "labels": {names.QUOTA_NAME_LABEL: HELD}},
            "spec": {"resource": {"cpu": "1"}, "priority": i % 7}}


def wait_pending(api: KubeApi, want: int, timeout: float) -> int:
    """Until the visibility API (through the aggregator) counts `want` pending units."""
    deadline = time.time() + timeout
    total = -1
    while time.time() < deadline:
        try:
            answer = api.request("GET", PENDING_PATH, query=[("limit", "1")])
            total = int(answer.get("total") or 0)
        except Exception as exc:  # the APIService not Available yet
            print(f"  visibility not answering yet: {exc}", file=sys.stderr)
        if total >= want:
            return total
        time.sleep(3)
    raise SystemExit(f"the visibility API counts {total} pending units, want {want}")


def resyncs_between(log_path: str, start: float, end: float) -> list[dict[str, Any]]:
    """The controller's periodic resyncs whose fold ended in the window or up to 3 s before it
    (its log's "periodic resync folded" lines): a window near one is marked, so a lag can be
    told from the resync (issue 27: one 6.1x window began 2 s after one)."""
    found = []
    for line in Path(log_path).read_text().splitlines():
        if '"periodic resync folded"' not in line:
            continue
        entry = json.loads(line)
        at = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp()
        if start - 3 <= at <= end:
            found.append({"at_s": round(at - start, 2), "folded_again": entry["folded_again"],
                          "fold_s": entry["seconds"]})
    return found


def figures(latencies: list[float], cpu_s: float, jobs: int) -> dict[str, Any]:
    return {"jobs": jobs, "latency_s": latency_figures(latencies),
            "controller_cpu_ms_per_job": round(1000 * cpu_s / max(jobs, 1), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, default=15000)
    parser.add_argument("--windows", type=int, default=6, help="windows of each condition")
    parser.add_argument("--jobs", type=int, default=400, help="Jobs per window")
    parser.add_argument("--quotas", type=int, default=10)
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--limit", type=int, default=15000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--log", default="/tmp/bench_visibility_live.log")
    parser.add_argument("--plain", action="store_true",
                        help="the poller does not ask for gzip (kubectl and client-go do)")
    parser.add_argument("--poller", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.poller:  # the child: poll until killed
        kubeconfig, out, expect = args.poller.split(",")
        poll(kubeconfig, args.poll, args.limit, int(expect), out, gz=not args.plain)
        return
    cal = calibrate()
    total_jobs = args.windows * 2 * args.jobs
    with ControlPlane() as cp, tempfile.TemporaryDirectory() as tmp_s:
        assert cp.kubeconfig is not None
        tmp = Path(tmp_s)
        kubectl = Kubectl(cp.binaries.kubectl, cp.kubeconfig)
        install_crds(kubectl)
        kubectl.apply({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": names.QUEUE_NAMESPACE}})
        ns = kq.namespace(kubectl, "bench")
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        api.create(ELASTIC_QUOTA, kq.quota(HELD, max_=dict(ZERO_QUOTA)), "default")
        room = fitting_quota(total_jobs, args.quotas)
        for q in range(args.quotas):
            api.create(ELASTIC_QUOTA, kq.quota(f"bq{q}", max_=dict(room)), "default")
        port, cert, key = register(kubectl, tmp)
        run = ["run", f"--kubeconfig={cp.kubeconfig}", "--metrics-port=0", "--health-port=0",
               "--log-level=info", f"--visibility-port={port}", f"--visibility-cert={cert}",
               f"--visibility-key={key}"]
        with component(run, args.log) as pid:
            kubectl("wait", "--for=condition=Available", f"apiservice/{APISERVICE}",
                    "--timeout=60s")
            t0 = time.time()
            with ThreadPoolExecutor(args.clients) as pool:
                list(pool.map(lambda i: api.create(QUEUE_UNIT, backlog_unit(i, ns), ns),
                              range(args.pending)))
            held = wait_pending(api, args.pending, timeout=600)
            print(f"backlog: {held} pending units in {time.time() - t0:.0f} s", file=sys.stderr)
            time.sleep(5)  # the backlog's status writes settle
            results = windows(args, api, pid, kubeconfig=str(cp.kubeconfig), tmp=tmp,
                              servers=list(cp.pids))
    report(args, cal, results, held)


def windows(args: argparse.Namespace, api: KubeApi, pid: int, *, kubeconfig: str,
            tmp: Path, servers: list[int]) -> dict[str, Any]:
    """Alternating quiet / polled windows; per condition the pooled latencies and CPU (the
    controller's, and the API server's and etcd's: `servers`)."""
    lat: dict[str, list[float]] = {"quiet": [], "polled": []}
    cpu: dict[str, float] = {"quiet": 0.0, "polled": 0.0}
    server_cpu: dict[str, float] = {"quiet": 0.0, "polled": 0.0}
    per_window: list[dict[str, Any]] = []
    polls = tmp / "polls.jsonl"
    resumed = lambda job: (job.get("spec") or {}).get("suspend") is False  # noqa: E731
    n = 0
    for pair in range(args.windows):
        order = ("quiet", "polled") if pair % 2 == 0 else ("polled", "quiet")
        for condition in order:
            # a namespace per window: the burst's watch starts with a listing, which must not
            # hold the Jobs of the windows before
            ns = api.create(NAMESPACE, {"metadata": {"name": f"w{n:02d}"}})["metadata"]["name"]
            jobs = [kq.job(f"j{i:04d}", ns, f"bq{i % args.quotas}", cpu="1", memory="1Gi")
                    for i in range(args.jobs)]
            n += 1
            poller = None
            if condition == "polled":
                poller = subprocess.Popen(
                    [sys.executable, __file__, "--poll", str(args.poll), "--limit",
                     str(args.limit), "--poller", f"{kubeconfig},{polls},{args.pending}",
                     *(["--plain"] if args.plain else [])],
                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
            time.sleep(1.5)  # unmeasured: the poller's start-up and first answer
            cpu0 = cpu_seconds(pid)
            server0 = sum(cpu_seconds(p) for p in servers)
            began = time.time()
            burst = run_burst(api, JOB, ns, jobs, reached=resumed, pid=pid,
                              clients=args.clients)
            used = cpu_seconds(pid) - cpu0
            server_used = sum(cpu_seconds(p) for p in servers) - server0
            if poller is not None:
                poller.terminate()
                poller.wait(10)
            got = [burst.reached[k] - burst.created[k] for k in burst.reached
                   if k in burst.created]
            if len(got) < len(jobs):
                raise SystemExit(f"window {n}: {len(got)} of {len(jobs)} Jobs un-suspended")
            lat[condition] += got
            cpu[condition] += used
            server_cpu[condition] += server_used
            per_window.append({"condition": condition, **figures(got, used, len(got)),
                               "server_cpu_ms_per_job": round(1000 * server_used / len(got), 3),
                               "stages_s": summary(burst, "controller_to_resume")["stages_s"],
                               "resyncs": resyncs_between(args.log, began, time.time())})
            print(json.dumps(per_window[-1]), file=sys.stderr)
    answers = [json.loads(line) for line in polls.read_text().splitlines()] if polls.exists() \
        else []
    return {"latencies": lat, "cpu": cpu, "server_cpu": server_cpu, "windows": per_window,
            "answers": answers}


def report(args: argparse.Namespace, cal: Any, results: dict[str, Any], held: int) -> None:
    lat, cpu = results["latencies"], results["cpu"]
    quiet = figures(lat["quiet"], cpu["quiet"], len(lat["quiet"]))
    polled = figures(lat["polled"], cpu["polled"], len(lat["polled"]))
    answers = [a for a in results["answers"] if "s" in a]
    errors = [a["error"] for a in results["answers"] if "error" in a]
    server = {c: round(1000 * results["server_cpu"][c] / max(len(lat[c]), 1), 3)
              for c in ("quiet", "polled")}
    window_p99 = {c: [w["latency_s"]["p99"] for w in results["windows"] if w["condition"] == c]
                  for c in ("quiet", "polled")}
    out = {
        "pending": held, "windows_each": args.windows, "jobs_per_window": args.jobs,
        "quiet": quiet, "polled": polled,
        "ratio_polled_over_quiet": {
            "p50": round(polled["latency_s"]["p50"] / quiet["latency_s"]["p50"], 2),
            "p99": round(polled["latency_s"]["p99"] / quiet["latency_s"]["p99"], 2),
            "cpu_per_job": round(polled["controller_cpu_ms_per_job"]
                                 / quiet["controller_cpu_ms_per_job"], 2),
            "server_cpu_per_job": round(server["polled"] / max(server["quiet"], 1e-9), 2),
        },
        "server_cpu_ms_per_job": server,
        "poller_gzip": not args.plain,
        "window_p99_s": window_p99,
        "window_p99_median_ratio": round(statistics.median(window_p99["polled"])
                                         / statistics.median(window_p99["quiet"]), 2),
        "poller": {
            "answers": len(answers), "errors": errors[:3], "error_count": len(errors),
            "answer_s_p50": round(statistics.median([a["s"] for a in answers]), 3)
            if answers else None,
            "answer_s_max": max((a["s"] for a in answers), default=None),
            "items_min": min((a["items"] for a in answers), default=None),
            "bytes_median": int(statistics.median([a["bytes"] for a in answers]))
            if answers else None,
        },
        "calibration": cal.as_dict(),
    }
    print(json.dumps(out))
    print(f"\ncreate -> un-suspend with {held} units pending, {args.windows} windows of "
          f"{args.jobs} Jobs per condition:")
    for name, f in (("quiet", quiet), ("polled", polled)):
        s = f["latency_s"]
        print(f"  {name:7s} p50 {s['p50']:.3f} s  p99 {s['p99']:.3f} s  max {s['max']:.3f} s  "
              f"CPU {f['controller_cpu_ms_per_job']:.2f} ms/Job")
    r = out["ratio_polled_over_quiet"]
    print(f"  polled / quiet: p50 {r['p50']}x  p99 {r['p99']}x  CPU per Job "
          f"{r['cpu_per_job']}x  (median of per-window p99s: "
          f"{out['window_p99_median_ratio']}x)")
    print(f"  API server + etcd CPU per Job: quiet {server['quiet']:.2f} ms, polled "
          f"{server['polled']:.2f} ms ({r['server_cpu_per_job']}x); the poller asks "
          f"{'with gzip' if not args.plain else 'plain'}")
    p = out["poller"]
    print(f"  poller: {p['answers']} answers of {p['items_min']}+ units "
          f"(~{p['bytes_median']} bytes), p50 {p['answer_s_p50']} s, max {p['answer_s_max']} s, "
          f"{p['error_count']} short answers")
    if p["error_count"] or not answers:
        raise SystemExit("the poller's answers did not hold the backlog")


if __name__ == "__main__":
    main()
