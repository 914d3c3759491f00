"""Queues: their policy and annotations folded into the engine; drift from the quota reverted."""

from __future__ import annotations

from typing import Any

from koordqueue.domain import names
from koordqueue.domain.effects import (
    queue_effects,
)
from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.kube.controller.base import (
    ControllerBase,
    _meta,
    log,
)
from koordqueue.kube.queue_sync import (
    apply_queue,
    queue_drifted,
)


class QueueHandlers(ControllerBase):
    def on_queue(self, event_type: str | None, obj: dict[str, Any]) -> None:
        meta = _meta(obj)
        if meta.get("namespace") != self.settings.namespace:
            return
        name = meta.get("name", "")
        quota = self._quota_object(name)
        if event_type == "DELETED":
            if quota is not None:  # deleted by hand while its quota lives: put it back
                self._safely(
                    "apply queue", lambda: apply_queue(self.api, quota, self.settings.namespace)
                )
            else:
                with self.lock:
                    self.engine.remove_queue(name)
            return
        if quota is not None and queue_drifted(obj, derive_queue(quota, self.settings.namespace)):
            log.info("queue drifted from its quota; reverting", queue=name)
            applied = self._safely(
                "apply queue", lambda: apply_queue(self.api, quota, self.settings.namespace)
            )
            if applied is not None:
                obj = applied
        spec = obj.get("spec") or {}
        policy = str(spec.get("queuePolicy") or names.DEFAULT_POLICY)
        annotations = {k: str(v) for k, v in (_meta(obj).get("annotations") or {}).items()}
        with self.lock:
            error = self.engine.upsert_queue(name, policy, annotations)
        self.wake.set()
        planned = queue_effects(name, error, self._queue_errors.get(name))
        if error is None:
            self._queue_errors.pop(name, None)
        else:
            self._queue_errors[name] = error
        for effect in planned:
            log.warning("queue not served", queue=name, error=error)
            self._record_event(obj, effect)

