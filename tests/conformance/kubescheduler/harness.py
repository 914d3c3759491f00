"""Builders in the style of kube-scheduler's test helpers (st.MakePod / st.MakeNode), and a
session on a snapshot so one plugin's filter or score can be read per node.

Pods are written as API objects and converted with the kube adapter, so each case also
exercises the parsing of affinity, spread constraints and tolerations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from koordqueue.domain.resources import Resources
from koordqueue.kube.scheduler.convert import task_info
from koordqueue.scheduler import ClusterSnapshot, default_config
from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, Taint, TaskInfo, TaskStatus
from koordqueue.scheduler.framework.session import Session, open_session
from koordqueue.scheduler.interpod import InterPodAffinity, PodTopologySpread, pod_counts
from koordqueue.scheduler.plugins.nodeorder import (
    default_normalize,
    intolerable_prefer_no_schedule,
    preferred_affinity_scores,
)
from koordqueue.scheduler.plugins.predicates import spread_inclusion

NODE_ALLOCATABLE = Resources.of(cpu="100", memory="100Gi", pods="1000")
_counter = iter(range(1_000_000))


def make_node(
    name: str, labels: Mapping[str, str] | None = None, taints: Sequence[Taint] = ()
) -> NodeInfo:
    return NodeInfo(name, NODE_ALLOCATABLE, labels=dict(labels or {}), taints=taints)


def selector(match_labels: Mapping[str, str] | None = None, **expressions: Any) -> dict[str, Any]:
    """A label selector: matchLabels plus expressions given as key=(operator, values)."""
    out: dict[str, Any] = {}
    if match_labels is not None:
        out["matchLabels"] = dict(match_labels)
    exprs = [
        {"key": k, "operator": op, "values": list(values)}
        for k, (op, values) in expressions.items()
    ]
    if exprs:
        out["matchExpressions"] = exprs
    return out


def exists(key: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "Exists"}]}


def term(
    sel: Mapping[str, Any] | None,
    topology_key: str,
    *,
    namespaces: Sequence[str] | None = None,
    namespace_selector: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": topology_key}
    if sel is not None:
        out["labelSelector"] = dict(sel)
    if namespaces is not None:
        out["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        out["namespaceSelector"] = dict(namespace_selector)
    return out


def in_term(key: str, topology_key: str, values: Sequence[str]) -> dict[str, Any]:
    """st.PodAffinityIn / PodAntiAffinityIn's term."""
    return term(
        {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]},
        topology_key,
    )


def not_in_term(key: str, topology_key: str, values: Sequence[str]) -> dict[str, Any]:
    return term(
        {"matchExpressions": [{"key": key, "operator": "NotIn", "values": list(values)}]},
        topology_key,
    )


def exists_term(key: str, topology_key: str) -> dict[str, Any]:
    return term(exists(key), topology_key)


