"""nodeorder: kube-scheduler's least-allocated, most-allocated and balanced-allocation
scores (integer, as kube-scheduler v1.36 computes them: `noderesources`); preferred node
affinity, PreferNoSchedule taints, inter-pod (anti-)affinity and topology spread
(ScheduleAnyway) scores, normalised over the candidate nodes as kube-scheduler does.
Weights are integers, read as Volcano's `Arguments.GetInt` reads them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import numpy as np

from koordqueue.scheduler.api import NodeInfo, TaskInfo
from koordqueue.scheduler.framework.interface import ExtensionPoint, Plugin
from koordqueue.scheduler.framework.placement import (
    BoolArray,
    FloatArray,
    IntArray,
    ScalarScore,
    Scorer,
)
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.interpod import (
    INTER_POD_AFFINITY,
    NODE_AFFINITY_TAINTS,
    POD_TOPOLOGY_SPREAD,
    InterPodAffinity,
    PodTopologySpread,
    plugin_enabled,
    pod_counts,
    timed,
)
from koordqueue.scheduler.plugins.binpack import int_argument
from koordqueue.scheduler.plugins.noderesources import resource_scores
from koordqueue.scheduler.plugins.predicates import spread_inclusion, term_matches, tolerates

MAX_NODE_SCORE = 100.0
PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
LEAST_REQUESTED_WEIGHT: Final = "leastrequested.weight"
MOST_REQUESTED_WEIGHT: Final = "mostrequested.weight"
BALANCED_RESOURCE_WEIGHT: Final = "balancedresource.weight"
NODE_AFFINITY_WEIGHT: Final = "nodeaffinity.weight"
POD_AFFINITY_WEIGHT: Final = "podaffinity.weight"
TAINT_TOLERATION_WEIGHT: Final = "tainttoleration.weight"
POD_TOPOLOGY_SPREAD_WEIGHT: Final = "podtopologyspread.weight"
_NEG_INF: Final = float("-inf")
_PREFER_NO_SCHEDULE_NODES: Final = ("nodeorder", "prefer-no-schedule taints")
BatchScore = Callable[[TaskInfo, IntArray], FloatArray]


_UNKNOWN: Final = object()


def _zero(_i: int) -> float:
    return 0.0


StaticVector = Callable[[TaskInfo], FloatArray | None]
"""Per pod shape, a score over all nodes (or None for none)."""


def preferred_affinity_scores(task: TaskInfo, nodes: list[NodeInfo]) -> FloatArray:
    """kube-scheduler NodeAffinity's raw score: the summed weights of the matching
    preferred terms."""
    preferred = task.affinity.preferred if task.affinity is not None else ()
    return np.fromiter(
        (sum(p.weight for p in preferred if term_matches(p.term, n.labels, n.name)) for n in nodes),
        dtype=np.float64,
        count=len(nodes),
    )


def intolerable_prefer_no_schedule(task: TaskInfo, nodes: list[NodeInfo]) -> FloatArray:
    """kube-scheduler TaintToleration's raw score: PreferNoSchedule taints the pod's
    PreferNoSchedule (or effect-less) tolerations do not tolerate."""
    tolerations = [t for t in task.tolerations if t.effect in ("", PREFER_NO_SCHEDULE)]
    return np.fromiter(
        (
            sum(
                1
                for taint in n.taints
                if taint.effect == PREFER_NO_SCHEDULE
                and not any(tolerates(t, taint) for t in tolerations)
            )
            for n in nodes
        ),
        dtype=np.float64,
        count=len(nodes),
    )


def default_normalize(
    raw: FloatArray, candidates: BoolArray, *, reverse: bool
) -> FloatArray | None:
    """kube-scheduler's DefaultNormalizeScore over the candidates (None: a constant)."""
    values = raw[candidates]
    high = float(values.max()) if len(values) else 0.0
    if high <= 0:
        return None  # all 0, or all 100 when reversed: no preference either way
    scaled = np.floor(MAX_NODE_SCORE * raw / high)
    out: FloatArray = MAX_NODE_SCORE - scaled if reverse else scaled
    return out


