"""Release mode of the admission benchmarks (issue 36 point 4): admission without the creator.

In the normal mode 8 client threads create the Jobs while the controller admits them, so the
wall time is the create phase and p99 partly measures the creator. Here every Job is created
suspended while its quota admits nothing, the script waits until each has its pending record
(QueueUnit / Workload) and the controller has gone quiet, and then one merge patch per quota
raises it to the normal value: everything after that edit is admission alone. Latency is
release -> un-suspend; CPU and API writes are counted over the release window only.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.burst import (
    Burst,
    api_writes,
    cpu_seconds,
    dump_times,
    latency_figures,
    stage,
    watch_objects,
    writes_per_job,
)
from koordqueue.kube.api import ELASTIC_QUOTA, Kind, KubeApi

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Edit:
    """One quota edit of the release: the merge patch, and the Jobs it lets in."""

    kind: Kind
    name: str
    namespace: str | None
    patch: dict[str, Any]
    jobs: tuple[str, ...]


def jobs_by_quota(jobs: int, quotas: int) -> list[tuple[str, ...]]:
    """Job names per quota index, as the benchmarks spread them (job i -> quota i % quotas)."""
    return [tuple(f"job{i:05d}" for i in range(q, jobs, quotas)) for q in range(quotas)]


def release_plan(
    kind: Kind,
    names: list[str],
    namespace: str | None,
    patch: Callable[[int], dict[str, Any]],
    jobs: int,
) -> list[Edit]:
    """One edit per quota `names[q]` with `patch(q)`, each releasing that quota's Jobs."""
    groups = jobs_by_quota(jobs, len(names))
    return [Edit(kind, name, namespace, patch(q), groups[q]) for q, name in enumerate(names)]


ZERO_QUOTA: dict[str, str] = {"cpu": "0", "memory": "0"}
"""What every quota holds while the Jobs are created: nothing fits."""


