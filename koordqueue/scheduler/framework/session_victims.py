"""The victim dispatchers of a session (Volcano's session_plugins.go Preemptable,
Reclaimable, VictimTasks and v1.15's UnifiedEvictable): which of the candidates the plugins
let an action evict. A base of `SessionPlugins`, which resolves the tiers they walk.

Two tier rules: preemptable, reclaimable and unified evictable intersect the answers within
the first tier that answers (any plugin may veto a victim); victim tasks unite them within
the first tier that names a victim (any plugin may ask for one), as Volcano does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from koordqueue.scheduler.api.task_info import TaskInfo
from koordqueue.scheduler.framework.callbacks import EvictionContext, UnifiedEvictableFn
from koordqueue.scheduler.framework.config import SchedulerConfig
from koordqueue.scheduler.framework.interface import ExtensionPoint

Tiers = list[list[tuple[str, Callable[..., Any]]]]


class VictimDispatch:
    """Victim dispatch over the tiers `_tiers` resolves (SessionPlugins supplies it)."""

    config: SchedulerConfig

    def __init__(self) -> None:
        self._unified_evictable: dict[str, UnifiedEvictableFn] = {}

    def _tiers(self, point: ExtensionPoint) -> Tiers:
        raise NotImplementedError

    def _timed(self, plugin: str, fn: UnifiedEvictableFn) -> UnifiedEvictableFn:
        raise NotImplementedError

    def add_unified_evictable_fn(self, plugin: str, fn: UnifiedEvictableFn) -> None:
        """Victims for gang-aware eviction (gangpreempt, gangreclaim); no switch, as
        Volcano v1.15's AddUnifiedEvictableFn has none."""
        self._unified_evictable[plugin] = self._timed(plugin, fn)

    def _victims(
        self, point: ExtensionPoint, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> list[TaskInfo]:
        for tier in self._tiers(point):
            chosen: list[TaskInfo] | None = None
            for _name, fn in tier:
                answer: list[TaskInfo] | None = fn(preemptor, candidates)
                if answer is None:
                    continue
                if not answer:
                    chosen = []
                    break
                if chosen is None:
                    chosen = list(answer)
                else:
                    keep = {t.uid for t in answer}
                    chosen = [t for t in chosen if t.uid in keep]
            if chosen is not None:
                return chosen
        return []

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Victims: intersected within the first tier whose plugins answer."""
        return self._victims(ExtensionPoint.PREEMPTABLE, preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Victims for reclaim: intersected within the first tier whose plugins answer."""
        return self._victims(ExtensionPoint.RECLAIMABLE, reclaimer, candidates)

    def victim_tasks(self, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Tasks plugins want evicted (Volcano's VictimTasks, which shuffle evicts): the
        union of a tier's answers, in the candidates' order; the first tier with a victim
        decides. A filter such as pdb's nominates every task it allows, so beside another
        plugin in its tier it widens that plugin's choice rather than narrowing it."""
        for tier in self._tiers(ExtensionPoint.VICTIM_TASKS):
            chosen: set[str] = set()
            for _name, fn in tier:
                answer: list[TaskInfo] | None = fn(candidates)
                chosen.update(task.uid for task in answer or ())
            if chosen:
                return [task for task in candidates if task.uid in chosen]
        return []

    def unified_evictable(
        self, context: EvictionContext, candidates: list[TaskInfo]
    ) -> list[TaskInfo]:
        """Victims for gang-aware eviction: intersected within the first tier whose plugins
        answer, as `preemptable` (Volcano v1.15's UnifiedEvictable)."""
        for tier in self.config.tiers:
            chosen: list[TaskInfo] | None = None
            for option in tier.plugins:
                fn = self._unified_evictable.get(option.name)
                answer = None if fn is None else fn(context, candidates)
                if answer is None:
                    continue
                keep = {t.uid for t in answer}
                chosen = list(answer) if chosen is None else [t for t in chosen if t.uid in keep]
                if not chosen:
                    return []
            if chosen is not None:
                return chosen
        return []

