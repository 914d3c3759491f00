"""The quota-to-queue controller: watch events in, admission engine in the middle, writes out.

Handlers stay thin and level-triggered: every event carries the whole object, which is folded
into the pure AdmissionEngine; the admission round decides; the controller persists the
decisions (guarded by resourceVersion), records events, and keeps Jobs' `suspend` in line with
their units. A periodic resync re-lists everything so a missed event is repaired within one
period. One module per kind of object: quotas, queues, units, jobs (the only one that knows
batch/v1 Job), admission (rounds and their effects), resync.
"""

from __future__ import annotations

from koordqueue.kube.controller.admission import AdmissionRounds
from koordqueue.kube.controller.base import STATUS_RETRY_SECONDS
from koordqueue.kube.controller.jobs import JobHandlers
from koordqueue.kube.controller.queues import QueueHandlers
from koordqueue.kube.controller.quotas import QuotaHandlers
from koordqueue.kube.controller.resync import Resync
from koordqueue.kube.controller.units import UnitHandlers

__all__ = ["STATUS_RETRY_SECONDS", "Controller"]


class Controller(
    QuotaHandlers, QueueHandlers, UnitHandlers, JobHandlers, AdmissionRounds, Resync
):
    """State and reactions of the controller; kopf handlers call the `on_*` methods."""