def weighted(weight: int, t: Mapping[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": dict(t)}


def spread(
    max_skew: int,
    topology_key: str,
    when: str,
    sel: Mapping[str, Any] | None,
    *,
    min_domains: int | None = None,
    node_affinity_policy: str | None = None,
    node_taints_policy: str | None = None,
    match_label_keys: Sequence[str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "maxSkew": max_skew,
        "topologyKey": topology_key,
        "whenUnsatisfiable": when,
    }
    if sel is not None:
        out["labelSelector"] = dict(sel)
    if min_domains is not None:
        out["minDomains"] = min_domains
    if node_affinity_policy is not None:
        out["nodeAffinityPolicy"] = node_affinity_policy
    if node_taints_policy is not None:
        out["nodeTaintsPolicy"] = node_taints_policy
    if match_label_keys is not None:
        out["matchLabelKeys"] = list(match_label_keys)
    return out


def make_pod(
    name: str = "",
    *,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    node: str | None = None,
    affinity: Sequence[Mapping[str, Any]] = (),
    anti_affinity: Sequence[Mapping[str, Any]] = (),
    preferred_affinity: Sequence[Mapping[str, Any]] = (),
    preferred_anti_affinity: Sequence[Mapping[str, Any]] = (),
    spread_constraints: Sequence[Mapping[str, Any]] = (),
    node_selector: Mapping[str, str] | None = None,
    node_affinity_in: tuple[str, Sequence[str]] | None = None,
    node_affinity_not_in: tuple[str, Sequence[str]] | None = None,
    preferred_node_terms: Sequence[tuple[int, Sequence[Mapping[str, Any]]]] = (),
    tolerations: Sequence[Mapping[str, str]] = (),
    terminating: bool = False,
) -> TaskInfo:
    """A pod object in the style of st.MakePod, converted to a task."""
    uid = name or f"pod-{next(_counter)}"
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if node is not None:
        spec["nodeName"] = node
    aff: dict[str, Any] = {}
    if affinity or preferred_affinity:
        aff["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(affinity),
            "preferredDuringSchedulingIgnoredDuringExecution": list(preferred_affinity),
        }
    if anti_affinity or preferred_anti_affinity:
        aff["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(anti_affinity),
            "preferredDuringSchedulingIgnoredDuringExecution": list(preferred_anti_affinity),
        }
    node_aff: dict[str, Any] = {}
    required_exprs = []
    if node_affinity_in is not None:
        required_exprs.append(
            {"key": node_affinity_in[0], "operator": "In", "values": list(node_affinity_in[1])}
        )
    if node_affinity_not_in is not None:
        key, values = node_affinity_not_in
        required_exprs.append({"key": key, "operator": "NotIn", "values": list(values)})
    if required_exprs:
        node_aff["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": required_exprs}]
        }
    if preferred_node_terms:
        node_aff["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": {"matchExpressions": list(exprs)}}
            for w, exprs in preferred_node_terms
        ]
    if node_aff:
        aff["nodeAffinity"] = node_aff
    if aff:
        spec["affinity"] = aff
    if spread_constraints:
        spec["topologySpreadConstraints"] = list(spread_constraints)
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    meta: dict[str, Any] = {"uid": uid, "name": uid, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    phase = "Running" if node is not None else "Pending"
    task = task_info({"metadata": meta, "spec": spec, "status": {"phase": phase}})
    task.job = "job-" + uid
    return task


def open_on(
    nodes: Iterable[NodeInfo],
    existing: Iterable[TaskInfo],
    incoming: TaskInfo,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[Session, TaskInfo]:
    """A session with the existing pods running on their nodes (as pods of no job) and the
    incoming pod pending in its own job; returns the session and its copy of the pod."""
    node_list = list(nodes)
    by_name = {n.name: n for n in node_list}
    for pod in existing:
        assert pod.node_name is not None
        if pod.status is not TaskStatus.RELEASING:
            pod.status = TaskStatus.RUNNING
        by_name[pod.node_name].add_task(pod)
    job = JobInfo(incoming.job, incoming.name, namespace=incoming.namespace, tasks=[incoming])
    snapshot = ClusterSnapshot(
        node_list, [job], [QueueInfo("default")], namespace_labels=dict(namespace_labels or {})
    )
    session = open_session(snapshot, default_config())
    return session, session.jobs[incoming.job].tasks[incoming.uid]


def interpod_filter(
    nodes: Iterable[NodeInfo],
    existing: Iterable[TaskInfo],
    incoming: TaskInfo,
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, str | None]:
    """Per node: None when InterPodAffinity's filter passes it, else its reason."""
    session, task = open_on(nodes, existing, incoming, namespace_labels)
    plugin = InterPodAffinity(pod_counts(session))
    mask = plugin.filter(task)
    out: dict[str, str | None] = {}
    for node in session.node_list:
        passes = True if mask is None else bool(mask[node.index])
        out[node.name] = None if passes else plugin.explain(task, node)
        assert passes == (plugin.explain(task, node) is None)
    return out


def spread_filter(
    nodes: Iterable[NodeInfo], existing: Iterable[TaskInfo], incoming: TaskInfo
) -> dict[str, bool]:
    """Per node: whether PodTopologySpread's filter passes it."""
    session, task = open_on(nodes, existing, incoming)
    plugin = PodTopologySpread(pod_counts(session), spread_inclusion(session.node_list))
    mask = plugin.filter(task)
    return {n.name: True if mask is None else bool(mask[n.index]) for n in session.node_list}


def _candidates(session: Session, names: Sequence[str] | None) -> np.ndarray:  # type: ignore[type-arg]
    wanted = set(names) if names is not None else {n.name for n in session.node_list}
    return np.array([n.name in wanted for n in session.node_list], dtype=np.bool_)


def interpod_scores(
    nodes: Iterable[NodeInfo],
    existing: Iterable[TaskInfo],
    incoming: TaskInfo,
    candidates: Sequence[str] | None = None,
) -> dict[str, int]:
    """InterPodAffinity's normalised score per candidate node (0 when it has no opinion)."""
    session, task = open_on(nodes, existing, incoming)
    plugin = InterPodAffinity(pod_counts(session))
    cand = _candidates(session, candidates)
    raw = plugin.raw_score(task)
    scores = None if raw is None else plugin.normalize(raw, cand)
    return {
        n.name: 0 if scores is None else int(scores[n.index])
        for n in session.node_list
        if cand[n.index]
    }


def spread_scores(
    nodes: Iterable[NodeInfo],
    existing: Iterable[TaskInfo],
    incoming: TaskInfo,
    candidates: Sequence[str] | None = None,
) -> dict[str, int]:
    """PodTopologySpread's normalised score per candidate node (100 when no preference)."""
    session, task = open_on(nodes, existing, incoming)
    plugin = PodTopologySpread(pod_counts(session), spread_inclusion(session.node_list))
    cand = _candidates(session, candidates)
    scores = plugin.score(task, cand)
    return {
        n.name: 100 if scores is None else int(scores[n.index])
        for n in session.node_list
        if cand[n.index]
    }


def node_affinity_scores(nodes: Sequence[NodeInfo], incoming: TaskInfo) -> dict[str, int]:
    """NodeAffinity's normalised score per node."""
    node_list = list(nodes)
    raw = preferred_affinity_scores(incoming, node_list)
    out = default_normalize(raw, np.ones(len(node_list), dtype=np.bool_), reverse=False)
    return {n.name: 0 if out is None else int(out[i]) for i, n in enumerate(node_list)}


def taint_scores(nodes: Sequence[NodeInfo], incoming: TaskInfo) -> dict[str, int]:
    """TaintToleration's normalised score per node."""
    node_list = list(nodes)
    raw = intolerable_prefer_no_schedule(incoming, node_list)
    out = default_normalize(raw, np.ones(len(node_list), dtype=np.bool_), reverse=True)
    return {n.name: 100 if out is None else int(out[i]) for i, n in enumerate(node_list)}
