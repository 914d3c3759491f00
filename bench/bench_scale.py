"""Kueue's scalability baseline shape through koordqueue and through Kueue, on a real API server.

    python bench/bench_scale.py [--peer koordqueue,kueue] [--scale 1.0 | --jobs 15000]
                                [--create-only]

The shape is Kueue's `test/performance/scheduler` baseline (configs/baseline/generator.yaml,
the config behind its published figures in default_rangespec.yaml), transcribed:

- 5 cohorts x 6 ClusterQueues, each with nominal quota 20 cpu and borrowing limit 100 (so one
  queue may use its whole cohort, 120 cpu); preemption reclaimWithinCohort Any,
  withinClusterQueue LowerPriority (Kueue side only: koordqueue's default has no preemption);
- per queue, three job streams created in parallel: small (350, one every 100 ms, 1 cpu, runs
  200 ms, priority 50), medium (100, every 500 ms, 5 cpu, 500 ms, 100), large (50, every
  1,200 ms, 20 cpu, 1,000 ms, 200): 500 Jobs per queue, 15,000 in all.

koordqueue gets the same shape as ElasticQuotas: one parent quota per cohort (max 120 cpu,
label `quota.scheduling.koordinator.sh/is-parent`) and six children under it
(`quota.scheduling.koordinator.sh/parent`, min 20, max 120 cpu). Kueue gets one ClusterQueue per
child (`cohortName` = the cohort) and a LocalQueue in the child's namespace. Priorities come from
three PriorityClasses on the pod template, which both read. Jobs are suspended batch/v1 Jobs
(not Kueue's bare Workloads), created on Kueue's schedule (due times `interval x (k+1)` per
stream; creators that fall behind catch up as fast as `--clients` threads go).

No kubelet: once the bench's own watch sees a Job resumed, it marks the Job Complete through its
status (SuccessCriteriaMet + Complete, succeeded 1) after the class's run time, as Kueue's runner
marks Workloads Finished; the controller sees the Job finish and releases its quota. A Job
suspended again before its time is up (a Kueue preemption) is counted as an eviction and runs
its full time after its next admission.

Reported per peer: wall time (first creation -> last Job seen Complete), average / p50 / p99
time to admission per class (creation -> the last resume seen, as Kueue's recorder keeps the
last admission), evictions, quota usage over the run (time-weighted, held quota / the children's
total nominal quota, over the wall-time window: `held` = each QueueUnit's admitted phases or
each Workload's QuotaReserved-until-Finished, read on that object's own watch (scale_figures.py;
Kueue's definition), with the most held at once per cohort, which the cohort's quota bounds;
`running` = resume seen -> Complete seen, both on the Job watch), the controller's CPU from
/proc and the bench's own CPU. Kueue runs with a `--kueue-profile` (bench_peers'
KUEUE_PROFILES, `best` by default), named in its row. `--create-only` runs the creators
alone (no controller, no watch) on the same set-up: the creation ceiling of the machine, the
least any controller's wall time can be. Kueue's published figures for this shape: wall 351 s,
usage 58.7 %, average time to admission small 215 s, medium 77 s, large 6.7 s (envtest +
minimalkueue, client qps 50).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import shlex
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_peers import (  # noqa: E402
    CLUSTER_QUEUE,
    KUEUE_GROUP,
    KUEUE_PROFILES,
    KUEUE_VERSION,
    LOCAL_QUEUE,
    RESOURCE_FLAVOR,
    all_active,
    kueue_job,
    kueue_process,
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
)
from bench.calibration import calibrate  # noqa: E402
from bench.scale_figures import (  # noqa: E402
    LEGACY_PROFILE,
    TARGET_USAGE,
    TARGET_WALL_RATIO,
    UNIT_HOLDS,
    WORKLOAD_FINISHED,
    WORKLOAD_HOLDS,
    Run,
    kueue_profile_name,
    record,
    summarise,
    table,
    workload_state,
)
from bench.scale_shape import (  # noqa: E402
    KUEUE_BASELINE,
    PlannedJob,
    Shape,
    child_quota,
    complete_status,
    is_complete,
    job_body,
    kueue_cluster_queue,
    parent_quota,
    plan,
    priority_class,
    queue_name,
    scaled,
)
from koordqueue.kube.api import (  # noqa: E402
    ELASTIC_QUOTA,
    JOB,
    PRIORITY_CLASS,
    QUEUE_UNIT,
    ApiError,
    Kind,
    KubeApi,
    load_api_client,
)

WORKLOAD = Kind(KUEUE_GROUP, KUEUE_VERSION, "workloads", "Workload")
RELEASED_PHASES = frozenset({"Succeed", "Failed"})


# --------------------------------------------------------------------------- the run


class Completer:
    """Marks each resumed Job Complete `run_s` after its resume was seen (a heap and a pool)."""

    def __init__(self, api: KubeApi, run: Run, jobs: Mapping[str, PlannedJob], workers: int):
        self._api, self._run, self._jobs = api, run, jobs
        self._heap: list[tuple[float, str, int]] = []
        self._epoch: dict[str, int] = {}
        self._cv = threading.Condition()
        self._stop = False
        self._pool = ThreadPoolExecutor(workers)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def admitted(self, key: str, at: float) -> None:
        with self._cv:
            epoch = self._epoch.get(key, 0)
            heapq.heappush(self._heap, (at + self._jobs[key].run_s, key, epoch))
            self._cv.notify()

    def evicted(self, key: str) -> None:
        with self._cv:
            self._epoch[key] = self._epoch.get(key, 0) + 1

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._thread.join(5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stop and (not self._heap or self._heap[0][0] > time.time()):
                    wait = self._heap[0][0] - time.time() if self._heap else None
                    self._cv.wait(wait)
                if self._stop:
                    return
                due: list[tuple[str, int]] = []
                while self._heap and self._heap[0][0] <= time.time():
                    _, key, epoch = heapq.heappop(self._heap)
                    if epoch == self._epoch.get(key, 0):
                        due.append((key, epoch))
            for key, epoch in due:
                self._pool.submit(self._complete, key, epoch)

    def _complete(self, key: str, epoch: int) -> None:
        namespace, name = key.split("/", 1)
        for attempt in range(20):
            with self._cv:
                if epoch != self._epoch.get(key, 0):
                    return  # evicted meanwhile: its next admission schedules it again
            try:
                self._api.merge_patch(JOB, name, complete_status(datetime.now(UTC)), namespace,
                                      subresource="status")  # fmt: skip
                return
            except ApiError as exc:
                with self._run.lock:
                    self._run.patch_errors += 1
                if not (exc.retryable or exc.conflict) or attempt == 19:
                    print(f"complete {key}: {exc}", file=sys.stderr)
                    return
                time.sleep(0.2)


def brief(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    """uid, resourceVersion and conditions (type, status, reason) of a watched object."""
    meta = obj.get("metadata") or {}
    conditions = [(c.get("type"), c.get("status"), c.get("reason"))
                  for c in (obj.get("status") or {}).get("conditions") or []]  # fmt: skip
    return meta.get("uid"), meta.get("resourceVersion"), conditions


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def create_all(
    api: KubeApi,
    jobs: list[PlannedJob],
    bodies: Mapping[str, dict[str, Any]],
    created: dict[str, float],
    *,
    t0: float,
    clients: int,
) -> None:
    """The creators: `clients` threads create `bodies` on the plan's schedule (due times from
    `t0`; a thread that falls behind creates its next Job at once); `created` gets each time."""
    queue = iter(jobs)
    queue_lock = threading.Lock()

    def creator() -> None:
        while True:
            with queue_lock:
                job = next(queue, None)
            if job is None:
                return
            delay = t0 + job.due_s - time.time()
            if delay > 0:
                time.sleep(delay)
            body = bodies[job.key]
            created[job.key] = time.time()
            api.create(JOB, body, job.namespace)

    creators = [threading.Thread(target=creator, daemon=True) for _ in range(clients)]
    for thread in creators:
        thread.start()
    for thread in creators:
        thread.join()


def create_only(
    api: KubeApi,
    jobs: list[PlannedJob],
    bodies: Mapping[str, dict[str, Any]],
    clients: int,
    apiserver_pids: list[int],
) -> dict[str, Any]:
    """The creation ceiling: the same creators with no controller and no watch, timed alone.

    Every Job is created suspended and nothing acts on it: what this takes is the least any
    controller's run of the shape can take on this machine (its wall time starts at the
    first creation and cannot end before the last)."""
    created: dict[str, float] = {}
    planned_s = max(j.due_s for j in jobs)
    cpu_before = [cpu_seconds(p) for p in apiserver_pids]
    bench_before, load_before = time.process_time(), os.getloadavg()[0]
    t0 = time.time()
    create_all(api, jobs, bodies, created, t0=t0, clients=clients)
    create_s = time.time() - t0
    server_cpu = [
        round(cpu_seconds(p) - b, 2) for p, b in zip(apiserver_pids, cpu_before, strict=True)
    ]
    return {
        "jobs": len(jobs),
        "created": len(created),
        "create_phase_s": round(create_s, 2),
        "creates_per_s": round(len(created) / create_s, 1),
        "schedule_s": round(planned_s, 2),
        "server_cpu_s": server_cpu,
        "server_cpu_ms_per_create": round(1000 * sum(server_cpu) / max(len(created), 1), 3),
        "bench_cpu_s": round(time.process_time() - bench_before, 2),
        "loadavg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def server_pids(cp: Any) -> list[int]:
    """The control plane's processes (etcd, kube-apiserver): their CPU is the creates' cost."""
    return list(cp.pids)


def run_scale(
    api: KubeApi,
    jobs: list[PlannedJob],
    bodies: Mapping[str, dict[str, Any]],
    *,
    pid: int,
    release_kind: Kind,
    capacity_cpu: float,
    cohort_cpu: float,
    clients: int,
    timeout_s: float,
    dump: str = "",
    server_pids: list[int] | None = None,
) -> dict[str, Any]:
    """Create `bodies` on the plan's schedule; complete them as they are resumed; time it all.

    `server_pids` (etcd, kube-apiserver): their CPU over the run is reported too, so the box's
    whole CPU per Job (controller + server + this bench) can be set against its 2 cores."""
    run = Run()
    by_key = {j.key: j for j in jobs}
    completer = Completer(api, run, by_key, workers=clients)
    all_complete_at: list[float] = []

    def everything_done() -> bool:
        """Every Job seen Complete and released (or 30 s after the last Complete)."""
        if len(run.completed) < len(jobs):
            return False
        if not all_complete_at:
            all_complete_at.append(time.time())
        return len(run.released) >= len(jobs) or time.time() - all_complete_at[0] > 30

    deadline = time.time() + timeout_s

    def on_job(event_type: str, obj: dict[str, Any], at: float) -> None:
        key = _key(obj)
        if key not in by_key or event_type == "DELETED":
            return
        suspended = (obj.get("spec") or {}).get("suspend")
        with run.lock:
            if is_complete(obj):
                run.completed.setdefault(key, at)
                return
            if key in run.completed:
                return
            if suspended is False and key not in run.admitted:
                run.admitted[key] = at
                run.first_admitted.setdefault(key, at)
                completer.admitted(key, at)
            elif suspended is True and key in run.admitted:
                del run.admitted[key]  # re-suspended before its time was up: preempted
                run.evictions[key] = run.evictions.get(key, 0) + 1
                completer.evicted(key)

    def on_release(event_type: str, obj: dict[str, Any], at: float) -> None:
        if release_kind is QUEUE_UNIT:
            key = _key(obj)
            state = (obj.get("status") or {}).get("phase") or ""
            released = state in RELEASED_PHASES or event_type == "DELETED"
        else:  # a Kueue Workload: owned by its Job, released once Finished
            owners = (obj.get("metadata") or {}).get("ownerReferences") or []
            job_name = next((o.get("name") for o in owners if o.get("kind") == "Job"), None)
            key = f"{(obj.get('metadata') or {}).get('namespace')}/{job_name}"
            state = workload_state(obj)
            released = state == WORKLOAD_FINISHED or event_type == "DELETED"
        if key not in by_key:
            return
        if event_type == "DELETED":
            state = "deleted"
        with run.lock:
            record(run.history, key, at, state)
            if released:
                run.released.setdefault(key, at)
            if dump:  # what the state was read from, to audit it
                run.raw.setdefault(key, []).append((at, event_type, *brief(obj), state))

    watchers = [
        threading.Thread(
            target=watch_objects,
            args=(api, kind, "", callback),
            kwargs={"done": everything_done, "deadline": deadline},
            daemon=True,
        )
        for kind, callback in ((JOB, on_job), (release_kind, on_release))
    ]
    for watcher in watchers:
        watcher.start()
    time.sleep(1)

    cpu_before, bench_before = cpu_seconds(pid), time.process_time()
    servers_before = [cpu_seconds(p) for p in server_pids or []]
    requests_before = api_writes(api, writes_only=False)
    load_before = os.getloadavg()[0]
    t0 = time.time()
    create_all(api, jobs, bodies, run.created, t0=t0, clients=clients)
    create_s = time.time() - t0
    progress_at = time.time()
    while not everything_done() and time.time() < deadline:
        time.sleep(0.5)
        if time.time() - progress_at >= 30:
            progress_at = time.time()
            print(f"  {time.time() - t0:.0f} s: created {len(run.created)}, admitted "
                  f"{len(run.admitted)}, complete {len(run.completed)}, released "
                  f"{len(run.released)} of {len(jobs)}", flush=True)  # fmt: skip
    cpu_s, bench_cpu_s = cpu_seconds(pid) - cpu_before, time.process_time() - bench_before
    peak_rss = rss_mb(pid, "VmHWM")  # the controller's peak, read while it still runs
    servers = zip(server_pids or [], servers_before, strict=True)
    requests = api_writes(api, writes_only=False) - requests_before
    server_cpu = [cpu_seconds(p) - b for p, b in servers]
    completer.stop()
    for watcher in watchers:
        watcher.join(70)
    if dump:
        times = {"t0": t0, "created": run.created, "admitted": run.admitted,
                 "first_admitted": run.first_admitted, "completed": run.completed,
                 "released": run.released, "evictions": run.evictions,
                 "unit_phases" if release_kind is QUEUE_UNIT else "workload_states":
                 run.history, "release_events": run.raw}  # fmt: skip
        Path(dump).write_text(json.dumps(times))
    holds = UNIT_HOLDS if release_kind is QUEUE_UNIT else WORKLOAD_HOLDS
    result = summarise(jobs, run, t0=t0, create_s=create_s, cpu_s=cpu_s, holds=holds,
                       bench_cpu_s=bench_cpu_s, capacity_cpu=capacity_cpu,
                       cohort_cpu=cohort_cpu)  # fmt: skip
    # every client's requests (the bench's creates, Complete patches and watches included)
    result["requests_per_job"] = {k: round(v / max(len(jobs), 1), 3)
                                  for k, v in sorted(requests.items())}  # fmt: skip
    if server_pids:
        result["server_cpu_s"] = [round(c, 2) for c in server_cpu]
        box = cpu_s + bench_cpu_s + sum(server_cpu)
        result["box_cpu_ms_per_job"] = round(1000 * box / max(len(jobs), 1), 3)
    # the box is shared: the 1-minute load average before and after says how busy it was
    result["peak_rss_mb"] = peak_rss
    result["loadavg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return result


def take_census(pid: int, prefix: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """SIGUSR1 to a controller run through bench/traced.py; its census once written."""
    done = Path(f"{prefix}.done")
    done.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.time() + timeout_s
    while not done.exists() and time.time() < deadline:
        time.sleep(0.5)
    census: dict[str, Any] = json.loads(Path(f"{prefix}.census.json").read_text())
    return census


# --------------------------------------------------------------------------- peers


def run_peer(who: str, shape: Shape, args: argparse.Namespace) -> dict[str, Any]:
    from tests.controlplane import peers
    from tests.controlplane.harness import ControlPlane
    from tests.e2e.conftest import Kubectl, install_crds

    kueue = peers.ensure_peer(peers.KUEUE) if who == "kueue" else None
    jobs = plan(shape)
    with ControlPlane() as cp, tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        assert cp.kubeconfig is not None
        kubectl = Kubectl(cp.binaries.kubectl, cp.kubeconfig)
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        log = f"{args.log_dir}/scale-{who}-{len(jobs)}.log"
        namespaces = [queue_name(c, q) for c in range(shape.cohorts) for q in range(shape.queues)]
        for ns in namespaces:
            kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for jc in shape.classes:
            api.create(PRIORITY_CLASS, priority_class(jc))
        bodies = {j.key: job_body(j) for j in jobs}
        dump = f"{args.log_dir}/scale-times-{who}-{len(jobs)}.json" if args.dump else ""
        common = {"pid": 0, "clients": args.clients, "timeout_s": args.timeout,
                  "capacity_cpu": shape.capacity_cpu, "dump": dump,
                  "cohort_cpu": shape.queues * shape.nominal_cpu,
                  "server_pids": server_pids(cp)}  # fmt: skip
        if kueue is None:
            install_crds(kubectl)
            kubectl.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koord-queue"}}
            )
            for c in range(shape.cohorts):
                api.create(ELASTIC_QUOTA, parent_quota(shape, c), "default")
                for q in range(shape.queues):
                    api.create(ELASTIC_QUOTA, child_quota(shape, c, q), queue_name(c, q))
            if args.create_only:
                ceiling = create_only(api, jobs, bodies, args.clients, server_pids(cp))
                return {"who": "none (create only)", **ceiling}
            argv = ["run", f"--kubeconfig={cp.kubeconfig}", "--metrics-port=0",
                    "--health-port=0", "--log-level=info",
                    *shlex.split(args.koordqueue_run_flags)]  # fmt: skip
            runner = None
            if args.census:  # bench/traced.py: a census of the controller's memory at the end
                runner = [sys.executable, str(ROOT / "bench" / "traced.py"), args.census, "0"]
            with component(argv, log, runner=runner) as pid:
                common["pid"] = pid
                result = run_scale(api, jobs, bodies, release_kind=QUEUE_UNIT, **common)
                if args.census:
                    result["census"] = take_census(pid, args.census)
        else:
            assert kueue.crds is not None
            install_crds(kubectl, kueue.crds)
            kubectl.apply({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": "kueue-system"}})  # fmt: skip
            api.create(RESOURCE_FLAVOR, resource_flavor())
            for c in range(shape.cohorts):
                for q in range(shape.queues):
                    name = queue_name(c, q)
                    cq = kueue_cluster_queue(shape, c, q, preemption=not args.no_kueue_preemption)
                    api.create(CLUSTER_QUEUE, cq)
                    api.create(LOCAL_QUEUE, local_queue(name, name, name), name)
            bodies = {k: kueue_job(b, b["metadata"]["namespace"]) for k, b in bodies.items()}
            profile = None if args.kueue_profile == LEGACY_PROFILE else args.kueue_profile
            with kueue_process(kueue, str(cp.kubeconfig), Path(tmp), log, args.peer_v,
                               profile=profile) as pid:  # fmt: skip
                wait_until(lambda: all_active(api.list_objects(CLUSTER_QUEUE)), 60, log)
                common["pid"] = pid
                result = run_scale(api, jobs, bodies, release_kind=WORKLOAD, **common)
    if kueue is not None:
        result["kueue_profile"] = kueue_profile_name(args.kueue_profile)
    return {"who": who, **result}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--peer", default="koordqueue,kueue", help="koordqueue and/or kueue")
    parser.add_argument("--scale", type=float, default=1.0, help="x Jobs per stream (0.1: 1,500)")
    parser.add_argument("--jobs", type=int, default=0, help="total Jobs (sets --scale)")
    parser.add_argument("--clients", type=int, default=8, help="parallel creators / completers")
    parser.add_argument("--timeout", type=float, default=1800, help="give up after S s")
    parser.add_argument("--koordqueue-run-flags", default="", help="extra flags, one string")
    parser.add_argument("--no-kueue-preemption", action="store_true",
                        help="ClusterQueues without the shape's preemption policies")  # fmt: skip
    parser.add_argument("--kueue-profile", default="best",
                        choices=[*KUEUE_PROFILES, LEGACY_PROFILE],
                        help="Kueue's configuration: bench_peers' KUEUE_PROFILES, or "
                        f"{LEGACY_PROFILE} (qps 5000, shipped workers: this bench before "
                        "issue 28)")  # fmt: skip
    parser.add_argument("--peer-v", type=int, default=1, help="Kueue log verbosity (2: reconciles)")
    parser.add_argument("--log-dir", default="/tmp", help="component logs go here")
    parser.add_argument("--create-only", action="store_true",
                        help="no controller: the creators alone (creation ceiling)")  # fmt: skip
    parser.add_argument("--census", default="",
                        help="koordqueue through bench/traced.py: after the run, a census of "
                             "its memory (gc objects by type, RSS before / after a full "
                             "collection, cyclic garbage found) written to PREFIX.census.json")
    parser.add_argument("--dump", action="store_true",
                        help="write every Job's wall times to the log dir")  # fmt: skip
    args = parser.parse_args()
    scale = args.jobs / KUEUE_BASELINE.jobs if args.jobs else args.scale
    shape = scaled(KUEUE_BASELINE, scale)
    who_list = [w.strip() for w in args.peer.split(",") if w.strip()]
    unknown = set(who_list) - {"koordqueue", "kueue"}
    if unknown:
        parser.error(f"unknown peer(s): {', '.join(sorted(unknown))}")
    cal = calibrate()  # before any control plane starts
    print(cal.line(), flush=True)
    print(
        f"shape: {shape.cohorts} cohorts x {shape.queues} queues, {shape.jobs} Jobs, "
        f"{', '.join(f'{c.name} {c.count}' for c in shape.classes)} per queue",
        flush=True,
    )
    if args.create_only:
        result = run_peer("koordqueue", shape, args)
        print(json.dumps({**result, "calibration": cal.as_dict()}), flush=True)
        return 0
    results = []
    for who in who_list:
        result = run_peer(who, shape, args)
        result["controller_cpu_py_refs_per_job"] = round(
            cal.in_py_refs(result["controller_cpu_s"]) / max(result["completed"], 1), 4
        )
        result["calibration"] = cal.as_dict()
        print(json.dumps(result), flush=True)
        results.append(result)
    print()
    print(cal.line())
    print(table(results))
    ours = next((r for r in results if r["who"] == "koordqueue"), None)
    kueue = next((r for r in results if r["who"] == "kueue"), None)
    if ours and kueue and kueue["wall_s"]:
        ratio = ours["wall_s"] / kueue["wall_s"]
        met = ratio <= TARGET_WALL_RATIO and ours["usage_held"] >= TARGET_USAGE
        print(
            f"issue 28 target (wall <= {TARGET_WALL_RATIO}x Kueue's, usage held >= 55 %): "
            f"{ratio:.2f}x, {100 * ours['usage_held']:.1f} %: {'met' if met else 'not met'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
