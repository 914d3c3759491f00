"""conformance: never preempt or reclaim system-critical pods."""

from __future__ import annotations

from koordqueue.scheduler.api import TaskInfo, names
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.session import Session


def is_critical(task: TaskInfo) -> bool:
    """Critical priority classes and everything in kube-system are off limits."""
    return (
        task.priority_class_name in names.CRITICAL_PRIORITY_CLASSES
        or task.namespace == names.SYSTEM_NAMESPACE
    )


class ConformancePlugin(Plugin):
    """Filters critical pods out of every victim list."""

    name = "conformance"
    quiet = True

    def on_session_open(self, session: Session) -> None:
        def evictable(_preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            return [c for c in candidates if not is_critical(c)]

        session.add_preemptable_fn(self.name, evictable)
        session.add_reclaimable_fn(self.name, evictable)
        session.add_unified_evictable_fn(
            self.name, lambda _context, candidates: [c for c in candidates if not is_critical(c)]
        )
