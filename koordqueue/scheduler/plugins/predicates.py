"""predicates: node selector, taints/tolerations, required node affinity, host ports,
cordoned nodes, inter-pod (anti-)affinity and topology spread (DoNotSchedule).

Label/taint checks are static per session and cached per constraint set; inter-pod
affinity and spreading are query-time filters over the session's pod counts
(`scheduler/interpod/`). Arguments (Volcano's): `predicate.PodAffinityEnable` and
`predicate.PodTopologySpreadEnable`, both true by default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

import numpy as np

from koordqueue.domain.quantity import NANO
from koordqueue.domain.resources import PODS
from koordqueue.scheduler.api import (
    HostPort,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    TaskInfo,
    Toleration,
    names,
)
from koordqueue.scheduler.api.selectors import LabelSelector
from koordqueue.scheduler.api.task_info import TopologySpreadConstraint
from koordqueue.scheduler.framework.interface import ExtensionPoint, Plugin
from koordqueue.scheduler.framework.placement import BoolArray, IntArray, ScalarPredicate
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.interpod import (
    INTER_POD_AFFINITY,
    POD_TOPOLOGY_SPREAD,
    InterPodAffinity,
    PodTopologySpread,
    included_nodes,
    plugin_enabled,
    pod_counts,
    timed,
)

POD_AFFINITY_ENABLE: Final = "predicate.PodAffinityEnable"
POD_TOPOLOGY_SPREAD_ENABLE: Final = "predicate.PodTopologySpreadEnable"

_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
_UNSCHEDULABLE_TAINT = Taint(names.UNSCHEDULABLE_TAINT_KEY, "", "NoSchedule")
_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_WILDCARD_IPS = frozenset({"", "0.0.0.0", "::"})
NODE_NAME_FIELD: Final = "metadata.name"


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' toleration matching (empty key + Exists tolerates everything)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.operator == "Exists":
        return not toleration.key or toleration.key == taint.key
    return toleration.key == taint.key and toleration.value == taint.value


def untolerated_taint(
    tolerations: tuple[Toleration, ...], taints: tuple[Taint, ...]
) -> Taint | None:
    """The first blocking taint none of the tolerations covers."""
    for taint in taints:
        if taint.effect in _BLOCKING_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One match expression against node labels."""
    op = req.operator
    present = req.key in labels
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op == "In":
        return present and labels[req.key] in req.values
    if op == "NotIn":
        return not present or labels[req.key] not in req.values
    if op in ("Gt", "Lt") and present and len(req.values) == 1:
        try:
            have, want = int(labels[req.key]), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def field_matches(req: NodeSelectorRequirement, node_name: str) -> bool:
    """One match field: only `metadata.name` with In or NotIn exists (API validation)."""
    if req.key != NODE_NAME_FIELD:
        return False
    if req.operator == "In":
        return node_name in req.values
    if req.operator == "NotIn":
        return node_name not in req.values
    return False


def term_matches(term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str = "") -> bool:
    """All expressions and fields of a term hold (an empty term matches nothing, as in
    Kubernetes)."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(requirement_matches(r, labels) for r in term.match_expressions) and all(
        field_matches(r, node_name) for r in term.match_fields
    )


def invalid_requirement(req: NodeSelectorRequirement) -> str | None:
    """Why an expression is malformed, or None."""
    if req.operator not in _OPERATORS:
        return f"invalid node affinity operator {req.operator!r} for key {req.key!r}"
    if req.operator in ("In", "NotIn") and not req.values:
        return f"node affinity operator {req.operator} for key {req.key!r} needs values"
    if req.operator in ("Exists", "DoesNotExist") and req.values:
        return f"node affinity operator {req.operator} for key {req.key!r} takes no values"
    integer = len(req.values) == 1 and req.values[0].lstrip("-").isdigit()
    if req.operator in ("Gt", "Lt") and not integer:
        return f"node affinity operator {req.operator} for key {req.key!r} needs one integer value"
    return None


def port_conflict(wanted: HostPort, used: HostPort) -> bool:
    """Same port and protocol on overlapping addresses."""
    return (
        wanted.port == used.port
        and wanted.protocol == used.protocol
        and (
            wanted.host_ip == used.host_ip
            or wanted.host_ip in _WILDCARD_IPS
            or used.host_ip in _WILDCARD_IPS
        )
    )


def static_reason(task: TaskInfo, node: NodeInfo) -> str | None:
    """Why the node's labels/taints/cordon exclude the task, or None."""
    if node.unschedulable and not any(tolerates(t, _UNSCHEDULABLE_TAINT) for t in task.tolerations):
        return names.NODE_UNSCHEDULABLE
    labels = node.labels
    for key, value in task.node_selector.items():
        if labels.get(key) != value:
            return names.NODE_SELECTOR_MISMATCH
    required = task.affinity.required if task.affinity is not None else ()
    if required and not any(term_matches(term, labels, node.name) for term in required):
        return names.NODE_AFFINITY_MISMATCH
    taint = untolerated_taint(task.tolerations, node.taints)
    if taint is not None:
        return names.UNTOLERATED_TAINT.format(key=taint.key, value=taint.value)
    return None


