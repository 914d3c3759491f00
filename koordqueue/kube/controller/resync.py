"""Start-up and periodic resync: list everything and fold it in."""

from __future__ import annotations

from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.kube.api import (
    ELASTIC_QUOTA,
    JOB,
    QUEUE,
    QUEUE_UNIT,
    Kind,
    Listing,
)
from koordqueue.kube.controller.base import (
    ControllerBase,
    _meta,
    log,
)
from koordqueue.kube.queue_sync import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    apply_queue,
    delete_queue,
    queue_drifted,
)


class Resync(ControllerBase):
    def resync(self) -> dict[Kind, Listing]:
        """List everything and fold it in; fixes whatever changed while we were not watching.

        Returns the QueueUnit and Job listings, so that the watches started after the first
        resync continue from them instead of listing again.
        """
        quotas = self.api.list_objects(ELASTIC_QUOTA)
        queues = self.api.list_objects(QUEUE, self.settings.namespace)
        by_name = {str(_meta(q).get("name")): q for q in queues}
        for quota in quotas:
            self.on_quota("ADDED", quota, apply=False)
        live = {_meta(q).get("name") for q in quotas}
        ns = self.settings.namespace
        for name in sorted(str(n) for n in live):
            # only the live (last reconciled) definition of a name; skip Queues that match
            winner = self._quota_object(name)
            current = by_name.get(name)
            if winner is not None and (
                current is None or queue_drifted(current, derive_queue(winner, ns))
            ):
                applied = self._safely(
                    "apply queue",
                    lambda w=winner: apply_queue(self.api, w, ns),  # type: ignore[misc]
                )
                if applied is not None:
                    by_name[name] = applied
        for queue in list(by_name.values()):
            qmeta = _meta(queue)
            managed = (qmeta.get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
            if managed and qmeta.get("name") not in live:
                log.info("deleting queue whose quota is gone", queue=qmeta.get("name"))
                queue_name = str(qmeta.get("name"))
                self._safely(
                    "delete queue",
                    lambda n=queue_name: delete_queue(self.api, n, self.settings.namespace),  # type: ignore[misc]
                )
            else:
                self.on_queue("ADDED", queue)
        listings = {QUEUE_UNIT: self.api.list_with_version(QUEUE_UNIT)}
        seen_units = set()
        for unit in listings[QUEUE_UNIT][0]:
            seen_units.add(_meta(unit).get("uid"))
            self.on_unit("ADDED", unit)
        with self.lock:
            for gone in [u.uid for u in self.engine.units() if u.uid not in seen_units]:
                self.engine.remove_unit(gone)
                self._units.pop(gone, None)
        if self.settings.manage_jobs:
            listings[JOB] = self.api.list_with_version(JOB)
            for job in listings[JOB][0]:
                self.on_job("ADDED", job)
        self.ready.set()
        return listings

