"""What `koordqueue snapshot --nodes` carries for placement (issue 29 point 1: running pods).

The nodes and pods come as the scheduler's cache reads them (`whatif --nodes`'s reader: its
ready nodes converted by the scheduler's own conversion, and the pods it keeps). Written out:
each node (allocatable, labels, taints, cordoned); each admitted unit's running pods
(`runningPods`: node and the pod's own request, by the rule the scheduler reads a pod with),
found by ownership: a pod the unit owns (a pod group), or whose owner the unit's owner is
(a Job's, a PyTorchJob's pods); every other running pod as its node's `occupied`. Also
each unit's pods' nodeSelector and tolerations, from its pod sets' templates. Bad input (a
pod on a node that is not there, a quantity that cannot be read, pod sets that disagree on
where to run) is a note, never a failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from koordqueue.domain.integrations.base import InvalidJobError, pod_requests
from koordqueue.domain.queue_unit import ADMITTED_PHASES, Phase
from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import NodeInfo
from koordqueue.scheduler.api.task_info import Toleration
from koordqueue.simulation.scenario_nodes import (
    RUNNING_PODS_FIELD,
    TOLERATIONS_FIELD,
    taint_entries,
    toleration_entries,
)

FINISHED_POD_PHASES: Final = frozenset({"Succeeded", "Failed"})
_HOLDING: Final = frozenset(p.value for p in ADMITTED_PHASES) - {Phase.RESERVED.value}
"""Phases whose workload may run (a Reserved unit's is suspended until its checks answer)."""


@dataclass(frozen=True, slots=True)
class LiveNodes:
    """What the scheduler's cache read: its ready nodes and the pods it keeps (raw)."""

    nodes: Sequence[NodeInfo]
    pods: Sequence[Mapping[str, Any]]
    notes: Sequence[str] = ()
    """What the reader left out (a node not Ready, an allocatable it cannot read)."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: Mapping[str, Any]) -> str:
    m = _meta(obj)
    return f"{m.get('namespace') or 'default'}/{m.get('name')}"


def _owner_uids(obj: Mapping[str, Any]) -> list[str]:
    refs = _meta(obj).get("ownerReferences") or []
    return [str(r["uid"]) for r in refs if isinstance(r, Mapping) and r.get("uid")]


def _templates(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    sets = (obj.get("spec") or {}).get("podSet") or []
    return [((s.get("template") or {}).get("spec") or {}) for s in sets
            if isinstance(s, Mapping) and (s.get("count") or 0) != 0]


def _tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"),
                   str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in spec.get("tolerations") or [] if isinstance(t, Mapping)
    )


def placement_fields(obj: Mapping[str, Any], notes: list[str]) -> dict[str, Any]:
    """A unit's pods' nodeSelector and tolerations, from its pod sets' templates. A scenario
    says one of each per unit: pod sets that disagree, and required node affinity (which a
    scenario cannot say), are noted and left out."""
    templates = _templates(obj)
    if not templates:
        return {}
    key = f"QueueUnit {_key(obj)}"
    out: dict[str, Any] = {}
    selectors = [{str(k): str(v) for k, v in (t.get("nodeSelector") or {}).items()}
                 for t in templates]
    tolerations = [_tolerations(t) for t in templates]
    if any(s != selectors[0] for s in selectors):
        notes.append(f"{key}: its pod sets ask for different nodeSelectors: none carried")
    elif selectors[0]:
        out["nodeSelector"] = dict(sorted(selectors[0].items()))
    if any(t != tolerations[0] for t in tolerations):
        notes.append(f"{key}: its pod sets tolerate different taints: none carried")
    elif tolerations[0]:
        out[TOLERATIONS_FIELD] = toleration_entries(tolerations[0])
    if any(((t.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") for t in templates):
        notes.append(f"{key}: its required node affinity is not carried: the replay may "
                     "place its pods where the scheduler would not")
    return out


def _node_entry(node: NodeInfo, occupied: tuple[int, Resources] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": node.name, "allocatable": node.allocatable.to_quantities()}
    if node.labels:
        entry["labels"] = dict(sorted(node.labels.items()))
    if node.taints:
        entry["taints"] = taint_entries(node.taints)
    if node.unschedulable:
        entry["unschedulable"] = True
    if occupied is not None:
        entry["occupied"] = {"pods": occupied[0], "request": occupied[1].to_quantities()}
    return entry


def _running(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (
        (pod.get("status") or {}).get("phase") not in FINISHED_POD_PHASES)


def carry_nodes(
    live: LiveNodes, units: Iterable[tuple[Mapping[str, Any], dict[str, Any]]],
    notes: list[str],
) -> list[dict[str, Any]]:
    """The scenario's `nodes`; each unit entry (paired with its object) gets its placement
    fields and, when admitted, its `runningPods`. Notes for what cannot be carried."""
    notes.extend(live.notes)
    names = {n.name for n in live.nodes}
    owned: dict[str, dict[str, Any]] = {}  # owner uid -> the admitted unit's entry
    holding: list[tuple[str, dict[str, Any]]] = []
    for obj, entry in units:
        entry.update(placement_fields(obj, notes))
        if entry.get("phase") in _HOLDING:
            holding.append((_key(obj), entry))
            for uid in _owner_uids(obj):
                owned.setdefault(uid, entry)
    occupied: dict[str, tuple[int, Resources]] = {}
    for pod in sorted(filter(_running, live.pods), key=_key):
        key, node = _key(pod), str(pod["spec"]["nodeName"])
        if node not in names:
            notes.append(f"Pod {key} runs on node {node}, which is not among the ready nodes "
                         "read: left out")
            continue
        try:
            request = pod_requests(pod.get("spec") or {}, key, "spec", "Pod")
        except InvalidJobError as exc:
            notes.append(f"Pod {key}: {exc}: counted as requesting nothing (as the scheduler "
                         "counts it)")
            request = Resources()
        uid = str(_meta(pod).get("uid") or "")
        owner = next((u for u in (uid, *_owner_uids(pod)) if u in owned), None)
        if owner is None:
            count, held = occupied.get(node, (0, Resources()))
            occupied[node] = (count + 1, held + request)
            continue
        owned[owner].setdefault(RUNNING_PODS_FIELD, []).append({
            "name": str(_meta(pod).get("name")), "node": node,
            "request": request.to_quantities(),
        })
    for key, entry in holding:
        if RUNNING_PODS_FIELD not in entry:
            notes.append(f"QueueUnit {key} is admitted and none of its pods runs on a node "
                         "(or they are not its own: docs/whatif.md): the replay places them")
    return [_node_entry(n, occupied.get(n.name)) for n in sorted(live.nodes, key=lambda n: n.name)]
