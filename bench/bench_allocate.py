"""Benchmark: one scheduler session (default plugins) placing gang jobs on many nodes.

Usage: python bench/bench_allocate.py [--quick]

Prints the headline case (10,000 pods = 1,000 gang jobs of 10, on 5,000 nodes), a scaling
curve over nodes x pods (absolute seconds and ratios to the smallest case), and the share
of session time spent in each plugin (open + close + callbacks; measured in a separate run
with callback profiling on, because the timing wrappers themselves cost a few percent).

Wall time is reported next to process CPU time: on a shared machine the wall time also
measures the neighbours, the CPU time measures us.

It then runs the same headline with 30 % of the jobs carrying placement constraints (issue
14, part 5): required anti-affinity to their own pods per host, zone spreading (DoNotSchedule)
with host spreading (ScheduleAnyway), required zone affinity to their own pods with a
preferred node affinity; 10 % of the nodes carry a PreferNoSchedule taint. The cost of each
new plugin is its callbacks' time in a profiled run of that session.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.calibration import calibrate
from koordqueue.domain.resources import Resources
from koordqueue.scheduler import (
    ClusterSnapshot,
    SchedulerConfig,
    SessionResult,
    default_config,
    run_session,
)
from koordqueue.scheduler.api import (
    JobInfo,
    NodeAffinity,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodGroupPhase,
    QueueInfo,
    Taint,
    TaskInfo,
)
from koordqueue.scheduler.api.selectors import LabelSelector
from koordqueue.scheduler.api.task_info import (
    SCHEDULE_ANYWAY,
    PodAffinity,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
)
from koordqueue.scheduler.interpod import (
    INTER_POD_AFFINITY,
    NODE_AFFINITY_TAINTS,
    POD_TOPOLOGY_SPREAD,
)

GANG = 10
TARGET_PY_REFS = 11.0
"""Issue 16, part 2: the headline in <= 0.35 s CPU on the box where py-ref is ~31 ms."""
SHAPES = [
    Resources.of(cpu="500m", memory="1Gi"),
    Resources.of(cpu="1", memory="2Gi"),
    Resources.of(cpu="2", memory="4Gi"),
    Resources.of(cpu="4", memory="8Gi"),
]
NODE = Resources.of(cpu="32", memory="128Gi", pods="110")
QUEUES = [QueueInfo(f"q{i}", weight=i + 1) for i in range(4)]


def build(nodes: int, pods: int, seed: int = 7) -> ClusterSnapshot:
    """`nodes` equal nodes; `pods // GANG` Pending gang jobs (minAvailable = GANG, with
    minResources so enqueue has work) spread over 4 weighted queues, 4 pod shapes."""
    rng = random.Random(seed)
    node_list = [
        NodeInfo(f"node-{i:05d}", NODE, labels={"zone": f"z{i % 3}"}) for i in range(nodes)
    ]
    jobs = []
    for j in range(pods // GANG):
        shape = SHAPES[rng.randrange(len(SHAPES))]
        tasks = [
            TaskInfo(f"j{j}-t{t}", f"j{j}-t{t}", resreq=shape, priority=rng.randrange(3))
            for t in range(GANG)
        ]
        jobs.append(
            JobInfo(
                f"j{j:05d}",
                queue=QUEUES[j % len(QUEUES)].name,
                min_available=GANG,
                min_resources=shape * GANG,
                phase=PodGroupPhase.PENDING,
                tasks=tasks,
                creation=float(j),
            )
        )
    return ClusterSnapshot(node_list, jobs, QUEUES)


HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
ZONES = 10
CONSTRAINED_SHARE = 0.3


def _constraints(kind: int, job: str, namespace: str) -> dict[str, object]:
    """TaskInfo keyword arguments for one of three kinds of constrained job."""
    own = LabelSelector((("job", job),))
    if kind == 0:  # one pod per host
        return {
            "pod_affinity": PodAffinity(
                anti_required=(PodAffinityTerm(HOSTNAME, own, frozenset({namespace})),)
            )
        }
    if kind == 1:  # even over zones, and over hosts when possible
        return {
            "spread": (
                TopologySpreadConstraint(1, ZONE, selector=own),
                TopologySpreadConstraint(1, HOSTNAME, SCHEDULE_ANYWAY, own),
            )
        }
    gold = NodeSelectorTerm((NodeSelectorRequirement("tier", "In", ("gold",)),))
    return {  # all in one zone, preferably on gold nodes
        "pod_affinity": PodAffinity(required=(PodAffinityTerm(ZONE, own, frozenset({namespace})),)),
        "affinity": NodeAffinity(preferred=(PreferredSchedulingTerm(50, gold),)),
    }


def build_constrained(nodes: int, pods: int, seed: int = 7) -> ClusterSnapshot:
    """`build`'s cluster with host and zone labels, 10 % PreferNoSchedule-tainted nodes, and
    30 % of the jobs constrained (a third of them of each kind in `_constraints`)."""
    rng = random.Random(seed)
    prefer = (Taint("example.com/spot", "", "PreferNoSchedule"),)
    node_list = [
        NodeInfo(
            f"node-{i:05d}",
            NODE,
            labels={
                "zone": f"z{i % 3}",
                ZONE: f"zone-{i % ZONES}",
                HOSTNAME: f"node-{i:05d}",
                "tier": "gold" if i % 4 == 0 else "silver",
            },
            taints=prefer if i % 10 == 0 else (),
        )
        for i in range(nodes)
    ]
    jobs = []
    constrained = 0
    for j in range(pods // GANG):
        shape = SHAPES[rng.randrange(len(SHAPES))]
        name = f"j{j:05d}"
        extra: dict[str, object] = {}
        if rng.random() < CONSTRAINED_SHARE:
            extra = _constraints(constrained % 3, name, "default")
            constrained += 1
        labels = {"job": name}
        tasks = [
            TaskInfo(
                f"j{j}-t{t}",
                f"j{j}-t{t}",
                resreq=shape,
                priority=rng.randrange(3),
                labels=labels,
                **extra,  # type: ignore[arg-type]
            )
            for t in range(GANG)
        ]
        jobs.append(
            JobInfo(
                name,
                queue=QUEUES[j % len(QUEUES)].name,
                min_available=GANG,
                min_resources=shape * GANG,
                phase=PodGroupPhase.PENDING,
                tasks=tasks,
                creation=float(j),
            )
        )
    return ClusterSnapshot(node_list, jobs, QUEUES)


@dataclass
class Measurement:
    wall: float
    cpu: float
    result: SessionResult


def measure(
    nodes: int,
    pods: int,
    repeats: int,
    *,
    profile: bool = False,
    snapshot: ClusterSnapshot | None = None,
    config: SchedulerConfig | None = None,
) -> Measurement:
    """Best-of-`repeats` run_session times (snapshot building excluded)."""
    snapshot = snapshot if snapshot is not None else build(nodes, pods)
    config = config if config is not None else default_config()
    best: Measurement | None = None
    for _ in range(repeats):
        gc.collect()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        result = run_session(snapshot, config, profile_callbacks=profile)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if best is None or cpu < best.cpu:
            best = Measurement(wall, cpu, result)
    assert best is not None
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller curve, fewer repetitions")
    args = parser.parse_args()
    repeats = 2 if args.quick else 5

    cal = calibrate()
    print(cal.line())
    head = measure(5000, 10_000, repeats)
    print(
        f"headline: 5000 nodes x 10000 pods ({10_000 // GANG} gangs of {GANG}): "
        f"wall {head.wall:.3f} s, cpu {head.cpu:.3f} s (target < 1 s), "
        f"binds={len(head.result.binds)}"
    )
    print(
        f"  headline in machine units: {cal.in_py_refs(head.cpu):.1f} py-ref "
        f"({cal.in_np_refs(head.cpu):.1f} np-ref; issue 16 target <= {TARGET_PY_REFS:g} py-ref)"
    )
    actions = ", ".join(f"{k}={v:.3f}s" for k, v in head.result.action_durations.items())
    print(f"  actions: {actions}")

    profiled = measure(5000, 10_000, 1, profile=True)
    total = profiled.result.duration
    plugin_total = 0.0
    print(f"  per-plugin share of a profiled session ({total:.3f} s wall):")
    for name, timing in sorted(
        profiled.result.plugin_durations.items(), key=lambda kv: -kv[1].total
    ):
        plugin_total += timing.total
        print(
            f"    {name:12s} {timing.total:7.3f} s  {100 * timing.total / total:5.1f}%  "
            f"(open {timing.open:.3f}, callbacks {timing.callbacks:.3f}, close {timing.close:.3f})"
        )
    rest = total - plugin_total
    print(
        f"    {'framework':12s} {rest:7.3f} s  {100 * rest / total:5.1f}%  "
        "(actions, placement, state)"
    )
    print(
        "    (the timing wrappers hide the scalar twins of predicates/nodeorder/binpack, so "
        "this run refreshes nodes through their batch path)"
    )

    constrained_costs(repeats)

    node_counts = [500, 1000, 5000] if not args.quick else [500, 5000]
    pod_counts = [1000, 5000, 10_000] if not args.quick else [1000, 10_000]
    grid: dict[tuple[int, int], Measurement] = {}
    for n in node_counts:
        for p in pod_counts:
            grid[(n, p)] = m = measure(n, p, repeats)
            print(
                f"  nodes={n:5d} pods={p:6d}: wall {m.wall:.3f} s  cpu {m.cpu:.3f} s  "
                f"placed={len(m.result.binds)}"
            )
    for label, pick in (("cpu seconds", lambda m: m.cpu), ("wall seconds", lambda m: m.wall)):
        base = pick(grid[(node_counts[0], pod_counts[0])])
        print(f"\nscaling, {label} (and ratio to {node_counts[0]} nodes x {pod_counts[0]} pods):")
        print("nodes\\pods " + "".join(f"{p:>16d}" for p in pod_counts))
        for n in node_counts:
            cells = "".join(
                f"{pick(grid[(n, p)]):8.3f} ({pick(grid[(n, p)]) / base:5.2f}x)" for p in pod_counts
            )
            print(f"{n:10d} {cells}")
    print(
        "\n(placed < pods means the nodes were full: "
        "500 nodes hold fewer than 10,000 of these pods)"
    )


FEATURES = (
    INTER_POD_AFFINITY,
    POD_TOPOLOGY_SPREAD,
    NODE_AFFINITY_TAINTS,
    "predicates",
    "nodeorder",
)
"""The new placement features' callback time as a profiled session reports it; predicates
also holds the pod counts' bookkeeping, nodeorder the single-level node affinity and taint
scores (cached per pod shape) besides the resource scores."""


def constrained_costs(repeats: int) -> None:
    """The headline with 30 % constrained jobs, and each new plugin's cost in it."""
    snapshot = build_constrained(5000, 10_000)
    full = measure(5000, 10_000, repeats, snapshot=snapshot)
    print(
        f"constrained: 5000 nodes x 10000 pods, {CONSTRAINED_SHARE:.0%} of the jobs with "
        f"(anti-)affinity or spread constraints: wall {full.wall:.3f} s, cpu {full.cpu:.3f} s "
        f"(target < 1 s), binds={len(full.result.binds)}"
    )
    profiled = measure(5000, 10_000, 1, snapshot=snapshot, profile=True)
    total = profiled.result.duration
    print(f"  cost of each new plugin in a profiled session ({total:.3f} s wall):")
    for feature in FEATURES:
        timing = profiled.result.plugin_durations.get(feature)
        spent = timing.callbacks if timing is not None else 0.0
        print(f"    {feature:30s} {spent:7.3f} s  {100 * spent / total:5.1f}%")


if __name__ == "__main__":
    main()
