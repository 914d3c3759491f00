"""The quota-to-queue controller: watch events in, admission engine in the middle, writes out.

Handlers stay thin and level-triggered: every event carries the whole object, which is folded
into the pure AdmissionEngine; the admission round decides; the controller persists the
decisions (guarded by resourceVersion), records events, and keeps each unit's workload (a Job's
`suspend`) in line with it. A periodic resync re-lists everything so a missed event is repaired
within one period.

One thread owns all of it (loop.py); API calls are typed writes (writes.py) run by one writer
on a bounded pool, whose outcomes come back to that thread. One module per kind of object:
quotas, queues, units, jobs (the only one that knows batch/v1 Job, behind the consumers.py
seam), admission (rounds and their effects), resync; status.py builds every unit status patch.
"""

from __future__ import annotations

from typing import Any

from koordqueue.kube.controller.admission import AdmissionRounds
from koordqueue.kube.controller.jobs import STATUS_RETRY_SECONDS, JobReconciler
from koordqueue.kube.controller.loop import OwnerLoop
from koordqueue.kube.controller.queues import QueueHandlers
from koordqueue.kube.controller.quotas import QuotaHandlers
from koordqueue.kube.controller.resync import Resync
from koordqueue.kube.controller.units import UnitHandlers

__all__ = ["STATUS_RETRY_SECONDS", "Controller", "OwnerLoop"]


class Controller(QuotaHandlers, QueueHandlers, UnitHandlers, AdmissionRounds, Resync):
    """State and reactions of the controller; the `on_*` methods take watch events.

    Call them from one thread: the OwnerLoop's, or the caller's own (tests), in which case
    every write runs at once and its outcome is taken in before the call returns.
    """

    jobs: JobReconciler

    def add_consumers(self) -> None:
        """The batch/v1 Job extension (jobs.py), registered as its unit's workload reconciler."""
        self.jobs = JobReconciler(self, self.write_unit_phase)
        self.consumers[self.jobs.consumer_kind] = self.jobs

    def on_job(self, event_type: str | None, obj: dict[str, Any]) -> None:
        """A batch/v1 Job's watch event (the Job extension, jobs.py)."""
        self.jobs.on_event(event_type, obj)

    def fire_job_timers(self) -> None:
        self.jobs.fire_timers()
