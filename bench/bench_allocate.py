"""Benchmark: one scheduler session (default plugins) placing gang jobs on many nodes.

Usage: python bench/bench_allocate.py [--quick]

Prints the headline case (10,000 pods = 1,000 gang jobs of 10, on 5,000 nodes), a scaling
curve over nodes x pods (absolute seconds and ratios to the smallest case), and the share
of session time spent in each plugin's callbacks/open/close.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot, SessionResult, default_config, run_session
from koordqueue.scheduler.api import JobInfo, NodeInfo, PodGroupPhase, QueueInfo, TaskInfo

GANG = 10
SHAPES = [
    Resources.of(cpu="500m", memory="1Gi"),
    Resources.of(cpu="1", memory="2Gi"),
    Resources.of(cpu="2", memory="4Gi"),
    Resources.of(cpu="4", memory="8Gi"),
]
NODE = Resources.of(cpu="32", memory="128Gi", pods="110")
QUEUES = [QueueInfo(f"q{i}", weight=i + 1) for i in range(4)]


def build(nodes: int, pods: int, seed: int = 7) -> ClusterSnapshot:
    """`nodes` identical nodes; `pods // GANG` gang jobs (minAvailable = GANG) over 4 queues."""
    rng = random.Random(seed)
    node_list = [NodeInfo(f"node-{i:05d}", NODE, labels={"zone": f"z{i % 3}"}) for i in range(nodes)]
    jobs = []
    for j in range(pods // GANG):
        shape = SHAPES[rng.randrange(len(SHAPES))]
        tasks = [TaskInfo(f"j{j}-t{t}", f"j{j}-t{t}", resreq=shape, priority=rng.randrange(3)) for t in range(GANG)]
        jobs.append(
            JobInfo(
                f"j{j:05d}", queue=QUEUES[j % len(QUEUES)].name, min_available=GANG,
                min_resources=shape * GANG, phase=PodGroupPhase.PENDING, tasks=tasks, creation=float(j),
            )
        )
    return ClusterSnapshot(node_list, jobs, QUEUES)


def run(nodes: int, pods: int, repeats: int) -> tuple[float, SessionResult]:
    """Best-of-`repeats` wall time of run_session (snapshot building excluded)."""
    snapshot = build(nodes, pods)
    config = default_config()
    times = []
    result: SessionResult | None = None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = run_session(snapshot, config)
        times.append(time.perf_counter() - start)
    assert result is not None
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller curve, one repetition")
    args = parser.parse_args()
    repeats = 1 if args.quick else 3

    seconds, result = run(5000, 10_000, repeats)
    print(f"headline: 5000 nodes x 10000 pods (1000 gangs of {GANG}): {seconds:.3f} s "
          f"(target < 1 s), binds={len(result.binds)}")
    print("  actions: " + ", ".join(f"{k}={v:.3f}s" for k, v in result.action_durations.items()))
    total = result.duration
    plugin_total = 0.0
    print(f"  per-plugin share of the session ({total:.3f} s):")
    for name, timing in sorted(result.plugin_durations.items(), key=lambda kv: -kv[1].total):
        plugin_total += timing.total
        print(f"    {name:12s} {timing.total:7.3f} s  {100 * timing.total / total:5.1f}%  "
              f"(open {timing.open:.3f}, callbacks {timing.callbacks:.3f}, close {timing.close:.3f})")
    print(f"    {'framework':12s} {total - plugin_total:7.3f} s  {100 * (total - plugin_total) / total:5.1f}%")

    node_counts = [500, 1000, 5000] if not args.quick else [500, 5000]
    pod_counts = [1000, 5000, 10_000] if not args.quick else [1000, 10_000]
    grid: dict[tuple[int, int], float] = {}
    for n in node_counts:
        for p in pod_counts:
            grid[(n, p)], res = run(n, p, repeats)
            placed = len(res.binds)
            print(f"  nodes={n:5d} pods={p:6d}: {grid[(n, p)]:.3f} s  placed={placed}")
    base = grid[(node_counts[0], pod_counts[0])]
    print("\nscaling (seconds):")
    print("nodes\\pods " + "".join(f"{p:>10d}" for p in pod_counts))
    for n in node_counts:
        print(f"{n:10d} " + "".join(f"{grid[(n, p)]:10.3f}" for p in pod_counts))
    print(f"\nscaling (ratio to {node_counts[0]} nodes x {pod_counts[0]} pods):")
    print("nodes\\pods " + "".join(f"{p:>10d}" for p in pod_counts))
    for n in node_counts:
        print(f"{n:10d} " + "".join(f"{grid[(n, p)] / base:10.2f}" for p in pod_counts))
    per_pod = [grid[(n, p)] / p * 1e6 for n in node_counts for p in pod_counts]
    print(f"\nmedian cost per pod: {statistics.median(per_pod):.1f} us")


if __name__ == "__main__":
    main()
