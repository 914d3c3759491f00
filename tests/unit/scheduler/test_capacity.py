"""capacity: capability limits, hierarchical queues and reserved guarantees."""

from __future__ import annotations

from koordqueue.scheduler import SchedulerConfig, parse_config, run_session
from koordqueue.scheduler.api import QueueInfo

from .builders import job, node, res, running, snapshot, task


def _config(hierarchy: bool = False, implicit_root: bool = False) -> SchedulerConfig:
    arguments = "\n    arguments:\n      capacity.implicitRootQueue: true" if implicit_root else ""
    return parse_config(f"""
actions: "allocate, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enableReclaimable: false
- plugins:
  - name: conformance
  - name: predicates
  - name: capacity
    enableHierarchy: {str(hierarchy).lower()}{arguments}
""")


def test_capacity_stops_a_queue_at_its_capability() -> None:
    queues = [QueueInfo("q", capability=res("2"))]
    jobs = [job(f"j{i}", [task(f"t{i}")], queue="q") for i in range(4)]
    result = run_session(snapshot([node("n1", cpu="8")], jobs, queues), _config())
    assert len(result.binds) == 2


def test_capacity_lets_a_queue_grow_past_deserved_up_to_capability() -> None:
    queues = [QueueInfo("q", deserved=res("1"), capability=res("3"))]
    jobs = [job(f"j{i}", [task(f"t{i}")], queue="q") for i in range(4)]
    result = run_session(snapshot([node("n1", cpu="8")], jobs, queues), _config())
    assert len(result.binds) == 3


TREE = [
    QueueInfo("root"),
    QueueInfo("parent", capability=res("2")),
    QueueInfo("a", parent="parent"),
    QueueInfo("b", parent="parent"),
]
TREE_JOBS = [job(f"j{i}", [task(f"t{i}")], queue="ab"[i % 2]) for i in range(4)]


def test_parent_capability_limits_children_when_hierarchy_is_enabled() -> None:
    flat = run_session(snapshot([node("n1", cpu="8")], TREE_JOBS, TREE), _config())
    tree = run_session(snapshot([node("n1", cpu="8")], TREE_JOBS, TREE), _config(hierarchy=True))
    assert len(flat.binds) == 4
    assert len(tree.binds) == 2


def test_hierarchy_without_a_root_queue_refuses_everything_by_default() -> None:
    """Volcano: no root queue, no usable tree (its queue controller always creates root)."""
    rootless = TREE[1:]
    tree = run_session(
        snapshot([node("n1", cpu="8")], TREE_JOBS, rootless), _config(hierarchy=True)
    )
    assert tree.binds == ()


def test_implicit_root_queue_is_an_opt_in() -> None:
    """`capacity.implicitRootQueue: true` stands in an unlimited root."""
    rootless = TREE[1:]
    tree = run_session(
        snapshot([node("n1", cpu="8")], TREE_JOBS, rootless),
        _config(hierarchy=True, implicit_root=True),
    )
    assert len(tree.binds) == 2


def test_guarantee_of_another_queue_is_reserved() -> None:
    queues = [QueueInfo("greedy"), QueueInfo("guaranteed", guarantee=res("3"))]
    jobs = [job(f"j{i}", [task(f"t{i}")], queue="greedy") for i in range(4)]
    result = run_session(snapshot([node("n1", cpu="4")], jobs, queues), _config())
    assert len(result.binds) == 1


def test_capacity_reclaims_only_beyond_deserved() -> None:
    queues = [QueueInfo("qa", deserved=res("2", "8Gi")), QueueInfo("qb", deserved=res("2", "8Gi"))]
    jobs = [
        job("a", [running(f"r{i}", "n1") for i in range(4)], queue="qa"),
        # reclaim serves a starving job up to its minAvailable per session (gang's IsStarving)
        job("b", [task("b0"), task("b1"), task("b2")], queue="qb", min_available=2),
    ]
    result = run_session(snapshot([node("n1", cpu="4", memory="16Gi")], jobs, queues), _config())
    assert len(result.evictions) == 2
    assert len(result.pipelined) == 2
