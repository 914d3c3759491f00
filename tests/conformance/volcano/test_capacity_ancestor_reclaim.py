"""capacity ancestorReclaimLevel: cases of volcano-sh/volcano
pkg/scheduler/plugins/capacity/capacity_test.go, Test_capacityPlugin_AncestorReclaimScenarios
(actions enqueue, reclaim, allocate; one tier: capacity with allocatable/preemptive/
reclaimable/queue order/hierarchy/job enqueued and the case's `ancestorReclaimLevel`,
predicates, gang with job starving, and for some cases priority with job/task order).

Pods built without a priority have task priority 1, as Volcano's TaskInfo defaults it."""

from __future__ import annotations

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import NodeInfo, PodGroupPhase, QueueInfo

from .harness import Outcome, Pod, PodGroup, build, node, pg, pod, queue, rl, run, tiers

RUNNING, INQUEUE, PENDING = PodGroupPhase.RUNNING, PodGroupPhase.INQUEUE, PodGroupPhase.PENDING
A100, HCA = "nvidia.com/a100", "rdma/hca"
BIG_NODE = node("n1", rl("16", "16Gi", {A100: "4", HCA: "1001", "pods": "11"}))
SMALL_NODE = node("n1", rl("2", "2Gi", {"pods": "10"}))
ONE_A100 = rl("1", "1Gi", {A100: "1", HCA: "1"})


def child(
    name: str, parent: str, deserved: Resources | None = None, capability: Resources | None = None
) -> QueueInfo:
    """buildQueueWithParents(name, parent, deserved, capability)."""
    return queue(name, deserved, capability, parent=parent or None)


def a100(n: str) -> Resources:
    return rl("", "", {A100: n})


def _ancestor(
    level: int,
    with_priority: bool,
    nodes: list[NodeInfo],
    pods: list[Pod],
    groups: list[PodGroup],
    queues: list[QueueInfo],
) -> Outcome:
    plugins: list[tuple[str, set[str]]] = [
        (
            "capacity",
            {"Allocatable", "Preemptive", "Reclaimable", "QueueOrder", "Hierarchy", "JobEnqueued"},
        ),
        ("predicates", {"Predicate"}),
        ("gang", {"JobStarving"}),
    ]
    if with_priority:
        plugins.append(("priority", {"JobOrder", "TaskOrder"}))
    config = tiers(*plugins, arguments={"capacity": {"ancestorReclaimLevel": level}})
    return run(build(nodes, pods, groups, queues), config, "enqueue, reclaim, allocate")


def _project_tree() -> list[QueueInfo]:
    """buildProjectQueueTree."""
    return [
        child("root", "", rl("16", "16Gi", {A100: "4", "rdma": "1000"})),
        child("project1_root", "root", a100("1"), a100("2")),
        child("project1_non-preemptable", "project1_root", a100("1"), a100("1")),
        child("project1_preemptable", "project1_root"),
        child("project2_root", "root", a100("3"), a100("4")),
        child("project2_non-preemptable", "project2_root", a100("3"), a100("3")),
        child("project2_preemptable", "project2_root"),
    ]


def _level_tree() -> list[QueueInfo]:
    """buildLevelSemanticsTree."""
    return [
        child("root", ""),
        child("grand-a", "root", rl("2", "2Gi"), rl("4", "4Gi")),
        child("parent-a", "grand-a", rl("2", "2Gi"), rl("2", "2Gi")),
        child("queue-a", "parent-a", rl("2", "2Gi"), rl("2", "2Gi")),
        child("grand-b", "root", rl("3", "3Gi"), rl("4", "4Gi")),
        child("parent-b", "grand-b", rl("1", "1Gi"), rl("2", "2Gi")),
        child("queue-b", "parent-b", rl("1", "1Gi"), rl("2", "2Gi")),
    ]


def _victim_and_reclaimer(
    victim_queue: str, reclaimer_queue: str
) -> tuple[list[Pod], list[PodGroup]]:
    return (
        [
            pod("p-victim", "n1", True, rl("2", "2Gi"), "pg-victim", priority=1),
            pod("p-reclaimer", "", False, rl("2", "2Gi"), "pg-reclaimer", priority=1),
        ],
        [
            pg("pg-victim", victim_queue, 1, RUNNING),
            pg("pg-reclaimer", reclaimer_queue, 1, INQUEUE),
        ],
    )


