"""Queues: policy and annotations folded into the engine; drift from the quota reverted.

The controller's own usage-annotation writes (quota_status.py: every changed quota's Queue on
each usage cadence during a burst) come back as Queue events. An event that differs from the
Queue last folded only in those annotations (or in bookkeeping: resourceVersion,
managedFields), with the same quota object behind it, is skipped: no drift check, no engine
update, no round woken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from koordqueue.domain import names
from koordqueue.domain.effects import queue_effects
from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.domain.queue_preemption import refusal
from koordqueue.kube.controller.base import DELETED, WARNING, log, meta
from koordqueue.kube.controller.quotas import QuotaHandlers
from koordqueue.kube.controller.state import ControllerState
from koordqueue.kube.controller.writes import ApplyQueue, RecordEvent
from koordqueue.kube.queue_sync import queue_drifted

USAGE_ANNOTATIONS: Final = frozenset(
    {
        names.QUEUE_USED_ANNOTATION,
        names.QUEUE_GUARANTEED_USED_ANNOTATION,
        names.QUEUE_SELF_USED_ANNOTATION,
        names.QUEUE_SELF_GUARANTEED_USED_ANNOTATION,
        names.QUEUE_CHILDREN_USED_ANNOTATION,
        names.QUEUE_CHILDREN_GUARANTEED_USED_ANNOTATION,
    }
)
"""The annotations the controller writes on Queues (usage, quota_status.py); the engine
does not read them."""


def _folded_part(obj: dict[str, Any]) -> object:
    """What of a Queue the controller reads: uid, spec, labels, annotations but usage."""
    m = meta(obj)
    annotations = m.get("annotations") or {}
    if not USAGE_ANNOTATIONS.isdisjoint(annotations):
        annotations = {k: v for k, v in annotations.items() if k not in USAGE_ANNOTATIONS}
    return (m.get("uid"), obj.get("spec"), m.get("labels") or {}, annotations or {})


class QueueHandlers:
    """Queue events into the engine; a Queue that drifted from its quota is reverted."""

    def __init__(
        self,
        state: ControllerState,
        quotas: QuotaHandlers,
        checks_changed: Callable[[str, dict[str, Any] | None], str | None] | None = None,
    ) -> None:
        self.state = state
        self.quotas = quotas
        """The quota each Queue mirrors, and the quota status that reports its errors."""
        self.checks_changed = checks_changed
        """A Queue's spec (None: gone) to the admission checks (checks.py); returns the
        error of an unreadable spec.admissionChecks."""
        self.folded: dict[str, tuple[object, dict[str, Any] | None]] = {}
        """Queue name -> (what of it was last folded, the quota object it was checked
        against): an event that changes neither is skipped."""
        self.refused: set[str] = set()
        """Queues told their policy refuses the preemption their annotations ask for."""
        self.live: dict[str, dict[str, Any]] = {}
        """Each Queue as last seen: a quota edit that would apply it unchanged writes nothing."""

    def on_queue(self, event_type: str | None, obj: dict[str, Any]) -> None:
        state = self.state
        ns = state.settings.namespace
        m = meta(obj)
        if m.get("namespace") != ns:
            return
        name = m.get("name", "")
        quota = self.quotas.quota_object(name)
        state.queue_items.observe(obj, deleted=event_type == DELETED)
        if event_type == DELETED:
            self.live.pop(name, None)
            self.folded.pop(name, None)
            if quota is not None:  # deleted by hand while its quota lives: put it back
                state.writer.submit(ApplyQueue(quota, ns))
            else:
                state.engine.remove_queue(name)
                if self.checks_changed is not None:
                    self.checks_changed(name, None)
            return
        self.live[name] = obj
        folded = self.folded.get(name)
        if folded is not None and folded[1] is quota and folded[0] == _folded_part(obj):
            return  # e.g. our own usage annotations coming back
        if quota is not None and queue_drifted(obj, derive_queue(quota, ns)):
            log.info("queue drifted from its quota; reverting", queue=name)
            drifted = obj  # served as it is if the revert is refused, as before it
            state.writer.submit(
                ApplyQueue(quota, ns), lambda applied: self.fold_queue(applied or drifted)
            )
            return
        self.fold_queue(obj)
        self.folded[name] = (_folded_part(obj), quota)  # not drifted: skip its echoes

    def fold_queue(self, obj: dict[str, Any]) -> None:
        """The Queue's policy and annotations into the engine; one event per new error."""
        state = self.state
        name = str(meta(obj).get("name", ""))
        spec = obj.get("spec") or {}
        policy = str(spec.get("queuePolicy") or names.DEFAULT_POLICY)
        annotations = {k: str(v) for k, v in (meta(obj).get("annotations") or {}).items()}
        error = state.engine.upsert_queue(name, policy, annotations)
        if self.checks_changed is not None:
            checks_error = self.checks_changed(name, spec)
            if checks_error is not None:
                log.warning("admission checks not read", queue=name, error=checks_error)
                state.writer.submit(
                    RecordEvent(obj, WARNING, names.REASON_INVALID_ADMISSION_CHECKS, checks_error)
                )
        state.wake.set()
        before = state.queue_errors.get(name)
        planned = queue_effects(name, error, before)
        if error is None:
            state.queue_errors.pop(name, None)
        else:
            state.queue_errors[name] = error
        if error != before:
            self.quotas.refresh_quota_status()  # the quota's Active condition reads the error
        for effect in planned:
            log.warning("queue not served", queue=name, error=error)
            state.writer.submit(RecordEvent(obj, effect.type, effect.reason, effect.message))
        refused = refusal(name, policy, annotations)
        if refused is None:
            self.refused.discard(name)
        elif name not in self.refused:  # once per Queue edit that asks for it
            self.refused.add(name)
            log.warning("queue-level preemption refused", queue=name, policy=policy)
            state.writer.submit(
                RecordEvent(obj, names.EVENT_WARNING, names.REASON_PREEMPTION_REFUSED, refused)
            )