def required_node_affinity_matches(
    task: TaskInfo, labels: Mapping[str, str], node_name: str = ""
) -> bool:
    """nodeSelector and required node affinity (kube's RequiredNodeAffinity.Match)."""
    for key, value in task.node_selector.items():
        if labels.get(key) != value:
            return False
    required = task.affinity.required if task.affinity is not None else ()
    return not required or any(term_matches(term, labels, node_name) for term in required)


def spread_inclusion(
    nodes: list[NodeInfo],
) -> Callable[[TaskInfo, TopologySpreadConstraint], BoolArray]:
    """Topology spread's node inclusion policies over `nodes`, cached per constraint set."""
    everywhere = np.ones(len(nodes), dtype=np.bool_)
    by_affinity: dict[object, BoolArray] = {}
    by_taints: dict[object, BoolArray] = {}

    def honor_affinity(task: TaskInfo) -> BoolArray:
        if not task.node_selector and (task.affinity is None or not task.affinity.required):
            return everywhere
        key = (tuple(sorted(task.node_selector.items())), task.affinity)
        mask = by_affinity.get(key)
        if mask is None:
            mask = by_affinity[key] = np.fromiter(
                (required_node_affinity_matches(task, n.labels, n.name) for n in nodes),
                dtype=np.bool_,
                count=len(nodes),
            )
        return mask

    def honor_taints(task: TaskInfo) -> BoolArray:
        mask = by_taints.get(task.tolerations)
        if mask is None:
            mask = by_taints[task.tolerations] = np.fromiter(
                (untolerated_taint(task.tolerations, n.taints) is None for n in nodes),
                dtype=np.bool_,
                count=len(nodes),
            )
        return mask

    return included_nodes(honor_affinity, honor_taints)


def invalid_constraints(task: TaskInfo) -> str | None:
    """Why the pod's label selectors (pod affinity, spread) cannot be evaluated."""
    selectors: list[LabelSelector | None] = []
    if task.pod_affinity is not None:
        for term in task.pod_affinity.terms():
            selectors.extend((term.selector, term.namespace_selector))
    selectors.extend(c.selector for c in task.spread)
    for selector in selectors:
        reason = selector.invalid() if selector is not None else None
        if reason is not None:
            return reason
    return None


def pods_reason(node: NodeInfo) -> str | None:
    """A node whose `pods` allocatable is used up takes no more pods."""
    limit = node.allocatable.get(PODS)
    if limit is not None and node.pod_count * NANO >= limit:
        return names.TOO_MANY_PODS
    return None


def ports_reason(task: TaskInfo, node: NodeInfo) -> str | None:
    """Whether the node still has the task's host ports free."""
    for wanted in task.host_ports:
        if any(port_conflict(wanted, used) for used in node.ports):
            return names.HOST_PORTS_CONFLICT
    return None


class PodLimitedPredicate(ScalarPredicate):
    """The predicates plugin's batch filter, with the same filter less its `pods` limit.

    Why: a node at its pod limit fails with a reason eviction resolves (kube-scheduler's
    "Too many pods" is Unschedulable, not UnschedulableAndUnresolvable), so preempt and
    reclaim take it as a candidate, as Volcano's PredicateForPreemptAction does, and count
    the slots their victims free.
    """

    __slots__ = ("without_pod_limit",)

    def __init__(
        self,
        batch: Callable[[TaskInfo, IntArray], BoolArray],
        prepare: Callable[[TaskInfo], Callable[[int], bool]],
        without_pod_limit: Callable[[TaskInfo, IntArray], BoolArray],
    ) -> None:
        super().__init__(batch, prepare)
        self.without_pod_limit = without_pod_limit


_BASE_MASK: Final = ("predicates", "base")
_CONSTRAINT_MASK: Final = "predicates"


def _frozen(mask: BoolArray) -> BoolArray:
    """The mask made read-only (it is shared across sessions)."""
    mask.flags.writeable = False
    return mask