def test_leaf_without_deserved_reclaims_through_its_parent_deserved() -> None:
    """ "case1: Can reclaim based on parent deserved when ancestorReclaimLevel is 1"."""
    out = _ancestor(
        1,
        True,
        [BIG_NODE],
        [
            pod("p1", "n1", True, rl("1", "1Gi", {A100: "4", HCA: "1"}), "pg1", priority=1),
            pod("p2", "", False, ONE_A100, "pg2", priority=1),
        ],
        [pg("pg1", "case1_queue2", 1, RUNNING), pg("pg2", "case1_queue11", 1, INQUEUE)],
        [
            child("root", "", rl("16", "16Gi", {A100: "4", "rdma": "1000"})),
            child("case1_queue1", "root", a100("1")),
            child("case1_queue11", "case1_queue1"),
            child("case1_queue2", "root"),
        ],
    )
    assert out.pipelined == {"ns1/pg2": {"ns1/p2": "n1"}}
    assert out.evicted == ["ns1/p1"]


def test_cross_parent_reclaim_when_victim_child_and_parent_are_over_deserved() -> None:
    """ "case2: Cross-parent reclaim pipelines project1 pending job when project2 child and
    parent are both over deserved"."""
    out = _ancestor(
        1,
        True,
        [BIG_NODE],
        [
            pod("p1", "n1", True, ONE_A100, "pg1", priority=2),
            pod("p2", "n1", True, ONE_A100, "pg2", priority=2),
            pod("p3", "n1", True, ONE_A100, "pg3", priority=2),
            pod("p4", "n1", True, ONE_A100, "pg4", priority=1),
            pod("p5", "", False, ONE_A100, "pg5", priority=1),
        ],
        [
            pg("pg1", "project2_preemptable", 1, RUNNING),
            pg("pg2", "project2_preemptable", 1, RUNNING),
            pg("pg3", "project2_preemptable", 1, RUNNING),
            pg("pg4", "project2_preemptable", 1, RUNNING),
            pg("pg5", "project1_preemptable", 1, PENDING),
        ],
        _project_tree(),
    )
    assert out.pipelined == {"ns1/pg5": {"ns1/p5": "n1"}}
    assert out.evicted == ["ns1/p4"]


def test_cross_parent_reclaim_evicts_a_sibling_queue_victim_first() -> None:
    """ "case3: Cross-parent reclaim can evict sibling-queue victim first"."""
    out = _ancestor(
        1,
        True,
        [BIG_NODE],
        [
            pod("p1", "n1", True, ONE_A100, "pg1", priority=2),
            pod("p2", "n1", True, ONE_A100, "pg2", priority=2),
            pod("p3", "n1", True, ONE_A100, "pg3", priority=2),
            pod("p4", "", False, ONE_A100, "pg4_reclaimed", priority=1),
            pod("p5", "n1", True, ONE_A100, "pg5_pipelined", priority=1),
            pod("p6", "", False, ONE_A100, "pg6", priority=1),
        ],
        [
            pg("pg1", "project2_preemptable", 1, RUNNING),
            pg("pg2", "project2_preemptable", 1, RUNNING),
            pg("pg3", "project2_preemptable", 1, RUNNING),
            pg("pg4_reclaimed", "project2_preemptable", 1, INQUEUE),
            pg("pg5_pipelined", "project1_preemptable", 1, RUNNING),
            pg("pg6", "project2_non-preemptable", 1, PENDING),
        ],
        _project_tree(),
    )
    assert out.pipelined == {"ns1/pg6": {"ns1/p6": "n1"}}
    assert out.evicted == ["ns1/p3"]


def test_cross_parent_reclaim_is_blocked_when_the_victim_child_is_within_deserved() -> None:
    """ "case4: Cross-parent reclaim is blocked when victim child is not over deserved"."""
    out = _ancestor(
        1,
        True,
        [node("n1", rl("8", "8Gi", {A100: "1", HCA: "1001", "pods": "11"}))],
        [
            pod("p1", "n1", True, ONE_A100, "pg1", priority=1),
            pod("p2", "", False, ONE_A100, "pg2", priority=1),
            pod("p3", "n1", True, ONE_A100, "pg3", preemptable=False, priority=1),
        ],
        [
            pg("pg1", "case4_child1", 1, RUNNING),
            pg("pg2", "case4_child2", 1, PENDING),
            pg("pg3", "case4_child1_sibling", 1, RUNNING),
        ],
        [
            child("root", "", rl("16", "16Gi", {A100: "4", "rdma": "1000"})),
            child("case4_parent1", "root", a100("1")),
            child("case4_child1", "case4_parent1", a100("1")),
            child("case4_child1_sibling", "case4_parent1"),
            child("case4_parent2", "root", a100("1")),
            child("case4_child2", "case4_parent2", a100("1")),
        ],
    )
    assert out.evicted == []
    assert out.pipelined == {}


