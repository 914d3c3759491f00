"""drf: dominant resource fairness between jobs (lower dominant share first)."""

from __future__ import annotations

from collections.abc import Callable

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, TaskInfo
from koordqueue.scheduler.api.resource import add, share, subtract
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.session import EventHandler, Session

_SHARE_DELTA = 1e-6


class DrfPlugin(Plugin):
    """Job share = max over resources of allocated / cluster total; kept current by events."""

    name = "drf"

    def on_session_open(self, session: Session) -> None:
        total = session.total_resource
        allocated: dict[str, Resources] = {uid: job.allocated for uid, job in session.jobs.items()}
        shares: dict[str, float] = {uid: share(res, total) for uid, res in allocated.items()}
        self.shares = shares

        def job_order(left: JobInfo, right: JobInfo) -> int:
            ls, rs = shares.get(left.uid, 0.0), shares.get(right.uid, 0.0)
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        def preemptable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            mine = share(allocated[preemptor.job] + preemptor.resreq, total)
            victims = []
            for candidate in candidates:
                theirs = share(allocated[candidate.job] - candidate.resreq, total)
                if mine < theirs or abs(mine - theirs) <= _SHARE_DELTA:
                    victims.append(candidate)
            return victims

        def on_change(sign: int) -> Callable[[TaskInfo], None]:
            def handle(task: TaskInfo) -> None:
                res = (
                    add(allocated[task.job], task.resreq)
                    if sign > 0
                    else subtract(allocated[task.job], task.resreq)
                )
                allocated[task.job] = res
                shares[task.job] = share(res, total)

            return handle

        session.add_job_order_fn(self.name, job_order)
        session.add_preemptable_fn(self.name, preemptable)
        session.add_event_handler(self.name, EventHandler(on_change(1), on_change(-1)))
