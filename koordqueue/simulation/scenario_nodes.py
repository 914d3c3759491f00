"""A scenario's nodes and what already runs on them (issue 29 point 1: running pods' requests).

`nodes:` are what placement places admitted units' pods on: allocatable, labels, taints,
`unschedulable` (cordoned), a Numatopology's spec, measured usage, and `occupied`: the pods
on the node that belong to no unit of the scenario (DaemonSets, workloads that are not
queued), counted and their requests summed, which the replay keeps taken. A unit that arrives
admitted may list `runningPods` [{name, node, request}]: its workload's pods where they run
(what `koordqueue snapshot --nodes` writes), which the replay starts bound there, each with its
own request, placing only the rest of the unit's pods. A unit's `tolerations` are its pods'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import NodeInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api.node_usage import CURRENT, NodeUsage
from koordqueue.scheduler.api.task_info import Taint, Toleration
from koordqueue.simulation.scenario_fields import (
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

RUNNING_PODS_FIELD: Final = "runningPods"
TOLERATIONS_FIELD: Final = "tolerations"
EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
OPERATORS: Final = ("Equal", "Exists")
_NODE_KEYS = {
    "name", "allocatable", "labels", "numatopology", "usage", "taints", "unschedulable",
    "occupied",
}
_TAINT_KEYS = {"key", "value", "effect"}
_TOLERATION_KEYS = {"key", "operator", "value", "effect"}
_OCCUPIED_KEYS = {"pods", "request"}
_RUNNING_KEYS = {"name", "node", "request"}


@dataclass(frozen=True, slots=True)
class NodeDef:
    """A node the scheduler may place admitted units' pods on."""

    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    numatopology: Mapping[str, Any] | None = None
    """The spec of the node's Numatopology (nodeinfo.volcano.sh), for numa-aware."""
    usage: NodeUsage | None = None
    """Measured load (`usage: {cpu: 90, memory: 40}`, percent), for usage and rescheduling."""
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    """spec.unschedulable (cordoned): nothing new is placed there; what runs stays."""
    occupied_pods: int = 0
    occupied: Resources = field(default_factory=Resources)
    """Pods of no unit on it (`occupied: {pods, request}`): they hold their summed request."""

    def node_info(self) -> NodeInfo:
        """The node as a session sees it, the pods of no unit accounted as the scheduler's
        cache accounts other schedulers' pods (running tasks of no job)."""
        node = NodeInfo(self.name, self.allocatable, labels=dict(self.labels),
                        taints=self.taints, unschedulable=self.unschedulable)
        for i in range(self.occupied_pods):  # (each counts against `pods`; one holds it all)
            node.add_task(TaskInfo(f"occupied/{self.name}/{i}", f"occupied-{i}", "",
                                   resreq=self.occupied if i == 0 else Resources(),
                                   status=TaskStatus.RUNNING, node_name=self.name))
        return node


@dataclass(frozen=True, slots=True)
class RunningPod:
    """One of an admitted unit's pods where it runs, with its own request."""

    name: str
    node: str
    request: Resources


