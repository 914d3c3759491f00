"""Why is my job pending: one explanation, computed from an admission-engine view.

The same pure function serves a replayed scenario and a live cluster: both sources are first
turned into API-shaped objects (ElasticQuotas, Queues, QueueUnits) and folded into a fresh
`AdmissionEngine` exactly as the controller folds them (admitted phases count as usage), so the
answer uses the engine's own CheckUsage, order and messages rather than a second opinion.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from koordqueue.domain.admission import (
    Admitted,
    EmptyQuotaSpec,
    QuotaCycleError,
    QuotaExceeded,
    QuotaNotFoundError,
)
from koordqueue.domain.engine import AdmissionEngine, RoundResult
from koordqueue.domain.mapping import QuotaName, UnresolvedReason, queue_name_for
from koordqueue.domain.names import (
    BLOCK_TIMEOUT_ANNOTATION,
    DEFAULT_POLICY,
    QUEUE_NAMESPACE,
    QUOTA_NAME_LABEL,
    REASON_ADD_QUEUE_FAIL,
    REASON_ADMITTED,
    REASON_QUEUE_NOT_FOUND,
)
from koordqueue.domain.policies import QueueSettings, order_key
from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.domain.queue_unit import (
    ADMITTED_PHASES,
    FINISHED_PHASES,
    NOT_YET_RUNNING,
    InvalidQueueUnitError,
    Phase,
    QueueUnit,
    queue_unit_from_object,
)
from koordqueue.domain.quota import InvalidQuotaError, quota_from_object
from koordqueue.domain.resources import Resources
from koordqueue.simulation.scenario import Scenario
from koordqueue.simulation.simulator import SimulationResult, iter_simulation


class Reason(StrEnum):
    """The one-word answer; event reasons where an event exists, so operators can grep both."""

    ADMITTED = REASON_ADMITTED
    FINISHED = "Finished"
    NO_QUOTA_LABEL = "NoQuotaLabel"
    INVALID_QUOTA_LABEL = "InvalidQuotaLabel"
    QUEUE_NOT_FOUND = REASON_QUEUE_NOT_FOUND
    ADD_QUEUE_FAIL = REASON_ADD_QUEUE_FAIL
    QUOTA_EXCEEDED = "QuotaExceeded"
    ANCESTOR_EXHAUSTED = "AncestorExhausted"
    EMPTY_QUOTA_SPEC = "EmptyQuotaSpec"
    QUOTA_CYCLE = "QuotaCycle"
    ANCESTOR_NOT_FOUND = "AncestorNotFound"
    BLOCKED_BY_HEAD = "BlockedByHead"
    BEYOND_MAX_DEPTH = "BeyondMaxDepth"
    WAITING_FOR_PODS_RUNNING = "WaitingForPodsRunning"
    BACKOFF = "Backoff"
    FITS = "Fits"
    INVALID_QUEUE_UNIT = "InvalidQueueUnit"
    NO_QUEUE_UNIT = "NoQueueUnit"


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """What explain reports about a Queue: its policy, settings and AddQueueFail message."""

    name: str
    policy: str
    settings: QueueSettings
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LevelCheck:
    """One `max × oversellrate − used < request` comparison on the parent chain."""

    quota: str
    resource: str
    limit: int
    used: int
    request: int

    @property
    def free(self) -> int:
        return self.limit - self.used

    @property
    def fits(self) -> bool:
        return self.free >= self.request


@dataclass(frozen=True, slots=True)
class Level:
    """One quota on the path from the unit's quota up to (not including) the root."""

    quota: str
    parent: str
    checks: tuple[LevelCheck, ...]
    empty_max: bool = False

    @property
    def fits(self) -> bool:
        return all(c.fits for c in self.checks)


