"""network-topology-aware: keep a job's pods close in the network (Volcano's plugin of that
name, v1.14.1, with v1.15's eviction gradients for gangpreempt and gangreclaim).

It registers, as Volcano's does:
- the **HyperNode gradients** of a hard-mode job: the HyperNodes it may be placed in, at most
  `highestTierAllowed`, under the HyperNode it already spans (when it has placed pods), whose
  idle or future idle holds its minResources, in groups by tier, lowest first (allocate
  tries each group and takes the best HyperNode of the first group that works). For
  eviction, the groups are reversed (widest first) and capped at
  `hypernode.gradient.evict.max-hypernodes` HyperNodes, and minResources is checked
  against the HyperNodes' allocatable;
- the **HyperNode scores**: how full the HyperNode would be with all the job's pods
  (binpacking by `hypernode.binpack.*` weights; 0 when they would not fit), ties broken by
  the share of the job's pods already there; x 100 x `weight`;
- the **node scores**: for a pod of a job with a networkTopology, how close the node is to
  the HyperNode the job's pods span so far (1 in it, else (top tier - tier of their lowest
  common ancestor) / (top tier - lowest tier)), ties broken as above; for any other pod
  (`hypernode.binpack.normal-pod.enable`), the HyperNode-level binpacking of the node's
  HyperNode at each tier, weighted by `hypernode.binpack.normal-pod.fading` ^ (tier - 1)
  (a tier where the node has no HyperNode scores 1); x 100 x `weight`.

Both node scores depend on the state of whole HyperNodes, so they are dynamic scores
(evaluated at query time over all nodes) computed as per-HyperNode vectors gathered onto
the nodes (`Layout.tier_member`), not per-node Python. A cluster without HyperNodes has
only the cluster top, which scores every node alike: nothing is registered then.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from koordqueue.domain.quantity import MILLI_NANO
from koordqueue.domain.resources import CPU, MEMORY, Resources
from koordqueue.scheduler.api import JobInfo, TaskInfo
from koordqueue.scheduler.api import topology_names as tn
from koordqueue.scheduler.api.resource import EPSILON_MILLI
from koordqueue.scheduler.framework.callbacks import PURPOSE_EVICT
from koordqueue.scheduler.framework.interface import Arguments, ExtensionPoint, Plugin
from koordqueue.scheduler.framework.placement import FloatArray, Scorer
from koordqueue.scheduler.framework.session import EventHandler, Session
from koordqueue.scheduler.framework.topology import CLUSTER_TOP, SessionTopology
from koordqueue.scheduler.interpod import plugin_enabled

PLUGIN_NAME: Final = "network-topology-aware"
MAX_NODE_SCORE: Final = 100.0
FULL_SCORE: Final = 1.0
ZERO_SCORE: Final = 0.0


@dataclass(frozen=True, slots=True)
class TopologyArguments:
    """The plugin's arguments as Volcano reads them (integers only where it asks for an
    int, a negative weight or fading falls back to its default)."""

    weight: int = 1
    cpu: int = 1
    memory: int = 1
    resources: Mapping[str, int] = field(default_factory=dict)
    normal_pod_enable: bool = True
    normal_pod_fading: float = 0.8
    evict_max_hypernodes: int = 8

    def resource_weight(self, name: str) -> int | None:
        """The binpacking weight of a resource, None for one not weighted."""
        if name == CPU:
            return self.cpu
        if name == MEMORY:
            return self.memory
        return self.resources.get(name)


def _int(arguments: Mapping[str, object], key: str, default: int) -> int:
    value = arguments.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def parse_arguments(arguments: Mapping[str, object]) -> TopologyArguments:
    """Volcano's getPriorityWeight, getNormalPodConfig and getMaxHyperNodesForEviction."""

    def weight(key: str) -> int:
        value = _int(arguments, key, 1)
        return 1 if value < 0 else value

    listed = arguments.get(tn.BINPACK_RESOURCES)
    resources: dict[str, int] = {}
    for name in (n.strip() for n in (listed if isinstance(listed, str) else "").split(",")):
        if name:
            resources[name] = weight(f"{tn.BINPACK_RESOURCES}.{name}")
    enable = arguments.get(tn.NORMAL_POD_ENABLE)
    fading_raw = arguments.get(tn.NORMAL_POD_FADING)
    fading = 0.8
    if isinstance(fading_raw, int | float) and not isinstance(fading_raw, bool):
        fading = float(fading_raw)
    if fading < 0:
        fading = 0.8
    evict = _int(arguments, tn.EVICT_MAX_HYPERNODES, 8)
    return TopologyArguments(
        weight=weight(tn.WEIGHT),
        cpu=weight(tn.BINPACK_CPU),
        memory=weight(tn.BINPACK_MEMORY),
        resources=resources,
        normal_pod_enable=enable if isinstance(enable, bool) else True,
        normal_pod_fading=fading,
        evict_max_hypernodes=evict if evict > 0 else 8,
    )


