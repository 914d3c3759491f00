"""resource-strategy-fit: Volcano's plugin of that name (v1.14.1) — a node score per resource
(MostAllocated or LeastAllocated, weighted), scarce-resource avoidance (`sra`: keep nodes
with scarce resources for the pods that need them) and a `proportional` filter (a node with
scarce resources keeps cpu and memory in proportion to its idle ones for their pods).

As in Volcano:
- `resourceStrategyFitWeight` (10; negative = 10) times 100 times the weighted mean of each
  requested resource's score: MostAllocated (used + request) / allocatable, LeastAllocated
  (allocatable - used - request) / allocatable; a resource the node does not have scores 0
  but its weight counts; a resource that does not fit makes the node's score 0;
- `resources` maps a resource name, or a prefix ending in one `*` (the longest matching
  prefix wins, an exact name first), to `type` and `weight` (<= 0 -> 1; an unknown type ->
  LeastAllocated); none given: cpu and memory LeastAllocated, weight 1; a bare `*` or a
  pattern with another `*` is dropped with a warning;
- a pod's `volcano.sh/resource-strategy-scoring-type` with `volcano.sh/resource-strategy-weight`
  (JSON resource -> weight) replaces the conf's type and weights for that pod (scored only
  those resources); the type without the weights, or weights that are not JSON, score 0;
- `sra` (`enable`, `resources: "a, b"`, `weight`, `resourceWeight`): a node lacking any
  resource the pod asks for scores 0; otherwise 100 x weight x (1 - the listed scarce
  resources the node has, by weight, over their total weight);
- `proportional` (`enable`, `resources`, `resourceProportion` with `<res>.cpu` and
  `<res>.memory`, default 1): a pod asking none of the listed resources is refused by a node
  whose idle cpu (memory) after it would drop below idle scarce units x the cpu (GB of
  memory) ratio, with Volcano's reason, naming the plugin.

Amounts are compared in Volcano's units (milli-cpu, bytes of memory, milli-units of the rest);
only the proportional rule mixes units, so only it depends on them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import structlog

from koordqueue.domain.resources import CPU, MEMORY
from koordqueue.scheduler.api import NodeInfo, TaskInfo
from koordqueue.scheduler.api import strategy_fit_names as sn
from koordqueue.scheduler.framework.interface import Arguments, ExtensionPoint, Plugin
from koordqueue.scheduler.framework.placement import BoolArray, FloatArray, Scorer
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.interpod import plugin_enabled

log = structlog.get_logger(__name__)
Amounts = Mapping[str, float]
_NANO_PER_MILLI = 1e6
_NANO_PER_UNIT = 1e9
_MIN_RESOURCE = 0.1
"""Volcano's minResource: smaller amounts are not requested."""


@dataclass(frozen=True, slots=True)
class ResourceType:
    """One resource's (or prefix's) scoring type and weight."""

    type: str = sn.LEAST_ALLOCATED
    weight: int = 1


@dataclass(frozen=True, slots=True)
class StrategyFit:
    """`resourceStrategyFitWeight` and `resources` as Volcano reads them (calculateWeight)."""

    weight: int = sn.DEFAULT_WEIGHT
    resources: Mapping[str, ResourceType] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Sra:
    weight: int = 0
    resources: Mapping[str, int] = field(default_factory=dict)
    weight_sum: int = 0


@dataclass(frozen=True, slots=True)
class Proportion:
    cpu: float = 1.0
    memory: float = 1.0


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _warn(key: str, detail: str, action: str) -> None:
    log.warning(sn.BAD_ARGUMENT_WARNING.format(key=key, detail=detail, action=action))


def valid_pattern(pattern: str) -> bool:
    """A name, or a prefix ending in its only `*` (a bare `*` is not)."""
    if "*" not in pattern:
        return True
    return pattern != "*" and pattern.endswith("*") and pattern.count("*") == 1


def parse_strategy_fit(arguments: Mapping[str, object]) -> StrategyFit:
    weight = _int(arguments.get(sn.WEIGHT))
    if weight is None or weight < 0:
        weight = sn.DEFAULT_WEIGHT
    raw = arguments.get(sn.RESOURCES)
    if not isinstance(raw, Mapping) or not raw:
        if raw is not None and not isinstance(raw, Mapping):
            _warn(sn.RESOURCES, "is not a map", "cpu and memory LeastAllocated are used")
        return StrategyFit(weight, {CPU: ResourceType(), MEMORY: ResourceType()})
    resources: dict[str, ResourceType] = {}
    for name, raw_spec in raw.items():
        key = str(name)
        if not valid_pattern(key):
            _warn(f"{sn.RESOURCES}.{key}", "is not a name or a prefix ending in one *",
                  "ignored")
            continue
        spec = raw_spec if isinstance(raw_spec, Mapping) else {}
        w = _int(spec.get("weight")) or 0
        kind = str(spec.get("type") or "")
        resources[key] = ResourceType(
            kind if kind in (sn.MOST_ALLOCATED, sn.LEAST_ALLOCATED) else sn.LEAST_ALLOCATED,
            w if w > 0 else 1,
        )
    return StrategyFit(weight, resources)


