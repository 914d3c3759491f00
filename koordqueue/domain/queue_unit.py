"""QueueUnit: the admission request of one workload (SPEC 1, 2.6), and its phases."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from koordqueue.domain.names import PREEMPTIBLE_ANNOTATION
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.reclaimable import InvalidReclaimablePodsError
from koordqueue.domain.resources import Resources
from koordqueue.domain.unit_share import held_request


class Phase(StrEnum):
    """QueueUnit phases as written to `status.phase`."""

    ENQUEUED = "Enqueued"
    RESERVED = "Reserved"
    DEQUEUED = "Dequeued"
    RUNNING = "Running"
    SUCCEED = "Succeed"
    FAILED = "Failed"
    SCHED_READY = "SchedReady"
    SCHED_SUCCEED = "SchedSucceed"
    SCHED_FAILED = "SchedFailed"
    BACKOFF = "TimeoutBackoff"
    """Koord-Queue's spelling of its Backoff phase."""
    PREEMPTED = "Preempted"

    @classmethod
    def _missing_(cls, value: object) -> Phase | None:
        # "Backoff": this project's spelling before it followed Koord-Queue; stored units keep it
        return cls.BACKOFF if value == "Backoff" else None


ADMITTED_PHASES: Final = frozenset(
    {Phase.RESERVED, Phase.DEQUEUED, Phase.RUNNING, Phase.SCHED_READY, Phase.SCHED_SUCCEED}
)
"""Phases whose units count in quota usage (SPEC 2.5)."""

FINISHED_PHASES: Final = frozenset({Phase.SUCCEED, Phase.FAILED})
"""Phases after which a unit's quota is released for good."""

WAITING_PHASES: Final = frozenset(
    {Phase.ENQUEUED, Phase.BACKOFF, Phase.PREEMPTED, Phase.SCHED_FAILED}
)
"""Phases of units that wait in their queue for admission."""

NOT_YET_RUNNING: Final = frozenset({Phase.RESERVED, Phase.DEQUEUED, Phase.SCHED_READY})
"""Admitted units whose pods are not running yet (preemption victims, wait-for-pods-running)."""


class InvalidQueueUnitError(ValueError):
    """A QueueUnit object that cannot be queued; `field` names the problem."""

    def __init__(self, key: str, field: str, reason: str) -> None:
        self.key = key
        self.field = field
        self.reason = reason
        super().__init__(f"QueueUnit {key}: {field}: {reason}")


@dataclass(frozen=True, slots=True)
class AdmissionCount:
    """One entry of status.admissions: a pod set's admitted replicas, how many run
    (None: not reported), and reclaimState.replicas (0: none)."""

    name: str
    replicas: int
    running: int | None = None
    reclaim: int = 0