def _power(base: float, exponent: int) -> float:
    """Go's math.Pow for the fading weights (0 to a negative power is +Inf)."""
    if base == 0.0 and exponent < 0:
        return math.inf
    return float(base**exponent)


class _Usage:
    """Per HyperNode (columns, `Layout.names` order) the allocatable and used amounts of the
    weighted resources in milli-units (Volcano's hyperNodeResourceCache), `used` moved by the
    session's allocate/deallocate events; and every resource's allocatable, idle and future
    idle as the session opened (the gradients' minResources check)."""

    def __init__(self, session: Session, topo: SessionTopology, names: list[str]) -> None:
        tensor = session.tensor
        layout = topo.layout
        weighted = [n for n in names if n in tensor.index]
        self.row_of = {n: i for i, n in enumerate(weighted)}
        rows = [tensor.index[n] for n in weighted]
        self.allocatable = layout.sums(tensor.allocatable[rows])
        self.used = layout.sums(tensor.used[rows])
        self.containing = layout.containing
        self.node_index = {n.name: n.index for n in session.node_list}
        self.placed: dict[str, int] = {}
        """Task uid -> the node it took resources on in this session."""
        self.dims = tensor.index
        self.opened = {
            "allocatable": layout.sums(tensor.allocatable),
            "idle": layout.sums(tensor.idle),
            "future": layout.sums(tensor.future),
        }
        self._vectors: dict[int, tuple[Resources, list[tuple[int, float]]]] = {}

    def _vector(self, res: Resources) -> list[tuple[int, float]]:
        hit = self._vectors.get(id(res))
        if hit is not None and hit[0] is res:
            return hit[1]
        out = [
            (self.row_of[name], amount / MILLI_NANO)
            for name, amount in res.items()
            if name in self.row_of and amount
        ]
        self._vectors[id(res)] = (res, out)
        return out

    def move(self, task: TaskInfo, sign: float) -> None:
        """A task took (+1) or gave back (-1) its request on its node's HyperNodes (an
        undone placement has lost its node name by then: the node it was placed on is
        remembered)."""
        node_index = self.node_index.get(task.node_name or "")
        if sign > 0:
            if node_index is None:
                return
            self.placed[task.uid] = node_index
        else:
            remembered = self.placed.pop(task.uid, None)
            if node_index is None:
                node_index = remembered
            if node_index is None:
                return
        pairs = self._vector(task.resreq)
        used = self.used
        for h in self.containing[node_index]:
            for r, amount in pairs:
                used[r, h] += sign * amount

    def fits(self, h: int, request: Resources, which: str) -> bool:
        """`request` <= the HyperNode's `which` ("allocatable", "idle" or "future") as the
        session opened, on every resource it names (Volcano's LessEqual, with tolerance)."""
        column = self.opened[which][:, h]
        for name, amount in request.items():
            r = self.dims.get(name)
            have = float(column[r]) if r is not None else 0.0
            if amount / MILLI_NANO > have + EPSILON_MILLI:
                return False
        return True


def reverse_and_cap(groups: list[list[str]], cap: int) -> list[list[str]]:
    """Volcano's reverseAndCapEvictionGradients: eviction tries the widest domains first
    (gradients run from the lowest tier up), at most `cap` HyperNodes in all, the last ones
    of a gradient kept when it is cut; no cap (<= 0): the gradients as they are."""
    if cap <= 0:
        return groups
    remaining = cap
    out: list[list[str]] = []
    for group in reversed(groups):
        if remaining == 0:
            break
        if len(group) <= remaining:
            out.append(group)
            remaining -= len(group)
        else:
            out.append(group[len(group) - remaining:])
            remaining = 0
    return out


class NetworkTopologyAwarePlugin(Plugin):
    """Registers HyperNode gradients and scores and the node scores described above."""

    name = PLUGIN_NAME
    quiet = True

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        self.args = parse_arguments(self.arguments)
        self.state: _State | None = None
        """This session's state (a plugin object is built per session)."""

    def on_session_open(self, session: Session) -> None:
        topo = session.topology
        args = self.args
        names = sorted({CPU, MEMORY, *args.resources})
        usage = _Usage(session, topo, names)
        session.add_event_handler(
            self.name,
            EventHandler(
                allocate=lambda task: usage.move(task, 1.0),
                deallocate=lambda task: usage.move(task, -1.0),
            ),
        )
        state = self.state = _State(session, topo, usage, args)
        session.add_hypernode_gradient_fn(self.name, state.gradients)
        session.add_hypernode_order_fn(self.name, state.hypernode_scores)
        if plugin_enabled(session, self.name, ExtensionPoint.NODE_ORDER) and len(topo.tiers) > 1:
            session.placement.add_dynamic_score(state.node_scores)


