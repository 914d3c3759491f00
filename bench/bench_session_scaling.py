"""Benchmark: the cost of one scheduler session as the number of bound pods grows.

Usage: python bench/bench_session_scaling.py [--nodes 5000] [--bound 1000,10000,50000]
                                             [--pending 10] [--repeats 3] [--profile N]

What a session costs in `koordqueue schedule` once the cache is warm: a SchedulerCache fed
with `--nodes` Ready nodes and N bound, Running standalone pods (our scheduler's; each is its
own job, as pods without a PodGroup are), then `--pending` new pending pods arrive by watch
event and one session runs: `cache.build` + `open_session` + the default actions + `close`
(Scheduler.run_once without the HTTP writes). Between repeats the placed pods come back bound,
as their bind watch events would. Issue 19's target: < 5 ms at 50,000 bound pods, 5,000 nodes,
10 pending pods. Prints CPU and wall time per session (best of `--repeats`) per stage and the
ratio to the smallest case, with calibration.py's yardstick. `gc ms` is the wall time the
cyclic collector ran inside the timed session (young-generation passes walk every container
the session made, so big per-session copies cost twice); `--profile N` runs N more sessions
at the largest size under cProfile and prints the top functions by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.calibration import calibrate
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler import SchedulerConfig, default_config
from koordqueue.scheduler.framework import open_session, run_actions

SCHEDULER = "volcano"


def node(i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"node-{i:05d}", "resourceVersion": "1", "labels": {"zone": f"z{i % 3}"},
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(uid: str, node_name: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {
            "name": uid, "namespace": "default", "uid": uid, "resourceVersion": "1",
            "creationTimestamp": "2026-12-03T00:00:00Z",
        },
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def fill(nodes: int, bound: int) -> SchedulerCache:
    cache = SchedulerCache(SCHEDULER)
    cache.replace(CachedKind.NODE, [node(i) for i in range(nodes)])
    cache.replace(CachedKind.QUEUE, [{"metadata": {"name": "default"}, "spec": {"weight": 1}}])
    cache.replace(CachedKind.POD_GROUP, [])
    cache.replace(
        CachedKind.POD, [pod(f"bound-{i}", f"node-{i % nodes:05d}") for i in range(bound)]
    )
    return cache


CONFIG: SchedulerConfig = default_config()
"""Parsed once, as the scheduler keeps it."""


class GcTimer:
    """Wall time the cyclic collector spends while installed (gc.callbacks)."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0

    def __call__(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._start


def one(
    cache: SchedulerCache, round_: int, pending: int, profiler: cProfile.Profile | None = None
) -> tuple[dict[str, float], int]:
    """CPU seconds per stage of one session after `pending` new pods arrive."""
    for k in range(pending):
        cache.on_event(CachedKind.POD, "ADDED", pod(f"new-{round_}-{k}", None))
    gc.collect()
    times: dict[str, float] = {}
    clock = time.process_time
    collector = GcTimer()
    gc.callbacks.append(collector)
    if profiler is not None:
        profiler.enable()
    t0 = clock()
    built = cache.build()
    t1 = clock()
    session = open_session(built.snapshot, CONFIG)
    t2 = clock()
    run_actions(session)
    result = session.close()
    t3 = clock()
    if profiler is not None:
        profiler.disable()
    gc.callbacks.remove(collector)
    times = {
        "build": t1 - t0, "open": t2 - t1, "actions+close": t3 - t2, "total": t3 - t0,
        "gc": collector.total,
    }
    for bind in result.binds:  # the binds come back on the watch
        cache.assume(bind.task, bind.node)
        raw = pod(bind.task, bind.node)
        raw["metadata"]["resourceVersion"] = "2"
        cache.on_event(CachedKind.POD, "MODIFIED", raw)
    return times, len(result.binds)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--bound", default="1000,10000,50000")
    parser.add_argument("--pending", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="profile N more sessions at the largest size (cProfile)")
    args = parser.parse_args()
    cal = calibrate()
    print(cal.line())
    sizes = [int(x) for x in args.bound.split(",")]
    rows: list[tuple[int, dict[str, float], float, int]] = []
    for bound in sizes:
        cache = fill(args.nodes, bound)
        wall0 = time.perf_counter()
        one(cache, 0, 0)  # the first session after the listing converts everything
        warm = time.perf_counter() - wall0
        best: dict[str, float] | None = None
        placed = 0
        for r in range(1, args.repeats + 1):
            times, placed = one(cache, r, args.pending)
            if best is None or times["total"] < best["total"]:
                best = times
        assert best is not None
        rows.append((bound, best, warm, placed))
        if args.profile and bound == max(sizes):
            profiler = cProfile.Profile()
            for r in range(args.repeats + 1, args.repeats + 1 + args.profile):
                one(cache, r, args.pending, profiler)
            print(f"cProfile of {args.profile} sessions at {bound} bound pods:")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    base = rows[0][1]["total"]
    print(
        f"session after {args.pending} new pending pods, {args.nodes} nodes, CPU ms "
        f"(best of {args.repeats}; target < 5 ms at 50,000 bound):"
    )
    print(f"{'bound':>8} {'build':>9} {'open':>9} {'act+close':>10} {'total':>9} {'gc ms':>6} "
          f"{'x smallest':>10} {'py-ref':>7} {'placed':>6} {'first session s':>15}")
    for bound, t, warm, placed in rows:
        print(
            f"{bound:>8} {t['build'] * 1e3:>9.2f} {t['open'] * 1e3:>9.2f} "
            f"{t['actions+close'] * 1e3:>10.2f} {t['total'] * 1e3:>9.2f} {t['gc'] * 1e3:>6.2f} "
            f"{t['total'] / base:>10.2f} {cal.in_py_refs(t['total']):>7.2f} {placed:>6} "
            f"{warm:>15.2f}"
        )


if __name__ == "__main__":
    main()
