"""preempt's topology-aware path (Volcano's `enableTopologyAwarePreemption`, an argument of
the preempt action): kube-scheduler's way of choosing victims, aware of pod topology
(inter-pod affinity, spread), not of HyperNodes. As in Volcano v1.15.1 (v1.14.1 reprieved
the least important first, against kube-scheduler's intent).

Normal preemption (preempt.py) takes the first node, best score first, where evicting in
victim order makes room. This path dry-runs every candidate node up to a number of
candidates: on each, the plugins' victims are evicted in victim order until the preemptor
fits, then each, the most important first, is reprieved if the preemptor still fits
without evicting it (SelectVictimsOnNode); of the nodes with victims, the one whose most
important victim has the lowest priority wins, then the lowest sum of priorities, the
fewest victims, the latest start of the most important victims, the first in node order
(pickOneNodeForPreemption). Its victims are evicted and the preemptor pipelined there.

Differences from Volcano, for reproducible sessions: the candidate nodes are walked from the
best-scored one, not from a random offset, one at a time (`topologyAwarePreemptWorkerNum`
is read and not needed); a victim's start time is its creation time (koordqueue keeps no
pod status.startTime).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from koordqueue.scheduler.api import QueueInfo, TaskInfo, names
from koordqueue.scheduler.api import topology_names as tn
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.statement import Statement

from .preempt_nodes import candidate_nodes, no_victims, node_fits, victims_cover

DEFAULT_MIN_PERCENTAGE = 10
DEFAULT_MIN_ABSOLUTE = 1
DEFAULT_MAX_ABSOLUTE = 100
PRIORITY_OFFSET = 2**31
"""Added to every priority in the sum (kube-scheduler's MaxInt32+1), so that negative
priorities do not favour nodes with more victims."""


@dataclass(frozen=True, slots=True)
class TopologyAwareOptions:
    """The preempt action's arguments for this path (`configurations:`)."""

    enabled: bool = False
    min_percentage: int = DEFAULT_MIN_PERCENTAGE
    min_absolute: int = DEFAULT_MIN_ABSOLUTE
    max_absolute: int = DEFAULT_MAX_ABSOLUTE

    def candidates(self, nodes: int) -> int:
        """How many candidate nodes to dry-run (calculateNumCandidates)."""
        wanted = nodes * self.min_percentage // 100
        wanted = max(wanted, self.min_absolute)
        return min(wanted, self.max_absolute, nodes)


def options(session: Session) -> TopologyAwareOptions:
    """The preempt action's topology-aware arguments, Volcano's defaults where absent."""
    args = session.config.action_arguments("preempt")
    return TopologyAwareOptions(
        enabled=args.get_bool(tn.ENABLE_TOPOLOGY_AWARE_PREEMPTION, False),
        min_percentage=args.get_int(tn.MIN_CANDIDATE_NODES_PERCENTAGE, DEFAULT_MIN_PERCENTAGE),
        min_absolute=args.get_int(tn.MIN_CANDIDATE_NODES_ABSOLUTE, DEFAULT_MIN_ABSOLUTE),
        max_absolute=args.get_int(tn.MAX_CANDIDATE_NODES_ABSOLUTE, DEFAULT_MAX_ABSOLUTE),
    )


def _fits_without(
    session: Session, preemptor: TaskInfo, queue: QueueInfo, index: int, evicted: list[TaskInfo]
) -> bool:
    """Would the preemptor fit node `index` with `evicted` gone (a trial, left undone)."""
    trial = Statement(session)
    try:
        for victim in evicted:
            trial.evict(victim, names.EVICT_PREEMPT)
        return session.allocatable(queue, preemptor) and node_fits(session, preemptor, index)
    finally:
        trial.discard()


def select_victims_on_node(
    session: Session,
    preemptor: TaskInfo,
    queue: QueueInfo,
    index: int,
    candidate_filter: Callable[[TaskInfo], bool],
) -> list[TaskInfo]:
    """The fewest victims on node `index` that let the preemptor fit, in eviction order;
    empty when none do (SelectVictimsOnNode)."""
    node = session.node_list[index]
    candidates = [t for t in node.tasks.values() if candidate_filter(t)]
    allowed = session.preemptable(preemptor, candidates)
    if not allowed or not victims_cover(preemptor, node, allowed):
        return []
    ordered = session.victims_queue(allowed, preemptor)
    potential: list[TaskInfo] = []
    while not ordered.empty():
        potential.append(ordered.pop())
        if _fits_without(session, preemptor, queue, index, potential):
            break
    else:
        return []
    # the most important first (the last evicted): v1.15's order, kube-scheduler's intent
    potential.reverse()
    victims: list[TaskInfo] = []
    for i, task in enumerate(potential):
        if not _fits_without(session, preemptor, queue, index, victims + potential[i + 1 :]):
            victims.append(task)
    return victims


def pick_node(candidates: list[tuple[int, list[TaskInfo]]]) -> tuple[int, list[TaskInfo]]:
    """kube-scheduler's pickOneNodeForPreemption over (node index, victims), in order."""

    def key(candidate: tuple[int, list[TaskInfo]]) -> tuple[int, int, int, float]:
        victims = candidate[1]
        highest = max(v.priority for v in victims)
        earliest = min(v.creation for v in victims if v.priority == highest)
        return (
            highest,
            sum(v.priority + PRIORITY_OFFSET for v in victims),
            len(victims),
            -earliest,
        )

    return min(candidates, key=key)  # min keeps the first of equals


def topology_aware_preempt_one(
    session: Session,
    statement: Statement,
    preemptor: TaskInfo,
    candidate_filter: Callable[[TaskInfo], bool],
    how: TopologyAwareOptions,
) -> bool:
    """Dry-run the candidate nodes, evict the chosen node's victims and pipeline the
    preemptor there (topologyAwarePreempt). False, with the preemption answer recorded,
    when no node has victims that make room."""
    if preemptor.preempt_never or session.pre_predicate(preemptor) is not None:
        no_victims(session, preemptor, (), never=preemptor.preempt_never)
        return False
    queue = session.queues[session.jobs[preemptor.job].queue]
    helpful = candidate_nodes(session, preemptor)
    wanted = how.candidates(len(helpful))
    found: list[tuple[int, list[TaskInfo]]] = []
    for index in helpful:
        victims = select_victims_on_node(session, preemptor, queue, index, candidate_filter)
        if victims:
            found.append((index, victims))
            if len(found) >= wanted:
                break
    if not found:
        no_victims(session, preemptor, [session.node_list[i].name for i in helpful])
        return False
    index, victims = pick_node(found)
    node_statement = Statement(session)
    for victim in victims:
        node_statement.evict(victim, names.EVICT_PREEMPT)
    node_statement.pipeline(preemptor, session.nodes[session.node_list[index].name])
    statement.merge(node_statement)
    return True


__all__ = [
    "TopologyAwareOptions",
    "options",
    "pick_node",
    "select_victims_on_node",
    "topology_aware_preempt_one",
]