def _numatopology(source: str, obj: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    raw = obj.get("numatopology")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ScenarioError(source, line_of(obj, "numatopology"), f"{where}.numatopology",
                            "must be a map (a Numatopology's spec)")
    spec: dict[str, Any] = plain(raw)
    return spec


def _usage(source: str, obj: Mapping[str, Any], where: str) -> NodeUsage | None:
    raw = obj.get("usage")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ScenarioError(source, line_of(obj, "usage"), f"{where}.usage",
                            "must be a map {cpu: <percent>, memory: <percent>}")
    check_keys(source, raw, {"cpu", "memory"}, f"{where}.usage")
    values: dict[str, float | None] = {}
    for key in ("cpu", "memory"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not 0 <= value <= 100):
            raise ScenarioError(source, line_of(raw, key), f"{where}.usage.{key}",
                                f"must be a percent from 0 to 100, got {value!r}")
        values[key] = None if value is None else float(value)
    return NodeUsage(values["cpu"], values["memory"], CURRENT)


def _text(source: str, obj: Mapping[str, Any], key: str, where: str, default: str = "") -> str:
    value = obj.get(key, default)
    if not isinstance(value, str):
        raise ScenarioError(source, line_of(obj, key), f"{where}.{key}", "must be a string")
    return value


def _one_of(source: str, obj: Mapping[str, Any], key: str, where: str, allowed: Sequence[str],
            *, default: str) -> str:
    value = _text(source, obj, key, where, default)
    if value not in allowed:
        raise ScenarioError(source, line_of(obj, key), f"{where}.{key}",
                            f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _taints(source: str, n: Mapping[str, Any], where: str) -> tuple[Taint, ...]:
    out = []
    for at, t in maps_of(source, n, "taints", list_field(source, n, "taints"), _TAINT_KEYS,
                         where):
        key = _text(source, t, "key", at)
        if not key:
            raise ScenarioError(source, line_of(t, "key"), f"{at}.key", "must not be empty")
        out.append(Taint(key, _text(source, t, "value", at),
                         _one_of(source, t, "effect", at, EFFECTS, default="NoSchedule")))
    return tuple(out)


def tolerations_field(source: str, u: Mapping[str, Any], where: str) -> tuple[Toleration, ...]:
    """A unit's `tolerations`, as a pod spec says them (Kubernetes' rules: Exists takes no
    value; an empty key only with Exists, which tolerates every taint)."""
    out = []
    listed = list_field(source, u, TOLERATIONS_FIELD)
    for at, t in maps_of(source, u, TOLERATIONS_FIELD, listed, _TOLERATION_KEYS, where):
        key, value = _text(source, t, "key", at), _text(source, t, "value", at)
        operator = _one_of(source, t, "operator", at, OPERATORS, default="Equal")
        effect = _text(source, t, "effect", at)
        if effect and effect not in EFFECTS:
            raise ScenarioError(source, line_of(t, "effect"), f"{at}.effect",
                                f"must be empty or one of {', '.join(EFFECTS)}, got {effect!r}")
        if operator == "Exists" and value:
            raise ScenarioError(source, line_of(t, "value"), f"{at}.value",
                                "must be empty with operator Exists")
        if operator == "Equal" and not key:
            raise ScenarioError(source, line_of(t, "key"), f"{at}.key",
                                "must not be empty with operator Equal")
        out.append(Toleration(key, operator, value, effect))
    return tuple(out)


def _occupied(source: str, n: Mapping[str, Any], where: str) -> tuple[int, Resources]:
    raw = n.get("occupied")
    if raw is None:
        return 0, Resources()
    at = f"{where}.occupied"
    if not isinstance(raw, Mapping):
        raise ScenarioError(source, line_of(n, "occupied"), at, "must be a map {pods, request}")
    check_keys(source, raw, _OCCUPIED_KEYS, at)
    pods = int_field(source, raw, "pods", at, 1) or 0
    if pods < 1:
        raise ScenarioError(source, line_of(raw, "pods"), f"{at}.pods", "must be >= 1")
    return pods, resources_field(source, raw, "request", at)


def nodes_field(source: str, doc: Mapping[str, Any]) -> tuple[NodeDef, ...]:
    """The scenario's `nodes`; names are unique."""
    nodes: list[NodeDef] = []
    for where, n in maps_of(source, doc, "nodes", list_field(source, doc, "nodes"), _NODE_KEYS):
        name = name_field(source, n, where)
        if any(d.name == name for d in nodes):
            raise ScenarioError(source, line_of(n, "name"), f"{where}.name",
                                f"duplicate node {name!r}")
        unschedulable = n.get("unschedulable", False)
        if not isinstance(unschedulable, bool):
            raise ScenarioError(source, line_of(n, "unschedulable"), f"{where}.unschedulable",
                                f"must be true or false, got {unschedulable!r}")
        pods, occupied = _occupied(source, n, where)
        nodes.append(NodeDef(
            name=name,
            allocatable=resources_field(source, n, "allocatable", where),
            labels=str_map(source, n, "labels", where),
            numatopology=_numatopology(source, n, where),
            usage=_usage(source, n, where),
            taints=_taints(source, n, where),
            unschedulable=unschedulable,
            occupied_pods=pods,
            occupied=occupied,
        ))
    return tuple(nodes)


def running_pods_field(  # noqa: PLR0917 - the reader's usual arguments, and what it checks
    source: str, u: Mapping[str, Any], where: str, phase: str, admitted: bool,
    nodes: Mapping[str, NodeDef],
) -> tuple[RunningPod, ...]:
    """A unit's `runningPods`: only on a unit that arrives admitted and not Reserved (whose
    workload is suspended), each on a node of the scenario, names unique."""
    listed = list_field(source, u, RUNNING_PODS_FIELD)
    out: list[RunningPod] = []
    for at, p in maps_of(source, u, RUNNING_PODS_FIELD, listed, _RUNNING_KEYS, where):
        if not admitted or phase == "Reserved":
            raise ScenarioError(source, line_of(u, RUNNING_PODS_FIELD),
                                f"{where}.{RUNNING_PODS_FIELD}",
                                f"only a unit that arrives admitted and not Reserved has "
                                f"running pods, not {phase}")
        name = name_field(source, p, at)
        if any(r.name == name for r in out):
            raise ScenarioError(source, line_of(p, "name"), f"{at}.name",
                                f"duplicate pod {name!r}")
        node = _text(source, p, "node", at)
        if node not in nodes:
            known = ", ".join(sorted(nodes)) or "none"
            raise ScenarioError(source, line_of(p, "node"), f"{at}.node",
                                f"no node {node!r} in the scenario (nodes: {known})")
        out.append(RunningPod(name, node, resources_field(source, p, "request", at)))
    return tuple(out)


def with_running(
    slots: Sequence[tuple[str, Resources]], running: Sequence[RunningPod]
) -> list[tuple[str, Resources]]:
    """A unit's pods as placement sees them: its running pods first (their names and own
    requests), then the slots none of them fills. A running pod fills the slot of its own
    name, else one asking for its request, else the first one left."""
    rest = list(slots)
    unmatched = []
    for pod in running:
        at = next((i for i, (name, _) in enumerate(rest) if name == pod.name), None)
        if at is None:
            unmatched.append(pod)
        else:
            del rest[at]
    for pod in unmatched:
        at = next((i for i, (_, r) in enumerate(rest) if r == pod.request), 0)
        if rest:
            del rest[at]
    return [(p.name, p.request) for p in running] + rest


def taint_entries(taints: Sequence[Taint]) -> list[dict[str, str]]:
    """`taints` as a scenario says them (the value only when there is one)."""
    return [{"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
            for t in taints]


def toleration_entries(tolerations: Sequence[Toleration]) -> list[dict[str, str]]:
    """`tolerations` as a scenario says them (defaults left out)."""
    out = []
    for t in tolerations:
        entry = {"key": t.key} if t.key else {}
        if t.operator != "Equal":
            entry["operator"] = t.operator
        if t.value:
            entry["value"] = t.value
        if t.effect:
            entry["effect"] = t.effect
        out.append(entry)
    return out
