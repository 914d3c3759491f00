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

The lists on the owner (quotas, Queues, and the start-up's units and workloads) wait at most
LIST_TIMEOUT for each read, not the API's 30 s: bench/soak.py (`--ci --seed 3`) saw a new
leader's takeover list of ElasticQuotas go into a half-open connection and wait out 30 s,
no admission and no usage annotation meanwhile, 25 s after the fault had ended. A page of
500 objects starts coming back well within it; a timed-out list is asked again (urllib3's
retry, then the start-up's back-off) on a new connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from koordqueue.domain.effects import WORKLOAD_KINDS
from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.domain.queue_unit import Phase
from koordqueue.domain.quota_fold import fold_order
from koordqueue.kube.api import (
    ELASTIC_QUOTA,
    QUEUE,
    QUEUE_UNIT,
    Kind,
    KubeApi,
    Listing,
    ObjectApi,
)
from koordqueue.kube.controller.base import ADDED, log, meta, newer
from koordqueue.kube.controller.queues import QueueHandlers
from koordqueue.kube.controller.quiet_looks import READ_ONE_BY_ONE, listed_key, read_whole
from koordqueue.kube.controller.quotas import QuotaHandlers
from koordqueue.kube.controller.state import ControllerState, ResyncWindow
from koordqueue.kube.controller.units import UnitHandlers
from koordqueue.kube.controller.writes import ApplyQueue, Priority, Read, delete_queue
from koordqueue.kube.queue_sync import MANAGED_BY, MANAGED_BY_LABEL, queue_drifted

__all__ = ["LIST_TIMEOUT", "READ_ONE_BY_ONE", "Resync", "ResyncWindow"]

LIST_TIMEOUT: Final = 10.0
"""Seconds each read of a list made on the owner may take (the API's default is 30 s)."""


class Resync:
    """The start-up and periodic resyncs, and the timers each round fires first."""

    def __init__(
        self,
        state: ControllerState,
        quotas: QuotaHandlers,
        queues: QueueHandlers,
        units: UnitHandlers,
        on_relisted: Callable[[], None] = lambda: None,
    ) -> None:
        self.state = state
        self.on_relisted = on_relisted
        """Called once a resync's listings are folded in (the collector's freeze, gcfreeze)."""
        self.quotas = quotas
        self.queues = queues
        self.units = units
        self.next_resync = state.clock() + state.settings.resync_period
        """When the periodic resync is due (the controller's clock)."""
        self._lister: ObjectApi = (
            state.api.with_timeout(LIST_TIMEOUT) if isinstance(state.api, KubeApi) else state.api
        )
        """`state.api` with the short timeout, for the lists that hold the owner."""
        self.workloads_pending = False
        """A periodic resync's units are folded, its workload lists not back yet."""

    def resync(self, listings: dict[Kind, Listing] | None = None) -> dict[Kind, Listing]:
        """List everything and fold it in; fixes whatever changed while we were not watching.

        Returns the QueueUnit listing and each served kind's whole listing, so that the
        watches started after the first resync continue from them instead of listing again
        (a kind listed narrowly, Pod, is left to its informer's own listing). `listings`:
        those already at hand (a warm standby's watch caches), folded instead of listed;
        the QueueUnits are listed again all the same: they hold every admission, and a
        standby's unit watch can be behind (stalled until its idle deadline, or cut in an etcd
        restart), so folding its cache admitted over a quota's max (bench/soak.py, seed 3).
        """
        self._resync_quotas_and_queues()
        if listings is None:
            listings = self.list_workloads(self._lister, startup=True)
        else:
            listings = {**listings, QUEUE_UNIT: self._lister.list_with_version(QUEUE_UNIT)}
        self._fold_workloads(listings)
        self.next_resync = self.state.clock() + self.state.settings.resync_period
        self.on_relisted()
        self.state.ready.set()
        return listings

    def fire_timers(self) -> None:
        """Each kind's due looks, then the periodic resync when it is due."""
        for consumer in self.state.consumers.values():
            consumer.fire_timers()
        if self.state.clock() >= self.next_resync:
            self.start_resync()

    def start_resync(self) -> None:
        """The periodic resync: lists on the writer's pool, folded in when they come back.

        In steps: the QueueUnits' metadata is listed; the units whose listed version the
        engine does not hold are read whole and folded; then the workloads are listed and
        folded. Decoding the whole list of 15,000 waiting units once a minute was 31 % of the
        controller's samples in a polled window of bench_visibility_live (issue 27), though
        nearly all are the versions the engine holds. The metadata list saves less than hoped:
        managedFields, ~60 % of a small unit, come with it (1,068 -> 919 bytes a unit; with
        21,000 units and 6,000 Jobs its decoding was still ~0.7 s a resync). One read of units
        and workloads together held both listings and every unit at once: at 10,000 pending
        Jobs that was the process's peak memory (issue 36, bench_curve's depth run). A
        workload listing newer than the units' is folded as one that came with them
        (workloads.py `fold` looks at each against its unit as the controller holds it then;
        events since the resync started win)."""
        if self.state.resync_window is not None or self.workloads_pending:
            return  # the last one has not come back yet
        self.next_resync = self.state.clock() + self.state.settings.resync_period
        self.state.resync_window = ResyncWindow({u.uid for u in self.state.engine.units()})
        for consumer in self.state.consumers.values():
            consumer.resync_started()
        read = Read(self.list_unit_versions, "resync")
        self.state.writer.submit(read, self._unit_versions_listed, priority=Priority.BACKGROUND)

    def list_unit_versions(self, api: ObjectApi) -> Listing:
        """The QueueUnits' metadata (the periodic resync's first read, on the writer's pool)."""
        return api.list_with_version(QUEUE_UNIT, metadata_only=True)

    def _unit_versions_listed(self, listing: Listing | None) -> None:
        """Back on the owner: units gone unseen are removed; those listed at a version the
        engine does not hold are read whole (then `_units_read`)."""
        window = self.state.resync_window
        if listing is None or window is None:
            self._refused()
            return
        began = time.monotonic()
        self._resync_quotas_and_queues()
        listed = listing[0]
        wanted = [item for item in listed if not self._held(item, window)]
        self._forget_gone({str(meta(item).get("uid")) for item in listed}, window)
        spent = time.monotonic() - began
        if not wanted:
            self._units_folded(len(listed), 0, 0, spent)
            return
        keys = [listed_key(i) for i in wanted]

        def read_back(objs: list[dict[str, Any]] | None) -> None:
            self._units_read(objs, len(listed), len(keys), spent)

        read = Read(lambda api: self.read_units(api, keys), "resync")
        self.state.writer.submit(read, read_back, priority=Priority.BACKGROUND)

    def read_units(self, api: ObjectApi, keys: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """The units `keys` (namespace, name) whole (quiet_looks.read_whole)."""
        return read_whole(api, QUEUE_UNIT, keys)

    def _units_read(
        self, objs: list[dict[str, Any]] | None, listed: int, read: int, spent: float
    ) -> None:
        """The units read whole, back on the owner: folded unless an event came first."""
        window = self.state.resync_window
        if objs is None or window is None:
            self._refused()
            return
        began = time.monotonic()
        folded = self._fold_listed(objs, window)
        self._units_folded(listed, read, folded, spent + time.monotonic() - began)

    def _units_folded(self, listed: int, read: int, folded: int, seconds: float) -> None:
        """The units' step is over: its window ends, the workloads are listed."""
        self.state.resync_window = None
        log.info(
            "periodic resync folded",
            units=listed,
            read_whole=read,
            folded_again=folded,
            seconds=round(seconds, 3),
        )
        self.workloads_pending = True
        read_kinds = Read(self.list_workload_kinds, "resync")
        self.state.writer.submit(read_kinds, self._workloads_listed, priority=Priority.BACKGROUND)

    def _refused(self) -> None:
        """A read of the units' step refused: each window ends; the next period tries again."""
        self.state.resync_window = None
        for consumer in self.state.consumers.values():
            consumer.fold([], periodic=False)  # (ends its window; lists refused)

    def _workloads_listed(self, listings: dict[Kind, Listing] | None) -> None:
        """The periodic resync's workloads, back on the owner (None: refused, each
        consumer's window ends all the same)."""
        self.workloads_pending = False
        self._fold_consumers(listings or {}, startup=False)
        self.on_relisted()

    def list_units(self, api: ObjectApi) -> dict[Kind, Listing]:
        """The QueueUnits, whole (the start-up's read; the periodic one lists their metadata)."""
        return {QUEUE_UNIT: api.list_with_version(QUEUE_UNIT)}

    def list_workloads(self, api: ObjectApi, startup: bool = False) -> dict[Kind, Listing]:
        """The QueueUnits and each served kind (the start-up resync's one read)."""
        return {**self.list_units(api), **self.list_workload_kinds(api, startup)}

    def list_workload_kinds(self, api: ObjectApi, startup: bool = False) -> dict[Kind, Listing]:
        """Each served kind (on the writer's pool, for the periodic resync)."""
        listings: dict[Kind, Listing] = {}
        if not self.state.settings.manage_jobs:
            return listings
        for consumer in self.state.consumers.values():
            if consumer.listed_whole:
                listings[consumer.watched] = (
                    api.list_with_version(consumer.watched) if startup
                    else consumer.resync_listing(api)  # (metadata first: quiet_looks.py)
                )
            elif not startup:
                listings[consumer.watched] = (consumer.listing(api), "")
        return listings

    def _resync_quotas_and_queues(self) -> None:
        ns = self.state.settings.namespace
        listed_quotas = self._lister.list_objects(ELASTIC_QUOTA)
        listed_queues = self._lister.list_objects(QUEUE, ns)
        by_name: dict[str, dict[str, Any]] = {str(meta(q).get("name")): q for q in listed_queues}
        for quota in fold_order(listed_quotas):  # refused edits last (quota_fold)
            self.quotas.on_quota(ADDED, quota, apply=False)
        self.quotas.refresh_quota_status()  # once for the batch (quotas.py)
        live = {str(meta(q).get("name")) for q in listed_quotas}
        for name in sorted(live):
            # only the live (last reconciled) definition of a name; skip Queues that match
            winner = self.quotas.quota_object(name)
            current = by_name.get(name)
            if winner is not None and (
                current is None or queue_drifted(current, derive_queue(winner, ns))
            ):
                applied = ApplyQueue(winner, ns).run(self.state.writer.apis)  # folded in below
                if applied is not None:
                    by_name[name] = applied
        for name, queue in list(by_name.items()):
            managed = (meta(queue).get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
            if managed and name not in live:
                log.info("deleting queue whose quota is gone", queue=name)
                self.state.writer.submit(delete_queue(name, ns))
            else:
                self.queues.on_queue(ADDED, queue)

    def _folded_already(self, uid: str, listed: Mapping[str, Any]) -> bool:
        """The periodic resync lists the very version the engine holds: nothing was missed.
        Folding it again cost the owner thread ~1 s per minute with 15,000 units waiting
        (every unit rebuilt and re-indexed, then every one tried again by the next round),
        and gave every reader of the rounds equal copies in place of the same objects. A
        version the engine holds in another phase (a back-off whose write did not land) is
        folded again, as before.

        A listed unit with no phase yet: a workload's unit is folded again (its first phase
        write never landed; test_failover needs the round that follows). A unit made by hand
        has none until admitted (rounds write it messages only, effects.created_effects), so
        it is read as Enqueued, the phase the engine gave it: folding every one of them again
        took the owner ~1.6 s per resync with 15,000 waiting and lagged the admissions
        around it (bench_visibility_live's 6.1x window, issue 27)."""
        held = self.state.unit_objects.get(uid)
        unit = self.state.engine.unit(uid)
        if held is None or unit is None:
            return False
        version = meta(listed).get("resourceVersion")
        if not version or version != meta(held).get("resourceVersion"):
            return False
        # the same version: its phase is the held object's (a metadata-only listing has none)
        phase = (held.get("status") or {}).get("phase")
        if not phase:
            if unit.consumer_kind in WORKLOAD_KINDS:
                return False
            phase = Phase.ENQUEUED.value
        return bool(phase == unit.phase.value)

    def _fold_workloads(self, listings: dict[Kind, Listing]) -> None:
        """The start-up's fold: every listed unit (units the listing lacks are forgotten),
        then each served kind."""
        units = listings[QUEUE_UNIT][0]
        self._fold_listed(units, None)
        self._forget_gone({str(meta(u).get("uid")) for u in units}, None)
        self._fold_consumers(listings, startup=True)

    def _held(self, listed: Mapping[str, Any], window: ResyncWindow) -> bool:
        """A periodic listing's unit (whole or its metadata) has nothing the controller
        lacks: deleted or seen at a newer version since the lists were asked for, or the
        very version the engine holds."""
        uid = str(meta(listed).get("uid"))
        return (
            uid in window.deleted_units
            or newer(self.state.unit_objects.get(uid), listed)
            or self._folded_already(uid, listed)
        )

    def _forget_gone(self, seen: set[str], window: ResyncWindow | None) -> None:
        """Units the listing does not hold: deleted unseen (a periodic resync forgets only
        those it knew before asking; a unit created since may be newer than the listing)."""
        for gone in [u.uid for u in self.state.engine.units() if u.uid not in seen]:
            if window is None or gone in window.known_units:
                self.state.engine.remove_unit(gone)
                self.state.unit_objects.pop(gone, None)

    def _fold_listed(self, objs: list[dict[str, Any]], window: ResyncWindow | None) -> int:
        """Fold units read whole (`window`: a periodic resync's, which skips those the
        controller holds; None: the start-up's, every one); how many were folded."""
        folded = 0
        for obj in objs:
            if window is None or not self._held(obj, window):
                folded += 1
                self.units.on_unit(ADDED, obj)
        return folded

    def _fold_consumers(self, listings: dict[Kind, Listing], *, startup: bool) -> None:
        """Each served kind's listing folded; `startup`: the start-up's or a takeover's, else a
        periodic resync's (each consumer's window ends, listed or not: refused)."""
        for consumer in list(self.state.consumers.values()):
            listing = listings.get(consumer.watched)
            if listing is not None:
                if startup:
                    # start-up / takeover: units whose workload went while no replica led
                    # (its DELETED event seen by none) are looked at now, not a period later:
                    # each held its quota until then (bench/soak.py, seed 1). The look reads
                    # the workload before deleting, so a warm cache that is behind is safe.
                    consumer.resync_started()
                consumer.fold(listing[0], periodic=True)
            elif not startup:
                consumer.fold([], periodic=False)  # (ends its window)