def _listed(value: object) -> list[str]:
    return [r.strip() for r in str(value or "").split(",") if r.strip()]


def parse_sra(arguments: Mapping[str, object]) -> Sra:
    raw = arguments.get(sn.SRA)
    if not isinstance(raw, Mapping) or raw.get("enable") is not True:
        return Sra()
    weights = raw.get("resourceWeight")
    weights = weights if isinstance(weights, Mapping) else {}
    resources: dict[str, int] = {}
    for name in _listed(raw.get("resources")):
        w = _int(weights.get(name))
        resources[name] = 1 if w is None or w < 0 else w
    return Sra(_int(raw.get("weight")) or 0, resources, sum(resources.values()))


def parse_proportional(arguments: Mapping[str, object]) -> dict[str, Proportion] | None:
    raw = arguments.get(sn.PROPORTIONAL)
    if not isinstance(raw, Mapping) or raw.get("enable") is not True:
        return None
    rates = raw.get("resourceProportion")
    rates = rates if isinstance(rates, Mapping) else {}

    def rate(key: str) -> float:
        value = rates.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return 1.0
        return float(value) if value >= 0 else 1.0

    return {
        name: Proportion(rate(f"{name}.cpu"), rate(f"{name}.memory"))
        for name in _listed(raw.get("resources"))
    }


def find_config(resource: str, resources: Mapping[str, ResourceType]) -> ResourceType | None:
    """The resource's exact entry, else the one of the longest matching `prefix*`."""
    exact = resources.get(resource)
    if exact is not None:
        return exact
    best, found = "", None
    for key, config in resources.items():
        if "*" in key:
            prefix = key[:-1]
            if resource.startswith(prefix) and len(prefix) > len(best):
                best, found = prefix, config
    return found


def used_finally(request: float, used: float, capacity: float) -> float | None:
    """used + request, None when it exceeds the capacity (validateAndCalcUsedFinally)."""
    final = request + used
    return None if final > capacity else final


def most_requested(request: float, used: float, capacity: float, weight: int) -> float | None:
    """(used + request) x weight / capacity; None when it does not fit."""
    if weight == 0 or capacity == 0:
        return 0.0
    final = used_finally(request, used, capacity)
    return None if final is None else final * weight / capacity


def least_requested(request: float, used: float, capacity: float, weight: int) -> float | None:
    """(capacity - used - request) x weight / capacity; None when it does not fit."""
    if weight == 0 or capacity == 0:
        return 0.0
    final = used_finally(request, used, capacity)
    return None if final is None else (capacity - final) * weight / capacity


_BROKEN: dict[str, int] = {}


def _pod_weights(annotations: tuple[str, str] | None) -> tuple[str, dict[str, int]] | None:
    """(type, weights) from the pod's annotations; None without them; weights `_BROKEN`
    when missing or not a JSON map of integers (Volcano then scores the node 0)."""
    if annotations is None or not annotations[0]:
        return None
    kind, raw = annotations
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, Mapping) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in parsed.values()
    ):
        return kind, _BROKEN
    return kind, {str(k): int(v) for k, v in parsed.items()}


def score(
    request: Amounts, used: Amounts, allocatable: Amounts, fit: StrategyFit,
    pod: tuple[str, str] | None = None,
) -> float:
    """The strategy score of a node for a request (Volcano's Score)."""
    pod_level = _pod_weights(pod)
    if pod_level is not None and pod_level[1] is _BROKEN:
        return 0.0
    total, weight_sum = 0.0, 0
    for name, amount in request.items():
        if amount < _MIN_RESOURCE:
            continue
        if pod_level is not None:
            kind, weights = pod_level
            if name not in weights:
                continue
            w = weights[name]
        else:
            config = find_config(name, fit.resources)
            if config is None:
                continue
            kind, w = config.type, config.weight
        capacity, held = allocatable.get(name, 0.0), used.get(name, 0.0)
        if kind == sn.MOST_ALLOCATED:
            part = most_requested(amount, held, capacity, w)
        elif kind == sn.LEAST_ALLOCATED:
            part = least_requested(amount, held, capacity, w)
        else:
            part = 0.0
        if part is None:
            return 0.0
        total += part
        weight_sum += w
    if weight_sum > 0:
        total /= weight_sum
    return total * sn.MAX_NODE_SCORE * fit.weight


