"""drf with enableHierarchy: the cases of volcano-sh/volcano
pkg/scheduler/plugins/drf/hdrf_test.go, TestHDRF (action allocate; one tier: drf with
enableHierarchy, enableQueueOrder and enableJobOrder, proportion with enableJobEnqueued,
enableQueueOrder and enableReclaimable).

The Go test's final check compares the whole `expected` map with one job's allocation and so
can never fail; the expectations below are the case's `expected` map itself, per PodGroup.
In "blocking nodes test" the PodGroups pg31 and pg32 both name queue root-pg3-pg31 (queue
root-pg3-pg32 has no job), exactly as in the original.

As written, proportion's queue order (in the same tier) already splits the node the way the
hierarchy would, so the allocations alone are the same with `enableHierarchy` off. Each case
therefore also checks the hierarchical shares drf's queue order compares once allocate is
done, worked from Volcano's updateHierarchicalShare: every resource is handed out, so every
job is saturated and each inner node holds its children's allocations unscaled. With
hierarchy off there is no tree and both cases fail (checked by dropping "Hierarchy" from
CONFIG). The tree's own rules (rescaling, saturation, weights, reclaim) are pinned in
tests/unit/scheduler/test_drf_hierarchy.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import PodGroupPhase, QueueInfo

from .harness import Pod, build, node, pg, pod, queue, rl, run, tiers

INQUEUE = PodGroupPhase.INQUEUE
NS = "default"
CONFIG = tiers(
    ("drf", {"Hierarchy", "QueueOrder", "JobOrder"}),
    ("proportion", {"JobEnqueued", "QueueOrder", "Reclaimable"}),
)


def hqueue(name: str, hierarchy: str, weights: str) -> QueueInfo:
    """util.BuildQueueWithAnnos(name, 1, nil, {volcano.sh/hierarchy, .../hierarchy-weights})."""
    return dataclasses.replace(queue(name), hierarchy=hierarchy, hierarchy_weights=weights)


def make_pods(num: int, cpu: str, memory: str, group: str) -> list[Pod]:
    """makePods(num, cpu, mem, podGroupName): pending pods named <group>-p<i>."""
    return [pod(f"{group}-p{i}", "", False, rl(cpu, memory), group) for i in range(num)]


def allocated(
    capacity: Resources, pods: list[Pod], groups: list[tuple[str, str]], queues: list[QueueInfo]
) -> tuple[dict[str, Resources], dict[str, float]]:
    """Run allocate on one node "n"; each PodGroup's allocation (job.Allocated), and the
    share of every inner node of drf's hierarchy ("root/eng"), as allocate left them."""
    snapshot = build(
        [node("n", capacity)],
        pods,
        [pg(name, q, 0, INQUEUE) for name, q in groups],
        queues,
        namespace=NS,
    )
    out = run(snapshot, CONFIG, "allocate")
    tree = out.session.plugins["drf"].tree  # type: ignore[attr-defined]
    assert tree is not None, "drf built no hierarchy: enableHierarchy is off"
    shares = {
        "/".join(path): share
        for path, (share, _saturated, _allocated) in tree.snapshot().items()
        if not path[-1].startswith("\x00")  # inner nodes, not job leaves
    }
    return {job.name: job.allocated for job in out.session.jobs.values()}, shares


def test_rescaling_gives_each_queue_half_of_what_it_demands() -> None:
    """TestHDRF "rescaling test": root/sci (100/50) and root/eng/{dev,prod} (100/50/50) on a
    10 cpu / 10G node: pg1 gets 5 cpu and 5G, pg21 5 cpu, pg22 5G."""
    got, shares = allocated(
        rl("10", "10G", {"pods": "50"}),
        make_pods(10, "1", "1G", "pg1")
        + make_pods(10, "1", "0G", "pg21")
        + make_pods(10, "0", "1G", "pg22"),
        [("pg1", "root-sci"), ("pg21", "root-eng-dev"), ("pg22", "root-eng-prod")],
        [
            hqueue("root-sci", "root/sci", "100/50"),
            hqueue("root-eng-dev", "root/eng/dev", "100/50/50"),
            hqueue("root-eng-prod", "root/eng/prod", "100/50/50"),
        ],
    )
    assert got == {
        "pg1": rl("5", "5G"),
        "pg21": rl("5", ""),
        "pg22": rl("", "5G"),
    }
    # sci holds 5 cpu / 5G; eng holds dev's 5 cpu and prod's 5G: each half of the node
    assert shares == pytest.approx(
        {"root": 1.0, "root/sci": 0.5, "root/eng": 0.5, "root/eng/dev": 0.5, "root/eng/prod": 0.5}
    )


def test_blocking_nodes_split_the_cluster_by_demanded_resource() -> None:
    """TestHDRF "blocking nodes test": four root children (100/25, pg3 with child pg31
    100/25/50) on a 30 cpu / 30G node: the three cpu-only jobs get 10 cpu each, the two
    memory-only jobs 15G each."""
    got, shares = allocated(
        rl("30", "30G", {"pods": "500"}),
        make_pods(30, "1", "0G", "pg1")
        + make_pods(30, "1", "0G", "pg2")
        + make_pods(30, "1", "0G", "pg31")
        + make_pods(30, "0", "1G", "pg32")
        + make_pods(30, "0", "1G", "pg4"),
        [
            ("pg1", "root-pg1"),
            ("pg2", "root-pg2"),
            ("pg31", "root-pg3-pg31"),
            ("pg32", "root-pg3-pg31"),
            ("pg4", "root-pg4"),
        ],
        [
            hqueue("root-pg1", "root/pg1", "100/25"),
            hqueue("root-pg2", "root/pg2", "100/25"),
            hqueue("root-pg3-pg31", "root/pg3/pg31", "100/25/50"),
            hqueue("root-pg3-pg32", "root/pg3/pg32", "100/25/50"),
            hqueue("root-pg4", "root/pg4", "100/25"),
        ],
    )
    assert got == {
        "pg1": rl("10", ""),
        "pg2": rl("10", ""),
        "pg31": rl("10", ""),
        "pg32": rl("", "15G"),
        "pg4": rl("", "15G"),
    }
    # pg3/pg31 holds both of its jobs (10 cpu and 15G: dominant memory, 1/2); pg3/pg32 has
    # no job (share 0)
    third = 1 / 3
    assert shares == pytest.approx(
        {
            "root": 1.0,
            "root/pg1": third,
            "root/pg2": third,
            "root/pg3": 0.5,
            "root/pg3/pg31": 0.5,
            "root/pg3/pg32": 0.0,
            "root/pg4": 0.5,
        }
    )
