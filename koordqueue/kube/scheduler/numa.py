"""The scheduler cache's view of Numatopologies across sessions (numa-aware); the objects
themselves are read by scheduler/numa/objects.py (also what scenario files use)."""

from __future__ import annotations

from collections.abc import Mapping

from koordqueue.scheduler.api.numa import NumaTopology
from koordqueue.scheduler.numa.objects import (
    Obj,
    guaranteed,
    numa_policy,
    numatopologies,
    numatopology,
    task_numa,
)

__all__ = [
    "NumaView",
    "guaranteed",
    "numa_policy",
    "numatopologies",
    "numatopology",
    "task_numa",
]


def _more(old: NumaTopology, new: NumaTopology) -> bool:
    """Volcano's NumatopoInfo.Compare: the exporter reports as many allocatable cpus or more
    (for the first resource where that holds; its map order, here by name)."""
    for name in sorted(old.resources):
        new_res = new.resources.get(name)
        if new_res is None or len(old.resources[name].allocatable) <= len(new_res.allocatable):
            return True
    return False


class NumaView:
    """The scheduler's view of every node's NUMA cpus (Volcano's NodeInfo.NumaSchedulerInfo):
    what the exporter reported, less the cpus sessions gave to pods since.

    When the exporter reports as many free cpus as before or more, its report replaces the
    view (it has seen the pods start); when it reports fewer, a resource's view takes the
    report only where the view had at least as many (RefreshNumaSchedulerInfoByCrd).
    """

    def __init__(self) -> None:
        self.reported: dict[str, NumaTopology] = {}
        self.view: dict[str, NumaTopology] = {}

    def on_object(self, name: str, raw: Obj | None) -> None:
        """A Numatopology was added or changed (`raw`), or deleted (None)."""
        if raw is None:
            self.reported.pop(name, None)
            self.view.pop(name, None)
            return
        new = numatopology(raw)
        old = self.reported.get(name)
        self.reported[name] = new
        current = self.view.get(name)
        if current is None or old is None or _more(old, new):
            self.view[name] = new
            return
        resources = dict(current.resources)
        for res, info in new.resources.items():
            mine = resources.get(res)
            if mine is None or len(mine.allocatable) >= len(info.allocatable):
                resources[res] = info
        self.view[name] = NumaTopology(
            new.name, new.policies, resources, new.cpus, new.reserved_cpu_millis
        )

    def allocate(self, allocated: Mapping[str, Mapping[str, frozenset[int]]]) -> bool:
        """Take the cpus a session gave (UpdateSchedulerNumaInfo); whether anything changed."""
        changed = False
        for name, taken in allocated.items():
            topo = self.view.get(name)
            if topo is not None and taken:
                self.view[name] = topo.with_allocated(taken)
                changed = True
        return changed

    def snapshot(self) -> dict[str, NumaTopology]:
        """The view by node name (a new dict: snapshots share it, it is never written)."""
        return dict(sorted(self.view.items()))
