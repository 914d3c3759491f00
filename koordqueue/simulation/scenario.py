"""Scenario files: YAML in, validated dataclasses out, with errors that name file, line and field.

A scenario describes quotas (the hierarchy), and units (or Jobs) arriving at time steps and
running for a number of steps; the simulator replays it through the real admission engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from koordqueue.domain import admission_checks as ac
from koordqueue.domain.integrations import (
    INTEGRATIONS,
    Integration,
    InvalidJobError,
    Reference,
    by_kind,
    queue_unit_for,
)
from koordqueue.domain.integrations import leaderworkerset as lws
from koordqueue.domain.integrations.base import Obj
from koordqueue.domain.names import (
    DEFAULT_POLICY,
    QUEUE_POLICY_KEY,
    QUOTA_NAME_LABEL,
    QUOTA_PARENT_LABEL,
    ROOT_QUOTA,
)
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.queue_unit import ADMITTED_PHASES, AdmissionCount, Phase
from koordqueue.domain.reclaimable import PodSetShare
from koordqueue.domain.resources import Resources
from koordqueue.domain.unit_share import pod_set_shares
from koordqueue.scheduler import SchedulerConfig, parse_config
from koordqueue.scheduler.api.task_info import Toleration
from koordqueue.scheduler.framework.config import ConfigError
from koordqueue.simulation.history import RunHistory, history_field
from koordqueue.simulation.scenario_checks import queue_checks, unit_checks, unit_labels
from koordqueue.simulation.scenario_fields import (
    Loader,
    ScenarioError,
    check_keys,
    int_field,
    line_of,
    list_field,
    maps_of,
    name_field,
    plain,
    resources_field,
    str_map,
)
from koordqueue.simulation.scenario_nodes import (
    RUNNING_PODS_FIELD,
    TOLERATIONS_FIELD,
    NodeDef,
    RunningPod,
    nodes_field,
    running_pods_field,
    tolerations_field,
    with_running,
)
from koordqueue.simulation.scenario_podsets import POD_SETS_FIELD, heterogeneous, pod_sets_field


@dataclass(frozen=True, slots=True)
class QuotaDef:
    name: str
    parent: str = ROOT_QUOTA
    min: Resources = field(default_factory=Resources)
    max: Resources = field(default_factory=Resources)
    policy: str = DEFAULT_POLICY
    annotations: Mapping[str, str] = field(default_factory=dict)
    namespace: str = "default"
    admission_checks: tuple[ac.CheckSpec, ...] = ()
    """Its Queue's spec.admissionChecks: an admission on it is a reservation (Reserved)."""

    def as_object(self) -> dict[str, Any]:
        """The ElasticQuota object this definition stands for."""
        labels = {QUEUE_POLICY_KEY: self.policy}
        if self.parent != ROOT_QUOTA:
            labels[QUOTA_PARENT_LABEL] = self.parent
        return {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": labels,
                "annotations": dict(self.annotations),
            },
            "spec": {"min": self.min.to_quantities(), "max": self.max.to_quantities()},
        }


