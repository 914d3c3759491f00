"""Why is my job pending: one explanation, read from a dry round of the real engine.

Explain does not re-derive the queue rules: it runs `AdmissionEngine.dry_round` (the round
the controller would run next, on a copy) and reports the outcome the round recorded for the
unit, with the numbers behind it. For a replayed scenario the engine is the simulator's own,
policy state included (which unit blocks a quota and since when). For a live cluster the
engine is rebuilt from the API objects exactly as the controller folds them, so what lives
only in the controller's memory is not visible: Block/Intelligent blocks (a rebuilt engine
has none, as after a controller restart) and back-off deadlines; the output says so.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from koordqueue.domain.admission import (
    EmptyQuotaSpec,
    QuotaCycle,
    QuotaExceeded,
    QuotaMissing,
    Rejection,
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
    InvalidQueueUnitError,
    Phase,
    QueueUnit,
    queue_unit_from_object,
)
from koordqueue.domain.quota import InvalidQuotaError, quota_from_object
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import (
    Admit,
    BackingOff,
    BeyondMaxDepth,
    BlockedByHead,
    HighPriorityWaiting,
    Outcome,
    Preempted,
    QueueNotFound,
    QueueUnserved,
    Reject,
    WaitingForPodsRunning,
)
from koordqueue.simulation.scenario import Scenario
from koordqueue.simulation.simulator import SimulationResult, StepRecord, iter_simulation


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
    now: float = 0.0
    """The clock of the dry round explain runs."""
    rebuilt: bool = True
    """The engine was rebuilt from API objects: the controller's in-memory policy state
    (Block/Intelligent blocks) and back-off deadlines are not in it."""

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
        now: float | None = None,
    ) -> ClusterView:
        """Fold objects in as the controller does; unreadable ones are remembered, not fatal."""
        view = cls(
            AdmissionEngine(oversell_rate),
            queue_namespace=queue_namespace,
            source=source,
            now=time.time() if now is None else now,
        )
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
    records: list[StepRecord] = []
    for record in iter_simulation(scenario, result):
        records.append(record)
        for key in record.finished:
            phases[key] = Phase.SUCCEED
        for key in record.admitted:
            phases[key] = Phase.DEQUEUED
        for key in record.preempted:
            phases[key] = Phase.ENQUEUED
        if record.step == upto:
            break
    result.steps = records
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
                "spec": {
                    "resource": u.resource.to_quantities(),
                    "priority": u.priority,
                    **({"consumerRef": {"kind": u.consumer_kind}} if u.consumer_kind else {}),
                },
                "status": {"phase": phases.get(key, Phase.ENQUEUED).value},
            }
        )
    view = ClusterView.from_objects(
        quota_objects,
        queue_objects,
        unit_objects,
        oversell_rate=scenario.oversell_rate,
        source=f"scenario {scenario.source} after step {upto}",
        now=float(upto + 1),
    )
    # the simulator's own engine, policy state included: the next round is the real one
    assert result.engine is not None
    view.engine, view.rebuilt = result.engine, False
    view.status_messages = result.final_messages()
    return view


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


def _served_order(engine: AdmissionEngine, queue: str, units: list[QueueUnit]) -> list[QueueUnit]:
    """The order the queue's policy offers units in (its own `offer_order`)."""
    ordered = sorted(units, key=lambda u: order_key(u, u.created))
    policy = engine.queue_policy(queue)
    return list(policy.offer_order(ordered)) if policy is not None else ordered


def _outcome_of(view: ClusterView, unit: QueueUnit) -> Outcome | None:
    """What the controller's next round records for the unit (a dry round of the engine)."""
    record = view.engine.dry_round(view.now)
    return next((o for o in record.outcomes if o.unit.uid == unit.uid), None)


def _waiting_in(engine: AdmissionEngine, queue: str) -> list[QueueUnit]:
    waiting: list[QueueUnit] = []
    for unit in engine.units():
        if unit.phase in FINISHED_PHASES or engine.is_admitted(unit.uid):
            continue
        resolution = queue_name_for(unit.labels)
        if isinstance(resolution, QuotaName) and resolution.name == queue:
            waiting.append(unit)
    return waiting


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
        if unit.phase not in ADMITTED_PHASES or not engine.is_admitted(unit.uid):
            return ex
        outcome = _outcome_of(view, unit)
        if isinstance(outcome, Preempted):
            ex.notes.append(
                f"the next round preempts it for {outcome.by.key}: it goes back to the queue"
            )
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
    waiting = _served_order(engine, quota, _waiting_in(engine, quota))
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

    ex.chain = _levels(engine, engine.tree.path(quota), unit.resource)
    outcome = _outcome_of(view, unit)
    if view.rebuilt and ex.policy in ("Block", "Intelligent"):
        ex.notes.append(
            "read from the cluster: which unit blocks the quota and since when lives only in "
            "the controller's memory; this is the round a freshly started controller would run "
            "(no quota blocked yet)"
        )
    _explain_outcome(view, unit, outcome, ex)
    return ex