def fitting_quota(jobs: int, quotas: int) -> dict[str, str]:
    """A quota every one of its Jobs (1 cpu / 1Gi each, job i in quota i % quotas) fits in."""
    per_quota = -(-jobs // quotas)
    return {"cpu": str(per_quota), "memory": f"{per_quota}Gi"}


def elastic_quota_plan(jobs: int, quotas: int, namespace: str = "default") -> list[Edit]:
    """koordqueue: raise each ElasticQuota `bq<q>`'s max from 0 to what its Jobs need."""
    patch = {"spec": {"max": fitting_quota(jobs, quotas)}}
    names = [f"bq{q}" for q in range(quotas)]
    return release_plan(ELASTIC_QUOTA, names, namespace, lambda _q: patch, jobs)


def owner_job(obj: Obj) -> str:
    """The Job a QueueUnit or Workload stands for: its owning Job's name, else its own name."""
    meta = obj.get("metadata") or {}
    for owner in meta.get("ownerReferences") or []:
        if owner.get("kind") == "Job" and owner.get("name"):
            return str(owner["name"])
    return str(meta.get("name") or "")


def unit_pending(obj: Obj) -> bool:
    """A QueueUnit waiting in its queue: its first status (Enqueued) is written."""
    return (obj.get("status") or {}).get("phase") == "Enqueued"


def workload_pending(obj: Obj) -> bool:
    """A Kueue Workload its scheduler tried and left waiting: QuotaReserved False."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "QuotaReserved" and c.get("status") == "False"
               for c in conditions)  # fmt: skip


def quiet(samples: list[tuple[float, float]], window_s: float, busy: float) -> bool:
    """Whether the (wall, CPU seconds) samples show under `busy` cores over the last
    `window_s`: the controller has drained what the creates left it (events, statuses)."""
    if len(samples) < 2 or samples[-1][0] - samples[0][0] < window_s:
        return False
    end_wall, end_cpu = samples[-1]
    start_wall, start_cpu = next(s for s in reversed(samples) if end_wall - s[0] >= window_s)
    return (end_cpu - start_cpu) / (end_wall - start_wall) < busy


@dataclass
class Held:
    """What the hold phase took: creates, then every Job pending, then the controller quiet."""

    create_s: float
    pending_s: float
    quiet_s: float


def hold(
    api: KubeApi,
    kind: Kind,
    namespace: str,
    bodies: list[dict[str, Any]],
    *,
    pending_kind: Kind,
    pending: Callable[[Obj], bool],
    pid: int,
    clients: int = 8,
    timeout_s: float = 600.0,
    busy: float = 0.05,
) -> Held:
    """Create `bodies` from `clients` threads, wait until each has a `pending` record of
    `pending_kind` (watched, not polled), then until process `pid` is quiet."""
    names = {b["metadata"]["name"] for b in bodies}
    seen: dict[str, bool] = {}

    def on_event(event_type: str, obj: dict[str, Any], at: float) -> None:
        job = owner_job(obj)
        if job in names:
            seen[job] = event_type != "DELETED" and pending(obj)

    def all_pending() -> bool:
        return len(seen) == len(names) and all(list(seen.values()))

    deadline = time.time() + timeout_s
    watcher = threading.Thread(
        target=watch_objects,
        args=(api, pending_kind, namespace, on_event),
        kwargs={"done": all_pending, "deadline": deadline},
        daemon=True,
    )
    watcher.start()
    t0 = time.time()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda body: api.create(kind, body, namespace), bodies))
    create_s = time.time() - t0
    watcher.join(max(0.0, deadline - time.time()) + 20)
    if not all_pending():
        waiting = sum(list(seen.values()))
        raise SystemExit(f"hold: {waiting} of {len(names)} pending after {timeout_s} s")
    pending_s = time.time() - t0
    samples: list[tuple[float, float]] = []
    while not quiet(samples, 1.0, busy) and time.time() < deadline:
        samples.append((time.time(), cpu_seconds(pid)))
        time.sleep(0.2)
    return Held(round(create_s, 2), round(pending_s, 2), round(time.time() - t0 - pending_s, 2))


def release(
    api: KubeApi,
    kind: Kind,
    namespace: str,
    edits: list[Edit],
    *,
    reached: Callable[[Obj], bool],
    pid: int,
    apiserver_pid: int | None = None,
    clients: int = 8,
    timeout_s: float = 600.0,
) -> Burst:
    """Apply `edits` at once from `clients` threads and watch `kind` until every Job they
    release is `reached`. In the Burst, `created` is the release start for every Job,
    `accepted` its quota's edit answered, `create_s` the edit phase, `cpu_s` process `pid`'s
    CPU from just before the first edit to the last Job reached (`apiserver_cpu_s` the API
    server's with `apiserver_pid`)."""
    names = {job for edit in edits for job in edit.jobs}
    burst = Burst()
    listed = threading.Event()

    def on_event(event_type: str, obj: dict[str, Any], at: float) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if name not in names:
            return
        if event_type == "ADDED":
            burst.added.setdefault(name, at)
            if len(burst.added) == len(names):
                listed.set()  # the watch has every Job: anything after is seen live
        if reached(obj):
            burst.reached.setdefault(name, at)

    watcher = threading.Thread(
        target=watch_objects,
        args=(api, kind, namespace, on_event),
        kwargs={"done": lambda: len(burst.reached) >= len(names),
                "deadline": time.time() + timeout_s},
        daemon=True,
    )  # fmt: skip
    watcher.start()
    if not listed.wait(60):
        raise SystemExit(f"release: the watch listed {len(burst.added)} of {len(names)} Jobs")
    if burst.reached:
        raise SystemExit(f"release: {len(burst.reached)} Jobs resumed before the release")

    def apply(edit: Edit) -> None:
        api.merge_patch(edit.kind, edit.name, edit.patch, edit.namespace)
        answered = time.time()
        for job in edit.jobs:
            burst.accepted[job] = answered

    cpu_before = cpu_seconds(pid)
    apiserver_before = cpu_seconds(apiserver_pid) if apiserver_pid else 0.0
    t0 = time.time()
    burst.created = dict.fromkeys(names, t0)
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(apply, edits))
    burst.create_s = time.time() - t0
    watcher.join(timeout_s + 20)
    burst.total_s = max(burst.reached.values(), default=time.time()) - t0
    burst.cpu_s = cpu_seconds(pid) - cpu_before
    if apiserver_pid:
        burst.apiserver_cpu_s = cpu_seconds(apiserver_pid) - apiserver_before
    return burst


def release_summary(burst: Burst, dump: str = "") -> dict[str, Any]:
    """Release -> un-suspend percentiles, the wall until the last, and the stage split (the
    edit call; edit answered -> un-suspend), shaped as burst.summary's; `dump`: keep every
    Job's times there."""
    if dump:
        dump_times(burst, dump)
    latencies = [burst.reached[n] - burst.created[n] for n in burst.reached if n in burst.created]
    if not latencies:
        latencies = [burst.total_s]
    return {
        "edit_phase_s": round(burst.create_s, 3),
        "total_s": round(burst.total_s, 2),
        "throughput_per_s": round(len(burst.reached) / max(burst.total_s, 1e-9), 1),
        "latency_s": latency_figures(latencies),
        "stages_s": {
            "edit_call": stage(burst.created, burst.accepted),
            "edit_to_resume": stage(burst.accepted, burst.reached),
        },
    }


def own_edits(edits: list[Edit]) -> Counter[str]:
    """The release's own writes as apiserver_request_total names them ("PATCH plural")."""
    return Counter(f"PATCH {edit.kind.plural}" for edit in edits)


@dataclass
class Released:
    """One release-mode run: the hold, the release burst, and the window's writes per Job."""

    held: Held
    burst: Burst
    writes: dict[str, float]


def run_release(
    api: KubeApi,
    kind: Kind,
    namespace: str,
    bodies: list[dict[str, Any]],
    edits: list[Edit],
    *,
    pending_kind: Kind,
    pending: Callable[[Obj], bool],
    reached: Callable[[Obj], bool],
    pid: int,
    apiserver_pid: int | None = None,
    clients: int = 8,
    settle_s: float = 5.0,
) -> Released:
    """Hold `bodies` pending, then release them with `edits`; API writes are read just
    before the first edit and `settle_s` after the last Job is reached (the edits taken out)."""
    held = hold(api, kind, namespace, bodies, pending_kind=pending_kind, pending=pending,
                pid=pid, clients=clients)  # fmt: skip
    before = api_writes(api)
    burst = release(api, kind, namespace, edits, reached=reached, pid=pid,
                    apiserver_pid=apiserver_pid, clients=clients)  # fmt: skip
    time.sleep(settle_s)  # background writes (events, usage) land
    writes = writes_per_job(before, api_writes(api), len(bodies), 0, own_edits(edits))
    return Released(held, burst, writes)
