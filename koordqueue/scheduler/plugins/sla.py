"""sla: Volcano's job waiting-time service level (its plugin of that name).

A job's waiting time is its PodGroup's `volcano.sh/sla-waiting-time` annotation, else its
`sla-waiting-time` annotation, else the plugin's `sla-waiting-time` argument (a Go duration;
one that does not parse, or is not positive, counts as unset, as in Volcano).
- **job order**: jobs with a waiting time first, earliest deadline (creation + waiting time)
  first; jobs without one after, in no order of sla's;
- **job enqueueable** and **job pipelined**: a job past its deadline is permitted (in its
  tier this outweighs the abstentions, so proportion or capacity of a later tier no longer
  holds it back); a job before its deadline or without one abstains.

The clock is `SlaPlugin.clock` (wall time; tests and simulations set their own).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import ClassVar

from koordqueue.domain.queue_items import parse_go_duration
from koordqueue.scheduler.api import JobInfo
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.framework.config import SchedulerConfig
from koordqueue.scheduler.framework.interface import Arguments, Plugin, Vote
from koordqueue.scheduler.framework.session import Session


def positive_duration(text: object) -> float | None:
    """Seconds of a positive Go duration string, else None (Volcano drops the rest)."""
    if not isinstance(text, str):
        return None
    try:
        seconds = parse_go_duration(text)
    except ValueError:
        return None
    return seconds if seconds > 0 else None


def annotated_waiting_time(annotations: Mapping[str, str]) -> float | None:
    """A PodGroup's own waiting time: the prefixed annotation, then the unprefixed one."""
    own = positive_duration(annotations.get(vn.SLA_WAITING_TIME_ANNOTATION))
    if own is None:
        own = positive_duration(annotations.get(vn.SLA_WAITING_TIME))
    return own


def not_yet_due(config: SchedulerConfig, job: JobInfo, now: float) -> str | None:
    """What `explain` says of a Pending job sla will enqueue later: when its waiting time
    runs out (None when sla is not configured, the job has none, or it has run out)."""
    for tier in config.tiers:
        for option in tier.plugins:
            if option.name != vn.SLA:
                continue
            deadline = SlaPlugin(option.arguments).deadline(job)
            if deadline is None or now >= deadline:
                return None
            when = datetime.fromtimestamp(deadline, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return vn.SLA_NOT_DUE.format(when=when)
    return None


class SlaPlugin(Plugin):
    """Orders jobs by SLA deadline and lets overdue jobs be enqueued and pipelined."""

    name = vn.SLA
    quiet = True
    clock: ClassVar[Callable[[], float]] = time.time

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        self.warning: str | None = None
        self.default: float | None = None
        if vn.SLA_WAITING_TIME in self.arguments:
            raw = self.arguments[vn.SLA_WAITING_TIME]
            self.default = positive_duration(raw)
            if self.default is None:
                self.warning = vn.SLA_ARGUMENT_WARNING.format(value=raw)

    def waiting_time(self, job: JobInfo) -> float | None:
        """The job's waiting time in seconds (its own, else the argument's), or None."""
        own = annotated_waiting_time(job.annotations) if job.annotations else None
        return own if own is not None else self.default

    def deadline(self, job: JobInfo) -> float | None:
        """When the job's waiting time runs out (epoch seconds), or None."""
        waiting = self.waiting_time(job)
        return None if waiting is None else job.creation + waiting

    def on_session_open(self, session: Session) -> None:
        if self.warning is not None:
            session.warnings.append(self.warning)
        now = type(self).clock()

        def order(left: JobInfo, right: JobInfo) -> int:
            ld, rd = self.deadline(left), self.deadline(right)
            if ld is None:
                return 0 if rd is None else 1
            if rd is None:
                return -1
            return -1 if ld < rd else (1 if ld > rd else 0)

        def key(job: JobInfo) -> tuple[int, float]:
            found = self.deadline(job)
            return (1, 0.0) if found is None else (0, found)

        def permit(job: JobInfo) -> Vote:
            found = self.deadline(job)
            return Vote.ABSTAIN if found is None or now < found else Vote.PERMIT

        session.add_job_order_fn(self.name, order, key=key)
        session.add_job_enqueueable_fn(self.name, permit)
        session.add_job_pipelined_fn(self.name, permit)
