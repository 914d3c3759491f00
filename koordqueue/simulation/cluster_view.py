"""The state explain reads: an admission engine folded from API objects or a scenario replay.

A live cluster is folded as the controller folds it; a replayed scenario hands over the
simulator's own engine, policy state included. Explain then reads the record of the engine's
next round (`ClusterView.dry_round`); nothing here decides anything.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from koordqueue.domain.engine import AdmissionEngine, RoundResult
from koordqueue.domain.names import DEFAULT_POLICY, QUEUE_NAMESPACE, QUOTA_NAME_LABEL
from koordqueue.domain.policies import QueueSettings
from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.domain.queue_unit import (
    InvalidQueueUnitError,
    Phase,
    QueueUnit,
    queue_unit_from_object,
)
from koordqueue.domain.quota_fold import fold_order, fold_quota
from koordqueue.simulation.scenario import Scenario
from koordqueue.simulation.simulator import SimulationResult, StepRecord, iter_simulation


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """What explain reports about a Queue: its policy, settings and AddQueueFail message."""

    name: str
    policy: str
    settings: QueueSettings
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RefusedQuota:
    """An ElasticQuota object the controller refuses: where, why, and whether an earlier
    definition of it stays in force (its status keeps it)."""

    namespace: str
    problems: str
    kept: bool


@dataclass(slots=True)
class ClusterView:
    """An engine fed with API-shaped objects, plus what explain needs beside the engine."""

    engine: AdmissionEngine
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    queue_namespace: str = QUEUE_NAMESPACE
    refused_quotas: dict[str, list[RefusedQuota]] = field(default_factory=dict)
    """Per quota name, its objects the controller refuses (domain/quota_fold.py)."""
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
        """Fold objects in as the controller does (quotas by `fold_quota`, the controller's
        own rule: a refused object's definition in force is the one its status keeps, and of
        same-name copies the oldest counts); unreadable ones are remembered, not fatal."""
        view = cls(
            AdmissionEngine(oversell_rate),
            queue_namespace=queue_namespace,
            source=source,
            now=time.time() if now is None else now,
        )
        for obj in fold_order(quotas):
            meta = obj.get("metadata") or {}
            folded = fold_quota(obj, view.engine.tree)
            if folded.spec is not None:
                view.engine.upsert_quota(folded.spec)
            if folded.problems:
                name = str(meta.get("name") or "")
                view.refused_quotas.setdefault(name, []).append(RefusedQuota(
                    str(meta.get("namespace") or "default"),
                    "; ".join(str(p) for p in folded.problems),
                    folded.kept,
                ))
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

    _round: tuple[AdmissionEngine, RoundResult] | None = None

    def dry_round(self) -> RoundResult:
        """The record of the round the controller runs next (`AdmissionEngine.dry_round` at
        `now`), run once per engine: every explanation of this view reads the same one."""
        if self._round is None or self._round[0] is not self.engine:
            self._round = (self.engine, self.engine.dry_round(self.now))
        return self._round[1]

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
                    "creationTimestamp": _epoch_text(
                        float(u.arrive) if u.created is None else u.created
                    ),
                },
                "spec": {
                    "resource": u.resource.to_quantities(),
                    "priority": u.priority,
                    **({"consumerRef": {"kind": u.consumer_kind}} if u.consumer_kind else {}),
                },
                "status": {"phase": phases.get(key, Phase(u.phase)).value},
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
