"""A long soak under mixed faults with the invariants checked continuously (issue 30, part 1).

    python bench/soak.py [--duration 1800] [--seed 1] [--out FILE.json] [--keep-dir]
    python bench/soak.py --ci   # 5 minutes (.ci/run runs it when KOORDQUEUE_SOAK=1)

Never part of the test run. Starts etcd + kube-apiserver (tests/controlplane, with an audit
log of every write) and tests/controlplane/faultproxy.py in front of it; two `koordqueue run
--leader-elect` replicas (the controller, Lease koord-queue) and two `koordqueue schedule
--leader-elect` replicas (the scheduler, Lease koord-queue-scheduler) talk to the API server
only through the proxy, and are restarted a second after they exit, as a Deployment would.
bench/soak_churn.py plays the users and the kubelet (workloads of every integrated kind,
quotas edited, re-parented and deleted, pods bound and finished), and a separate watcher
(its own client, straight to the API server) feeds bench/soak_checker.py, which checks the
invariants as it goes; the audit log tells which replica wrote what, by its user agent.

Faults come from a schedule drawn from `--seed`: each kind once per cycle, cycles shuffled,
gaps of 0.5 to 1.5 x `--fault-every` seconds; none in the last `--quiet-tail` of the run,
after which every unit that fits must be admitted within `--bound` seconds:

    kill-controller-leader / kill-scheduler-leader   SIGKILL of the Lease holder
    stop-leader        SIGSTOP of a leader for 2.5 x the lease, then SIGCONT (it exits)
    api-429            30 % of requests answered 429 (Retry-After: 1) for 10 s
    api-500            20 % answered 500 for 10 s
    dropped            10 % of connections dropped, 10 % of writes' answers lost, 10 s
    half-open          3 % of requests answered with headers then nothing, for 10 s
    never-ending-watch every connection cut, then the next watches of one kind stall
    etcd-restart       etcd stopped for 2 s and started again
    clock-step         one replica's wall clock stepped by +-1..10 min (bench/soak_clock)

Prints a summary: faults by kind, takeovers and the time without a renewing leader (p50 /
max), violations by invariant (must all be 0), admissions per second over time, the
replicas' RSS slopes. Exit status 1 on any violation.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import math
import random
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Final

import structlog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.soak_checker import (  # noqa: E402
    INVARIANTS,
    Checker,
    parse_time,
    per_interval,
    pooled_rss_slope,
    role_segments,
    rss_slope,
)
from bench.soak_churn import NAMESPACE, Churn  # noqa: E402
from bench.soak_fuzz import Fuzzer, ignored  # noqa: E402
from bench.soak_replicas import (  # noqa: E402
    Life,
    Replica,
    identity_of,
    is_crash,
    replica_argv,
)
from koordqueue.kube.api import (  # noqa: E402
    ELASTIC_QUOTA,
    NODE,
    POD,
    QUEUE,
    QUEUE_UNIT,
    Kind,
    KubeApi,
    load_api_client,
)
from koordqueue.kube.informer import Informer  # noqa: E402
from koordqueue.kube.leader import CONTROLLER_LEASE, LEASE, SCHEDULER_LEASE  # noqa: E402
from tests.controlplane.faultproxy import FaultProxy, Rule  # noqa: E402
from tests.controlplane.harness import ControlPlane  # noqa: E402
from tests.e2e.conftest import Kubectl, install_crds  # noqa: E402

LEASE_NAMESPACE: Final = "koord-queue"
INTEGRATION_CRDS: Final = ROOT / "tests" / "crds" / "integrations"
FAULTS: Final = (
    "kill-controller-leader", "kill-scheduler-leader", "stop-leader", "api-429", "api-500",
    "dropped", "half-open", "never-ending-watch", "etcd-restart", "clock-step",
)
RSS_MIN_LIFE: Final = 600.0
"""Seconds of samples a process needs before its own RSS slope is judged (a shorter life is
mostly start-up growth: caches, pools, imports); shorter ones are reported, not judged."""
RSS_WARMUP: Final = 60.0
"""Seconds left out of the slot's pooled RSS slope at the start of each process and of each
takeover (soak_checker.role_segments): start-up growth, over within a minute in long2's data
(bench/HISTORY.md)."""
RSS_LEADER_WARMUP: Final = 600.0
"""Seconds after a takeover left out of every RSS slope: a new leader's working set grows for
minutes, not one. The 40-minute soak without faults (2026-12-05, seed 13, bench/README.md):
its leader grew 95 MB/h over minutes 1-10, 37 over 10-20, 13 over 20-30 and 18 over 30-39
(148 -> 173 MB), with the Python heap flat under tracemalloc (63-66 MB, minutes 2-12 of a
traced run): allocator pools and bounded caches filling. Under faults a leader lives 3-7
minutes, so a one-minute cut judged that warm-up as growth (controller-1 pooled +133 MB/h
on 8cdb018)."""
RSS_MIN_COVER: Final = 600.0
"""Seconds of samples past the warm-up a slot's processes need, together, before the slot's
pooled slope is judged (soak_checker.pooled_rss_slope: the faults leave no process alive
for 10 minutes, so the slot, not the process, is what lives long enough to judge)."""
WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
AUDIT_POLICY: Final = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
omitManagedFields: true
rules:
  - level: None
    verbs: ["get", "list", "watch"]
  - level: RequestResponse
    resources: [{group: "coordination.k8s.io", resources: ["leases"]}]
  - level: Metadata
"""


