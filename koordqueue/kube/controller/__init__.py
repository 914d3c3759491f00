"""The quota-to-queue controller: watch events in, admission engine in the middle, writes out.

Handlers stay thin and level-triggered: every event carries the whole object, which is folded
into the pure AdmissionEngine; the admission round decides; the controller persists the
decisions (guarded by resourceVersion), records events, and keeps each unit's workload in line
with it. A periodic resync re-lists everything so a missed event is repaired within one period.

One thread owns all of it (loop.py); API calls are typed writes (writes.py) run by one writer
on a bounded pool, whose outcomes come back to that thread. One module per kind of object:
quotas, queues, units, workloads (one reconciler for every workload kind, batch/v1 Job
included, behind the consumers.py seam; integrations.py says which kinds are served),
admission (rounds and their effects), resync; status.py builds every unit status patch.
"""

from __future__ import annotations

from koordqueue.kube.controller.admission import AdmissionRounds
from koordqueue.kube.controller.integrations import built_in, serve
from koordqueue.kube.controller.loop import OwnerLoop
from koordqueue.kube.controller.queues import QueueHandlers
from koordqueue.kube.controller.quotas import QuotaHandlers
from koordqueue.kube.controller.resync import Resync
from koordqueue.kube.controller.units import UnitHandlers

__all__ = ["Controller", "OwnerLoop"]


class Controller(QuotaHandlers, QueueHandlers, UnitHandlers, AdmissionRounds, Resync):
    """State and reactions of the controller; the `on_*` methods take watch events.

    Call them from one thread: the OwnerLoop's, or the caller's own (tests), in which case
    every write runs at once and its outcome is taken in before the call returns.
    """

    def add_consumers(self) -> None:
        """Serve the `--integrations` kinds every cluster has (batch/v1 Job, Pod) from the
        start; `integrations.register_integrations` adds those behind a CRD."""
        serve(self, built_in(self.settings.integrations))
