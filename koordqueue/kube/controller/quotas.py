"""ElasticQuotas: folded into the engine, each mirrored by the Queue of its name (SPEC 2.2).

The controller guards itself as the admission webhook would (issue 33): an edit that breaks a
rule of the quota's own fields (domain/quota_validation.py), or a parent edit that would close
a cycle, is refused and the last valid definition stays in force, so no admitted unit is undone
by it; the status keeps that definition (`lastValid`) while refused, so a restarted controller
and `koordqueue explain` fold the same one (domain/quota_fold.py, the one rule). Of same-name
quotas in several namespaces the oldest is in force (quota.precedence), the same one at every
resync and after a restart.

What is wrong with a quota is said on the quota itself (domain/quota_health.py): the status
conditions Valid and Active, and one Warning event per cause when it appears, not at every
resync. Recomputed only when something they read changed: a quota's definition, a refusal,
a queue's policy error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from koordqueue.domain import names
from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.quota_fold import fold_quota, in_force_copy, last_valid_status
from koordqueue.domain.quota_health import (
    Cause,
    chain_break,
    chain_message,
    conditions_by_type,
    new_causes,
    quota_conditions,
    same_conditions,
)
from koordqueue.domain.quota_validation import Rule
from koordqueue.kube.api import ELASTIC_QUOTA, ApiError, now_rfc3339
from koordqueue.kube.controller.base import DELETED, WARNING, log, meta
from koordqueue.kube.controller.state import ControllerState
from koordqueue.kube.controller.writes import (
    Apis,
    ApplyQueue,
    Priority,
    RecordEvent,
    delete_queue,
    safely,
)
from koordqueue.kube.queue_sync import queue_drifted

Key = tuple[str, str]
"""(namespace, name) of one ElasticQuota object."""


@dataclass(frozen=True, slots=True)
class PatchQuotaStatus:
    """The quota's status conditions (a merge patch of the status subresource)."""

    namespace: str
    name: str
    conditions: tuple[dict[str, Any], ...]
    last_valid: dict[str, Any] | None = None
    """`status.lastValid` (None removes it): the definition kept while refused."""
    priority: ClassVar[Priority] = Priority.BACKGROUND

    def run(self, apis: Apis) -> dict[str, Any] | None:
        patch = {"status": {"conditions": list(self.conditions),
                            names.QUOTA_LAST_VALID_FIELD: self.last_valid}}

        def call() -> dict[str, Any]:
            try:
                return apis.api.merge_patch(
                    ELASTIC_QUOTA, self.name, patch, self.namespace, "status"
                )
            except ApiError as exc:
                if exc.not_found:
                    return {}  # deleted meanwhile: nothing left to say it on
                raise

        return safely("patch quota status", call)


def _folded_part(obj: dict[str, Any]) -> object:
    """What of a quota the controller reads (not its status, nor bookkeeping)."""
    m = meta(obj)
    return (
        m.get("uid"),
        m.get("creationTimestamp"),
        m.get("labels"),
        m.get("annotations"),
        obj.get("spec"),
    )


def log_duplicate_quota(in_force: QuotaSpec, ignored: QuotaSpec) -> None:
    """The engine's word that two ElasticQuotas share a name (the status says it too)."""
    log.warning(
        "two ElasticQuotas share a name; the oldest is in force",
        quota=in_force.name,
        in_force=f"{in_force.namespace}/{in_force.name}",
        ignored=f"{ignored.namespace}/{ignored.name}",
    )


