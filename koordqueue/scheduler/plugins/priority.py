"""priority: higher job/task priority first; only lower priority may be preempted."""

from __future__ import annotations

from koordqueue.scheduler.api import JobInfo, TaskInfo
from koordqueue.scheduler.framework.callbacks import GANG_RECLAIM, EvictionContext
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.session import Session


def _desc(left: int, right: int) -> int:
    return -1 if left > right else (1 if left < right else 0)


class PriorityPlugin(Plugin):
    """Orders by priority and protects equal-or-higher priority tasks from preemption."""

    name = "priority"
    quiet = True

    def on_session_open(self, session: Session) -> None:
        session.add_task_order_fn(
            self.name,
            lambda left, right: _desc(left.priority, right.priority),
            key=lambda task: -task.priority,  # the same order: higher priority first
        )
        session.add_job_order_fn(
            self.name,
            lambda left, right: _desc(left.priority, right.priority),
            key=lambda job: -job.priority,
        )

        def preemptable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            preemptor_job = session.jobs[preemptor.job]
            victims = []
            for candidate in candidates:
                job = session.jobs[candidate.job]
                if job.uid != preemptor_job.uid:
                    if job.priority < preemptor_job.priority:
                        victims.append(candidate)
                elif candidate.priority < preemptor.priority:
                    victims.append(candidate)
            return victims

        session.add_preemptable_fn(self.name, preemptable)

        def gang_evictable(context: EvictionContext, candidates: list[TaskInfo]) -> list[TaskInfo]:
            # gangreclaim is fairness between queues: priority does not gate it (Volcano)
            if context.kind == GANG_RECLAIM:
                return list(candidates)
            return [c for c in candidates if session.jobs[c.job].priority < context.job.priority]

        session.add_unified_evictable_fn(self.name, gang_evictable)

        def starving(job: JobInfo) -> bool:
            return job.ready_task_num() + job.waiting_task_num() < len(job.tasks)

        session.add_job_starving_fn(self.name, starving)