class _State:
    """One session's scoring state (the plugin object outlives sessions)."""

    def __init__(
        self, session: Session, topo: SessionTopology, usage: _Usage, args: TopologyArguments
    ) -> None:
        self.session = session
        self.topo = topo
        self.usage = usage
        self.args = args
        layout = topo.layout
        self.min_tier = topo.tiers[0]
        self.max_tier = topo.tiers[-1]
        self.scale = MAX_NODE_SCORE * args.weight
        tiers = range(self.min_tier, self.max_tier + 1)
        weights = {t: _power(args.normal_pod_fading, t - 1) for t in tiers}
        self.tier_total = sum(weights.values())
        self.tier_weights = [
            (layout.tier_member[t], weights[t]) for t in tiers if t in layout.tier_member
        ]
        """Tiers below the top with a HyperNode: (node -> its HyperNode there, weight)."""
        self.top_weight = weights[layout.top_tier]
        self.full_weight = self.tier_total - self.top_weight - sum(
            w for _m, w in self.tier_weights
        )
        """Tiers with no HyperNode: every node scores 1 there."""
        self.top = layout.index[CLUSTER_TOP]
        self._closeness: dict[str, FloatArray] = {}

    # --- gradients -----------------------------------------------------------------------
    def gradients(
        self, job: JobInfo, hypernode: str, purpose: str, minimum: Resources | None = None
    ) -> list[list[str]]:
        topo = self.topo
        tier = (
            job.network_topology.hard_tier(topo.tier_names)
            if job.network_topology is not None
            else None
        )
        if tier is None:
            return [[hypernode]]
        allocated = topo.job_hypernode(job)
        root = self.search_root(hypernode, tier, allocated)
        if root is None:
            return []
        if minimum is None:
            minimum = job.min_request()
        eligible: dict[int, list[str]] = {}
        queue = [root]
        seen = {root}
        while queue:
            current = queue.pop(0)
            if self._eligible(current, tier, allocated, minimum, purpose):
                eligible.setdefault(topo.tier(current), []).append(current)
            for child in topo.children(current):
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
        groups = [eligible[t] for t in sorted(eligible)]
        if purpose != PURPOSE_EVICT:
            return groups
        return reverse_and_cap(groups, self.args.evict_max_hypernodes)

    def search_root(self, available: str, tier: int, allocated: str) -> str | None:
        """Where to search: `available`, narrowed to the highest ancestor of the job's
        HyperNode within `tier` (None when they do not meet, or the job's HyperNode is
        already above `tier`: Volcano's getSearchRoot)."""
        if not allocated:
            return available
        topo = self.topo
        highest = ""
        for ancestor in topo.ancestors(allocated):
            if not topo.known(ancestor):
                return None
            if topo.tier(ancestor) > tier:
                break
            highest = ancestor
        if not highest:
            return None
        lca = topo.lca(available, highest)
        if lca == highest:
            return available
        if lca == available:
            return highest
        return None

    def _eligible(
        self, name: str, tier: int, allocated: str, minimum: Resources, purpose: str
    ) -> bool:
        topo = self.topo
        if topo.tier(name) > tier:
            return False
        if allocated:
            return True
        h = topo.layout.index.get(name)
        if h is None:
            return True
        usage = self.usage
        if purpose == PURPOSE_EVICT:
            return usage.fits(h, minimum, "allocatable")
        return usage.fits(h, minimum, "idle") or usage.fits(h, minimum, "future")

    # --- HyperNode scores ----------------------------------------------------------------
    def hypernode_scores(self, job: JobInfo, hypernodes: list[str]) -> dict[str, float]:
        """Volcano's HyperNodeOrderFn for the job's (default) sub-job: every task of the
        job counts in the request, whatever its status."""
        args = self.args
        request: dict[str, float] = {}
        for task in job.tasks.values():
            for name, amount in task.resreq.items():
                if amount and args.resource_weight(name) is not None:
                    request[name] = request.get(name, 0.0) + amount / MILLI_NANO
        scores = {hn: self._binpack(hn, request) for hn in hypernodes}
        best = max(scores.values(), default=-1.0)
        tied = [hn for hn, s in scores.items() if s == best]
        if len(tied) > 1:
            tasks = list(job.tasks.values())
            for hn in tied:
                scores[hn] += _task_share(self.topo, hn, tasks)
        return {hn: self.scale * s for hn, s in scores.items()}

    def _binpack(self, hypernode: str, request: Mapping[str, float]) -> float:
        h = self.topo.layout.index.get(hypernode)
        if h is None:
            return ZERO_SCORE
        usage = self.usage
        total, weights = 0.0, 0
        for name, amount in request.items():
            weight = self.args.resource_weight(name)
            if weight is None:
                continue
            r = usage.row_of.get(name)
            alloc = float(usage.allocatable[r, h]) if r is not None else 0.0
            used = float(usage.used[r, h]) if r is not None else 0.0
            if used + amount > alloc:
                return ZERO_SCORE
            total += weight * (used + amount) / alloc
            weights += weight
        return total / weights if weights > 0 else ZERO_SCORE

    # --- node scores ---------------------------------------------------------------------
    def node_scores(self, task: TaskInfo) -> Scorer | None:
        job = self.session.jobs.get(task.job)
        if job is None:
            return None
        if job.network_topology is not None:
            return self._closeness_scorer(job)
        if not self.args.normal_pod_enable or not self.tier_weights:
            return None
        return self._binpack_scorer(task)

    def _closeness_scorer(self, job: JobInfo) -> Scorer | None:
        topo = self.topo
        allocated = topo.scoring.get(job.uid)
        if allocated is None:
            allocated = topo.job_hypernode(job)
        if not allocated:
            return None
        per_leaf = self._closeness.get(allocated)
        layout = topo.layout
        if per_leaf is None:
            per_leaf = np.zeros(len(layout.names) + 1, dtype=np.float64)  # [-1]: no leaf
            for h, name in enumerate(layout.names):
                per_leaf[h] = self._closeness_of(name, allocated)
            self._closeness[allocated] = per_leaf
        base = per_leaf[layout.leaf]
        scale = self.scale

        def score(eff: FloatArray) -> FloatArray:
            candidates = eff > -np.inf
            out = base.copy()
            if candidates.any():
                best = out[candidates].max()
                tied = candidates & (out == best)
                if int(tied.sum()) > 1:
                    tasks = list(job.tasks.values())
                    shares: dict[int, float] = {}
                    for i in np.flatnonzero(tied).tolist():
                        h = int(layout.leaf[i])
                        if h not in shares:
                            name = layout.names[h] if h >= 0 else ""
                            shares[h] = _task_share(topo, name, tasks) if name else 0.0
                        out[i] += shares[h]
            return out * scale

        return score

    def _closeness_of(self, hypernode: str, allocated: str) -> float:
        """networkTopologyAwareScore: 1 in the job's HyperNode, else by the tier of their
        lowest common ancestor."""
        if hypernode == allocated:
            return FULL_SCORE
        lca = self.topo.lca(hypernode, allocated)
        if not lca or not self.topo.known(lca):
            return ZERO_SCORE
        tier = self.topo.tier(lca)
        if self.min_tier == self.max_tier:
            return FULL_SCORE
        if self.min_tier <= tier <= self.max_tier:
            return (self.max_tier - tier) / (self.max_tier - self.min_tier)
        return ZERO_SCORE

    def _binpack_scorer(self, task: TaskInfo) -> Scorer:
        """batchNodeOrderFnForNormalPods: per tier, the binpacking score of the node's
        HyperNode of that tier (1 where it has none), weighted by the fading."""
        usage = self.usage
        per_hn = np.zeros(len(self.topo.layout.names), dtype=np.float64)
        ok = np.ones(len(per_hn), dtype=np.bool_)
        weights = 0
        for name, amount in task.resreq.items():
            weight = self.args.resource_weight(name)
            if not amount or weight is None:
                continue
            r = usage.row_of.get(name)
            req = amount / MILLI_NANO
            if r is None:
                ok[:] = False
                weights += weight
                continue
            alloc = usage.allocatable[r]
            after = usage.used[r] + req
            ok &= after <= alloc
            with np.errstate(divide="ignore", invalid="ignore"):
                per_hn += weight * np.where(alloc > 0, after / np.where(alloc > 0, alloc, 1), 0)
            weights += weight
        per_hn = np.where(ok, per_hn / weights, ZERO_SCORE) if weights else per_hn * 0
        gathered = np.append(per_hn, FULL_SCORE)  # index -1: no HyperNode at that tier
        constant = self.full_weight * FULL_SCORE + self.top_weight * float(per_hn[self.top])
        total = np.full(len(usage.containing), constant, dtype=np.float64)
        for member, fading in self.tier_weights:
            total += fading * gathered[member]
        result = total / self.tier_total * self.scale if self.tier_total > 0 else total * 0

        def score(_eff: FloatArray) -> FloatArray:
            return result

        return score


def _task_share(topo: SessionTopology, hypernode: str, tasks: list[TaskInfo]) -> float:
    """scoreWithTaskNum: the share of the job's tasks on the HyperNode's nodes."""
    if not tasks:
        return FULL_SCORE
    return topo.task_count(hypernode, tasks) / len(tasks)


__all__ = ["PLUGIN_NAME", "NetworkTopologyAwarePlugin", "TopologyArguments", "parse_arguments"]
