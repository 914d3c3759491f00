"""rescheduling: Volcano's plugin that moves pods off overloaded nodes, through the shuffle
action's victim tasks.

Every `interval` (a Go duration, 5m by default; the first run comes one interval after the
scheduler started, as Volcano's), each configured strategy names running pods to evict;
shuffle evicts them and they are placed again. `strategies` is a list of
`{name, parameters}` and replaces the default, one `lowNodeUtilization` with thresholds and
targetThresholds of 100% (rescheduling_lnu.py). Load is the snapshot's `node_usage` (the
conf's `metrics` source); a node without a fresh reading is neither low nor high here,
where Volcano would count it as idle and move pods towards it.

A strategy Volcano does not have, or a `strategies` that is not a list of maps, is named in
a session warning and skipped (Volcano would crash on the first, at its next run).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import ClassVar

from koordqueue.scheduler.api import TaskInfo, TaskStatus
from koordqueue.scheduler.api import load_names as ln
from koordqueue.scheduler.framework.interface import Arguments, Plugin
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.plugins.rescheduling_args import LowNodeUtilizationConf, parse_interval
from koordqueue.scheduler.plugins.rescheduling_lnu import NodeLoad, victims


def parse_strategies(raw: object) -> tuple[list[tuple[str, Mapping[str, object]]], list[str]]:
    """(name, parameters) per strategy in order, and what was skipped and why."""
    if raw is None:
        return [(ln.LOW_NODE_UTILIZATION, {})], []
    if not isinstance(raw, list):
        return [(ln.LOW_NODE_UTILIZATION, {})], [
            f"{ln.RESCHEDULING}: strategies must be a list of {{name, parameters}}, "
            f"got {type(raw).__name__}; using {ln.LOW_NODE_UTILIZATION}"]
    out: list[tuple[str, Mapping[str, object]]] = []
    problems: list[str] = []
    for i, item in enumerate(raw):
        name = item.get("name") if isinstance(item, Mapping) else None
        params = item.get("parameters") if isinstance(item, Mapping) else None
        if name != ln.LOW_NODE_UTILIZATION:
            problems.append(f"{ln.RESCHEDULING}: strategies[{i}]: unknown strategy {name!r} "
                            f"(known: {ln.LOW_NODE_UTILIZATION}); skipped")
            continue
        out.append((name, params if isinstance(params, Mapping) else {}))
    return out, problems


class ReschedulingPlugin(Plugin):
    """Names pods on overloaded nodes for the shuffle action to evict."""

    name = ln.RESCHEDULING
    clock: ClassVar[Callable[[], float]] = time.time
    last_run: ClassVar[float | None] = None
    """When victims were last named (Volcano's package-level lastRescheduleTime): None
    until the first session, which starts the clock without evicting."""

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        self.interval = parse_interval(self.arguments.get(ln.RESCHEDULING_INTERVAL))
        strategies, self.problems = parse_strategies(
            self.arguments.get(ln.RESCHEDULING_STRATEGIES))
        self.confs: list[LowNodeUtilizationConf] = []
        for _name, params in strategies:
            conf = LowNodeUtilizationConf()
            conf.parse(params)
            self.confs.append(conf)

    def on_session_open(self, session: Session) -> None:
        self.session = session
        session.warnings.extend(self.problems)
        session.add_victim_tasks_fn(self.name, self.victim_tasks)

    def due(self) -> bool:
        """Whether an interval has passed since the last run (the first call starts it)."""
        cls = type(self)
        now = cls.clock()
        if cls.last_run is None:
            cls.last_run = now
            return False
        if cls.last_run + self.interval > now:
            return False
        cls.last_run = now
        return True

    def loads(self) -> list[NodeLoad]:
        """The session's nodes with a fresh reading, with their running tasks."""
        now = type(self).clock()
        out: list[NodeLoad] = []
        for node in self.session.node_list:
            usage = self.session.node_usage.get(node.name)
            if usage is None or not usage.fresh(now):
                continue
            percent = {name: value for name, value in
                       (("cpu", usage.cpu), ("memory", usage.memory)) if value is not None}
            running = [t for t in node.tasks.values() if t.status is TaskStatus.RUNNING]
            out.append(NodeLoad(node.name, node.allocatable.as_dict(), percent, running,
                                node.unschedulable))
        return out

    def victim_tasks(self, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
        if not self.due():
            return None
        chosen: dict[str, TaskInfo] = {}
        for conf in self.confs:  # fresh loads each: `victims` lowers them as it picks
            for task in victims(self.loads(), candidates, conf):
                chosen.setdefault(task.uid, task)
        return list(chosen.values())