class PredicatesPlugin(Plugin):
    """Vectorised filter: a cached static mask per constraint set, plus host ports."""

    name = "predicates"
    quiet = True

    def on_session_open(self, session: Session) -> None:
        nodes = session.node_list
        # Static masks live with the node tensor: a cache hands sessions of an unchanged
        # node layout the same store, so each constraint set is computed once, not per
        # session (read-only: callers index them, never write).
        shared = session.tensor.static
        base = shared.get(_BASE_MASK)
        if base is None:
            base = shared[_BASE_MASK] = _frozen(
                np.fromiter(
                    (
                        not n.unschedulable and untolerated_taint((), n.taints) is None
                        for n in nodes
                    ),
                    dtype=np.bool_,
                    count=len(nodes),
                )
            )
        static: dict[object, BoolArray] = {}

        def static_mask(task: TaskInfo) -> BoolArray:
            # Cached per static key (cached on the task), and computed once per set of
            # label/taint constraints: preferred terms, labels and requests do not matter.
            key = task.static_key()
            mask = static.get(key)
            if mask is None:
                required = task.affinity.required if task.affinity is not None else ()
                if not task.node_selector and not task.tolerations and not required:
                    mask = base
                else:
                    constraints = (
                        _CONSTRAINT_MASK,
                        tuple(sorted(task.node_selector.items())),
                        task.tolerations,
                        required,
                    )
                    found = shared.get(constraints)
                    if found is None:
                        found = shared[constraints] = _frozen(
                            np.fromiter(
                                (static_reason(task, n) is None for n in nodes),
                                dtype=np.bool_,
                                count=len(nodes),
                            )
                        )
                    mask = found
                static[key] = mask
            return mask

        tensor = session.tensor
        pod_limited = bool(np.isfinite(tensor.pod_limit).any())

        def without_pod_limit(task: TaskInfo, idx: IntArray) -> BoolArray:
            mask: BoolArray = static_mask(task)[idx]
            if task.host_ports:
                mask = mask & np.fromiter(
                    (ports_reason(task, nodes[i]) is None for i in idx.tolist()),
                    dtype=np.bool_,
                    count=len(idx),
                )
            return mask

        def batch(task: TaskInfo, idx: IntArray) -> BoolArray:
            mask: BoolArray = static_mask(task)[idx]
            if pod_limited:
                mask = mask & (tensor.pod_count[idx] < tensor.pod_limit[idx])
            if task.host_ports:
                mask = mask & np.fromiter(
                    (ports_reason(task, nodes[i]) is None for i in idx.tolist()),
                    dtype=np.bool_,
                    count=len(idx),
                )
            return mask

        def explain(task: TaskInfo, node: NodeInfo) -> str | None:
            return static_reason(task, node) or pods_reason(node) or ports_reason(task, node)

        def pre_predicate(task: TaskInfo) -> str | None:
            if task.affinity is not None:
                for term in task.affinity.required:
                    for req in term.match_expressions:
                        reason = invalid_requirement(req)
                        if reason is not None:
                            return reason
            seen: set[tuple[int, str, str]] = set()
            for port in task.host_ports:
                key = (port.port, port.protocol, port.host_ip)
                if key in seen:
                    return f"host port {port.port}/{port.protocol} requested twice"
                seen.add(key)
            if task.pod_affinity is not None or task.spread:
                return invalid_constraints(task)
            return None

        py_pod_count, py_pod_limit = tensor.py_pod_count, tensor.py_pod_limit

        def prepare(task: TaskInfo) -> Callable[[int], bool]:
            # `batch` for one node at a time, in Python scalars (the per-placement refresh).
            allowed = static_mask(task).item
            if not pod_limited and not task.host_ports:
                return allowed

            def one(i: int) -> bool:
                if not allowed(i):
                    return False
                if pod_limited and not py_pod_count[i] < py_pod_limit[i]:
                    return False
                return not task.host_ports or ports_reason(task, nodes[i]) is None

            return one

        session.add_batch_predicate_fn(
            self.name, PodLimitedPredicate(batch, prepare, without_pod_limit), explain
        )
        session.add_pre_predicate_fn(self.name, pre_predicate)
        affinity_on = self.arguments.get_bool(POD_AFFINITY_ENABLE, True)
        spread_on = self.arguments.get_bool(POD_TOPOLOGY_SPREAD_ENABLE, True)
        if (affinity_on or spread_on) and plugin_enabled(
            session, self.name, ExtensionPoint.PREDICATE
        ):
            counts = pod_counts(session)
            ipa = InterPodAffinity(counts) if affinity_on else None
            pts = PodTopologySpread(counts, spread_inclusion(nodes)) if spread_on else None
            # Timed under their kube-scheduler names when callbacks are profiled.
            ipa_filter = timed(session, INTER_POD_AFFINITY, ipa.filter) if ipa else None
            pts_filter = timed(session, POD_TOPOLOGY_SPREAD, pts.filter) if pts else None

            def inter_pod(task: TaskInfo) -> BoolArray | None:
                # One cheap gate for both filters: most pods use neither feature.
                if task.pod_affinity is None and not task.spread and not counts.selects(task):
                    return None
                mask = ipa_filter(task) if ipa_filter is not None else None
                if pts_filter is not None and task.spread:
                    more = pts_filter(task)
                    if more is not None:
                        mask = more if mask is None else mask & more
                return mask

            def inter_pod_reason(task: TaskInfo, node: NodeInfo) -> str | None:
                reason = ipa.explain(task, node) if ipa is not None else None
                if reason is None and pts is not None:
                    reason = pts.explain(task, node)
                return reason

            session.placement.add_dynamic_predicate(inter_pod, inter_pod_reason)