@dataclass(slots=True)
class Explanation:
    """Everything `koordqueue explain` prints; `to_dict` is the JSON form."""

    unit: str
    reason: Reason
    summary: str
    phase: str | None = None
    message: str | None = None
    """The verbatim event/status message the controller writes for this reason."""
    resolution: str = ""
    quota: str | None = None
    quota_exists: bool = False
    queue: str | None = None
    queue_exists: bool = False
    policy: str | None = None
    queue_error: str | None = None
    position: int | None = None
    queue_length: int = 0
    ahead: list[str] = field(default_factory=list)
    request: Resources = field(default_factory=Resources)
    chain: list[Level] = field(default_factory=list)
    blocking_quota: str | None = None
    status_message: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def admitted(self) -> bool:
        return self.reason is Reason.ADMITTED

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "reason": self.reason.value,
            "summary": self.summary,
            "phase": self.phase,
            "message": self.message,
            "resolution": self.resolution,
            "quota": {"name": self.quota, "exists": self.quota_exists},
            "queue": {
                "name": self.queue,
                "exists": self.queue_exists,
                "policy": self.policy,
                "error": self.queue_error,
                "position": self.position,
                "length": self.queue_length,
                "ahead": list(self.ahead),
            },
            "request": self.request.to_quantities(),
            "chain": [
                {
                    "quota": level.quota,
                    "parent": level.parent,
                    "fits": level.fits,
                    "emptyMax": level.empty_max,
                    "resources": {
                        c.resource: {
                            "limit": fmt(c.resource, c.limit),
                            "used": fmt(c.resource, c.used),
                            "request": fmt(c.resource, c.request),
                            "free": fmt(c.resource, c.free),
                            "fits": c.fits,
                        }
                        for c in level.checks
                    },
                }
                for level in self.chain
            ],
            "blockingQuota": self.blocking_quota,
            "statusMessage": self.status_message,
            "notes": list(self.notes),
        }


def fmt(resource: str, nanos: int) -> str:
    """One amount as a Kubernetes quantity (binary suffixes for memory)."""
    return Resources({resource: nanos}).to_quantities()[resource]


# --- the view -----------------------------------------------------------------------------


@dataclass(slots=True)
class ClusterView:
    """An engine fed with API-shaped objects, plus what explain needs beside the engine."""

    engine: AdmissionEngine
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    queue_namespace: str = QUEUE_NAMESPACE
    invalid_quotas: dict[str, str] = field(default_factory=dict)
    invalid_units: dict[str, str] = field(default_factory=dict)
    status_messages: dict[str, str] = field(default_factory=dict)
    source: str = ""

    @classmethod
    def from_objects(
        cls,
        quotas: Iterable[Mapping[str, Any]],
        queues: Iterable[Mapping[str, Any]],
        units: Iterable[Mapping[str, Any]],
        *,
        oversell_rate: float | int | str = 1,
        queue_namespace: str = QUEUE_NAMESPACE,
        source: str = "",
    ) -> ClusterView:
        """Fold objects in as the controller does; unreadable ones are remembered, not fatal."""
        view = cls(AdmissionEngine(oversell_rate), queue_namespace=queue_namespace, source=source)
        for obj in quotas:
            meta = obj.get("metadata") or {}
            try:
                view.engine.upsert_quota(quota_from_object(obj))
            except InvalidQuotaError as exc:
                view.invalid_quotas[str(meta.get("name") or "")] = str(exc)
        for obj in queues:
            meta = obj.get("metadata") or {}
            if meta.get("namespace", queue_namespace) != queue_namespace:
                continue
            name = str(meta.get("name") or "")
            policy = str((obj.get("spec") or {}).get("queuePolicy") or DEFAULT_POLICY)
            annotations = {k: str(v) for k, v in (meta.get("annotations") or {}).items()}
            error = view.engine.upsert_queue(name, policy, annotations)
            view.queues[name] = QueueInfo(
                name, policy, QueueSettings.from_annotations(annotations, policy), error
            )
        for obj in units:
            meta = obj.get("metadata") or {}
            key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            message = (obj.get("status") or {}).get("message")
            if message:
                view.status_messages[key] = str(message)
            try:
                view.engine.upsert_unit(queue_unit_from_object(obj))
            except InvalidQueueUnitError as exc:
                view.invalid_units[key] = str(exc)
        return view

    def find(self, key: str) -> QueueUnit | None:
        for unit in self.engine.units():
            if unit.key == key:
                return unit
        return None


