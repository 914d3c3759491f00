"""A live cluster's admission state as a scenario (`koordqueue snapshot`, issue 29 part 1).

The objects are folded as the controller folds them (`ClusterView.from_objects`: a refused
quota edit keeps the definition in force, of same-name copies the oldest counts), then written
back out as scenario entries: each quota in force with its Queue's policy and settings, each
unit in the phase it is in (an admitted one holds its quota from the start; a waiting one is
Enqueued) with the status message it shows (the replayed round changes it only where the
controller's next round writes another), ordered by creation time relative to the snapshot. So
`simulate` on the file replays the round the controller runs next: the round-trip e2e test
(tests/e2e/test_snapshot.py) compares it, unit by unit, with what the controller wrote.

What a scenario cannot say is left out and listed in `Snapshot.notes`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from koordqueue.domain import admission_checks as ac
from koordqueue.domain.activation import active_from
from koordqueue.domain.names import (
    DEFAULT_POLICY,
    QUEUE_NAMESPACE,
    QUOTA_NAME_LABEL,
    ROOT_QUOTA,
)
from koordqueue.domain.queue_derivation import policy_for, synced_annotations
from koordqueue.domain.queue_unit import (
    FINISHED_PHASES,
    AdmissionCount,
    InvalidQueueUnitError,
    Phase,
    QueueUnit,
    queue_unit_from_object,
)
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.reclaimable import PodSetShare
from koordqueue.domain.reservation import queue_of
from koordqueue.domain.unit_share import pod_set_shares
from koordqueue.simulation.cluster_view import ClusterView
from koordqueue.simulation.history import run_history
from koordqueue.simulation.scenario_podsets import (
    POD_SETS_FIELD,
    heterogeneous,
    pod_set_entries,
)
from koordqueue.simulation.snapshot_nodes import LiveNodes, carry_nodes

SNAPSHOT_STEPS: Final = 2
"""Steps a snapshot replays by default: the controller's next round, and one more to show
that nothing else moves (a what-if with a run time sets its own)."""
DROPPED_ANNOTATIONS: Final = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})
"""Annotations no admission reads that would only bloat the file."""


@dataclass(slots=True)
class Snapshot:
    """The scenario document and what could not be carried into it."""

    doc: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_yaml(self) -> str:
        header = "".join(f"# note: {n}\n" for n in self.notes)
        body = yaml.safe_dump(self.doc, sort_keys=False, default_flow_style=None, width=100)
        return header + body


def _ordered(quotas: Iterable[QuotaSpec]) -> list[QuotaSpec]:
    """Parents before children (a scenario reads top-down), else by name."""
    by_name = {q.name: q for q in quotas}
    out: list[QuotaSpec] = []
    seen: set[str] = set()

    def visit(q: QuotaSpec, trail: frozenset[str]) -> None:
        if q.name in seen or q.name in trail:
            return
        parent = by_name.get(q.parent)
        if parent is not None:
            visit(parent, trail | {q.name})
        seen.add(q.name)
        out.append(q)

    for name in sorted(by_name):
        visit(by_name[name], frozenset())
    return out


def _quota_entry(
    spec: QuotaSpec,
    queue: Mapping[str, Any] | None,
    labels: Mapping[str, Any],
    checks: tuple[ac.CheckSpec, ...] = (),
) -> dict[str, Any]:
    """A quota in force with the policy and settings its Queue is served with (the Queue's
    own when it exists: that is what the engine reads; else what the quota's labels say),
    and the admission checks the Queue asks for."""
    if queue is not None:
        policy = str((queue.get("spec") or {}).get("queuePolicy") or DEFAULT_POLICY)
        annotations = (queue.get("metadata") or {}).get("annotations") or {}
    else:
        policy = policy_for(labels, spec.annotations)
        annotations = spec.annotations
    entry: dict[str, Any] = {"name": spec.name, "namespace": spec.namespace}
    if spec.parent != ROOT_QUOTA:
        entry["parent"] = spec.parent
    if spec.min:
        entry["min"] = spec.min.to_quantities()
    if spec.max:
        entry["max"] = spec.max.to_quantities()
    entry["policy"] = policy
    synced = synced_annotations({**spec.annotations, **annotations})
    if synced:
        entry["annotations"] = dict(sorted(synced.items()))
    if checks:
        entry[ac.CHECKS_FIELD] = [_check_spec_entry(c) for c in checks]
    return entry


def _check_spec_entry(check: ac.CheckSpec) -> dict[str, Any]:
    """A Queue's check as its spec says it (the selector only when it has one)."""
    out: dict[str, Any] = {"name": check.name}
    if check.match_labels is not None:
        selector: dict[str, Any] = {}
        if check.match_labels:
            selector["matchLabels"] = dict(check.match_labels)
        if check.match_expressions:
            selector["matchExpressions"] = [
                {"key": r.key, "operator": r.operator, **({"values": list(r.values)}
                                                          if r.values else {})}
                for r in check.match_expressions
            ]
        out["labelSelector"] = selector
    return out


def _queue_checks(
    queues: Mapping[str, Mapping[str, Any]], notes: list[str]
) -> dict[str, tuple[ac.CheckSpec, ...]]:
    """Each Queue's admission checks, as the controller reads them; one it cannot read asks
    for none there, and is noted."""
    out: dict[str, tuple[ac.CheckSpec, ...]] = {}
    for name, queue in sorted(queues.items()):
        try:
            checks = ac.parse_checks((queue.get("spec") or {}).get(ac.CHECKS_FIELD))
        except ac.InvalidAdmissionCheckError as exc:
            notes.append(f"Queue {name}: {exc}: the controller asks for no checks there, "
                         "nor does the replay")
            continue
        if checks:
            out[name] = checks
    return out


def _selector_keys(by_queue: Mapping[str, tuple[ac.CheckSpec, ...]]) -> frozenset[str]:
    """The label keys some check's labelSelector reads (the units carry these labels)."""
    keys: set[str] = set()
    for checks in by_queue.values():
        for c in checks:
            keys.update(k for k, _ in c.match_labels or ())
            keys.update(r.key for r in c.match_expressions)
    return frozenset(keys)


def _check_states(
    obj: Mapping[str, Any], unit: QueueUnit, asks: tuple[ac.CheckSpec, ...], key: str,
    notes: list[str],
) -> list[dict[str, Any]]:
    """A Reserved unit's status.admissionChecks as the controller evaluates them: a state of
    a check its Queue no longer asks for is left out (it counts as Ready), one that is none of
    Kueue's four is carried as Pending (it neither releases nor backs off). Both noted."""
    out: list[dict[str, Any]] = []
    names = {c.name for c in asks}
    for s in ac.states_from_objects((obj.get("status") or {}).get(ac.CHECKS_FIELD)):
        if s.name not in names:
            notes.append(f"{key}: check {s.name!r} is no check its Queue {queue_of(unit)} asks "
                         f"for: left out (the controller counts it as Ready)")
            continue
        state = s.state
        if state not in ac.STATES:
            notes.append(f"{key}: check {s.name!r} has state {state!r}, none of "
                         f"{', '.join(ac.STATES)}: carried as Pending (the controller waits)")
            state = ac.PENDING
        entry = {"name": s.name, "state": state}
        if s.message:
            entry["message"] = s.message
        out.append(entry)
    return out


def _pods(obj: Mapping[str, Any]) -> int:
    sets = (obj.get("spec") or {}).get("podSet") or []
    total = sum(int(s.get("count") or 0) for s in sets if isinstance(s, Mapping))
    return max(total, 1)


def _pod_sets(obj: Mapping[str, Any]) -> tuple[PodSetShare, ...]:
    """spec.podSet's per-pod requests, when they differ from set to set (a template whose
    quantities cannot be read: none, the unit is one pod as before)."""
    try:
        return heterogeneous(pod_set_shares((obj.get("spec") or {}).get("podSet")))
    except ValueError:
        return ()


def _unit_entry(  # noqa: PLR0917 - the fold's state, passed through once
    obj: Mapping[str, Any], unit: QueueUnit, now: float, honour_active: bool,
    by_queue: Mapping[str, tuple[ac.CheckSpec, ...]], notes: list[str],
) -> dict[str, Any] | None:
    """A unit as it stands; None for a finished one (it holds nothing, and never will).
    `honour_active`: the controller's QueueUnitActive gate (off: spec.active and the Job's
    annotation change nothing). `by_queue`: each Queue's admission checks (a Reserved unit
    carries its check states; every unit the labels their selectors read)."""
    if unit.phase in FINISHED_PHASES:
        return None
    entry: dict[str, Any] = {"name": unit.name, "namespace": unit.namespace}
    quota = unit.labels.get(QUOTA_NAME_LABEL)
    if quota is not None:
        entry["quota"] = str(quota)
    entry["resource"] = unit.resource.to_quantities()
    shares = _pod_sets(obj)
    pods = _pods(obj)
    if shares:  # (pod sets asking for different requests: each placed with its own)
        entry[POD_SETS_FIELD] = pod_set_entries(shares)
    elif pods > 1 and not any(v % pods for v in unit.resource.values()):
        entry["pods"] = pods  # (a gang the scenario can split evenly; else one pod)
    if unit.priority:
        entry["priority"] = unit.priority
    annotations = {
        k: str(v) for k, v in unit.annotations.items() if k not in DROPPED_ANNOTATIONS
    }
    if annotations:
        entry["annotations"] = dict(sorted(annotations.items()))
    if unit.consumer_kind:
        entry["consumerKind"] = unit.consumer_kind
    read = _selector_keys(by_queue)
    labels = {k: str(v) for k, v in unit.labels.items() if k in read and k != QUOTA_NAME_LABEL}
    if labels:
        entry["labels"] = dict(sorted(labels.items()))
    if unit.admitted:
        entry["phase"] = unit.phase.value
        if unit.admissions:  # who runs, and a reclaim a queue-level preemption marked
            entry["admissions"] = [_admission_entry(a) for a in unit.admissions]
    if unit.phase is Phase.RESERVED:
        asks = by_queue.get(queue_of(unit) or "", ())
        states = _check_states(obj, unit, asks, f"QueueUnit {unit.key}", notes)
        if states:
            entry[ac.CHECKS_FIELD] = states
        attempts = int((obj.get("status") or {}).get("attempts") or 0)
        if attempts > 0:  # (a back-off's delay grows with it)
            entry["attempts"] = attempts
    active = unit.active or not honour_active
    if active != (active_from(unit.annotations) is not False):
        # spec.active persists (the annotation may be gone or never set), and a controller
        # without the gate ignores both: said where the annotation alone would mislead
        entry["active"] = active
    message = (obj.get("status") or {}).get("message")
    if message:  # the round replayed writes only a change, as a write over it would show
        entry["message"] = str(message)
    entry["created"] = round(unit.created - now, 3)
    return entry


def _admission_entry(a: AdmissionCount) -> dict[str, Any]:
    out: dict[str, Any] = {"name": a.name, "replicas": a.replicas}
    if a.running is not None:
        out["running"] = a.running
    if a.reclaim:
        out["reclaim"] = a.reclaim
    return out


def snapshot_from_objects(
    quotas: Iterable[Mapping[str, Any]],
    queues: Iterable[Mapping[str, Any]],
    units: Iterable[Mapping[str, Any]],
    *,
    oversell_rate: str = "1",
    queue_namespace: str = QUEUE_NAMESPACE,
    now: float,
    source: str = "",
    honour_active: bool = False,
    step_seconds: float = 1.0,
    nodes: LiveNodes | None = None,
) -> Snapshot:
    """The scenario for these objects as listed at `now` (epoch seconds). `honour_active`:
    the controller's QueueUnitActive gate (alpha, off by default). `step_seconds`: its
    --admission-period, one replay step (the finished units' run times become steps).
    `nodes`: the nodes and pods the scheduler's cache read (snapshot_nodes.py), carried so
    that the replay places pods around what already runs; None: no nodes, no placement."""
    unit_list = list(units)
    queue_list = [
        q for q in queues
        if (q.get("metadata") or {}).get("namespace", queue_namespace) == queue_namespace
    ]
    quota_list = list(quotas)
    labels = {
        (str(m.get("name")), str(m.get("namespace") or "default")): m.get("labels") or {}
        for m in ((q.get("metadata") or {}) for q in quota_list)
    }
    view = ClusterView.from_objects(
        quota_list, queue_list, unit_list, oversell_rate=oversell_rate,
        queue_namespace=queue_namespace, now=now, source=source,
    )
    notes: list[str] = []
    by_queue = {str((q.get("metadata") or {}).get("name")): q for q in queue_list}
    tree = view.engine.tree
    in_force = [q for q in tree if tree.get(q.name) is q]
    checks = {n: c for n, c in _queue_checks(by_queue, notes).items()
              if any(q.name == n for q in in_force)}
    quota_entries = [
        _quota_entry(q, by_queue.get(q.name), labels.get((q.name, q.namespace), {}),
                     checks.get(q.name, ()) if q.name in by_queue else ())
        for q in _ordered(in_force)
    ]
    for name, refused in sorted(view.refused_quotas.items()):
        if not any(r.kept for r in refused):
            notes.append(f"ElasticQuota {name} is refused by the controller: left out")
    for q in in_force:
        if q.name not in by_queue:
            notes.append(f"quota {q.name} has no Queue in {queue_namespace} yet: "
                         "the replay serves one")
    carried: list[tuple[Mapping[str, Any], dict[str, Any]]] = []
    for obj in unit_list:
        try:
            unit = queue_unit_from_object(obj)
        except InvalidQueueUnitError as exc:
            notes.append(f"{exc}: left out")
            continue
        entry = _unit_entry(obj, unit, now, honour_active, checks, notes)
        if entry is not None:
            carried.append((obj, entry))
    node_entries = carry_nodes(nodes, carried, notes) if nodes is not None else []
    unit_entries = [entry for _, entry in carried]
    unit_entries.sort(key=lambda e: (e["created"], e["namespace"], e["name"]))
    waiting = {p.value for p in (Phase.BACKOFF, Phase.PREEMPTED, Phase.SCHED_FAILED)}
    for obj in unit_list:
        phase = (obj.get("status") or {}).get("phase")
        meta = obj.get("metadata") or {}
        key = f"QueueUnit {meta.get('namespace')}/{meta.get('name')}"
        if phase in waiting:
            notes.append(f"{key} is {phase}: "
                         "replayed as Enqueued (its back-off deadline is not carried)")
    doc: dict[str, Any] = {
        "name": "snapshot",
        "description": f"koordqueue snapshot of {source or 'a cluster'}",
        "steps": SNAPSHOT_STEPS,
        "oversellRate": str(oversell_rate),
        "quotas": quota_entries,
        "units": unit_entries,
    }
    if nodes is not None:
        doc["nodes"] = node_entries
    history = run_history(unit_list, step_seconds)
    if history is not None:
        doc["history"] = history.to_doc()
    return Snapshot(doc, notes)
