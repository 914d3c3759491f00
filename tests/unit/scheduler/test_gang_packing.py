"""Volcano's gang benchmark shape in one in-process session: how many nodes binpack fills.

The shape is volcano-sh/volcano benchmark/testcases/gang (scheduler-config.yaml: actions
enqueue, allocate, backfill; tiers priority, gang, conformance / overcommit, drf, predicates,
proportion, nodeorder, binpack): 10 jobs of 100 pods with minMember 100, pods of 1 cpu and
1Gi, 100 nodes of 32 cpu and 256Gi.

What Volcano's arithmetic gives: a pod scores on a node already holding k pods
least-allocated floor((floor(100 (31-k) / 32) + floor(100 (255-k) / 256)) / 2), balanced
allocation 74 (the balance barely moves), and binpack 100 (k+1) (1/32 + 1/256) / 2. Binpack
gains exactly what least-allocated loses, so only the floors decide: up to k = 16 the node
beats an empty one (172.7578...), at k = 17 it no longer does. Each node takes 17 pods before
the next is started: 1000 pods fill 58 nodes and put 14 on a 59th (5000 pods: 294 and 2).
"""

from __future__ import annotations

from collections import Counter

import pytest

from koordqueue.scheduler import run_session
from koordqueue.scheduler.plugins.noderesources import balanced_allocation, least_allocated

from .builders import bound_nodes, config, job, node, snapshot, task

GANG_TIERS = (
    ("priority", "gang", "conformance"),
    ("overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"),
)
GIB = 1024**3


def _gang_shape(jobs: int, pods: int, nodes: int) -> Counter[str]:
    node_list = [node(f"n{i:03d}", cpu="32", memory="256Gi") for i in range(nodes)]
    job_list = [
        job(
            f"job{j}",
            [task(f"job{j}-p{p:03d}", cpu="1", memory="1Gi") for p in range(pods)],
            min_available=pods,
        )
        for j in range(jobs)
    ]
    config_ = config("enqueue, allocate, backfill", *GANG_TIERS)
    result = run_session(snapshot(node_list, job_list), config_)
    return Counter(bound_nodes(result).values())


@pytest.mark.parametrize(
    ("jobs", "pods", "nodes", "full", "last"),
    [(10, 100, 100, 58, 14), (20, 250, 500, 294, 2)],
    ids=["10 x 100 on 100 nodes", "20 x 250 on 500 nodes"],
)
def test_gang_benchmark_shape_fills_nodes_to_17_pods_as_volcano_does(
    jobs: int, pods: int, nodes: int, full: int, last: int
) -> None:
    """Volcano's gang shape and the larger one the peer bench runs: every node used takes
    17 pods but the last. Fails with the float resource scores nodeorder had before (they
    cancel binpack out: 10 pods on each of the 100 nodes, checked)."""
    per_node = _gang_shape(jobs, pods, nodes)
    assert sum(per_node.values()) == jobs * pods
    assert len(per_node) == full + 1
    assert sorted(per_node.values(), reverse=True) == [17] * full + [last]


@pytest.mark.parametrize(("held", "least"), [(0, 97), (4, 91), (16, 69), (17, 67)])
def test_least_allocated_floors_each_resource_and_the_mean(held: int, least: int) -> None:
    """kube-scheduler's leastRequestedScore per resource, then the 50/50 weighted mean, both
    floored: the values the docstring's argument rests on."""
    cpu = least_allocated((held + 1) * 1000, 32000)
    memory = least_allocated((held + 1) * GIB, 256 * GIB)
    assert (cpu * 50 + memory * 50) // 100 == least


def test_balanced_allocation_scores_the_change_in_balance() -> None:
    """kube-scheduler v1.36: 50 + (50 + with - without) / 2; an unchanged balance is 75, a
    node brought from fully skewed to balanced 100, the reverse 50."""
    assert balanced_allocation([1.0, 1.0], [0.0, 0.0], [4.0, 4.0]) == 75
    assert balanced_allocation([0.0, 4.0], [4.0, 0.0], [4.0, 4.0]) == 100
    assert balanced_allocation([4.0, 0.0], [0.0, 0.0], [4.0, 4.0]) == 50
    # the gang shape: one more 1 cpu / 1Gi pod on a 32 cpu / 256Gi node holding 5
    assert balanced_allocation([1000.0, GIB], [5000.0, 5.0 * GIB], [32000.0, 256.0 * GIB]) == 74