class LevelNormalizer:
    """DefaultNormalizeScore of a fixed raw vector, as a Scorer.

    Why: the maximum over the candidates is one of the few distinct raw values; checking
    them from the top (on the few nodes holding each) finds it without a pass over all
    nodes, and the normalised vector per maximum is computed once.
    """

    __slots__ = ("cache", "levels", "raw", "reverse", "static", "weight")

    def __init__(self, raw: FloatArray, *, reverse: bool, weight: float) -> None:
        self.raw = raw
        self.reverse = reverse
        self.weight = weight
        values = np.unique(raw[raw > 0])[::-1]
        self.levels = [(float(v), np.flatnonzero(raw == v)) for v in values]
        self.cache: dict[float, FloatArray] = {}
        self.static: FloatArray | None = None
        """With one positive level: the normalised vector whatever the candidates (when no
        candidate is at that level they all score the same, which changes no choice)."""
        if len(self.levels) == 1:
            self.static = self._vector(self.levels[0][0])

    def _vector(self, high: float) -> FloatArray:
        scaled = np.floor(MAX_NODE_SCORE * self.raw / high)
        out: FloatArray = (MAX_NODE_SCORE - scaled if self.reverse else scaled) * self.weight
        return out

    def __call__(self, eff: FloatArray) -> FloatArray | None:
        for high, where in self.levels:
            if bool((eff[where] > _NEG_INF).any()):
                out = self.cache.get(high)
                if out is None:
                    out = self.cache[high] = self._vector(high)
                return out
        return None  # every candidate scores 0 (100 when reversed): no preference


def _summed(scorers: Sequence[Scorer]) -> Scorer:
    def score(eff: FloatArray) -> FloatArray | None:
        total: FloatArray | None = None
        for scorer in scorers:
            part = scorer(eff)
            if part is not None:
                total = part if total is None else total + part
        return total

    return score