def sra_score(request: Amounts, allocatable: Amounts, sra: Sra) -> float:
    """Scarce-resource avoidance (Volcano's sraScore): 0 on a node lacking a requested
    resource; else 100 x weight x (1 - weight of the scarce resources it has / their total)."""
    for name, amount in request.items():
        if amount >= _MIN_RESOURCE and allocatable.get(name, 0.0) == 0:
            return 0.0
    has = float(sum(w for name, w in sra.resources.items() if allocatable.get(name, 0.0) > 0))
    if sra.weight_sum > 0:
        has = 1.0 - has / sra.weight_sum
    return has * sn.MAX_NODE_SCORE * sra.weight


def proportional_refusal(
    request: Amounts, idle: Amounts, proportional: Mapping[str, Proportion]
) -> str | None:
    """Why the node's idle cpu or memory would fall below its scarce resources' share."""
    for name in proportional:
        if request.get(name, 0.0) > 0:
            return None
    for name, rate in proportional.items():
        if name not in idle:
            continue
        value = idle[name]
        cpu_kept, memory_kept = value * rate.cpu, value * rate.memory * 1000 * 1000
        if (idle.get(CPU, 0.0) - request.get(CPU, 0.0) < cpu_kept
                or idle.get(MEMORY, 0.0) - request.get(MEMORY, 0.0) < memory_kept):
            return sn.PROPORTION_REFUSED.format(resource=name)
    return None


def volcano_units(amounts: Mapping[str, int]) -> dict[str, float]:
    """Nano-units as Volcano counts them: milli-cpu, bytes of memory, milli-units else."""
    return {
        name: value / (_NANO_PER_UNIT if name == MEMORY else _NANO_PER_MILLI)
        for name, value in amounts.items()
    }


class ResourceStrategyFitPlugin(Plugin):
    """Registers the strategy + sra score and the proportional filter."""

    name = sn.PLUGIN_NAME
    quiet = True

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        self.fit = parse_strategy_fit(self.arguments)
        self.sra = parse_sra(self.arguments)
        self.proportional = parse_proportional(self.arguments)

    def on_session_open(self, session: Session) -> None:
        nodes = session.node_list
        size = session.tensor.size
        if self.proportional is not None and plugin_enabled(
            session, self.name, ExtensionPoint.PREDICATE
        ):
            proportional = self.proportional

            def refusal(task: TaskInfo, node: NodeInfo) -> str | None:
                idle = volcano_units(node.accounting()[0])
                return proportional_refusal(volcano_units(task.resreq), idle, proportional)

            def predicate(task: TaskInfo) -> BoolArray | None:
                request = volcano_units(task.resreq)
                if any(request.get(name, 0.0) > 0 for name in proportional):
                    return None
                mask = np.ones(size, dtype=bool)
                for i, node in enumerate(nodes):
                    idle = volcano_units(node.accounting()[0])
                    if proportional_refusal(request, idle, proportional) is not None:
                        mask[i] = False
                return mask

            session.placement.add_dynamic_predicate(predicate, refusal)
        if (self.fit.weight > 0 or self.sra.weight > 0) and plugin_enabled(
            session, self.name, ExtensionPoint.NODE_ORDER
        ):
            session.placement.add_dynamic_score(lambda task: self._scorer(task, nodes, size))

    def node_score(self, task: TaskInfo, node: NodeInfo) -> float:
        """The plugin's score of one node (Volcano's nodeOrderFn)."""
        request = volcano_units(task.resreq)
        allocatable = volcano_units(node.allocatable)
        total = 0.0
        if self.fit.weight > 0:
            used = volcano_units(node.accounting()[1])
            total += score(request, used, allocatable, self.fit, task.strategy_fit)
        if self.sra.weight > 0:
            total += sra_score(request, allocatable, self.sra)
        return total

    def _scorer(self, task: TaskInfo, nodes: list[NodeInfo], size: int) -> Scorer:
        def scores(eff: FloatArray) -> FloatArray:
            out = np.zeros(size, dtype=np.float64)
            for i in np.flatnonzero(eff != -np.inf).tolist():
                out[i] = self.node_score(task, nodes[i])
            return out

        return scores