def test_level_0_reclaims_on_leaf_deserved_alone() -> None:
    """ "case5: level 0 allows reclaim based on leaf-level deserved checks"."""
    pods, groups = _victim_and_reclaimer("queue-b", "queue-a")
    out = _ancestor(0, False, [SMALL_NODE], pods, groups, _level_tree())
    assert out.pipelined == {"ns1/pg-reclaimer": {"ns1/p-reclaimer": "n1"}}
    assert out.evicted == ["ns1/p-victim"]


def test_level_1_reclaims_when_the_parent_check_passes() -> None:
    """ "case6: level 1 allows reclaim when parent-level check passes"."""
    pods, groups = _victim_and_reclaimer("queue-b", "queue-a")
    out = _ancestor(1, False, [SMALL_NODE], pods, groups, _level_tree())
    assert out.pipelined == {"ns1/pg-reclaimer": {"ns1/p-reclaimer": "n1"}}
    assert out.evicted == ["ns1/p-victim"]


def test_level_2_blocks_reclaim_when_the_grandparent_check_fails() -> None:
    """ "case7: level 2 blocks reclaim when grandparent-level check fails"."""
    pods, groups = _victim_and_reclaimer("queue-b", "queue-a")
    out = _ancestor(2, False, [SMALL_NODE], pods, groups, _level_tree())
    assert out.evicted == []
    assert out.pipelined == {}


def test_level_1_blocks_sibling_reclaim_without_leaf_deserved() -> None:
    """ "case8: level 1 blocks sibling reclaim when leaf deserved is unset and no ancestor gate
    applies"."""
    pods, groups = _victim_and_reclaimer("queue-b", "queue-a")
    out = _ancestor(
        1,
        False,
        [SMALL_NODE],
        pods,
        groups,
        [
            child("root", ""),
            child("parent", "root", rl("4", "4Gi"), rl("4", "4Gi")),
            child("queue-a", "parent"),
            child("queue-b", "parent"),
        ],
    )
    assert out.evicted == []
    assert out.pipelined == {}


def test_level_2_blocks_reclaim_under_a_shared_grandparent_without_leaf_deserved() -> None:
    """ "case9: level 2 blocks reclaim when leaf deserved is unset and queues share
    grandparent"."""
    pods, groups = _victim_and_reclaimer("queue-b", "queue-a")
    out = _ancestor(
        2,
        False,
        [SMALL_NODE],
        pods,
        groups,
        [
            child("root", ""),
            child("grand", "root", rl("2", "2Gi"), rl("2", "2Gi")),
            child("parent-a", "grand"),
            child("queue-a", "parent-a"),
            child("parent-b", "grand"),
            child("queue-b", "parent-b"),
        ],
    )
    assert out.evicted == []
    assert out.pipelined == {}


def test_level_2_blocks_reclaim_in_an_unbalanced_shared_grandparent_tree() -> None:
    """ "case10: level 2 blocks reclaim in unbalanced shared-grandparent tree when leaf
    deserved is unset"."""
    pods, groups = _victim_and_reclaimer("queue-deep", "queue-shallow")
    out = _ancestor(
        2,
        False,
        [SMALL_NODE],
        pods,
        groups,
        [
            child("root", ""),
            child("grand", "root", rl("1", "1Gi"), rl("2", "2Gi")),
            child("parent-deep", "grand", rl("1", "1Gi"), rl("2", "2Gi")),
            child("queue-deep", "parent-deep"),
            child("queue-shallow", "grand"),
        ],
    )
    assert out.evicted == []
    assert out.pipelined == {}


def test_level_2_blocks_reclaim_when_the_depth_2_ancestor_is_within_deserved() -> None:
    """ "case11: unbalanced level2 blocks reclaim when depth-2 ancestor is not over
    deserved"."""
    out = _ancestor(
        2,
        False,
        [node("n1", rl("4", "4Gi", {"pods": "10", A100: "2"}))],
        [
            pod("p-victim", "n1", True, rl("1", "1Gi", {A100: "2"}), "pg-victim", priority=1),
            pod("p-reclaimer", "", False, rl("1", "1Gi", {A100: "1"}), "pg-reclaimer", priority=1),
        ],
        [
            pg("pg-victim", "queue-deep", 1, RUNNING),
            pg("pg-reclaimer", "queue-shallow", 1, INQUEUE),
        ],
        [
            child("root", ""),
            child("shallow-parent", "root", a100("1")),
            child("queue-shallow", "shallow-parent", a100("1")),
            child("deep-grand", "root", a100("2")),
            child("deep-parent", "deep-grand", a100("1")),
            child("queue-deep", "deep-parent", a100("1")),
        ],
    )
    assert out.evicted == []
    assert out.pipelined == {}