class QuotaHandlers:
    """ElasticQuota events into the engine, and what the quotas' status says."""

    def __init__(self, state: ControllerState) -> None:
        self.state = state
        self.objects: dict[Key, dict[str, Any]] = {}
        """The last valid object of each quota."""
        self.seen: dict[Key, dict[str, Any]] = {}
        """The last object seen of each quota, valid or not."""
        self.refused: dict[Key, tuple[Any, ...]] = {}
        """The problems of each refused quota."""
        self.reported: dict[Key, tuple[Any, ...]] = {}
        """The status conditions last written of each quota."""
        self.kept: dict[Key, object] = {}
        """The status.lastValid last written of each quota."""
        self.queue_of: Callable[[str], Mapping[str, Any] | None] = lambda _name: None
        """The Queue last seen of a name (QueueHandlers.live, wired by the Controller)."""

    def on_quota(self, event_type: str | None, obj: dict[str, Any], apply: bool = True) -> None:
        """Fold a quota in and (unless a resync batches it) apply its Queue."""
        m = meta(obj)
        name, namespace = m.get("name", ""), m.get("namespace", "default")
        key = (namespace, name)
        state = self.state
        engine, writer, ns = state.engine, state.writer, state.settings.namespace
        if event_type == DELETED:
            self.seen.pop(key, None)
            self.refused.pop(key, None)
            self.reported.pop(key, None)
            self.kept.pop(key, None)
            self.objects.pop(key, None)
            live = engine.tree.get(name)
            engine.remove_quota(name, namespace)
            survivor = engine.tree.get(name)
            if survivor is None:
                writer.submit(delete_queue(name, ns))
                engine.remove_queue(name)
            elif survivor is not live:
                remaining = self.objects.get((survivor.namespace, name))
                if remaining is not None:
                    writer.submit(ApplyQueue(remaining, ns))
            state.wake.set()
            self._retry_cycles(apply=True)
            self.refresh_quota_status()
            return
        seen = self.seen.get(key)
        self.seen[key] = obj
        if seen is not None and _folded_part(seen) == _folded_part(obj):
            return  # our own status write coming back, a resync: nothing it says changed
        folded = fold_quota(obj, engine.tree)
        problems, spec = folded.problems, folded.spec
        if problems:
            self.refused[key] = problems
            log.warning(
                "ElasticQuota refused; the last valid definition stays in force",
                quota=f"{namespace}/{name}",
                problems=[str(p) for p in problems],
            )
            if spec is not None and in_force_copy(engine.tree, name, namespace) is None:
                # a restart: the definition the status keeps is the one in force (quota_fold)
                engine.upsert_quota(spec)
                state.wake.set()
            if apply:
                self.refresh_quota_status()
            return
        assert spec is not None
        self._accept(key, obj, spec, apply)
        self._retry_cycles(apply)
        if apply:  # a resync's batch refreshes once, after folding every quota
            self.refresh_quota_status()

    def _accept(self, key: Key, obj: dict[str, Any], spec: QuotaSpec, apply: bool) -> None:
        state = self.state
        self.refused.pop(key, None)
        self.objects[key] = obj
        state.engine.upsert_quota(spec)
        state.wake.set()
        live = state.engine.tree.get(spec.name)
        if apply and live is not None and live.namespace == key[0]:
            ns = state.settings.namespace
            current = self.queue_of(spec.name)
            # an edit that leaves the Queue as it is (max, min: most edits) writes nothing;
            # a Queue changed meanwhile by hand comes back as an event and is reverted there
            if current is None or queue_drifted(current, derive_queue(obj, ns)):
                state.writer.submit(ApplyQueue(obj, ns))

    def _retry_cycles(self, apply: bool) -> None:
        """Level-triggered: a parent edit refused because it closed a cycle is taken once the
        tree no longer loops through it (another quota re-parented or deleted), as a fresh
        fold (explain, a new leader) of the same objects takes it. Only the cycle rule
        depends on the other quotas; the others are the object's own fields."""
        progress = True
        while progress:
            progress = False
            for key, problems in list(self.refused.items()):
                obj = self.seen.get(key)
                if obj is None or not any(p.rule is Rule.CYCLE for p in problems):
                    continue
                folded = fold_quota(obj, self.state.engine.tree)
                if not folded.problems and folded.spec is not None:
                    log.info("ElasticQuota accepted: the cycle that refused it is gone",
                             quota=f"{key[0]}/{key[1]}")
                    self._accept(key, obj, folded.spec, apply)
                    progress = True

    def quota_object(self, name: str) -> dict[str, Any] | None:
        """The object of the quota in force called `name`."""
        live = self.state.engine.tree.get(name)
        return None if live is None else self.objects.get((live.namespace, name))

    # --- what kubectl describe elasticquota says ------------------------------------------
    def refresh_quota_status(self) -> None:
        """Write the conditions of every quota whose conditions changed; one Warning event
        per new cause. Cheap when nothing changed (a few dict lookups per quota)."""
        tree = self.state.engine.tree
        parents = {q.name: q.parent for q in tree}
        now = now_rfc3339()
        for key, obj in self.seen.items():
            valid, active = self._causes(key, parents)
            wanted = quota_conditions(obj, valid, active, self.state.settings.namespace, now)
            kept = self._kept(key)
            reported = self.reported.get(key)
            if reported is None:
                reported = tuple(conditions_by_type(obj).values())
                shown = (obj.get("status") or {}).get(names.QUOTA_LAST_VALID_FIELD)
                self.kept[key] = shown
            if same_conditions(wanted, reported) and self.kept.get(key) == kept:
                self.reported[key] = reported
                continue
            for cause in new_causes([*valid, *active], reported):
                self.state.writer.submit(RecordEvent(obj, WARNING, cause.reason, cause.message))
            self.reported[key] = tuple(wanted)
            self.kept[key] = kept
            namespace, name = key

            def failed(outcome: dict[str, Any] | None, key: Key = key) -> None:
                if outcome is None:
                    self.reported.pop(key, None)  # the next change or resync retries

            # keyed: two patches of one quota in flight on the pool land in the order made
            write = PatchQuotaStatus(namespace, name, tuple(wanted), kept)
            self.state.writer.submit(write, failed, key=f"quota-status/{namespace}/{name}")

    def _kept(self, key: Key) -> dict[str, Any] | None:
        """`status.lastValid` for the object: the definition kept in force while it is
        refused (None: accepted, or nothing kept)."""
        if key not in self.refused:
            return None
        namespace, name = key
        mine = in_force_copy(self.state.engine.tree, name, namespace)
        return None if mine is None else last_valid_status(mine)

    def _causes(self, key: Key, parents: dict[str, str]) -> tuple[list[Cause], list[Cause]]:
        namespace, name = key
        tree = self.state.engine.tree
        mine = next((q for q in tree.copies(name) if q.namespace == namespace), None)
        valid: list[Cause] = []
        refused = self.refused.get(key)
        if refused:
            kept = names.MSG_QUOTA_REFUSED_KEPT if mine else names.MSG_QUOTA_REFUSED_NONE
            text = "; ".join(str(p) for p in refused)
            reason = (
                names.REASON_QUOTA_CYCLE
                if any(p.rule is Rule.CYCLE for p in refused)
                else names.REASON_INVALID_QUOTA
            )
            valid += [Cause(reason, text), Cause(reason, kept, event=False)]
        active: list[Cause] = []
        live = tree.get(name)
        if mine is None or live is None:
            if not refused:
                return valid, active
            active.append(Cause(valid[0].reason, names.MSG_QUOTA_REFUSED_NONE, event=False))
            return valid, active
        if live is not mine:
            message = names.MSG_DUPLICATE_QUOTA.format(
                name=name, in_force=live.namespace, ignored=namespace
            )
            active.append(Cause(names.REASON_DUPLICATE_QUOTA, message))
            return valid, active
        broken = chain_break(name, parents)
        if broken is not None:
            kind, path = broken
            reason = names.REASON_QUOTA_CYCLE if kind == "cycle" else names.REASON_PARENT_NOT_FOUND
            active.append(Cause(reason, chain_message(kind, path), event=kind == "cycle"))
        queue_error = self.state.queue_errors.get(name)
        if queue_error:
            active.append(Cause(names.REASON_ADD_QUEUE_FAIL, queue_error))
        return valid, active