@dataclass(frozen=True, slots=True)
class UnitDef:
    name: str
    namespace: str
    quota: str | None
    resource: Resources
    priority: int = 0
    arrive: int = 0
    duration: int | None = None
    """Steps the workload runs once admitted; None runs forever."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    pods: int = 1
    """Pods of the workload; each requests resource / pods (a gang: all or nothing)."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    consumer_kind: str | None = None
    """The kind of the unit's workload when given as `workload:` (PyTorchJob, JobSet, Pod...)."""
    phase: str = Phase.ENQUEUED.value
    """The phase it arrives in: an admitted phase holds its quota from the start (a snapshot
    of a live cluster, `koordqueue snapshot`); a waiting unit arrives Enqueued."""
    message: str | None = None
    """Its status message as it arrives (a snapshot's unit): a round writes only a change,
    and no creator's first status is written for it."""
    created: float | None = None
    """Creation time on the scenario's clock (seconds, may be negative: before step 0), the
    tie breaker of its queue's order; None: its arrival step."""
    admissions: tuple[AdmissionCount, ...] = ()
    """status.admissions of a unit that arrives admitted (a snapshot's): per pod set the
    replicas admitted, how many run, and reclaimState.replicas (> 0: a queue-level preemption
    marked it, and the next round reclaims it)."""
    active: bool | None = None
    """spec.active as it arrives (a snapshot's unit: persisted on the QueueUnit, whatever its
    Job's annotation says now); None: from the `scheduling.x-k8s.io/active` annotation."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Its labels besides the quota's (those an admission check's labelSelector reads)."""
    checks: tuple[ac.CheckState, ...] = ()
    """A Reserved unit's status.admissionChecks: the replay releases it when every check its
    queue asks for is Ready, backs it off on a Retry or Rejected, else it stays Reserved."""
    attempts: int = 0
    """status.attempts: back-offs so far (the next one's delay grows with it)."""
    pod_sets: tuple[PodSetShare, ...] = ()
    """Pod sets whose requests differ (scenario_podsets.py): placement places each pod with
    its set's request; () splits `resource` evenly over `pods`."""
    tolerations: tuple[Toleration, ...] = ()
    running_pods: tuple[RunningPod, ...] = ()
    """Its workload's pods where they run as it arrives (scenario_nodes.py): bound there."""

    def pod_request(self) -> Resources:
        return Resources({k: v // self.pods for k, v in self.resource.items()})

    def pod_requests(self) -> list[tuple[str, Resources]]:
        """Each pod's name and request, as placement creates them (running pods first)."""
        if not self.pod_sets:
            slots = [(f"{self.name}-{i}", self.pod_request()) for i in range(self.pods)]
        else:
            slots = [(f"{self.name}-{s.name}-{i}", s.request)
                     for s in self.pod_sets for i in range(s.count)]
        return with_running(slots, self.running_pods) if self.running_pods else slots


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    source: str
    steps: int
    oversell_rate: str
    quotas: tuple[QuotaDef, ...]
    units: tuple[UnitDef, ...]
    description: str = ""
    nodes: tuple[NodeDef, ...] = ()
    """With nodes, admitted units are also placed by the scheduler core, pod by pod."""
    scheduler_config: SchedulerConfig | None = None
    """`schedulerConf`: the volcano-scheduler.conf the placement sessions run, parsed and
    checked when the scenario loads (None: the default configuration). Lets a scenario run
    Volcano's plugins (nodegroup, tdm, numa-aware, ...)."""
    history: RunHistory | None = None
    """How long the cluster's finished workloads ran (a snapshot's `history`): what `whatif`
    paces the replay by when no --runtime is given."""


def _scheduler_conf(source: str, doc: Mapping[str, Any]) -> SchedulerConfig | None:
    """The scenario's `schedulerConf` parsed (None when absent or empty: the default); a
    conf that would not load names the field, as the scheduler would refuse it at start."""
    raw = doc.get("schedulerConf")
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise ScenarioError(source, line_of(doc, "schedulerConf"), "schedulerConf",
                            "must be a string (a volcano-scheduler.conf)")
    try:
        return parse_config(raw, f"{source}: schedulerConf")
    except ConfigError as exc:
        raise ScenarioError(source, line_of(doc, "schedulerConf"), "schedulerConf",
                            exc.detail) from exc


_QUOTA_KEYS = {
    "name", "parent", "min", "max", "policy", "annotations", "namespace", ac.CHECKS_FIELD,
}
_UNIT_KEYS = {
    "name",
    "namespace",
    "quota",
    "resource",
    "priority",
    "arrive",
    "duration",
    "annotations",
    "pods",
    "nodeSelector",
    "workload",
    "references",
    "phase",
    "message",
    "created",
    "consumerKind",
    "active",
    "admissions",
    "labels",
    ac.CHECKS_FIELD,
    "attempts",
    POD_SETS_FIELD,
    TOLERATIONS_FIELD,
    RUNNING_PODS_FIELD,
}
_ADMISSION_KEYS = {"name", "replicas", "running", "reclaim"}
_WORKLOAD_EXCLUSIVE = ("name", "namespace", "resource", "priority", "pods")
"""Unit keys a `workload:` manifest decides (its unit is built as the controller builds it)."""
_TOP_KEYS = {
    "name", "description", "steps", "oversellRate", "quotas", "units", "nodes", "schedulerConf",
    "history",
}


def _resolved(
    source: str, u: Mapping[str, Any], where: str, integration: Integration, obj: Obj
) -> Integration:
    """The integration reading the workload's references (a TrainJob's runtime) from the
    unit's `references:` list, matched by apiVersion, kind, name and (when namespaced)
    namespace, as the controller reads them from the API; one not listed is not there."""
    raw = u.get("references", [])
    if not isinstance(raw, list) or not all(isinstance(r, Mapping) for r in raw):
        line, field_ = line_of(u, "references"), f"{where}.references"
        raise ScenarioError(source, line, field_, "must be a list of objects")
    given = [plain(r) for r in raw]
    found: dict[Reference, Obj | None] = {
        ref: next((r for r in given if _names(r, ref)), None)
        for ref in integration.references(obj)
    }
    return integration.resolved(found)


def _names(obj: Mapping[str, Any], ref: Reference) -> bool:
    """`obj` is the object `ref` names (a namespaced one without a namespace: default)."""
    m = obj.get("metadata") or {}
    return (
        (obj.get("apiVersion"), obj.get("kind")) == (ref.kind.api_version, ref.kind.kind)
        and m.get("name") == ref.name
        and (ref.namespace is None or m.get("namespace", "default") == ref.namespace)
    )


def _workload_units(source: str, u: Mapping[str, Any], where: str) -> list[UnitDef]:
    """The units of a `workload:` manifest: one, or a LeaderWorkerSet's one per group (the
    pods its controller makes, as the pod path queues them)."""
    raw = u["workload"]
    if not (isinstance(raw, Mapping) and raw.get("kind") == lws.LWS_KIND.kind):
        return [_workload_unit(source, u, where)]
    obj = plain(raw)
    field_ = f"{where}.workload"
    try:
        groups = [lws.group_pods(obj, g) for g in range(lws.replicas(obj))]
    except InvalidJobError as exc:
        raise ScenarioError(source, line_of(u, "workload"), field_, str(exc)) from exc
    return [_workload_unit(source, u, where, pods) for pods in groups]


def _workload_unit(
    source: str, u: Mapping[str, Any], where: str, group: list[dict[str, Any]] | None = None
) -> UnitDef:
    """A unit given as a workload manifest of a job integration (issue 13, part 4).

    `workload:` is one object (Job, PyTorchJob, MPIJob, JobSet, Pod) or the list of a pod
    group's Pods (`group`: a LeaderWorkerSet's group, made from it). The unit is what the
    controller would create for it: its name (with the kind's suffix), namespace, resource
    (every pod set's count x per-pod request), priority (the pods' spec.priority: no
    PriorityClasses in a scenario), pods (the pod sets' counts) and the quota from the quota
    label, unless `quota:` overrides it.
    """
    raw = u["workload"]
    line = line_of(u, "workload")
    field_ = f"{where}.workload"
    given = [key for key in _WORKLOAD_EXCLUSIVE if key in u]
    if given:
        raise ScenarioError(
            source, line, f"{where}.{given[0]}", "is decided by workload: leave it out"
        )
    members = (
        group  # (a LeaderWorkerSet's)
        if group is not None
        else plain(raw) if isinstance(raw, list) else [plain(raw)]
    )
    if not members or not all(isinstance(m, dict) for m in members):
        raise ScenarioError(source, line, field_, "must be an object or a list of Pods")
    kind, api_version = members[0].get("kind"), members[0].get("apiVersion")
    integration = by_kind(str(kind), str(api_version)) if kind else None
    if integration is None:
        known = ", ".join(
            f"{i.workload.api_version} {i.workload.kind}" for i in INTEGRATIONS.values()
        )
        raise ScenarioError(
            source, line, f"{field_}.kind", f"{api_version} {kind} is not queued (known: {known})"
        )
    for member in members:
        member.setdefault("metadata", {}).setdefault("namespace", "default")
        member["metadata"].setdefault("uid", f"scenario-{member['metadata'].get('name')}")
    integration = _resolved(source, u, where, integration, members[0])
    try:
        expected = integration.expected_members(members)
        body = queue_unit_for(integration, members)
    except (InvalidJobError, InvalidQuantityError, ValueError) as exc:
        raise ScenarioError(source, line, field_, str(exc)) from exc
    if len(members) < expected:
        raise ScenarioError(
            source, line, field_, f"a group of {expected} pods lists {len(members)}"
        )
    quota = u.get("quota", body["metadata"]["labels"].get(QUOTA_NAME_LABEL))
    if quota is not None and not isinstance(quota, str):
        raise ScenarioError(source, line_of(u, "quota"), f"{where}.quota", "must be a string")
    spec = body["spec"]
    try:
        resource = Resources.parse(spec["resource"], f"{field_}.resource")
    except InvalidQuantityError as exc:
        raise ScenarioError(source, line, field_, str(exc)) from exc
    pods = sum(int(ps.get("count") or 0) for ps in spec["podSet"]) or 1
    try:
        pod_sets = heterogeneous(pod_set_shares(spec["podSet"]))
    except ValueError as exc:  # (its quantities were read once already, above)
        raise ScenarioError(source, line, field_, str(exc)) from exc
    return UnitDef(
        name=body["metadata"]["name"],
        namespace=body["metadata"]["namespace"],
        quota=quota,
        resource=resource,
        priority=int(spec.get("priority") or 0),
        arrive=int_field(source, u, "arrive", where, 0) or 0,
        duration=int_field(source, u, "duration", where, None),
        annotations={
            **{str(k): str(v) for k, v in body["metadata"]["annotations"].items()},
            **str_map(source, u, "annotations", where),
        },
        pods=pods,
        node_selector=str_map(source, u, "nodeSelector", where),
        consumer_kind=integration.workload.kind,
        labels={str(k): str(v) for k, v in body["metadata"]["labels"].items()
                if k != QUOTA_NAME_LABEL},
        pod_sets=pod_sets,
        tolerations=tolerations_field(source, u, where),
        running_pods=running_pods_field(source, u, where, Phase.ENQUEUED.value, False, {}),
    )


ARRIVAL_PHASES: tuple[str, ...] = (
    Phase.ENQUEUED.value, *sorted(p.value for p in ADMITTED_PHASES)
)
"""Phases a unit may arrive in: waiting, or holding its quota (a snapshot's admitted units)."""
ADMITTED_VALUES: frozenset[str] = frozenset(p.value for p in ADMITTED_PHASES)


def _arrival(
    source: str, u: Mapping[str, Any], where: str, asked: Mapping[str, tuple[ac.CheckSpec, ...]],
    nodes: Mapping[str, NodeDef],
) -> dict[str, Any]:
    """A unit's `phase`, `message`, `created`, `consumerKind` (spec.consumerRef.kind),
    `active` (spec.active), `admissions`, `labels`, `admissionChecks`, `attempts` and
    `runningPods`: the state a snapshot caught it in (`asked`: each quota's admission checks;
    `nodes`: the scenario's, by name)."""
    phase = u.get("phase", Phase.ENQUEUED.value)
    if phase not in ARRIVAL_PHASES:
        raise ScenarioError(
            source, line_of(u, "phase"), f"{where}.phase",
            f"must be one of {', '.join(ARRIVAL_PHASES)}, got {phase!r}",
        )
    message = u.get("message")
    if message is not None and not isinstance(message, str):
        raise ScenarioError(source, line_of(u, "message"), f"{where}.message", "must be a string")
    created = u.get("created")
    if created is not None and (
        isinstance(created, bool) or not isinstance(created, (int, float))
    ):
        raise ScenarioError(
            source, line_of(u, "created"), f"{where}.created", f"must be a number, got {created!r}"
        )
    kind = u.get("consumerKind")
    if kind is not None and (not isinstance(kind, str) or not kind):
        raise ScenarioError(
            source, line_of(u, "consumerKind"), f"{where}.consumerKind", "must be a kind name"
        )
    active = u.get("active")
    if active is not None and not isinstance(active, bool):
        raise ScenarioError(
            source, line_of(u, "active"), f"{where}.active",
            f"must be true or false, got {active!r}",
        )
    admissions: list[AdmissionCount] = []
    listed = list_field(source, u, "admissions")
    for at, a in maps_of(source, u, "admissions", listed, _ADMISSION_KEYS, where):
        if phase not in ADMITTED_VALUES:
            raise ScenarioError(source, line_of(u, "admissions"), f"{where}.admissions",
                                f"only a unit that arrives admitted has admissions, not {phase}")
        name = a.get("name", "")
        if not isinstance(name, str):
            raise ScenarioError(
                source, line_of(a, "name"), f"{at}.name", "must be a string"
            )
        replicas = int_field(source, a, "replicas", at, 1) or 0
        running = int_field(source, a, "running", at, None)
        reclaim = int_field(source, a, "reclaim", at, 0) or 0
        if reclaim > replicas or (running is not None and running > replicas):
            raise ScenarioError(source, line_of(u, "admissions"), at,
                                "running and reclaim must not exceed replicas")
        admissions.append(AdmissionCount(name, replicas, running, reclaim))
    return {
        "consumer_kind": kind,
        "phase": phase,
        "message": message,
        "created": None if created is None else float(created),
        "active": active,
        "admissions": tuple(admissions),
        "labels": unit_labels(source, u, where),
        "checks": unit_checks(source, u, where, phase, asked),
        "attempts": int_field(source, u, "attempts", where, 0) or 0,
        "running_pods": running_pods_field(source, u, where, phase, phase in ADMITTED_VALUES,
                                           nodes),
    }


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    """Parse and validate scenario YAML; every error is a ScenarioError with a location."""
    loader = Loader(text)
    loader.name = source
    try:
        doc = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise ScenarioError(
            source, mark.line + 1 if mark else None, "<yaml>", str(exc.problem or exc)
        ) from exc
    finally:
        loader.dispose()
    if not isinstance(doc, Mapping):
        raise ScenarioError(source, 1, "<document>", "must be a map with quotas and units")
    check_keys(source, doc, _TOP_KEYS, "scenario")
    quotas_raw = list_field(source, doc, "quotas")
    units_raw = list_field(source, doc, "units")
    quotas: list[QuotaDef] = []
    for where, q in maps_of(source, doc, "quotas", quotas_raw, _QUOTA_KEYS):
        parent = q.get("parent", ROOT_QUOTA)
        if not isinstance(parent, str) or not parent:
            raise ScenarioError(
                source, line_of(q, "parent"), f"{where}.parent", "must be a non-empty string"
            )
        policy = q.get("policy", DEFAULT_POLICY)
        if not isinstance(policy, str):
            raise ScenarioError(source, line_of(q, "policy"), f"{where}.policy", "must be a string")
        quotas.append(
            QuotaDef(
                name=name_field(source, q, where),
                parent=parent,
                min=resources_field(source, q, "min", where),
                max=resources_field(source, q, "max", where),
                policy=policy,
                annotations=str_map(source, q, "annotations", where),
                namespace=str(q.get("namespace") or "default"),
                admission_checks=queue_checks(source, q, where),
            )
        )
    asked = {q.name: q.admission_checks for q in quotas}
    nodes = nodes_field(source, doc)
    by_name = {n.name: n for n in nodes}
    units: list[UnitDef] = []
    for where, u in maps_of(source, doc, "units", units_raw, _UNIT_KEYS):
        if "workload" in u:
            units.extend(_workload_units(source, u, where))
            continue
        quota = u.get("quota")
        if quota is not None and not isinstance(quota, str):
            raise ScenarioError(source, line_of(u, "quota"), f"{where}.quota", "must be a string")
        priority = u.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise ScenarioError(
                source, line_of(u, "priority"), f"{where}.priority", "must be an integer"
            )
        pods = int_field(source, u, "pods", where, 1) or 0
        if pods < 1:
            raise ScenarioError(source, line_of(u, "pods"), f"{where}.pods", "must be >= 1")
        resource = resources_field(source, u, "resource", where)
        pod_sets = pod_sets_field(source, u, where)
        if pod_sets:
            pods = sum(p.count for p in pod_sets)
        elif any(v % pods for v in resource.values()):
            raise ScenarioError(
                source,
                line_of(u, "resource"),
                f"{where}.resource",
                f"must divide evenly into {pods} pods",
            )
        units.append(
            UnitDef(
                name=name_field(source, u, where),
                namespace=str(u.get("namespace") or "default"),
                quota=quota,
                resource=resource,
                priority=priority,
                arrive=int_field(source, u, "arrive", where, 0) or 0,
                duration=int_field(source, u, "duration", where, None),
                annotations=str_map(source, u, "annotations", where),
                pods=pods,
                node_selector=str_map(source, u, "nodeSelector", where),
                pod_sets=pod_sets,
                tolerations=tolerations_field(source, u, where),
                **_arrival(source, u, where, asked, by_name),
            )
        )
    steps = int_field(source, doc, "steps", "scenario", None)
    if steps is None:
        last = max((u.arrive + (u.duration or 0) for u in units), default=0)
        steps = last + 2
    rate = doc.get("oversellRate", 1)
    if isinstance(rate, bool) or not isinstance(rate, (int, float, str)):
        raise ScenarioError(
            source, line_of(doc, "oversellRate"), "oversellRate", "must be a number"
        )
    return Scenario(
        name=str(doc.get("name") or Path(source).stem),
        source=source,
        steps=steps,
        oversell_rate=str(rate),
        quotas=tuple(quotas),
        units=tuple(units),
        description=str(doc.get("description") or ""),
        nodes=nodes,
        scheduler_config=_scheduler_conf(source, doc),
        history=history_field(source, doc),
    )


def load_scenario(path: str | Path) -> Scenario:
    """Read and parse a scenario file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(str(p), None, "<file>", exc.strerror or str(exc)) from exc
    return parse_scenario(text, str(p))
