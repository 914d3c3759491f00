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
        # filled on first use from the job as the session opened it (the snapshot's job is
        # never written): a session no longer walks every job at open
        allocated: dict[str, Resources] = {}
        shares: dict[str, float] = {}
        self.shares = shares

        def allocated_of(uid: str) -> Resources:
            res = allocated.get(uid)
            if res is None:
                res = allocated[uid] = session.original_job(uid).allocated
            return res

        def share_of(uid: str) -> float:
            found = shares.get(uid)
            if found is None:
                if uid not in session.jobs:
                    return 0.0
                found = shares[uid] = share(allocated_of(uid), total)
            return found

        def job_order(left: JobInfo, right: JobInfo) -> int:
            ls, rs = share_of(left.uid), share_of(right.uid)
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        def preemptable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            mine = share(allocated_of(preemptor.job) + preemptor.resreq, total)
            victims = []
            for candidate in candidates:
                theirs = share(allocated_of(candidate.job) - candidate.resreq, total)
                if mine < theirs or abs(mine - theirs) <= _SHARE_DELTA:
                    victims.append(candidate)
            return victims

        def on_change(sign: int) -> Callable[[TaskInfo], None]:
            def handle(task: TaskInfo) -> None:
                res = (
                    add(allocated_of(task.job), task.resreq)
                    if sign > 0
                    else subtract(allocated_of(task.job), task.resreq)
                )
                allocated[task.job] = res
                shares[task.job] = share(res, total)

            return handle

        session.add_job_order_fn(self.name, job_order)
        session.add_preemptable_fn(self.name, preemptable)
        session.add_event_handler(self.name, EventHandler(on_change(1), on_change(-1)))