# --- the watcher and the audit log --------------------------------------------------------
class Ordered(Informer):
    """An informer whose handler runs on the watch thread, in the order the server sent
    the events (the checker's recounts need one order across objects)."""

    def _dispatch(self, event_type: str | None, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        if event_type != "DELETED":
            self._known[key] = meta.get("uid")
        else:
            self._known.pop(key, None)
        self.handler(event_type, obj)


class AuditTail(threading.Thread):
    """Feeds the audit log's events to the checker, each a few seconds after it was written
    and in the order of their completion (the log's order is close to it, not exactly)."""

    DELAY: Final = 3.0

    def __init__(self, path: Path, checker: Checker, lock: threading.Lock) -> None:
        super().__init__(name="soak-audit", daemon=True)
        self.path, self.checker, self.lock = path, checker, lock
        self.stop = threading.Event()
        self.events = 0
        self._pending: list[tuple[float, dict[str, Any]]] = []

    def run(self) -> None:
        while not self.path.exists() and not self.stop.wait(0.5):
            pass
        with open(self.path) as f:
            buffer = ""
            while True:
                chunk = f.read()
                buffer += chunk
                *lines, buffer = buffer.split("\n")
                for line in lines:
                    if line.strip():
                        event = json.loads(line)
                        stamp = event.get("stageTimestamp") or event.get(
                            "requestReceivedTimestamp") or ""
                        self._pending.append((_epoch(stamp), event))
                finishing = self.stop.is_set() and not chunk
                self._feed(math.inf if finishing else time.time() - self.DELAY)
                if finishing:
                    return
                time.sleep(0.5)

    def _feed(self, until: float) -> None:
        self._pending.sort(key=lambda pair: pair[0])
        ready = [e for t, e in self._pending if t <= until]
        self._pending = [(t, e) for t, e in self._pending if t > until]
        with self.lock:
            for event in ready:
                self.checker.on_audit(event)
        self.events += len(ready)


def _epoch(stamp: str) -> float:
    return parse_time(stamp) if stamp else 0.0


# --- faults ---------------------------------------------------------------------------------
def schedule(
    seed: int, duration: float, quiet_tail: float, every: float
) -> list[tuple[float, str]]:
    """(seconds from the start, kind): every kind once per shuffled cycle, gaps uniform in
    [0.5, 1.5] x `every` (so a 5-minute run holds a whole cycle, which exponential gaps did
    not always leave room for)."""
    rng = random.Random(seed)
    plan: list[tuple[float, str]] = []
    t = min(30.0, duration / 10)
    end = duration * (1 - quiet_tail)
    cycle: list[str] = []
    while True:
        t += rng.uniform(0.5, 1.5) * every
        if t >= end:
            return plan
        if not cycle:
            cycle = list(FAULTS)
            rng.shuffle(cycle)
        plan.append((t, cycle.pop()))


class Faults:
    def __init__(self, soak: Soak) -> None:
        self.soak = soak
        self.rng = random.Random(soak.args.seed * 7919 + 1)
        self.done: Counter[str] = Counter()
        self.log: list[tuple[float, str, str]] = []

    def leader(self, lease: str) -> Replica | None:
        obj = self.soak.api.get(LEASE, lease, LEASE_NAMESPACE)
        holder = str(((obj or {}).get("spec") or {}).get("holderIdentity") or "")
        for replica in self.soak.replicas:
            if replica.alive() and replica.identity == holder:
                return replica
        return None

    def inject(self, kind: str) -> None:
        soak, proxy = self.soak, self.soak.proxy
        began = time.time() - soak.started
        soak.note_fault(began=True)
        detail = ""
        if kind in ("kill-controller-leader", "kill-scheduler-leader"):
            lease = CONTROLLER_LEASE if kind.startswith("kill-controller") else SCHEDULER_LEASE
            victim = self.leader(lease)
            if victim is None or victim.proc is None:
                detail = "no leader to kill"
            else:
                detail = f"{victim.name} (pid {victim.kill()})"
        elif kind == "stop-leader":
            victim = self.leader(self.rng.choice((CONTROLLER_LEASE, SCHEDULER_LEASE)))
            if victim is None or victim.proc is None:
                detail = "no leader to stop"
            else:
                victim.stopped = True
                victim.proc.send_signal(signal.SIGSTOP)
                time.sleep(soak.args.lease * 2.5)
                victim.proc.send_signal(signal.SIGCONT)
                victim.stopped = False
                detail = victim.name
        elif kind == "api-429":
            self._window([Rule("429", share=0.3, retry_after=1)])
        elif kind == "api-500":
            self._window([Rule("500", share=0.2)])
        elif kind == "dropped":
            self._window([Rule("drop", share=0.1), Rule("lose-reply", share=0.1, methods=WRITES)])
        elif kind == "half-open":
            self._window([Rule("stall", share=0.03, path=r"^(?!.*watch=)")])
        elif kind == "never-ending-watch":
            plural = self.rng.choice(("queueunits", "jobs", "pods"))
            proxy.set_rules([Rule("stall", methods=frozenset({"GET"}),
                                  path=rf"/{plural}\?(.*&)?watch=", times=2)], 10.0)
            proxy.cut()
            time.sleep(10)
            detail = plural
        elif kind == "etcd-restart":
            soak.plane.restart_etcd(down_seconds=2.0)
        elif kind == "clock-step":
            replica = self.rng.choice(soak.replicas)
            step = self.rng.choice((-1, 1)) * self.rng.uniform(60, 600)
            replica.clock_file.write_text(f"{step:.0f}")
            detail = f"{replica.name} {step:+.0f} s"
        self.done[kind] += 1
        self.log.append((began, kind, detail))
        soak.note_fault(began=False)
        print(f"  [{began:6.0f} s] fault {kind} {detail} (done at "
              f"{time.time() - soak.started:.0f} s)", flush=True)

    def _window(self, rules: list[Rule], seconds: float = 10.0) -> None:
        self.soak.proxy.set_rules(rules, seconds)
        time.sleep(seconds)


# --- the soak -------------------------------------------------------------------------------
class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(tempfile.mkdtemp(prefix="kq-soak-"))
        self.checker = Checker(bound=args.bound)
        self.lock = threading.Lock()
        self.replicas: list[Replica] = []
        self.started = time.time()
        self._supervise = threading.Event()
        self._finished = threading.Event()
        self.faults_done = threading.Event()
        self.objects: list[tuple[int, int, int, int]] = []
        """(seconds, units, pods, quotas) the watcher knew, every 10 s (RSS follows them)."""

    def note_fault(self, began: bool | None = None) -> None:
        with self.lock:
            self.checker.fault(time.time(), began)

    def run(self) -> dict[str, Any]:
        args = self.args
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY)
        audit_log = self.workdir / "audit.log"
        flags = [f"--audit-policy-file={policy}", f"--audit-log-path={audit_log}",
                 "--audit-log-format=json", "--audit-log-maxsize=0", "--audit-log-maxbackup=0"]
        with ControlPlane(workdir=self.workdir / "plane", extra_apiserver_flags=flags) as plane:
            self.plane = plane
            assert plane.kubeconfig is not None
            kubectl = Kubectl(plane.binaries.kubectl, plane.kubeconfig)
            install_crds(kubectl)
            install_crds(kubectl, INTEGRATION_CRDS)
            for ns in (LEASE_NAMESPACE, NAMESPACE):
                kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            self.api = KubeApi(load_api_client(str(plane.kubeconfig)))
            churn = Churn(self.api, args.seed, workloads_per_s=args.rate, pods_per_s=args.rate)
            churn.setup()
            with FaultProxy(plane, [], faults_for=0, seed=args.seed) as proxy:
                self.proxy = proxy
                return self._soak(plane, proxy, churn, audit_log)

    def _soak(self, plane: ControlPlane, proxy: FaultProxy, churn: Churn,
              audit_log: Path) -> dict[str, Any]:
        args = self.args
        kubeconfig = proxy.write_kubeconfig(self.workdir / "kubeconfig")
        for i in range(2):
            self.replicas.append(Replica(f"controller-{i}", CONTROLLER_LEASE,
                                         replica_argv("run", kubeconfig, args), self.workdir))
            self.replicas.append(Replica(f"scheduler-{i}", SCHEDULER_LEASE,
                                         replica_argv("schedule", kubeconfig, args), self.workdir))
        audit = AuditTail(audit_log, self.checker, self.lock)
        audit.start()
        watchers = self._watch(plane)
        for replica in self.replicas:
            replica.start(self.checker)
        self.started = time.time()
        supervisor = threading.Thread(target=self._restart_exited, daemon=True)
        supervisor.start()
        probe_api = KubeApi(load_api_client(str(kubeconfig)), timeout=5.0)
        threading.Thread(target=self._probe, args=(probe_api,), daemon=True).start()
        churn.start()
        fuzzer = Fuzzer(self.api, args.seed, args.bound, self._report,
                        lambda: self.checker.quiet_since(time.time()))
        if args.fuzz:
            fuzzer.start()
        faults = Faults(self)
        plan = schedule(args.seed, args.duration, args.quiet_tail, args.fault_every)
        print(f"soak: {args.duration:.0f} s, seed {args.seed}, {len(plan)} faults planned, "
              f"work dir {self.workdir}", flush=True)
        fault_thread = threading.Thread(target=self._run_faults, args=(faults, plan), daemon=True)
        fault_thread.start()
        next_rss = next_report = 0.0
        while (elapsed := time.time() - self.started) < args.duration:
            now = time.time()
            with self.lock:
                self.checker.tick(now)
            if elapsed >= next_rss:
                for replica in self.replicas:
                    replica.sample_rss(now)
                with self.lock:
                    self.objects.append((round(elapsed), len(self.checker.units),
                                         len(self.checker.pods), len(self.checker.quotas)))
                next_rss = elapsed + 10
            if elapsed >= next_report:
                self._progress(elapsed, churn)
                next_report = elapsed + 60
            time.sleep(1.0)
        self.faults_done.wait()
        # the tail: no more work created; every unit that fits must get in within the bound
        churn.stop_creating()
        churn.recreate_deleted_quotas()
        fuzzer.stop.set()  # its example under way is still judged, within the tail
        tail_end = time.time() + args.bound + 15
        while time.time() < tail_end:
            with self.lock:
                self.checker.tick(time.time())
            time.sleep(1.0)
        fuzzer.abort.set()
        fuzzer.join(30)
        self._supervise.set()
        exits: dict[str, float] = {}
        for replica in self.replicas:
            took, life = replica.terminate()
            exits[replica.name] = round(took, 1)
            self._judge_exit(replica, life)
        churn.stop()
        for watcher in watchers:
            watcher.stop()
        audit.stop.set()
        audit.join(60)
        now = time.time()
        slopes: dict[str, float | None] = {}
        with self.lock:
            for replica in self.replicas:
                for pid, samples in replica.rss.items():
                    lived = samples[-1][0] - samples[0][0] if samples else 0
                    led = self.checker.led_from(identity_of(pid))
                    # a process that took over is judged as a leader past its warm-up
                    judged = samples if led is None else [
                        s for s in samples if s[0] >= led + RSS_LEADER_WARMUP]
                    span = judged[-1][0] - judged[0][0] if judged else 0
                    key = f"{replica.name}/{pid} ({lived / 60:.0f} min" + (
                        ")" if led is None else f", {span / 60:.0f} as a settled leader)")
                    if span >= RSS_MIN_LIFE:
                        slopes[key] = self.checker.check_rss(
                            f"{replica.name} (pid {pid})", judged, now)
                    elif lived >= 120:
                        slopes[key + " not judged"] = rss_slope(samples)
                segments = [
                    segment for pid, samples in replica.rss.items()
                    for segment in role_segments(replica.born[pid], samples,
                                                 self.checker.led_from(identity_of(pid)),
                                                 RSS_LEADER_WARMUP)]
                pooled, covered = pooled_rss_slope(segments, RSS_WARMUP)
                judged = self.checker.check_pooled_rss(
                    f"{replica.name} (all its processes)", pooled, covered, RSS_MIN_COVER, now)
                slopes[f"{replica.name} pooled over {covered / 60:.0f} min"
                       f"{'' if judged else ' not judged'}"] = pooled
        result = self._result(faults, churn, exits, slopes, audit.events, proxy)
        result["fuzz"] = dict(fuzzer.outcomes)
        result["fuzz_error"] = repr(fuzzer.error) if fuzzer.error else None
        self._finished.set()
        fault_thread.join(30)
        return result

    def _watch(self, plane: ControlPlane) -> list[Informer]:
        assert plane.kubeconfig is not None
        api = KubeApi(load_api_client(str(plane.kubeconfig)))
        checker = self.checker
        feeds: list[tuple[Kind, Any]] = [
            (ELASTIC_QUOTA, checker.on_quota), (QUEUE, checker.on_queue),
            (QUEUE_UNIT, checker.on_unit), (NODE, checker.on_node), (POD, checker.on_pod),
        ]
        watchers: list[Informer] = []
        for kind, feed in feeds:
            def handler(event_type: str | None, obj: dict[str, Any], feed: Any = feed) -> None:
                if ignored(obj):
                    return  # the fuzzer's: it checks their answers itself
                with self.lock:
                    feed(event_type, obj, time.time())

            watcher = Ordered(api, kind, handler, workers=1)
            watcher.start()
            watchers.append(watcher)
        for each in watchers:
            each.synced.wait(60)
        return watchers

    def _restart_exited(self) -> None:
        while not self._supervise.wait(1.0):
            for replica in self.replicas:
                if not replica.alive() and not self._supervise.is_set():
                    self._judge_exit(replica, replica.note_exit())
                    replica.start(self.checker)

    def _run_faults(self, faults: Faults, plan: list[tuple[float, str]]) -> None:
        """The plan's faults in turn; then waits for the end of the run: etcd restarted from
        this thread dies with it (the harness's PR_SET_PDEATHSIG follows the thread that
        forked, not the process), which a first version of this soak found out the hard way:
        every write answered 504 from the moment the last fault was done."""
        for at, kind in plan:
            delay = self.started + at - time.time()
            if delay > 0:
                time.sleep(delay)
            try:
                faults.inject(kind)
            except Exception as exc:  # a fault that could not be injected is reported
                self.note_fault(began=False)
                faults.log.append((time.time() - self.started, kind, f"failed: {exc!r}"))
        self.faults_done.set()
        self._finished.wait()

    def _judge_exit(self, replica: Replica, life: Life | None) -> None:
        if life is not None and is_crash(life.cause):
            last = life.log_tail.strip().splitlines()[-3:]
            self._report("replica-crashed", f"{replica.name} pid {life.pid} "
                         f"({life.cause}); log ends: {' | '.join(last)[-400:]}")

    def _report(self, invariant: str, detail: str) -> None:
        with self.lock:
            self.checker.report(invariant, time.time(), detail)

    def _probe(self, proxy_api: KubeApi) -> None:
        """The proxy answers? Three misses in a row: every thread's stack to stacks.txt."""
        misses = 0
        while not self._supervise.wait(5.0):
            try:
                proxy_api.request("GET", "/version")
                misses = 0
            except Exception as exc:
                misses += 1
                if misses >= 2:  # (one miss is the faults' doing)
                    print(f"  [{time.time() - self.started:6.0f} s] proxy probe failed "
                          f"{misses} times: {exc}", flush=True)
                if misses == 3:
                    with open(self.workdir / "stacks.txt", "a") as out:
                        faulthandler.dump_traceback(out, all_threads=True)

    def _progress(self, elapsed: float, churn: Churn) -> None:
        with self.lock:
            admitted = len(self.checker.admissions)
            bad = {k: n for k, n in self.checker.counts().items() if n}
        alive = sum(r.alive() for r in self.replicas)
        print(f"  [{elapsed:6.0f} s] admissions {admitted}, violations {bad or 0}, replicas alive "
              f"{alive}/4, churn {dict(churn.done)}", flush=True)

    def _result(  # noqa: PLR0917 (what the run gathered, once)
        self, faults: Faults, churn: Churn, exits: dict[str, float],
        slopes: dict[str, float | None], audit_events: int, proxy: FaultProxy,
    ) -> dict[str, Any]:
        checker = self.checker
        width = 60.0 if self.args.duration >= 900 else 30.0
        takeovers: dict[str, list[float]] = {}
        for t in checker.takeovers:
            takeovers.setdefault(t.lease, []).append(t.gap)
        return {
            "duration_s": self.args.duration, "seed": self.args.seed,
            "faults": dict(faults.done), "fault_log": faults.log,
            "takeovers": {lease: {"count": len(gaps), "p50_s": statistics.median(gaps),
                                  "max_s": max(gaps)} for lease, gaps in takeovers.items()},
            "takeover_log": [(round(t.at - self.started, 1), t.lease, t.previous or "-",
                              t.holder, round(t.gap, 1)) for t in checker.takeovers],
            "violations": checker.counts(),
            "violation_details": [v.__dict__ for v in checker.violations[:50]],
            "admissions": len(checker.admissions),
            "admissions_per_s": [round(r, 2) for r in
                                 per_interval(checker.admissions, self.started, width)],
            "interval_s": width,
            "writes_checked": checker.writes_checked, "audit_events": audit_events,
            "replica_starts": {r.name: r.starts for r in self.replicas},
            "replica_exits": {r.name: dict(r.exits) for r in self.replicas},
            "replica_lives": {r.name: [
                {"pid": life.pid, "from_s": round(life.started - self.started, 1),
                 "to_s": round(life.ended - self.started, 1) if life.ended else None,
                 "status": life.status, "cause": life.cause,
                 **({"log_tail": life.log_tail} if life.log_tail else {})} for life in r.lives]
                for r in self.replicas},
            "rss_samples_mb": {r.name: {str(pid): [(round(t - self.started), round(b / 1e6, 1))
                                                   for t, b in samples]
                                        for pid, samples in r.rss.items()}
                               for r in self.replicas},
            "objects": self.objects,
            "exit_s": exits, "rss_mb_per_hour": slopes,
            "churn": dict(churn.done), "churn_errors": dict(churn.errors),
            "proxy": {"fired": dict(proxy.fired), "forwarded": proxy.forwarded},
            "workdir": str(self.workdir),
        }


