"""Start-up and periodic resync: list everything and fold it in.

Runs on the owner thread and waits for its lists (and for the rare Queue it must create or
revert, whose answer it folds in), so no event is folded in between a listing and the fold:
a stale listing never overwrites a newer event. At start-up this is what the first round
sees; every `resync_period` it repairs whatever a missed event left behind.
"""

from __future__ import annotations

from typing import Any

from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE, QUEUE_UNIT, Kind, Listing
from koordqueue.kube.controller.base import ControllerBase, log, meta
from koordqueue.kube.controller.writes import ApplyQueue, delete_queue
from koordqueue.kube.queue_sync import MANAGED_BY, MANAGED_BY_LABEL, queue_drifted


class Resync(ControllerBase):
    def resync(self) -> dict[Kind, Listing]:
        """List everything and fold it in; fixes whatever changed while we were not watching.

        Returns the QueueUnit and Job listings, so that the watches started after the first
        resync continue from them instead of listing again.
        """
        ns = self.settings.namespace
        quotas = self.api.list_objects(ELASTIC_QUOTA)
        queues = self.api.list_objects(QUEUE, ns)
        by_name: dict[str, dict[str, Any]] = {str(meta(q).get("name")): q for q in queues}
        for quota in quotas:
            self.on_quota("ADDED", quota, apply=False)
        live = {str(meta(q).get("name")) for q in quotas}
        for name in sorted(live):
            # only the live (last reconciled) definition of a name; skip Queues that match
            winner = self.quota_object(name)
            current = by_name.get(name)
            if winner is not None and (
                current is None or queue_drifted(current, derive_queue(winner, ns))
            ):
                applied = ApplyQueue(winner, ns).run(self.writer.apis)  # folded in below
                if applied is not None:
                    by_name[name] = applied
        for name, queue in list(by_name.items()):
            managed = (meta(queue).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
            if managed and name not in live:
                log.info("deleting queue whose quota is gone", queue=name)
                self.writer.submit(delete_queue(name, ns))
            else:
                self.on_queue("ADDED", queue)
        listings = {QUEUE_UNIT: self.api.list_with_version(QUEUE_UNIT)}
        seen_units = set()
        for unit in listings[QUEUE_UNIT][0]:
            seen_units.add(meta(unit).get("uid"))
            self.on_unit("ADDED", unit)
        for gone in [u.uid for u in self.engine.units() if u.uid not in seen_units]:
            self.engine.remove_unit(gone)
            self.unit_objects.pop(gone, None)
        if self.settings.manage_jobs:
            listings[JOB] = self.api.list_with_version(JOB)
            jobs = self.consumers.get(JOB.kind)
            for job in listings[JOB][0]:
                if jobs is not None:
                    jobs.on_event("ADDED", job)
        self.ready.set()
        return listings
