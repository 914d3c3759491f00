"""predicates plugin: cases of volcano-sh/volcano
pkg/scheduler/plugins/predicates/predicates_test.go, TestEventHandler and TestNodeNum.

The file's other tests are about Volcano's wrapping of kube-scheduler plugin objects (which
plugins InitPlugin builds, their argument defaults, PreScore calls, reserve rollback order,
failure-reason ordering, device annotations) and TestPodAntiAffinity runs topology-aware
preemption; none has a koordqueue counterpart (docs/concepts.md lists them).
"""

from __future__ import annotations

from typing import Any

from koordqueue.scheduler.api import PodGroupPhase

from .harness import build, node, pg, pod, queue, rl, run, tiers

INQUEUE = PodGroupPhase.INQUEUE
HOST = "kubernetes.io/hostname"
ANTI_WORKER: dict[str, Any] = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": "role", "operator": "In", "values": ["worker"]}
                        ]
                    },
                    "topologyKey": HOST,
                }
            ]
        }
    }
}
WORKER = {"role": "worker"}


def test_a_discarded_placement_leaves_no_trace_in_the_filters() -> None:
    """TestEventHandler, "pod-deallocate": pg1 (minMember 2, priority 2) places worker-1 on
    node1 but worker-2 fits nowhere (anti-affinity keeps it off node1, node2 is too small),
    so pg1's placement is discarded; pg2's worker-3 then goes to node1, which worker-1 no
    longer holds. Fails when the inter-pod counts keep a discarded placement (checked by
    dropping the counts' deallocate handler: nothing is bound)."""
    nodes = [
        node("node1", rl("14", "14k", {"pods": "10"}), {"selector": "worker", HOST: "node1"}),
        node("node2", rl("3", "3k", {"pods": "10"}), {HOST: "node2"}),
    ]
    pods = [
        pod(
            "worker-1",
            "",
            False,
            rl("3", "3k"),
            "pg1",
            selector={"selector": "worker"},
            labels=WORKER,
            spec=ANTI_WORKER,
        ),
        pod("worker-2", "", False, rl("5", "5k"), "pg1", labels=WORKER, spec=ANTI_WORKER),
        pod("worker-3", "", False, rl("4", "4k"), "pg2", labels=WORKER, spec=ANTI_WORKER),
    ]
    snapshot = build(
        nodes,
        pods,
        [pg("pg1", "q1", 2, INQUEUE, priority=2), pg("pg2", "q1", 1, INQUEUE, priority=1)],
        [queue("q1", weight=0)],
    )
    config = tiers(
        ("predicates", {"Predicate"}),
        ("gang", {"JobReady", "JobPipelined"}),
        ("priority", {"JobOrder"}),
    )
    assert run(snapshot, config, "allocate").binds == {"ns1/worker-3": "node1"}


def test_a_node_takes_no_more_pods_than_its_pods_allocatable() -> None:
    """TestNodeNum, "pod-predicate": three best-effort pods (pg1: worker-1 and worker-2,
    minMember 2; pg2: worker-3) and node1 with `pods: 2`; allocate then backfill bind pg1's
    two. Fails without the predicates plugin's `pods` check (checked: worker-3 is bound
    too)."""
    nodes = [node("node1", rl("4", "4k", {"pods": "2"}), {"selector": "worker"})]
    pods = [
        pod("worker-1", "", False, rl(), "pg1", selector={"selector": "worker"}, labels=WORKER),
        pod("worker-2", "", False, rl(), "pg1", labels=WORKER),
        pod("worker-3", "", False, rl(), "pg2", labels=WORKER),
    ]
    snapshot = build(
        nodes,
        pods,
        [pg("pg1", "q1", 2, INQUEUE, priority=2), pg("pg2", "q1", 1, INQUEUE, priority=1)],
        [queue("q1", weight=0)],
    )
    out = run(snapshot, tiers(("predicates", {"Predicate"})), "allocate, backfill")
    assert out.binds == {"ns1/worker-1": "node1", "ns1/worker-2": "node1"}
