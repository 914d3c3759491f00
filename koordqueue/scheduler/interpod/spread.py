"""kube-scheduler's PodTopologySpread filter and score over the session's pod counts."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.task_info import (
    POLICY_HONOR,
    TaskInfo,
    TopologySpreadConstraint,
)
from koordqueue.scheduler.framework.placement import BoolArray, FloatArray
from koordqueue.scheduler.interpod.counts import PodCounts, Vector
from koordqueue.scheduler.interpod.names import (
    ERR_SPREAD,
    ERR_SPREAD_LABEL,
    HOSTNAME_KEY,
    MAX_NODE_SCORE,
)


class PodTopologySpread:
    """kube-scheduler's PodTopologySpread filter (DoNotSchedule) and score (ScheduleAnyway)
    over the shared counts. Only the pod's own constraints: the system default constraints
    need Services/ReplicaSets to select pods, which the scheduler does not watch."""

    def __init__(
        self, counts: PodCounts, included: Callable[[TaskInfo, TopologySpreadConstraint], BoolArray]
    ) -> None:
        self.counts = counts
        self._none = Vector(np.zeros(counts.size, dtype=np.intp))
        """The count of a nil or empty selector (never moved)."""
        self.included = included
        """Nodes a constraint's inclusion policies (node affinity, taints) keep."""
        self._keys: dict[tuple[str, ...], BoolArray] = {}
        self._eligible: dict[object, BoolArray | None] = {}

    def _node_counts(self, task: TaskInfo, constraint: TopologySpreadConstraint) -> Vector:
        selector = constraint.selector
        if selector is None or selector.empty:
            # kube-scheduler counts no pod for a nil or empty selector.
            return self._none
        return self.counts.spread_filter(task.namespace, selector).vec

    def _all_keys(self, constraints: Iterable[TopologySpreadConstraint]) -> BoolArray:
        keys = tuple(c.topology_key for c in constraints)
        ok = self._keys.get(keys)
        if ok is None:
            ok = np.ones(self.counts.size, dtype=np.bool_)
            for key in keys:
                ok &= self.counts.topology(key).has
            self._keys[keys] = ok
        return ok

    def _eligible_nodes(
        self, task: TaskInfo, constraint: TopologySpreadConstraint, all_keys: BoolArray
    ) -> BoolArray | None:
        """Nodes whose pods count for the constraint; None when that is every node with
        the key (cached per pod shape: inclusion depends on static fields only)."""
        if constraint.node_taints_policy != POLICY_HONOR and (
            constraint.node_affinity_policy != POLICY_HONOR
            or (not task.node_selector and (task.affinity is None or not task.affinity.required))
        ):
            # The inclusion policies keep every node (the usual case): the answer depends
            # on the keys alone, and hashing the pod's shape per query costs more.
            plain = (id(all_keys), constraint.topology_key)
            if plain not in self._eligible:
                has = self.counts.topology(constraint.topology_key).has
                self._eligible[plain] = None if bool((all_keys == has).all()) else all_keys
            return self._eligible[plain]
        key = (task.static_key(), constraint, id(all_keys))
        if key not in self._eligible:
            eligible = all_keys & self.included(task, constraint)
            same = bool((eligible == self.counts.topology(constraint.topology_key).has).all())
            self._eligible[key] = None if same else eligible
        return self._eligible[key]

    def _constraint_ok(
        self, task: TaskInfo, constraint: TopologySpreadConstraint, all_keys: BoolArray
    ) -> BoolArray:
        c = self.counts
        d = c.topology(constraint.topology_key)
        dom, ndom, has = d.ids, d.count, d.has
        eligible = self._eligible_nodes(task, constraint, all_keys)
        vec = self._node_counts(task, constraint)
        if eligible is None:
            # Every node with the key counts: every domain is present.
            sums = vec.sums(constraint.topology_key, d)[:ndom]
            domains = ndom
            minimum = float(sums.min()) if ndom else 0.0
        else:
            per_node = vec.counts
            sums = np.bincount(dom[eligible], weights=per_node[eligible], minlength=ndom)
            present = np.bincount(dom[eligible], minlength=ndom) > 0
            domains = int(present.sum())
            minimum = float(sums[present].min()) if domains else 0.0
        if domains == 0:
            return has  # no eligible domain: kube-scheduler skips the constraint
        if domains < constraint.min_domains:
            minimum = 0.0
        selector = constraint.selector
        own = 1 if selector is not None and selector.matches(task.labels) else 0
        allowed = np.zeros(ndom + 1, dtype=np.bool_)  # the extra slot: nodes without the key
        np.less_equal(sums + (own - minimum), constraint.max_skew, out=allowed[:ndom])
        ok: BoolArray = allowed[d.ext]
        return ok

    def filter(self, task: TaskInfo) -> BoolArray | None:
        hard = [c for c in task.spread if c.hard]
        if not hard:
            return None
        all_keys = self._all_keys(hard)
        if self.counts.preempting:
            return all_keys  # only a missing topology key is beyond eviction's help
        # Each constraint's verdict already fails the nodes without its key, so their
        # conjunction lies within `all_keys`.
        mask: BoolArray | None = None
        for constraint in hard:
            ok = self._constraint_ok(task, constraint, all_keys)
            mask = ok if mask is None else mask & ok
        return mask

    def explain(self, task: TaskInfo, node: NodeInfo) -> str | None:
        hard = [c for c in task.spread if c.hard]
        if not hard:
            return None
        i = node.index
        for constraint in hard:
            if node.labels.get(constraint.topology_key) is None:
                return ERR_SPREAD_LABEL
        all_keys = self._all_keys(hard)
        for constraint in hard:
            if not self._constraint_ok(task, constraint, all_keys)[i]:
                return ERR_SPREAD
        return None

    def score(self, task: TaskInfo, candidates: BoolArray) -> FloatArray | None:
        """Normalised 0..100 per node (0 for candidates missing a topology key)."""
        soft = [c for c in task.spread if not c.hard]
        if not soft:
            return None
        all_keys = self._all_keys(soft)
        if all(s.topology_key == HOSTNAME_KEY for s in soft):
            return self._score_hosts(task, soft, candidates, all_keys)
        return self._score_general(task, soft, candidates, all_keys)

    def _score_general(
        self,
        task: TaskInfo,
        soft: list[TopologySpreadConstraint],
        candidates: BoolArray,
        all_keys: BoolArray,
    ) -> FloatArray | None:
        c = self.counts
        valid = candidates & all_keys
        if not valid.any():
            return None
        raw = np.zeros(c.size, dtype=np.float64)
        for constraint in soft:
            dom, ndom = c.domains(constraint.topology_key)
            per_node = self._node_counts(task, constraint).counts
            if constraint.topology_key == HOSTNAME_KEY:
                size = int(valid.sum())
                count = per_node.astype(np.float64)
            else:
                size = int((np.bincount(dom[valid], minlength=ndom) > 0).sum())
                eligible = all_keys & self.included(task, constraint)
                sums = np.bincount(dom[eligible], weights=per_node[eligible], minlength=ndom)
                count = np.where(dom >= 0, sums[np.maximum(dom, 0)], 0.0)
            weight = math.log(size + 2)
            raw += np.where(dom >= 0, count * weight + (constraint.max_skew - 1), 0.0)
        raw = np.floor(raw + 0.5)  # math.Round of a non-negative number
        values = raw[valid]
        high = max(float(values.max()), 0.0)
        low = float(values.min())
        if high == 0:
            if bool((valid == candidates).all()):
                return None  # every candidate scores 100: no preference
            return np.where(valid, float(MAX_NODE_SCORE), 0.0)
        out = np.where(valid, np.floor(MAX_NODE_SCORE * (high + low - raw) / high), 0.0)
        result: FloatArray = out
        return result

    def _score_hosts(
        self,
        task: TaskInfo,
        soft: list[TopologySpreadConstraint],
        candidates: BoolArray,
        all_keys: BoolArray,
    ) -> FloatArray | None:
        """`score` when every soft constraint spreads over hosts, worked out on the few
        nodes holding matching pods: every other candidate has the same raw score. The
        same float operations in the same order as `score`, so the same result."""
        valid = candidates if self.counts.topology(HOSTNAME_KEY).full else candidates & all_keys
        size = int(np.count_nonzero(valid))
        if size == 0:
            return None
        weight = math.log(size + 2)
        vectors = [self._node_counts(task, constraint) for constraint in soft]
        vecs = [vec.counts for vec in vectors]
        nodes = vectors[0].nonzero()
        if len(vectors) > 1:
            nodes = nodes.union(*(vec.nonzero() for vec in vectors[1:]))
        hot = np.fromiter(nodes, dtype=np.intp, count=len(nodes))
        hot = hot[valid[hot]]
        base = 0.0
        raw_hot = np.zeros(len(hot), dtype=np.float64)
        for constraint, counts in zip(soft, vecs, strict=True):
            base += 0.0 * weight + (constraint.max_skew - 1)
            raw_hot += counts[hot] * weight + (constraint.max_skew - 1)
        base = math.floor(base + 0.5)
        raw_hot = np.floor(raw_hot + 0.5)  # math.Round of a non-negative number
        cold = size > len(hot)  # some valid node holds no matching pod
        high = max(float(raw_hot.max()) if len(hot) else base, base if cold else -math.inf, 0.0)
        low = min(float(raw_hot.min()) if len(hot) else base, base if cold else math.inf)
        if high == 0:
            if valid is candidates or bool((valid == candidates).all()):
                return None  # every candidate scores 100: no preference
            return np.where(valid, float(MAX_NODE_SCORE), 0.0)
        out = np.where(valid, math.floor(MAX_NODE_SCORE * (high + low - base) / high), 0.0)
        out[hot] = np.floor(MAX_NODE_SCORE * (high + low - raw_hot) / high)
        result: FloatArray = out
        return result


def included_nodes(
    honor_affinity: Callable[[TaskInfo], BoolArray],
    honor_taints: Callable[[TaskInfo], BoolArray],
) -> Callable[[TaskInfo, TopologySpreadConstraint], BoolArray]:
    """A constraint's node inclusion: the pod's node selector and required node affinity
    (nodeAffinityPolicy Honor, the default), untolerated NoSchedule/NoExecute taints
    (nodeTaintsPolicy Honor; Ignore is the default)."""

    def included(task: TaskInfo, constraint: TopologySpreadConstraint) -> BoolArray:
        mask: BoolArray | None = None
        if constraint.node_affinity_policy == POLICY_HONOR:
            mask = honor_affinity(task)
        if constraint.node_taints_policy == POLICY_HONOR:
            taints = honor_taints(task)
            mask = taints if mask is None else mask & taints
        if mask is None:
            return np.ones(len(honor_affinity(task)), dtype=np.bool_)
        return mask

    return included