class NodeOrderPlugin(Plugin):
    """Kubernetes-style resource scores over cpu and memory, each times its weight, and the
    kube-scheduler placement scores Volcano's nodeorder wraps.

    Arguments (Volcano's names and defaults): `leastrequested.weight` (1),
    `mostrequested.weight` (0), `balancedresource.weight` (1), `nodeaffinity.weight` (2),
    `podaffinity.weight` (2), `tainttoleration.weight` (3), `podtopologyspread.weight` (2).
    """

    name = "nodeorder"
    quiet = True

    def on_session_open(self, session: Session) -> None:
        resource = self._resource_scores(session)
        static = None
        if plugin_enabled(session, self.name, ExtensionPoint.NODE_ORDER):
            static = self._placement_scores(session)
        if static is None:
            if resource is not None:
                session.add_batch_node_order_fn(self.name, resource)
            return
        vector_of = static

        def with_static(task: TaskInfo, idx: IntArray) -> FloatArray:
            vector = vector_of(task)
            if resource is None:
                return vector[idx] if vector is not None else np.zeros(len(idx))
            out = resource(task, idx)
            return out + vector[idx] if vector is not None else out

        def prepare(task: TaskInfo) -> Callable[[int], float]:
            vector = vector_of(task)
            if resource is None:
                return vector.item if vector is not None else _zero
            own = resource.prepare(task)
            if vector is None:
                return own
            static_item = vector.item

            def one(i: int) -> float:
                return own(i) + static_item(i)

            return one

        session.add_batch_node_order_fn(self.name, ScalarScore(with_static, prepare))

    def _placement_scores(self, session: Session) -> StaticVector | None:
        """Scores normalised over the candidates.

        Node affinity and taint scores are fixed per pod shape; when their raw values have a
        single level the normalised vector does not depend on the candidates (up to a
        constant), so it is a cached batch score; otherwise it is a dynamic score, as are
        inter-pod affinity and spreading.
        """
        nodes = session.node_list
        makers: list[Callable[[TaskInfo], Scorer | None]] = []
        affinity_w = float(int_argument(self.arguments, NODE_AFFINITY_WEIGHT, 2))
        taint_w = float(int_argument(self.arguments, TAINT_TOLERATION_WEIGHT, 3))
        # Whether any node has a PreferNoSchedule taint: kept with the node tensor, so
        # sessions of an unchanged node layout do not walk every node for it.
        shared = session.tensor.static
        prefer_no_schedule = shared.get(_PREFER_NO_SCHEDULE_NODES)
        if prefer_no_schedule is None:
            prefer_no_schedule = shared[_PREFER_NO_SCHEDULE_NODES] = any(
                t.effect == PREFER_NO_SCHEDULE for n in nodes for t in n.taints
            )
        tainted = bool(taint_w) and bool(prefer_no_schedule)
        by_affinity: dict[object, LevelNormalizer | None] = {}
        by_tolerations: dict[object, LevelNormalizer | None] = {}

        def affinity_norm(task: TaskInfo) -> LevelNormalizer | None:
            if not affinity_w or task.affinity is None or not task.affinity.preferred:
                return None
            if task.affinity not in by_affinity:
                raw = preferred_affinity_scores(task, nodes)
                by_affinity[task.affinity] = (
                    LevelNormalizer(raw, reverse=False, weight=affinity_w) if raw.any() else None
                )
            return by_affinity[task.affinity]

        def taint_norm(task: TaskInfo) -> LevelNormalizer | None:
            if not tainted:
                return None
            if task.tolerations not in by_tolerations:
                raw = intolerable_prefer_no_schedule(task, nodes)
                by_tolerations[task.tolerations] = (
                    LevelNormalizer(raw, reverse=True, weight=taint_w) if raw.any() else None
                )
            return by_tolerations[task.tolerations]

        multi: dict[object, Scorer | None] = {}
        last_key: object = _UNKNOWN
        last_found: Scorer | None = None

        def multi_level(task: TaskInfo) -> Scorer | None:
            # Depends on the node affinity and tolerations only: kept per static key (asked
            # for every pod placed; a gang's pods share one interned key, compared first).
            nonlocal last_key, last_found
            key = task.static_key()
            if key is last_key:
                return last_found
            known = multi.get(key, _UNKNOWN)
            if known is not _UNKNOWN:
                last_key, last_found = key, known  # type: ignore[assignment]
                return known  # type: ignore[return-value]
            scorers = [
                norm
                for norm in (affinity_norm(task), taint_norm(task))
                if norm is not None and norm.static is None
            ]
            found: Scorer | None = None
            if len(scorers) == 1:
                found = scorers[0]
            elif scorers:
                found = _summed(scorers)
            multi[key] = found
            last_key, last_found = key, found
            return found

        if affinity_w or tainted:
            vectors: dict[object, FloatArray | None] = {}

            def static_vector(task: TaskInfo) -> FloatArray | None:
                key = task.static_key()
                if key not in vectors:
                    total: FloatArray | None = None
                    for norm in (affinity_norm(task), taint_norm(task)):
                        if norm is not None and norm.static is not None:
                            part = norm.static
                            total = part if total is None else total + part
                    vectors[key] = total
                return vectors[key]

            static: StaticVector | None = static_vector
            makers.append(timed(session, NODE_AFFINITY_TAINTS, multi_level))
        else:
            static = None
        pod_affinity_w = float(int_argument(self.arguments, POD_AFFINITY_WEIGHT, 2))
        spread_w = float(int_argument(self.arguments, POD_TOPOLOGY_SPREAD_WEIGHT, 2))
        counts = pod_counts(session) if pod_affinity_w or spread_w else None
        if pod_affinity_w and counts is not None:
            ipa = InterPodAffinity(counts)
            owners = counts

            def inter_pod(task: TaskInfo) -> Scorer | None:
                if task.pod_affinity is None and not owners.selects(task):
                    return None
                raw = ipa.raw_score(task)
                if raw is None:
                    return None
                raw_scores = raw

                def score(eff: FloatArray) -> FloatArray | None:
                    out = ipa.normalize(raw_scores, eff > _NEG_INF)
                    return None if out is None else out * pod_affinity_w

                return timed(session, INTER_POD_AFFINITY, score)

            makers.append(timed(session, INTER_POD_AFFINITY, inter_pod))
        if spread_w and counts is not None:
            pts = PodTopologySpread(counts, spread_inclusion(nodes))

            def spread(task: TaskInfo) -> Scorer | None:
                if not any(not c.hard for c in task.spread):
                    return None

                def score(eff: FloatArray) -> FloatArray | None:
                    out = pts.score(task, eff > _NEG_INF)
                    return None if out is None else out * spread_w

                return timed(session, POD_TOPOLOGY_SPREAD, score)

            makers.append(spread)
        if not makers:
            return static

        def placement_scores(task: TaskInfo) -> Scorer | None:
            # One cheap gate: most pods have no inter-pod term, spread constraint or
            # existing pod's term selecting them, and single-level node affinity and taint
            # scores are batch scores.
            if (
                task.pod_affinity is None
                and not task.spread
                and (counts is None or not counts.selects(task))
            ):
                return multi_level(task) if affinity_w or tainted else None
            scorers = [s for make in makers if (s := make(task)) is not None]
            if not scorers:
                return None
            return scorers[0] if len(scorers) == 1 else _summed(scorers)

        session.placement.add_dynamic_score(placement_scores)
        return static

    def _resource_scores(self, session: Session) -> ScalarScore | None:
        return resource_scores(
            session.tensor,
            int_argument(self.arguments, LEAST_REQUESTED_WEIGHT, 1),
            int_argument(self.arguments, MOST_REQUESTED_WEIGHT, 0),
            int_argument(self.arguments, BALANCED_RESOURCE_WEIGHT, 1),
        )
