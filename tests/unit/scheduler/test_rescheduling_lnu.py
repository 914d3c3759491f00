"""lowNodeUtilization's victim choice: Volcano's grouping, stop rule and pod order."""

from __future__ import annotations

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import TaskInfo, TaskStatus
from koordqueue.scheduler.plugins.rescheduling_args import LowNodeUtilizationConf
from koordqueue.scheduler.plugins.rescheduling_lnu import NodeLoad, eviction_order, victims

GI = 1024**3


def _task(uid: str, cpu: int, mem: int, priority: int = 0, creation: float = 0.0) -> TaskInfo:
    return TaskInfo(
        uid=uid,
        name=uid,
        job="j",
        resreq=Resources.parse({"cpu": f"{cpu}", "memory": f"{mem}Gi"}),
        priority=priority,
        status=TaskStatus.RUNNING,
        creation=creation,
    )


def _conf(low: float, target: float) -> LowNodeUtilizationConf:
    return LowNodeUtilizationConf(
        thresholds={"cpu": low, "memory": low}, target_thresholds={"cpu": target, "memory": target}
    )


def _node(name: str, cpu_pct: float, tasks: list[TaskInfo]) -> NodeLoad:
    alloc = Resources.parse({"cpu": "10", "memory": "10Gi"}).as_dict()
    return NodeLoad(name, alloc, {"cpu": cpu_pct, "memory": cpu_pct}, tasks)


def test_an_over_used_nodes_pods_go_until_it_is_under_its_target() -> None:
    a, b, c = _task("a", 2, 2), _task("b", 2, 2), _task("c", 2, 2)
    hot = _node("hot", 90.0, [a, b, c])
    cold = _node("cold", 10.0, [])
    chosen = victims([hot, cold], [a, b, c], _conf(20, 70))
    # 90% -> 70% after a, and 70 is not over the 70 target: one victim
    assert [t.uid for t in chosen] == ["a"]


def test_no_victims_when_every_node_is_low_or_none_is_high() -> None:
    a = _task("a", 2, 2)
    assert victims([_node("x", 10.0, [a]), _node("y", 10.0, [])], [a], _conf(20, 70)) == []
    assert victims([_node("x", 50.0, [a]), _node("y", 10.0, [])], [a], _conf(20, 70)) == []
    assert victims([_node("x", 90.0, [a]), _node("y", 50.0, [])], [a], _conf(20, 70)) == []


def test_the_lowest_priority_then_the_newest_goes_first() -> None:
    old = _task("old", 1, 1, priority=1, creation=1.0)
    new = _task("new", 1, 1, priority=1, creation=2.0)
    low = _task("low", 1, 1, priority=0, creation=0.0)
    assert [t.uid for t in sorted([old, new, low], key=eviction_order)] == ["low", "new", "old"]
