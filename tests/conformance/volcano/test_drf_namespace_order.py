"""drf with enableNamespaceOrder: the cases of volcano-sh/volcano
pkg/scheduler/actions/allocate/allocate_test.go, TestAllocate, as they stood before commit
4ee689ac2 ("Refactor namespace fairshare function", Volcano v1.8 removed namespace order):
one tier, drf with enablePreemptable, enableJobOrder and enableNamespaceOrder, proportion
with enableQueueOrder and enableReclaimable; action allocate.

The case "one Job with two Pods on one node" has a single namespace and is covered by
test_allocate_action.py; namespace order cannot change it.
"""

from __future__ import annotations

import dataclasses

from koordqueue.scheduler import SchedulerConfig
from koordqueue.scheduler.api import NodeInfo, PodGroupPhase, QueueInfo
from koordqueue.scheduler.plugins.drf import NAMESPACE_ORDER_SWITCH

from .harness import Outcome, Pod, PodGroup, build, node, pg, pod, queue, rl, run, tiers

INQUEUE = PodGroupPhase.INQUEUE
ONE = rl("1", "1G")


def with_switch(config: SchedulerConfig, plugin: str, switch: str) -> SchedulerConfig:
    """The configuration with `switch: true` added to `plugin` (the harness only knows the
    current extension points)."""
    tiers_ = tuple(
        dataclasses.replace(
            tier,
            plugins=tuple(
                dataclasses.replace(p, switches={**p.switches, switch: True})
                if p.name == plugin
                else p
                for p in tier.plugins
            ),
        )
        for tier in config.tiers
    )
    return dataclasses.replace(config, tiers=tiers_)


CONFIG = with_switch(
    tiers(("drf", {"Preemptable", "JobOrder"}), ("proportion", {"QueueOrder", "Reclaimable"})),
    "drf",
    NAMESPACE_ORDER_SWITCH,
)


def _allocate(
    nodes: list[NodeInfo], pods: list[Pod], groups: list[PodGroup], queues: list[QueueInfo]
) -> Outcome:
    return run(build(nodes, pods, groups, queues, namespace="c1"), CONFIG, "allocate")


def test_two_namespaces_get_one_pod_each() -> None:
    """TestAllocate (before 4ee689ac2), "two Jobs on one node": pg1 in namespace/queue c1,
    pg2 in namespace/queue c2, two 1-cpu pods each on a 2-cpu node: one pod each."""
    out = _allocate(
        [node("n1", rl("2", "4G"))],
        [
            pod("pg1-p-1", "", False, ONE, "pg1"),
            pod("pg1-p-2", "", False, ONE, "pg1"),
            pod("pg2-p-1", "", False, ONE, "pg2", namespace="c2"),
            pod("pg2-p-2", "", False, ONE, "pg2", namespace="c2"),
        ],
        [pg("pg1", "c1", 0, INQUEUE), pg("pg2", "c2", 0, INQUEUE, namespace="c2")],
        [queue("c1"), queue("c2")],
    )
    assert out.binds == {"c2/pg2-p-1": "n1", "c1/pg1-p-1": "n1"}


def test_job_that_does_not_fit_does_not_block_its_namespace() -> None:
    """TestAllocate (before 4ee689ac2), "high priority queue should not block others": both
    PodGroups in namespace c1 (queues c1 and c2); pg1's 3-cpu pod does not fit, pg2's does."""
    out = _allocate(
        [node("n1", rl("2", "4G"))],
        [pod("p1", "", False, rl("3", "1G"), "pg1"), pod("p2", "", False, ONE, "pg2")],
        [pg("pg1", "c1", 0, INQUEUE), pg("pg2", "c2", 0, INQUEUE)],
        [queue("c1"), queue("c2")],
    )
    assert out.binds == {"c1/p2": "n1"}