def summary(result: dict[str, Any]) -> str:
    lines = [f"soak summary: {result['duration_s']:.0f} s, seed {result['seed']}", "",
             "| fault | injected |", "|---|---|"]
    lines += [f"| {kind} | {result['faults'].get(kind, 0)} |" for kind in FAULTS]
    lines += [f"  at {at:.0f} s: {kind} {detail}" for at, kind, detail in result["fault_log"]]
    lines += ["", "| Lease | takeovers | without a renewing leader p50 | max |",
              "|---|---|---|---|"]
    for lease, t in sorted(result["takeovers"].items()):
        lines.append(f"| {lease} | {t['count']} | {t['p50_s']:.1f} s | {t['max_s']:.1f} s |")
    lines += [f"  at {at:.0f} s: {lease} {prev} -> {new}, {gap:.1f} s without a renewing leader"
              for at, lease, prev, new, gap in result["takeover_log"]]
    lines += ["", "| invariant | violations |", "|---|---|"]
    lines += [f"| {kind} | {result['violations'].get(kind, 0)} |" for kind in INVARIANTS]
    rates = " ".join(f"{r:g}" for r in result["admissions_per_s"])
    lines += ["", f"admissions: {result['admissions']}; per second, each "
              f"{result['interval_s']:.0f} s: {rates}",
              f"writes by replicas checked against the Lease: {result['writes_checked']} "
              f"({result['audit_events']} audit events)",
              f"replica starts: {result['replica_starts']}; exit on SIGTERM (s): "
              f"{result['exit_s']}",
              f"replica exits by cause (crashes are violations): {result.get('replica_exits')}",
              "RSS slope (MB/h; per slot: pooled over its processes' lives as standby and as "
              f"leader, each past its first {RSS_WARMUP:.0f} s, a leader past its first "
              f"{RSS_LEADER_WARMUP:.0f} s; per process: second half of its life, without a "
              "leader's warm-up): " + ", ".join(
                  f"{k} {v:+.1f}" if v is not None else f"{k} -"
                  for k, v in result["rss_mb_per_hour"].items())]
    lines.append(f"bad input (bench/soak_fuzz.py): {result.get('fuzz')}")
    if result.get("fuzz_error"):
        lines.append(f"  FUZZER FAILED: {result['fuzz_error']}")
    for v in result["violation_details"][:20]:
        lines.append(f"  VIOLATION {v['kind']}: {v['detail']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=1800.0, help="seconds of churn")
    parser.add_argument("--ci", action="store_true", help="the 5-minute variant")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fault-every", type=float, default=25.0, help="mean seconds between")
    parser.add_argument("--quiet-tail", type=float, default=0.15,
                        help="share of the run at its end without faults")
    parser.add_argument("--bound", type=float, default=90.0,
                        help="seconds after the last fault within which a fitting unit is in")
    parser.add_argument("--lease", type=float, default=4.0, help="lease duration (s)")
    parser.add_argument("--rate", type=float, default=0.6, help="workloads and pods per second")
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    parser.add_argument("--fuzz", action=argparse.BooleanOptionalAction, default=True,
                        help="malformed objects alongside (bench/soak_fuzz.py)")
    parser.add_argument("--keep-dir", action="store_true",
                        help="keep the work dir (replica logs, audit log) even when clean")
    args = parser.parse_args(argv)
    # the proxy's cut and dropped connections leave tasks asyncio reports at teardown
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    if args.ci:
        args.duration, args.fault_every = 300.0, 18.0
    result = Soak(args).run()
    if args.out:  # first: a summary that fails loses nothing
        args.out.write_text(json.dumps(result, indent=2, default=str))
    print(summary(result))
    failed = sum(result["violations"].values()) > 0 or bool(result.get("fuzz_error"))
    if failed or args.keep_dir:
        print(f"replica logs and the audit log: {result['workdir']}")
    else:
        shutil.rmtree(result["workdir"], ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
