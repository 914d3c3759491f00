"""lowNodeUtilization's victim choice (Volcano's rescheduling strategy), apart from the plugin.

A node is low when no
resource's usage is over `thresholds`, high when one is over `targetThresholds` (percent of
allocatable); pods move from high nodes (busiest first) while the low nodes have room below
their targets and the node is still high. Within a node the lowest priority goes first, then
best-effort, then the newest (Volcano also puts Burstable before Guaranteed; a task here
knows only whether it is best-effort).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from koordqueue.scheduler.api import TaskInfo
from koordqueue.scheduler.plugins.rescheduling_args import LowNodeUtilizationConf

MEASURED = ("cpu", "memory")


@dataclass
class NodeLoad:
    """One node's measured usage (percent per resource) and the tasks it runs."""

    name: str
    allocatable: Mapping[str, int]
    percent: dict[str, float]
    tasks: list[TaskInfo] = field(default_factory=list)
    unschedulable: bool = False


def _is_low(node: NodeLoad, conf: LowNodeUtilizationConf) -> bool:
    if node.unschedulable:
        return False
    return all(
        used <= conf.thresholds[name]
        for name, used in node.percent.items()
        if name in conf.thresholds
    )


def _is_high(node: NodeLoad, conf: LowNodeUtilizationConf) -> bool:
    return any(
        used > conf.target_thresholds[name]
        for name, used in node.percent.items()
        if name in conf.target_thresholds
    )


def eviction_order(task: TaskInfo) -> tuple[int, int, float]:
    """Lowest priority first; at equal priority best-effort first, then the newest."""
    return (task.priority, 0 if task.best_effort else 1, -task.creation)


def victims(
    nodes: Sequence[NodeLoad], candidates: Sequence[TaskInfo], conf: LowNodeUtilizationConf
) -> list[TaskInfo]:
    """The candidates to evict so high nodes shed load the low nodes can take."""
    low = [n for n in nodes if _is_low(n, conf)]
    high = [n for n in nodes if n not in low and _is_high(n, conf)]
    if not low or len(low) == len(nodes) or not high:
        return []
    # room on the low nodes up to their targets, in the resources' own units
    room = {
        name: sum(
            (conf.target_thresholds.get(name, 100.0) - n.percent.get(name, 0.0))
            * n.allocatable.get(name, 0)
            / 100
            for n in low
        )
        for name in MEASURED
    }
    wanted = {t.uid for t in candidates}
    chosen: list[TaskInfo] = []
    for node in sorted(high, key=lambda n: -sum(n.percent.get(r, 0.0) for r in MEASURED)):
        for task in sorted(node.tasks, key=eviction_order):
            if not _is_high(node, conf) or any(room[r] == 0 for r in MEASURED):
                break
            if task.uid not in wanted:
                continue
            request = task.resreq.as_dict()
            for name in MEASURED:
                amount = request.get(name, 0)
                room[name] -= amount
                capacity = node.allocatable.get(name, 0)
                if capacity:
                    node.percent[name] = node.percent.get(name, 0.0) - amount * 100 / capacity
            chosen.append(task)
    return chosen