def _epoch_text(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def view_from_scenario(scenario: Scenario, step: int | None = None) -> ClusterView:
    """Replay `scenario` through step `step` (default: the last) and view the state after it.

    The unit phases come from the simulator's records (admitted -> Dequeued, finished ->
    Succeed, preempted -> Enqueued again), then everything goes through `from_objects`, the
    path the live cluster takes too.
    """
    last = scenario.steps - 1
    upto = last if step is None else step
    if not 0 <= upto <= last:
        raise ValueError(f"step {step} is outside the scenario (0..{last})")
    phases: dict[str, Phase] = {}
    result = SimulationResult(scenario)
    for record in iter_simulation(scenario, result):
        for key in record.finished:
            phases[key] = Phase.SUCCEED
        for key in record.admitted:
            phases[key] = Phase.DEQUEUED
        for event in record.events:
            if event.reason == "Preempted":
                phases[event.unit] = Phase.ENQUEUED
        if record.step == upto:
            break
    quota_objects = [q.as_object() for q in scenario.quotas]
    queue_objects = [derive_queue(q).to_manifest() for q in quota_objects]
    unit_objects: list[dict[str, Any]] = []
    for u in scenario.units:
        if u.arrive > upto:
            continue
        key = f"{u.namespace}/{u.name}"
        labels = {QUOTA_NAME_LABEL: u.quota} if u.quota is not None else {}
        unit_objects.append(
            {
                "metadata": {
                    "name": u.name,
                    "namespace": u.namespace,
                    "uid": key,
                    "labels": labels,
                    "annotations": dict(u.annotations),
                    "creationTimestamp": _epoch_text(float(u.arrive)),
                },
                "spec": {"resource": u.resource.to_quantities(), "priority": u.priority},
                "status": {"phase": phases.get(key, Phase.ENQUEUED).value},
            }
        )
    return ClusterView.from_objects(
        quota_objects,
        queue_objects,
        unit_objects,
        oversell_rate=scenario.oversell_rate,
        source=f"scenario {scenario.source} after step {upto}",
    )


# --- the explanation ----------------------------------------------------------------------


def _levels(engine: AdmissionEngine, path: Iterable[str], request: Resources) -> list[Level]:
    tree = engine.tree
    levels: list[Level] = []
    for name in path:
        spec = tree.get(name)
        limit = tree.limit(name)
        used = tree.used(name)
        checks = tuple(
            LevelCheck(name, res, amount, used.get_nanos(res), request.get_nanos(res))
            for res, amount in sorted(limit.items())
        )
        levels.append(
            Level(name, spec.parent if spec else "", checks, empty_max=not limit)
        )
    return levels


def _served_order(units: list[QueueUnit], info: QueueInfo | None) -> list[QueueUnit]:
    """The order the queue's policy offers units in (Intelligent: high sub-queue first)."""
    ordered = sorted(units, key=lambda u: order_key(u, u.created))
    if info is not None and info.policy == "Intelligent":
        threshold = info.settings.priority_threshold
        high = [u for u in ordered if u.priority >= threshold]
        low = [u for u in ordered if u.priority < threshold]
        return high + low
    return ordered


def _waiting_in(engine: AdmissionEngine, queue: str) -> list[QueueUnit]:
    waiting: list[QueueUnit] = []
    for unit in engine.units():
        if unit.phase in FINISHED_PHASES or engine.is_admitted(unit.uid):
            continue
        resolution = queue_name_for(unit.labels)
        if isinstance(resolution, QuotaName) and resolution.name == queue:
            waiting.append(unit)
    return waiting


def _admitted_in(engine: AdmissionEngine, queue: str) -> list[QueueUnit]:
    out: list[QueueUnit] = []
    for unit in engine.units():
        resolution = queue_name_for(unit.labels)
        if (
            engine.is_admitted(unit.uid)
            and isinstance(resolution, QuotaName)
            and resolution.name == queue
        ):
            out.append(unit)
    return out


def explain_missing(
    view: ClusterView, key: str, job: Mapping[str, Any] | None = None
) -> Explanation | None:
    """No QueueUnit under `key`: explain an invalid one or a Job that never got one, else None."""
    if key in view.invalid_units:
        return Explanation(
            key, Reason.INVALID_QUEUE_UNIT,
            "the QueueUnit cannot be read, so the controller ignores it",
            message=view.invalid_units[key],
        )
    if job is None:
        return None
    spec = job.get("spec") or {}
    labels = (job.get("metadata") or {}).get("labels") or {}
    notes = []
    if not spec.get("suspend"):
        notes.append(
            "the Job is not suspended: only Jobs created with spec.suspend: true are queued"
        )
    else:
        notes.append(
            "the Job is suspended but has no QueueUnit: is the controller running "
            "(with --manage-jobs) and was the Job created suspended?"
        )
    if QUOTA_NAME_LABEL not in labels:
        notes.append(f"the Job has no label {QUOTA_NAME_LABEL}")
    return Explanation(
        key, Reason.NO_QUEUE_UNIT, "the Job has no QueueUnit, so it is not queued", notes=notes
    )


def add_job_notes(ex: Explanation, job: Mapping[str, Any] | None) -> Explanation:
    """Add what the unit's Job shows: an admitted unit whose Job is still suspended is a fault."""
    if job is None or ex.reason is Reason.NO_QUEUE_UNIT:
        return ex
    suspended = bool((job.get("spec") or {}).get("suspend"))
    if ex.reason is Reason.ADMITTED and suspended:
        ex.notes.append(
            "the Job is still suspended although its unit is admitted: the controller could not "
            'resume it (see koordqueue_api_errors_total{operation="resume job"}); it retries on '
            "the next Job event or resync"
        )
    elif ex.reason not in (Reason.ADMITTED, Reason.FINISHED) and not suspended:
        ex.notes.append("the Job is not suspended: it runs without waiting for admission")
    return ex


def explain(view: ClusterView, key: str) -> Explanation | None:
    """Why the unit `namespace/name` is (not) admitted; None when there is no such unit."""
    engine = view.engine
    unit = view.find(key)
    if unit is None:
        return None
    ex = Explanation(
        key,
        Reason.FITS,
        "",
        phase=unit.phase.value,
        request=unit.resource,
        status_message=view.status_messages.get(key),
    )
    resolution = queue_name_for(unit.labels)
    if isinstance(resolution, QuotaName):
        ex.resolution = f"label {QUOTA_NAME_LABEL}={resolution.name} names quota {resolution.name}"
        ex.quota = ex.queue = resolution.name
        ex.quota_exists = resolution.name in engine.tree
        ex.queue_exists = engine.has_queue(resolution.name)
        info = view.queues.get(resolution.name)
        if info is not None:
            ex.policy, ex.queue_error = info.policy, info.error
    elif resolution.reason is UnresolvedReason.NO_LABEL:
        ex.resolution = f"no label {QUOTA_NAME_LABEL}"
    else:
        ex.resolution = resolution.message

    if unit.phase in FINISHED_PHASES:
        ex.reason = Reason.FINISHED
        ex.summary = f"finished (phase {unit.phase.value}); quota released"
        return ex
    if engine.is_admitted(unit.uid) or unit.phase in ADMITTED_PHASES:
        ex.reason = Reason.ADMITTED
        ex.summary = f"admitted (phase {unit.phase.value}) into quota {ex.quota}"
        if ex.quota is not None:
            ex.chain = _levels(engine, engine.tree.path(ex.quota), Resources())
            ex.notes.append("its request is already counted in USED at every level")
        return ex

    if not isinstance(resolution, QuotaName):
        no_label = resolution.reason is UnresolvedReason.NO_LABEL
        ex.reason = Reason.NO_QUOTA_LABEL if no_label else Reason.INVALID_QUOTA_LABEL
        ex.message = resolution.message
        ex.summary = (
            "the unit names no quota, so it is never admitted (no event is sent; see the "
            "status message and the koordqueue_units_unmapped metric)"
        )
        return ex

    quota = resolution.name
    info = view.queues.get(quota)
    waiting = _served_order(_waiting_in(engine, quota), info)
    index = next(i for i, u in enumerate(waiting) if u.uid == unit.uid)
    ex.position, ex.queue_length = index + 1, len(waiting)
    ex.ahead = [u.key for u in waiting[:index]]

    if info is not None and info.policy == "Intelligent" and (
        unit.priority < info.settings.priority_threshold
    ):
        ex.notes.append(
            "below koord-queue/priority-threshold: tried only while no unit at or above it "
            "waits, then in queue order from the head of the low units; a low unit that does "
            "not fit does not hold later ones"
        )
    if unit.phase is Phase.BACKOFF:
        ex.notes.append(
            "phase TimeoutBackoff: it failed (SchedFailed) or its Job did not start running in "
            "time, and it is retried after a back-off delay"
        )
    if not ex.quota_exists or not ex.queue_exists:
        ex.reason = Reason.QUEUE_NOT_FOUND
        ex.message = RoundResult.queue_not_found_message(unit, quota)
        if not ex.quota_exists:
            ex.summary = f"no ElasticQuota named {quota} exists (in any namespace)"
            if quota in view.invalid_quotas:
                ex.notes.append(f"an ElasticQuota {quota} exists but is invalid: "
                                f"{view.invalid_quotas[quota]}")
        else:
            ex.summary = (
                f"quota {quota} exists but Queue {view.queue_namespace}/{quota} does not "
                "(the controller creates it: is it running?)"
            )
        return ex
    if ex.queue_error is not None:
        ex.reason, ex.message = Reason.ADD_QUEUE_FAIL, ex.queue_error
        ex.summary = f"queue {quota} is not served: its policy {ex.policy} is not registered"
        return ex

    decision = engine.tree.check(unit.key, quota, unit.resource)
    path = engine.tree.path(quota)
    ex.chain = _levels(engine, path, unit.resource)
    if isinstance(decision, QuotaExceeded):
        ex.message, ex.blocking_quota = decision.message, decision.quota
        check = next(
            c for level in ex.chain if level.quota == decision.quota
            for c in level.checks if c.resource == decision.resource
        )
        numbers = (f"{decision.resource}: {fmt(check.resource, check.used)} of "
                   f"{fmt(check.resource, check.limit)} used, request "
                   f"{fmt(check.resource, check.request)}")
        if decision.quota == quota:
            ex.reason = Reason.QUOTA_EXCEEDED
            ex.summary = f"quota {quota} is full ({numbers})"
        else:
            ex.reason = Reason.ANCESTOR_EXHAUSTED
            ex.summary = f"ancestor quota {decision.quota} is exhausted ({numbers})"
            if ex.chain and ex.chain[0].fits:
                ex.summary += f" although {quota} itself has room"
        return ex
    if isinstance(decision, EmptyQuotaSpec):
        ex.reason, ex.message, ex.blocking_quota = (
            Reason.EMPTY_QUOTA_SPEC, decision.message, decision.quota
        )
        ex.summary = f"quota {decision.quota} has an empty max, so it admits no requests"
        return ex
    if isinstance(decision, QuotaCycleError):
        ex.reason, ex.message, ex.blocking_quota = (
            Reason.QUOTA_CYCLE, decision.message, decision.quota
        )
        ex.summary = (f"the parent chain of {quota} loops back to {decision.quota} "
                      f"({' -> '.join((*decision.visited, decision.quota))})")
        return ex
    if isinstance(decision, QuotaNotFoundError):
        ex.reason, ex.message, ex.blocking_quota = (
            Reason.ANCESTOR_NOT_FOUND, decision.message, decision.quota
        )
        ex.summary = (f"the parent chain of {quota} reaches {decision.quota}, which does not "
                      f"exist ({' -> '.join(decision.visited)})")
        return ex
    assert isinstance(decision, Admitted)
    _explain_fitting(view, unit, info, waiting[:index], ex)
    return ex


def _explain_fitting(
    view: ClusterView,
    unit: QueueUnit,
    info: QueueInfo | None,
    ahead: list[QueueUnit],
    ex: Explanation,
) -> None:
    """The quota has room: say which policy rule holds the unit back, if any."""
    engine = view.engine
    settings = info.settings if info is not None else QueueSettings()
    quota = ex.quota or ""
    not_running = [u.key for u in _admitted_in(engine, quota) if u.phase in NOT_YET_RUNNING]
    if settings.wait_for_pods_running and not settings.enable_preemption and not_running:
        ex.reason = Reason.WAITING_FOR_PODS_RUNNING
        ex.summary = (f"queue {quota} has koord-queue/wait-for-pods-running: it admits nothing "
                      f"until these admitted units run: {', '.join(sorted(not_running))}")
        return
    if settings.max_depth > 0 and len(ahead) >= settings.max_depth:
        ex.reason = Reason.BEYOND_MAX_DEPTH
        ex.summary = (f"position {len(ahead) + 1} is beyond koord-queue/max-depth "
                      f"{settings.max_depth}: the policy scans only the first units")
        return
    policy = info.policy if info is not None else DEFAULT_POLICY
    if policy in ("Block", "Intelligent"):
        threshold = settings.priority_threshold
        low = policy == "Intelligent" and unit.priority < threshold
        for head in ahead:
            if policy == "Intelligent" and head.priority < threshold:
                continue  # only high units hold others; a low one never does
            blocked = engine.tree.check(head.key, quota, head.resource)
            if blocked.admitted:
                continue
            ex.reason = Reason.BLOCKED_BY_HEAD
            if low:
                ex.summary = (f"policy Intelligent serves no unit below "
                              f"koord-queue/priority-threshold {threshold} while one at or "
                              f"above it waits: {head.key} does not fit ({blocked.message})")
            else:
                ex.summary = (f"policy {policy} is head-of-line: {head.key} ahead of it does "
                              f"not fit ({blocked.message}) and blocks quota {quota}")
            lifted_by = ("a unit of the quota is deleted or releases quota" if policy ==
                         "Intelligent" else
                         "a unit of the quota is added, deleted or releases quota")
            ex.notes.append(
                f"the block holds until {lifted_by}; then the head is retried first, and "
                "after 3 minutes with nothing tried it is retried anyway (a head that never "
                "fits holds the quota)"
            )
            if policy == "Block" and settings.block_timeout > 0:
                ex.notes.append(
                    f"{BLOCK_TIMEOUT_ANNOTATION} {settings.block_timeout:g} (opt-in): after "
                    "that long blocked, the other units get one round past the head"
                )
            return
    if unit.phase is Phase.BACKOFF:
        ex.reason = Reason.BACKOFF
        ex.summary = "the unit failed before and is backing off; it will be retried"
        return
    ex.reason = Reason.FITS
    ex.summary = "it fits at current usage; the next admission round admits it"
