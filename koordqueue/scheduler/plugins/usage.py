"""usage: Volcano's load-aware filter and score, from each node's measured cpu and memory.

The readings are the snapshot's `node_usage` (averages over the conf's `metrics` period,
fed by kube/scheduler/node_metrics.py, or a scenario's `usage:`). As in Volcano:
- **predicate** (enablePredicate, on unless switched off): a node whose cpu average is over
  `thresholds.cpu` percent refuses every pod, then one whose memory is over `thresholds.mem`;
  UnschedulableAndUnresolvable. A node without a reading, or whose reading is older than
  five minutes, passes: no data is never a reason to refuse.
- **node order**: ((100 - cpu) / 100 * cpu.weight + (100 - mem) / 100 * memory.weight)
  / (cpu.weight + memory.weight) * 100 * usage.weight; 0 without a fresh reading of both.
Arguments keep their defaults (usage.weight 5, cpu.weight and memory.weight 1, thresholds
80) when a value is not a whole number, a weight is negative or a threshold is outside
0-100, as Volcano's newest argument checks do.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import ClassVar

import numpy as np

from koordqueue.scheduler.api import NodeInfo, TaskInfo
from koordqueue.scheduler.api import load_names as ln
from koordqueue.scheduler.api.node_usage import NodeUsage
from koordqueue.scheduler.framework.interface import Arguments, ExtensionPoint, Plugin
from koordqueue.scheduler.framework.placement import BoolArray, FloatArray, Scorer
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.interpod import plugin_enabled


def whole(value: object) -> int | None:
    """A whole-number argument as Volcano reads it (ints only: "85" and 80.5 are not)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _weight(arguments: Arguments, key: str, default: int) -> int:
    value = whole(arguments.get(key))
    return default if value is None or value < 0 else value


def _threshold(raw: object, key: str) -> int:
    value = whole(raw.get(key)) if isinstance(raw, Mapping) else None
    return ln.USAGE_DEFAULT_THRESHOLD if value is None or not 0 <= value <= 100 else value


def refusal(usage: NodeUsage | None, now: float, cpu_limit: int, mem_limit: int) -> str | None:
    """Volcano's usage predicate on one node's reading: the reason it refuses, or None."""
    if usage is None or not usage.fresh(now):
        return None
    if usage.cpu is not None and usage.cpu > cpu_limit:
        return ln.ERR_USAGE.format(reason=ln.ERR_USAGE_CPU)
    if usage.memory is not None and usage.memory > mem_limit:
        return ln.ERR_USAGE.format(reason=ln.ERR_USAGE_MEMORY)
    return None


def score(usage: NodeUsage | None, now: float, cpu_weight: int, mem_weight: int,
          weight: int) -> float:
    """Volcano's usage node-order score of one node's reading."""
    if usage is None or not usage.fresh(now) or usage.cpu is None or usage.memory is None:
        return 0.0
    total = cpu_weight + mem_weight
    if total == 0:
        return 0.0
    free = (100 - usage.cpu) / 100 * cpu_weight + (100 - usage.memory) / 100 * mem_weight
    return free / total * 100 * weight


class UsagePlugin(Plugin):
    """Keeps pods off nodes whose measured load is over the thresholds; prefers idle ones."""

    name = ln.USAGE
    quiet = True
    clock: ClassVar[Callable[[], float]] = time.time

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        args = self.arguments
        self.weight = _weight(args, ln.USAGE_WEIGHT, ln.USAGE_DEFAULT_WEIGHT)
        self.cpu_weight = _weight(args, ln.USAGE_CPU_WEIGHT, ln.USAGE_DEFAULT_RESOURCE_WEIGHT)
        self.mem_weight = _weight(args, ln.USAGE_MEMORY_WEIGHT, ln.USAGE_DEFAULT_RESOURCE_WEIGHT)
        raw = args.get(ln.USAGE_THRESHOLDS)
        self.cpu_threshold = _threshold(raw, ln.USAGE_THRESHOLD_CPU)
        self.mem_threshold = _threshold(raw, ln.USAGE_THRESHOLD_MEMORY)

    def on_session_open(self, session: Session) -> None:
        now = type(self).clock()
        readings = session.node_usage
        nodes = session.node_list
        self.reasons: dict[str, str] = {}
        for n in nodes:
            reason = refusal(readings.get(n.name), now, self.cpu_threshold, self.mem_threshold)
            if reason is not None:
                self.reasons[n.name] = reason
        if self.reasons and plugin_enabled(session, self.name, ExtensionPoint.PREDICATE):
            mask: BoolArray = np.array([n.name not in self.reasons for n in nodes],
                                       dtype=np.bool_)
            session.placement.add_dynamic_predicate(lambda _task: mask, self.explain)
        scores: FloatArray = np.array(
            [score(readings.get(n.name), now, self.cpu_weight, self.mem_weight, self.weight)
             for n in nodes], dtype=np.float64)
        if scores.any() and plugin_enabled(session, self.name, ExtensionPoint.NODE_ORDER):
            session.placement.add_dynamic_score(lambda _task: self._scorer(scores))

    @staticmethod
    def _scorer(scores: FloatArray) -> Scorer:
        return lambda _eff: scores

    def explain(self, _task: TaskInfo, node: NodeInfo) -> str | None:
        return self.reasons.get(node.name)
