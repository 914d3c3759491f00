"""Start-up and periodic resync: list everything and fold it in.

At start-up (and in tests) `resync()` lists and folds on the calling thread: it is what the
first round sees. The periodic resync (`start_resync`) must not stop the owner while a large
list crosses a busy API server, so the QueueUnit and Job lists are read on the writer's pool
and folded in when they come back. Events handled meanwhile are newer than the listing: the
fold skips an object already seen at a newer resourceVersion or deleted since the list was
asked for, and forgets only units it knew before asking. Quotas and Queues, a few objects,
are listed at fold time on the owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE, QUEUE_UNIT, Kind, Listing, ObjectApi
from koordqueue.kube.controller.base import ADDED, ControllerBase, log, meta, newer, object_key
from koordqueue.kube.controller.writes import ApplyQueue, Read, delete_queue
from koordqueue.kube.queue_sync import MANAGED_BY, MANAGED_BY_LABEL, queue_drifted


@dataclass(slots=True)
class ResyncWindow:
    """What happened between asking for the periodic resync's lists and folding them in."""

    known_units: set[str]
    deleted_units: set[str] = field(default_factory=set)
    deleted_jobs: set[str] = field(default_factory=set)


class Resync(ControllerBase):
    def resync(self, listings: dict[Kind, Listing] | None = None) -> dict[Kind, Listing]:
        """List everything and fold it in; fixes whatever changed while we were not watching.

        Returns the QueueUnit and Job listings, so that the watches started after the first
        resync continue from them instead of listing again. `listings`: QueueUnits and Jobs
        already at hand (a warm standby's watch caches), folded instead of listed.
        """
        self._resync_quotas_and_queues()
        if listings is None:
            listings = self._list_workloads(self.api)
        self._fold_workloads(listings, None)
        self.ready.set()
        return listings

    def start_resync(self) -> None:
        """The periodic resync: lists on the writer's pool, folded in when they come back."""
        if self.resync_window is not None:
            return  # the last one has not come back yet
        self.resync_window = ResyncWindow({u.uid for u in self.engine.units()})
        self.writer.submit(Read(self._list_workloads, "resync"), self._finish_resync)

    def _finish_resync(self, listings: dict[Kind, Listing] | None) -> None:
        window, self.resync_window = self.resync_window, None
        if listings is None:
            return  # refused: the next period tries again
        self._resync_quotas_and_queues()
        self._fold_workloads(listings, window)

    def _list_workloads(self, api: ObjectApi) -> dict[Kind, Listing]:
        listings = {QUEUE_UNIT: api.list_with_version(QUEUE_UNIT)}
        if self.settings.manage_jobs:
            listings[JOB] = api.list_with_version(JOB)
        return listings

    def _resync_quotas_and_queues(self) -> None:
        ns = self.settings.namespace
        quotas = self.api.list_objects(ELASTIC_QUOTA)
        queues = self.api.list_objects(QUEUE, ns)
        by_name: dict[str, dict[str, Any]] = {str(meta(q).get("name")): q for q in queues}
        for quota in quotas:
            self.on_quota(ADDED, quota, apply=False)
        self.refresh_quota_status()  # once for the batch (quotas.py)
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
                self.on_queue(ADDED, queue)

    def _fold_workloads(
        self, listings: dict[Kind, Listing], window: ResyncWindow | None
    ) -> None:
        seen_units = set()
        for unit in listings[QUEUE_UNIT][0]:
            uid = str(meta(unit).get("uid"))
            seen_units.add(uid)
            if window is not None and (
                uid in window.deleted_units or newer(self.unit_objects.get(uid), unit)
            ):
                continue
            self.on_unit(ADDED, unit)
        for gone in [u.uid for u in self.engine.units() if u.uid not in seen_units]:
            if window is None or gone in window.known_units:
                self.engine.remove_unit(gone)
                self.unit_objects.pop(gone, None)
        jobs = self.consumers.get(JOB.kind)
        if JOB in listings and jobs is not None:
            for job in listings[JOB][0]:
                if window is None or object_key(job) not in window.deleted_jobs:
                    jobs.on_event(ADDED, job)
