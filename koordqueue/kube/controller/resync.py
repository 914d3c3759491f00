"""Start-up and periodic resync, one for every kind: list everything and fold it in.

At start-up (and in tests) `resync()` lists and folds on the calling thread: it is what the
first round sees. The periodic resync (`start_resync`, due every `resync_period` on the
controller's clock, looked at with each round) must not stop the owner while a large list
crosses a busy API server, so the QueueUnit list and each served workload kind's list are
read on the writer's pool and folded in when they come back. Events handled meanwhile are
newer than the listing: the fold skips a unit already seen at a newer resourceVersion or
deleted since the lists were asked for, forgets only units it knew before asking, and leaves
a workload that had an event meanwhile to that event (workloads.py `fold`). Quotas and
Queues, a few objects, are listed at fold time on the owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT, Kind, Listing, ObjectApi
from koordqueue.kube.controller.base import ADDED, ControllerBase, log, meta, newer
from koordqueue.kube.controller.writes import ApplyQueue, Priority, Read, delete_queue
from koordqueue.kube.queue_sync import MANAGED_BY, MANAGED_BY_LABEL, queue_drifted


@dataclass(slots=True)
class ResyncWindow:
    """What happened between asking for the periodic resync's lists and folding them in."""

    known_units: set[str]
    deleted_units: set[str] = field(default_factory=set)


class Resync(ControllerBase):
    def resync(self, listings: dict[Kind, Listing] | None = None) -> dict[Kind, Listing]:
        """List everything and fold it in; fixes whatever changed while we were not watching.

        Returns the QueueUnit listing and each served kind's whole listing, so that the
        watches started after the first resync continue from them instead of listing again
        (a kind listed narrowly, Pod, is left to its informer's own listing). `listings`:
        those already at hand (a warm standby's watch caches), folded instead of listed.
        """
        self._resync_quotas_and_queues()
        if listings is None:
            listings = self._list_workloads(self.api, startup=True)
        self._fold_workloads(listings, None)
        self.next_resync = self.clock() + self.settings.resync_period
        self.ready.set()
        return listings

    def fire_timers(self) -> None:
        """Each kind's due looks, then the periodic resync when it is due."""
        for consumer in self.consumers.values():
            consumer.fire_timers()
        if self.clock() >= self.next_resync:
            self.start_resync()

    def start_resync(self) -> None:
        """The periodic resync: lists on the writer's pool, folded in when they come back."""
        if self.resync_window is not None:
            return  # the last one has not come back yet
        self.next_resync = self.clock() + self.settings.resync_period
        self.resync_window = ResyncWindow({u.uid for u in self.engine.units()})
        for consumer in self.consumers.values():
            consumer.resync_started()
        read = Read(self._list_workloads, "resync")
        self.writer.submit(read, self._finish_resync, priority=Priority.BACKGROUND)

    def _finish_resync(self, listings: dict[Kind, Listing] | None) -> None:
        window, self.resync_window = self.resync_window, None
        if listings is None:
            for consumer in self.consumers.values():
                consumer.fold([], periodic=False)  # (ends its window; lists refused)
            return  # refused: the next period tries again
        self._resync_quotas_and_queues()
        self._fold_workloads(listings, window)

    def _list_workloads(self, api: ObjectApi, startup: bool = False) -> dict[Kind, Listing]:
        listings = {QUEUE_UNIT: api.list_with_version(QUEUE_UNIT)}
        if not self.settings.manage_jobs:
            return listings
        for consumer in self.consumers.values():
            if consumer.listed_whole:
                listings[consumer.watched] = api.list_with_version(consumer.watched)
            elif not startup:
                listings[consumer.watched] = (consumer.listing(api), "")
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
        for consumer in list(self.consumers.values()):
            listing = listings.get(consumer.watched)
            if listing is not None:
                consumer.fold(listing[0], periodic=window is not None)
            elif window is not None:
                consumer.fold([], periodic=False)  # (ends its window)