def _explain_rejection(ex: Explanation, decision: Rejection) -> None:
    """CheckUsage refused the unit: say where and why, with the numbers."""
    quota = ex.quota or ""
    ex.message = decision.message
    ex.blocking_quota = decision.quota
    if isinstance(decision, QuotaExceeded):
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
    elif isinstance(decision, EmptyQuotaSpec):
        ex.reason = Reason.EMPTY_QUOTA_SPEC
        ex.summary = f"quota {decision.quota} has an empty max, so it admits no requests"
    elif isinstance(decision, QuotaCycle):
        ex.reason = Reason.QUOTA_CYCLE
        ex.summary = (f"the parent chain of {quota} loops back to {decision.quota} "
                      f"({' -> '.join((*decision.visited, decision.quota))})")
    elif isinstance(decision, QuotaMissing):
        ex.reason = Reason.ANCESTOR_NOT_FOUND
        ex.summary = (f"the parent chain of {quota} reaches {decision.quota}, which does not "
                      f"exist ({' -> '.join(decision.visited)})")
    else:  # AlreadyReserved: the engine never offers an admitted unit, kept for completeness
        ex.reason = Reason.QUOTA_EXCEEDED
        ex.summary = decision.message


def _explain_outcome(
    view: ClusterView, unit: QueueUnit, outcome: Outcome | None, ex: Explanation
) -> None:
    """Translate the dry round's outcome for the unit into the answer."""
    quota = ex.quota or ""
    policy = ex.policy or DEFAULT_POLICY
    if isinstance(outcome, Reject):
        _explain_rejection(ex, outcome.decision)
        return
    if isinstance(outcome, WaitingForPodsRunning):
        ex.reason = Reason.WAITING_FOR_PODS_RUNNING
        ex.summary = (f"queue {quota} has koord-queue/wait-for-pods-running: it admits nothing "
                      f"until these admitted units run: {', '.join(sorted(outcome.not_running))}")
        return
    if isinstance(outcome, BeyondMaxDepth):
        ex.reason = Reason.BEYOND_MAX_DEPTH
        ex.summary = (f"position {outcome.position} is beyond koord-queue/max-depth "
                      f"{outcome.depth}: the policy scans only the first units")
        return
    if isinstance(outcome, BlockedByHead | HighPriorityWaiting):
        _explain_block(view, unit, outcome, ex)
        return
    if isinstance(outcome, BackingOff):
        ex.reason = Reason.BACKOFF
        ex.summary = (f"the unit failed before and is backing off; it is retried at "
                      f"t={outcome.until:g}")
        return
    if isinstance(outcome, QueueNotFound | QueueUnserved):  # (reported above; kept total)
        ex.reason = Reason.QUEUE_NOT_FOUND
        ex.summary = f"queue {outcome.queue} is not served"
        return
    if unit.phase is Phase.BACKOFF:
        ex.reason = Reason.BACKOFF
        ex.summary = "the unit failed before and is backing off; it will be retried"
        if view.rebuilt:
            ex.notes.append(
                "read from the cluster: the back-off deadline lives only in the controller's "
                "memory; once it passes, the next round admits it at current usage"
            )
        return
    ex.reason = Reason.FITS
    if isinstance(outcome, Admit):
        ex.summary = "it fits at current usage; the next admission round admits it"
    else:
        ex.summary = f"it fits at current usage, but policy {policy} did not offer it this round"


def _explain_block(
    view: ClusterView,
    unit: QueueUnit,
    outcome: BlockedByHead | HighPriorityWaiting,
    ex: Explanation,
) -> None:
    """Block/Intelligent hold the unit back: name the unit holding it, from the policy state."""
    engine = view.engine
    quota = ex.quota or ""
    policy = ex.policy or DEFAULT_POLICY
    ex.reason = Reason.BLOCKED_BY_HEAD
    if isinstance(outcome, HighPriorityWaiting):
        head_key = outcome.waiting[0]
        head = view.find(head_key)
        why = engine.tree.check(head.key, quota, head.resource) if head else None
        detail = f" ({why.message})" if why is not None and not why.admitted else ""
        ex.summary = (f"policy Intelligent serves no unit below koord-queue/priority-threshold "
                      f"{outcome.threshold} while one at or above it waits: "
                      f"{', '.join(outcome.waiting)}{detail}")
        return
    head = view.find(outcome.head)
    check = engine.tree.check(head.key, quota, head.resource) if head is not None else None
    detail = f" ({check.message})" if check is not None and not check.admitted else ""
    if outcome.head == unit.key:
        ex.summary = (f"policy {policy} blocked quota {outcome.quota} when this unit, its head, "
                      f"did not fit{detail}; it waits for the block to lift")
        if check is not None and not check.admitted:
            ex.message = check.message
    else:
        ex.summary = (f"policy {policy} is head-of-line: {outcome.head} ahead of it does not "
                      f"fit{detail} and blocks quota {outcome.quota}")
    lifted_by = ("a unit of the quota is deleted or releases quota" if policy == "Intelligent"
                 else "a unit of the quota is added, deleted or releases quota")
    ex.notes.append(
        f"the block holds until {lifted_by}; then the head is retried first, and "
        "after 3 minutes with nothing tried it is retried anyway (a head that never "
        "fits holds the quota)"
    )
    settings = engine.queue_settings(quota) or QueueSettings()
    if policy == "Block" and settings.block_timeout > 0:
        ex.notes.append(
            f"{BLOCK_TIMEOUT_ANNOTATION} {settings.block_timeout:g} (opt-in): after "
            "that long blocked, the other units get one round past the head"
        )