@dataclass(frozen=True, slots=True)
class QueueUnit:
    """What admission needs to know about a unit; built from the API object or a scenario."""

    namespace: str
    name: str
    uid: str
    resource: Resources = field(default_factory=Resources)
    priority: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    phase: Phase = Phase.ENQUEUED
    created: float = 0.0
    """Creation time (epoch seconds): the first-attempt tie breaker until a unit is tried."""
    consumer_kind: str | None = None
    """spec.consumerRef.kind (e.g. Job): the workload that follows the unit's admission."""
    active: bool = True
    """spec.active (unset: True). False: never admitted, evicted if admitted (QueueUnitActive)."""
    reclaiming: bool = False
    """Some status.admissions[].reclaimState.replicas > 0: a preemption is taking pods back
    (a deactivation waits for it)."""
    max_exec_seconds: int | None = None
    """spec.maximumExecutionTimeSeconds: the execution budget (MaximumExecutionTime)."""
    pods_ready_since: float | None = None
    """When condition PodsReady last turned True (epoch seconds); None unless it is True."""
    accumulated_seconds: int = 0
    """status.accumulatedPastExecutionTimeSeconds: run time banked by earlier admissions."""
    requeue_count: int = 0
    """status.requeueState.count: back-offs since it last ran (QueueUnitRequeueState)."""
    requeue_at: float | None = None
    """status.requeueState.requeueAt (epoch seconds): when its back-off ends."""
    admissions: tuple[AdmissionCount, ...] = ()
    """status.admissions as counts: what a queue-level preemption may reclaim."""
    last_allocate: float | None = None
    """status.lastAllocateTime (epoch seconds): when it was last given quota (the reclaim
    protect time counts from it)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def preemptible(self) -> bool:
        return self.annotations.get(PREEMPTIBLE_ANNOTATION) == "true"

    @property
    def admitted(self) -> bool:
        return self.phase in ADMITTED_PHASES


def _epoch(value: object) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0
    return 0.0


def queue_unit_from_object(obj: Mapping[str, Any]) -> QueueUnit:
    """Parse a QueueUnit API object; raises InvalidQueueUnitError naming the field."""
    metadata = obj.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "default")
    name = metadata.get("name")
    key = f"{namespace}/{name}"
    if not isinstance(name, str) or not name:
        raise InvalidQueueUnitError(key, "metadata.name", "must be a non-empty string")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    try:
        resource = Resources.parse(spec.get("resource"), "spec.resource")
    except InvalidQuantityError as exc:
        raise InvalidQueueUnitError(key, exc.field, f"{exc.value!r}: {exc.reason}") from exc
    try:
        resource = held_request(spec, status, resource)
    except InvalidReclaimablePodsError as exc:
        raise InvalidQueueUnitError(key, exc.field, exc.reason) from exc
    priority = spec.get("priority") or 0
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise InvalidQueueUnitError(key, "spec.priority", f"must be an integer, got {priority!r}")
    raw_phase = status.get("phase") or Phase.ENQUEUED.value
    try:
        phase = Phase(raw_phase)
    except ValueError as exc:
        raise InvalidQueueUnitError(key, "status.phase", f"unknown phase {raw_phase!r}") from exc
    active = spec.get("active")
    if active is not None and not isinstance(active, bool):
        raise InvalidQueueUnitError(key, "spec.active", f"must be a boolean, got {active!r}")
    budget = spec.get("maximumExecutionTimeSeconds")
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool)):
        raise InvalidQueueUnitError(
            key, "spec.maximumExecutionTimeSeconds", f"must be an integer, got {budget!r}"
        )
    banked = status.get("accumulatedPastExecutionTimeSeconds")
    raw_requeue = status.get("requeueState")
    requeue: Mapping[str, Any] = raw_requeue if isinstance(raw_requeue, Mapping) else {}
    count = requeue.get("count")
    consumer = (spec.get("consumerRef") or {}).get("kind")
    labels = {k: v for k, v in (metadata.get("labels") or {}).items()}
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items()}
    return QueueUnit(
        namespace=namespace,
        name=name,
        uid=str(metadata.get("uid") or key),
        resource=resource,
        priority=priority,
        labels=labels,
        annotations=annotations,
        phase=phase,
        created=_epoch(metadata.get("creationTimestamp")),
        consumer_kind=consumer if isinstance(consumer, str) and consumer else None,
        active=active is not False,
        reclaiming=_reclaiming(status.get("admissions")),
        max_exec_seconds=budget if budget is not None and budget > 0 else None,
        pods_ready_since=_pods_ready_since(status.get("conditions")),
        accumulated_seconds=banked if isinstance(banked, int) and banked > 0 else 0,
        requeue_count=count if isinstance(count, int) and count > 0 else 0,
        requeue_at=_epoch(requeue.get("requeueAt")) or None,
        admissions=_admission_counts(status.get("admissions")),
        last_allocate=_epoch(status.get("lastAllocateTime")) or None,
    )


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _admission_counts(admissions: object) -> tuple[AdmissionCount, ...]:
    out: list[AdmissionCount] = []
    for admission in admissions if isinstance(admissions, list) else ():
        if not isinstance(admission, Mapping):
            continue
        state = admission.get("reclaimState")
        reclaim = _count(state.get("replicas")) if isinstance(state, Mapping) else None
        out.append(AdmissionCount(
            str(admission.get("name") or ""), _count(admission.get("replicas")) or 0,
            _count(admission.get("running")), reclaim or 0,
        ))
    return tuple(out)


def _pods_ready_since(conditions: object) -> float | None:
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodsReady":
            if condition.get("status") != "True":
                return None
            return _epoch(condition.get("lastTransitionTime")) or None
    return None


def _reclaiming(admissions: object) -> bool:
    if not isinstance(admissions, list):
        return False
    for admission in admissions:
        state = admission.get("reclaimState") if isinstance(admission, Mapping) else None
        replicas = state.get("replicas") if isinstance(state, Mapping) else None
        if isinstance(replicas, int) and replicas > 0:
            return True
    return False
