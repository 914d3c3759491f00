"""ElasticQuotas: folded into the engine, each mirrored by the Queue of its name."""

from __future__ import annotations

from typing import Any

from koordqueue.domain import names
from koordqueue.domain.quota import InvalidQuotaError, QuotaSpec, quota_from_object
from koordqueue.kube.controller.base import (
    WARNING,
    ControllerBase,
    _meta,
    log,
)
from koordqueue.kube.queue_sync import (
    apply_queue,
    delete_queue,
)


class QuotaHandlers(ControllerBase):
    def _on_duplicate_quota(self, previous: QuotaSpec, winner: QuotaSpec) -> None:
        log.warning(
            "two ElasticQuotas share a name; the last reconciled wins",
            quota=winner.name,
            previous=f"{previous.namespace}/{previous.name}",
            winner=f"{winner.namespace}/{winner.name}",
        )
        obj = self._quotas.get((winner.namespace, winner.name))
        if obj is not None:
            self.recorder.record(
                obj,
                WARNING,
                names.REASON_DUPLICATE_QUOTA,
                names.MSG_DUPLICATE_QUOTA.format(
                    name=winner.name, previous=previous.namespace, winner=winner.namespace
                ),
            )

    def on_quota(self, event_type: str | None, obj: dict[str, Any], apply: bool = True) -> None:
        """Fold a quota in and (unless a resync batches it) apply its Queue."""
        meta = _meta(obj)
        name, namespace = meta.get("name", ""), meta.get("namespace", "default")
        if event_type == "DELETED":
            self._quotas.pop((namespace, name), None)
            with self.lock:
                self.engine.remove_quota(name, namespace)
                survivor = self.engine.tree.get(name)
            if survivor is None:
                self._safely(
                    "delete queue", lambda: delete_queue(self.api, name, self.settings.namespace)
                )
                with self.lock:
                    self.engine.remove_queue(name)
            else:
                remaining = self._quotas.get((survivor.namespace, name))
                if remaining is not None:
                    self._safely(
                        "apply queue",
                        lambda: apply_queue(self.api, remaining, self.settings.namespace),
                    )
            return
        self._quotas[(namespace, name)] = obj
        try:
            spec = quota_from_object(obj)
        except InvalidQuotaError as exc:
            log.warning("invalid ElasticQuota", quota=f"{namespace}/{name}", error=str(exc))
            self.recorder.record(obj, WARNING, names.REASON_INVALID_QUOTA, str(exc))
            return
        with self.lock:
            self.engine.upsert_quota(spec)
        self.wake.set()
        if apply:
            self._safely("apply queue", lambda: apply_queue(self.api, obj, self.settings.namespace))


    def _quota_object(self, name: str) -> dict[str, Any] | None:
        with self.lock:
            live = self.engine.tree.get(name)
        return None if live is None else self._quotas.get((live.namespace, name))

