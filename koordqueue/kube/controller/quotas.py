"""ElasticQuotas: folded into the engine, each mirrored by the Queue of its name (SPEC 2.2)."""

from __future__ import annotations

from typing import Any

from koordqueue.domain import names
from koordqueue.domain.quota import InvalidQuotaError, QuotaSpec, quota_from_object
from koordqueue.kube.controller.base import DELETED, WARNING, ControllerBase, log, meta
from koordqueue.kube.controller.writes import ApplyQueue, RecordEvent, delete_queue


class QuotaHandlers(ControllerBase):
    def _on_duplicate_quota(self, previous: QuotaSpec, winner: QuotaSpec) -> None:
        log.warning(
            "two ElasticQuotas share a name; the last reconciled wins",
            quota=winner.name,
            previous=f"{previous.namespace}/{previous.name}",
            winner=f"{winner.namespace}/{winner.name}",
        )
        obj = self.quota_objects.get((winner.namespace, winner.name))
        if obj is not None:
            message = names.MSG_DUPLICATE_QUOTA.format(
                name=winner.name, previous=previous.namespace, winner=winner.namespace
            )
            self.writer.submit(RecordEvent(obj, WARNING, names.REASON_DUPLICATE_QUOTA, message))

    def on_quota(self, event_type: str | None, obj: dict[str, Any], apply: bool = True) -> None:
        """Fold a quota in and (unless a resync batches it) apply its Queue."""
        m = meta(obj)
        name, namespace = m.get("name", ""), m.get("namespace", "default")
        ns = self.settings.namespace
        if event_type == DELETED:
            self.quota_objects.pop((namespace, name), None)
            self.engine.remove_quota(name, namespace)
            survivor = self.engine.tree.get(name)
            if survivor is None:
                self.writer.submit(delete_queue(name, ns))
                self.engine.remove_queue(name)
            else:
                remaining = self.quota_objects.get((survivor.namespace, name))
                if remaining is not None:
                    self.writer.submit(ApplyQueue(remaining, ns))
            return
        self.quota_objects[(namespace, name)] = obj
        try:
            spec = quota_from_object(obj)
        except InvalidQuotaError as exc:
            log.warning("invalid ElasticQuota", quota=f"{namespace}/{name}", error=str(exc))
            self.writer.submit(RecordEvent(obj, WARNING, names.REASON_INVALID_QUOTA, str(exc)))
            return
        self.engine.upsert_quota(spec)
        self.wake.set()
        if apply:
            self.writer.submit(ApplyQueue(obj, ns))

    def quota_object(self, name: str) -> dict[str, Any] | None:
        """The object of the live (last reconciled) quota called `name`."""
        live = self.engine.tree.get(name)
        return None if live is None else self.quota_objects.get((live.namespace, name))
