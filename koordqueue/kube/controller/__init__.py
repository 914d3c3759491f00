"""The quota-to-queue controller: watch events in, admission engine in the middle, writes out.

Handlers stay thin and level-triggered: every event carries the whole object, which is folded
into the pure AdmissionEngine; the admission round decides; the controller persists the
decisions (guarded by resourceVersion), records events, and keeps each unit's workload in line
with it. A periodic resync re-lists everything so a missed event is repaired within one period.

One thread owns all of it (loop.py); API calls are typed writes (writes.py) run by one writer
on a bounded pool, whose outcomes come back to that thread. The state is one object
(state.py); the components take it and are wired explicitly (wiring.py): one module per kind of
object: quotas, queues, units, workloads (one reconciler for every workload kind, batch/v1 Job
included, behind the consumers.py seam; integrations.py says which kinds are served),
admission (rounds and their effects), resync; status.py builds every unit status patch.
"""

from __future__ import annotations

from koordqueue.kube.controller.loop import OwnerLoop
from koordqueue.kube.controller.wiring import Controller

__all__ = ["Controller", "OwnerLoop"]
