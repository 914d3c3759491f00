"""priority plugin: cases of volcano-sh/volcano pkg/scheduler/plugins/priority/priority_test.go,
TestPreempt (actions allocate, preempt; one tier: priority with task order, job order,
reclaimable, job starving, and preemptable on or off; priority classes low-priority 100 and
high-priority 1000). Pods built without a priority have task priority 1, as Volcano's TaskInfo
defaults it.

TestUnifiedEvictableFn_GangReclaimPermitsAll exercises Volcano's gangreclaim action, which
koordqueue does not have (docs/concepts.md), and is not transcribed.
"""

from __future__ import annotations

from koordqueue.scheduler.api import PodGroupPhase

from .harness import Outcome, build, node, pg, pod, queue, rl, run, tiers

INQUEUE = PodGroupPhase.INQUEUE
PODS = {"pods": "10"}
LOW, HIGH = 100, 1000
THREE = rl("3", "3G")


def _run(
    preemptable: bool, nodes: list[tuple[str, str]], preemptee2: tuple[str, bool, int]
) -> Outcome:
    switches = {"TaskOrder", "JobOrder", "Reclaimable", "JobStarving"}
    if preemptable:
        switches.add("Preemptable")
    node2, preemptee2_preemptable, preemptee2_priority = preemptee2
    snapshot = build(
        [node(name, rl(size, f"{size}G", PODS)) for name, size in nodes],
        [
            pod("preemptee1", "node1", True, THREE, "pg1", namespace="ns1", priority=1),
            pod(
                "preemptee2",
                node2,
                True,
                THREE,
                "pg1",
                namespace="ns1",
                priority=preemptee2_priority,
                preemptable=preemptee2_preemptable,
            ),
            pod("preemptor1", "", False, THREE, "pg2", namespace="ns2", priority=1),
        ],
        [
            pg("pg1", "q1", 1, INQUEUE, priority=LOW, task_min={}, namespace="ns1"),
            pg("pg2", "q1", 1, INQUEUE, priority=HIGH, task_min={}, namespace="ns2"),
        ],
        [queue("q1", None, rl("6", "6G"))],
    )
    return run(snapshot, tiers(("priority", switches)), "allocate, preempt")


def test_low_priority_task_is_preempted_first() -> None:
    """TestPreempt, "enable preempt low priority: enablePreemptable:true": both preemptees are
    of the low-priority job on node1; preemptee1 (task priority 1) goes before preemptee2
    (1000), and only it is needed. Fails with priority's preemptable off (nothing evicted)
    and with its task order off (preemptee2 evicted instead): both checked."""
    out = _run(True, [("node1", "6"), ("node2", "2")], ("node1", True, 1000))
    assert out.evicted == ["ns1/preemptee1"]
    assert list(out.pipelined) == ["ns2/pg2"]
    assert set(out.pipelined["ns2/pg2"].values()) == {"node1"}


def test_nothing_is_preempted_with_preemptable_off() -> None:
    """TestPreempt, "disable preempt low priority: enablePreemptable:false". Fails when the
    switch is ignored (checked with preemptable on: preemptee1 is evicted)."""
    out = _run(False, [("node1", "3"), ("node2", "3")], ("node2", False, 1))
    assert out.evicted == []
    assert out.pipelined == {}
