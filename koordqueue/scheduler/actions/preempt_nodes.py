"""Where preemption could help and whether a preemptor fits once victims are gone: the node
checks preempt's two paths (preempt.py, preempt_topology.py) and reclaim share."""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np

from koordqueue.domain.quantity import NANO
from koordqueue.domain.resources import PODS
from koordqueue.scheduler.api import TaskInfo, TaskStatus
from koordqueue.scheduler.api.fit_errors import preemption_answer
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.resource import fits
from koordqueue.scheduler.framework.placement import RESOLVABLE_BY_EVICTION
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.interpod import preemption_candidates

PREEMPTABLE_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})
"""Only tasks already placed and running may be preempted (Volcano's PreemptableStatus)."""


HOLDING_STATUSES = frozenset(
    {
        TaskStatus.ALLOCATED,
        TaskStatus.PIPELINED,
        TaskStatus.BINDING,
        TaskStatus.BOUND,
        TaskStatus.RUNNING,
    }
)
"""Tasks that hold or reserve a pod slot once evictions complete (releasing ones give theirs
back): Volcano's future-idle `pods`."""


def pod_room(node: NodeInfo) -> float:
    """Pods `node` can still take once its releasing tasks are gone (inf without a `pods`
    allocatable). Volcano counts `pods` as a resource every task requests, so an eviction
    frees a slot as it frees cpu and memory."""
    if PODS not in node.allocatable:
        return math.inf
    holding = sum(1 for t in node.tasks.values() if t.status in HOLDING_STATUSES)
    return node.allocatable.get_nanos(PODS) / NANO - holding


def victims_cover(task: TaskInfo, node: NodeInfo, victims: list[TaskInfo]) -> bool:
    """Would evicting all `victims` free enough future idle on `node` for `task`: resources,
    and a pod slot (Volcano's ValidateVictims, `pods` included)."""
    freed = node.future_idle
    for victim in victims:
        freed = freed + victim.resreq
    return fits(task.request, freed) and pod_room(node) + len(victims) >= 1


def candidate_nodes(session: Session, task: TaskInfo) -> list[int]:
    """Node indices, best score first, passing the predicates except what evictions could
    lift: inter-pod anti-affinity and spread skew, the `pods` limit, the plain (per-node)
    predicates of other plugins (Volcano's PredicateForPreemptAction keeps a node whose
    failure is Unschedulable; a plugin's FitError is), and query-time predicates marked
    `RESOLVABLE_BY_EVICTION` (deviceshare's GPUs). Nodes are re-checked after each eviction
    (`node_fits`)."""
    engine = session.placement
    tensor = session.tensor
    full = bool((tensor.pod_count >= tensor.pod_limit).any())
    lifted_any = any(getattr(fn, RESOLVABLE_BY_EVICTION, False)
                     for fn, _explain in engine.dynamic_predicates)
    with preemption_candidates(session):
        if not engine.predicates and not full and not lifted_any:
            nodes: list[int] = engine.predicate_nodes(task).tolist()
            return nodes
        idx = np.arange(tensor.size, dtype=np.intp)
        passes = np.ones(tensor.size, dtype=np.bool_)
        for fn, _explain in engine.batch_predicates:
            # the predicates plugin's filter has a twin without the pods limit
            # (PodLimitedPredicate; actions import no plugin, so it is read by name)
            lifted = getattr(fn, "without_pod_limit", fn)
            passes &= lifted(task, idx)
        for dynamic, _explain in engine.dynamic_predicates:
            if getattr(dynamic, RESOLVABLE_BY_EVICTION, False):
                continue
            mask = dynamic(task)
            if mask is not None:
                passes &= mask
        scores = np.zeros(tensor.size, dtype=np.float64)
        for score in engine.batch_scores:
            scores += score(task, idx)
        for one in engine.scores:
            scores += np.array([one(task, n) for n in session.node_list], dtype=np.float64)
        eff = np.where(passes, scores, -np.inf)
        total = eff
        for make in engine.dynamic_scores:
            scorer = make(task)
            extra = scorer(eff) if scorer is not None else None
            if extra is not None:
                total = total + extra
        found = np.flatnonzero(passes)
        order = np.argsort(-total[found], kind="stable")
        ordered: list[int] = found[order].tolist()
        return ordered


def node_fits(session: Session, task: TaskInfo, index: int) -> bool:
    """Whether `task` fits node `index` as the session now has it (evictions so far taken
    into account): future idle resources, a pod slot, the plain predicates and the
    query-time filters (inter-pod affinity, topology spread)."""
    node = session.nodes[session.node_list[index].name]  # an eviction may have copied it
    if not fits(task.request, node.future_idle) or pod_room(node) < 1:
        return False
    if any(pred(task, node) is not None for pred in session.placement.predicates):
        return False
    return filters_pass(session, task, index)


def filters_pass(session: Session, task: TaskInfo, index: int) -> bool:
    """Whether the query-time filters (inter-pod affinity, topology spread) pass node
    `index` now: their counts follow the evictions made so far."""
    for fn, _explain in session.placement.dynamic_predicates:
        mask = fn(task)
        if mask is not None and not bool(mask[index]):
            return False
    return True


def no_victims(
    session: Session, preemptor: TaskInfo, candidates: Collection[str], *, never: bool = False
) -> None:
    """Add kube-scheduler's preemption answer to the task's fit errors (the suffix its
    condition ends with): nodes where evictions could have helped found no victims, the
    others could not be helped by preemption."""
    errors = session.fit_errors.get(preemptor.uid)
    if errors is not None:
        answer = preemption_answer(session.nodes, set(candidates), never=never)
        session.fit_errors[preemptor.uid] = errors.with_preemption(answer)


__all__ = [
    "HOLDING_STATUSES",
    "PREEMPTABLE_STATUSES",
    "candidate_nodes",
    "filters_pass",
    "no_victims",
    "node_fits",
    "pod_room",
    "victims_cover",
]
