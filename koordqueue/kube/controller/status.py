"""Every QueueUnit status patch the controller writes, built here and nowhere else.

The rules that used to be repeated at each write: `lastUpdateTime` on every write; a phase
that holds no quota clears `admissions`; an admission also writes its time and the pod sets
admitted whole; a write that must not overwrite a newer status carries the resourceVersion
it was decided on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from koordqueue.domain import conditions as cond
from koordqueue.domain.features import FeatureGates
from koordqueue.domain.queue_unit import ADMITTED_PHASES, AdmissionCount, Phase
from koordqueue.domain.requeue import RequeueState
from koordqueue.kube.api import now_rfc3339
from koordqueue.kube.controller.base import epoch


def now_string() -> str:
    """The API's RFC 3339 time, to the second (what lastUpdateTime and admissionTime hold)."""
    return now_rfc3339()


def admitted_pod_sets(unit_obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """status.admissions of a unit admitted whole: each pod set with all its replicas."""
    pod_sets = (unit_obj.get("spec") or {}).get("podSet") or []
    return [{"name": ps.get("name"), "replicas": int(ps.get("count") or 0)} for ps in pod_sets]


LAST_ALLOCATE_FIELD = "lastAllocateTime"


def admission_object(admission: AdmissionCount) -> dict[str, Any]:
    """One status.admissions entry; reclaimState only while a reclaim is asked for."""
    out: dict[str, Any] = {"name": admission.name, "replicas": admission.replicas}
    if admission.running is not None:
        out["running"] = admission.running
    if admission.reclaim:
        out["reclaimState"] = {"replicas": admission.reclaim}
    return out


def unit_status_patch(
    message: str,
    phase: Phase | None = None,
    *,
    now: str | None = None,
    attempts: int | None = None,
    admitted: Mapping[str, Any] | None = None,
    resource_version: str | None = None,
    initial: bool = False,
    conditions: Sequence[Mapping[str, Any]] | None = None,
    mirror: Phase | None = None,
    evicted: str | None = None,
    stop_clock: bool = False,
    admissions: Sequence[AdmissionCount] | None = None,
) -> dict[str, Any]:
    """A merge patch of status: `message`, and `phase` unless None.

    `admitted`: the unit object being admitted (phase Dequeued): adds admissionTime and its
    pod sets. `initial`: the first status of a new unit (nothing to clear). `resource_version`
    guards the write against a newer status. `conditions`: the unit's status.conditions as
    last seen (None: the QueueUnitConditions gate is off, conditions are not written); they
    are brought in line with `phase` (or `mirror`, the phase a message-only write leaves),
    `evicted` names the precise cause of an eviction (domain/conditions.py), `stop_clock`
    turns PodsReady False (the execution clock stops). `admissions`: status.admissions to
    write as they are (a preemption's reclaimState marks, what a partial reclaim leaves).
    """
    stamp = now or now_string()
    status: dict[str, Any] = {"message": message, "lastUpdateTime": stamp}
    target = phase or mirror
    if conditions is not None and (target is not None or evicted is not None or stop_clock):
        old = cond.from_objects(conditions)
        new = old if target is None else cond.sync(old, target, message, stamp)
        if stop_clock:
            new = cond.stop_execution_clock(new, stamp)
        if evicted is not None:
            new = cond.evict(new, evicted, message, stamp)
        if new != old:
            status["conditions"] = cond.to_objects(new)
    if phase is not None:
        status["phase"] = phase.value
    if attempts is not None:
        status["attempts"] = attempts
    if admitted is not None:
        status["admissionTime"] = stamp
        status[LAST_ALLOCATE_FIELD] = stamp  # the reclaim protect time counts from it
        status["admissions"] = admitted_pod_sets(admitted)
    elif admissions is not None:
        status["admissions"] = [admission_object(a) for a in admissions]
    elif phase is not None and phase not in ADMITTED_PHASES and not initial:
        status["admissions"] = []  # finished or back in the queue: it holds nothing
    patch: dict[str, Any] = {"status": status}
    if resource_version:
        patch["metadata"] = {"resourceVersion": resource_version}
    return patch


def seen_conditions(
    features: FeatureGates, unit_obj: Mapping[str, Any] | None
) -> list[Mapping[str, Any]] | None:
    """The conditions a status write starts from: the unit's, or None with the gate off."""
    if not features.conditions:
        return None
    return list(((unit_obj or {}).get("status") or {}).get("conditions") or [])


ACCUMULATED_FIELD = "accumulatedPastExecutionTimeSeconds"


def banked_seconds(unit_obj: Mapping[str, Any] | None, now: str) -> int | None:
    """status.accumulatedPastExecutionTimeSeconds after an eviction at `now`: the time run
    since PodsReady turned True added (None: its pods were not running, nothing to bank)."""
    status = (unit_obj or {}).get("status") or {}
    ready = cond.find(cond.from_objects(status.get("conditions")), cond.PODS_READY)
    if ready is None or not ready.status:
        return None
    started, ended = epoch(ready.last_transition_time), epoch(now)
    if started is None or ended is None or ended <= started:
        return None
    before = status.get(ACCUMULATED_FIELD)
    return (before if isinstance(before, int) else 0) + int(ended - started)


def workload_reference(unit_obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """An object an event can name from the unit's spec.consumerRef (None: it has none)."""
    ref = (unit_obj.get("spec") or {}).get("consumerRef") or {}
    if not ref.get("kind") or not ref.get("name"):
        return None
    namespace = ref.get("namespace") or (unit_obj.get("metadata") or {}).get("namespace")
    return {
        "apiVersion": ref.get("apiVersion", ""),
        "kind": ref["kind"],
        "metadata": {"name": ref["name"], "namespace": namespace, "uid": ref.get("uid", "")},
    }


REQUEUE_FIELD = "requeueState"


def requeue_object(state: RequeueState) -> dict[str, Any]:
    """status.requeueState as the API stores it."""
    at = datetime.fromtimestamp(state.requeue_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"count": state.count, "requeueAt": at}


def backoff_after(unit_obj: Mapping[str, Any], flat: float, structured: bool) -> float:
    """The job extension's back-off time for a unit: the flat one, or with the
    QueueUnitRequeueState gate and a recorded state, requeueAt - lastUpdateTime (so
    "since the last update > back-off" means "requeueAt has passed")."""
    status = unit_obj.get("status") or {}
    state = status.get(REQUEUE_FIELD) if structured else None
    at = epoch(state.get("requeueAt")) if isinstance(state, Mapping) else None
    updated = epoch(status.get("lastUpdateTime"))
    if at is None or updated is None:
        return flat
    return at - updated
