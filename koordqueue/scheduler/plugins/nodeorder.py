"""nodeorder: least-allocated, most-allocated and balanced-allocation scores, vectorised;
preferred node affinity, PreferNoSchedule taints, inter-pod (anti-)affinity and topology
spread (ScheduleAnyway) scores, normalised over the candidate nodes as kube-scheduler does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np

from koordqueue.domain.resources import CPU, MEMORY, Resources
from koordqueue.scheduler.api import NodeInfo, TaskInfo
from koordqueue.scheduler.framework.interface import ExtensionPoint, Plugin
from koordqueue.scheduler.framework.placement import SMALL, BoolArray, FloatArray, IntArray
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.plugins.interpod import (
    InterPodAffinity,
    PodTopologySpread,
    plugin_enabled,
    pod_counts,
)
from koordqueue.scheduler.plugins.predicates import spread_inclusion, term_matches, tolerates

MAX_NODE_SCORE = 100.0
PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
NODE_AFFINITY_WEIGHT: Final = "nodeaffinity.weight"
POD_AFFINITY_WEIGHT: Final = "podaffinity.weight"
TAINT_TOLERATION_WEIGHT: Final = "tainttoleration.weight"
POD_TOPOLOGY_SPREAD_WEIGHT: Final = "podtopologyspread.weight"
Scorer = Callable[[BoolArray], FloatArray | None]


def preferred_affinity_scores(task: TaskInfo, nodes: list[NodeInfo]) -> FloatArray:
    """kube-scheduler NodeAffinity's raw score: the summed weights of the matching
    preferred terms."""
    preferred = task.affinity.preferred if task.affinity is not None else ()
    return np.fromiter(
        (sum(p.weight for p in preferred if term_matches(p.term, n.labels)) for n in nodes),
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


class NodeOrderPlugin(Plugin):
    """Kubernetes-style resource scores over cpu and memory, each times its weight, and the
    kube-scheduler placement scores Volcano's nodeorder wraps.

    Arguments (Volcano's names and defaults): `leastrequested.weight` (1),
    `mostrequested.weight` (0), `balancedresource.weight` (1), `nodeaffinity.weight` (2),
    `podaffinity.weight` (2), `tainttoleration.weight` (3), `podtopologyspread.weight` (2).
    """

    name = "nodeorder"

    def on_session_open(self, session: Session) -> None:
        self._resource_scores(session)
        if plugin_enabled(session, self.name, ExtensionPoint.NODE_ORDER):
            self._placement_scores(session)

    def _placement_scores(self, session: Session) -> None:
        """Scores normalised over the candidates: registered as dynamic scores."""
        nodes = session.node_list
        engine = session.placement
        affinity_w = self.arguments.get_float(NODE_AFFINITY_WEIGHT, 2.0)
        if affinity_w:
            by_affinity: dict[object, FloatArray | None] = {}

            def node_affinity(task: TaskInfo) -> Scorer | None:
                if task.affinity is None or not task.affinity.preferred:
                    return None
                if task.affinity not in by_affinity:
                    raw = preferred_affinity_scores(task, nodes)
                    by_affinity[task.affinity] = raw if raw.any() else None
                found = by_affinity[task.affinity]
                if found is None:
                    return None
                raw_scores = found

                def score(candidates: BoolArray) -> FloatArray | None:
                    out = default_normalize(raw_scores, candidates, reverse=False)
                    return None if out is None else out * affinity_w

                return score

            engine.add_dynamic_score(node_affinity)
        taint_w = self.arguments.get_float(TAINT_TOLERATION_WEIGHT, 3.0)
        tainted = any(t.effect == PREFER_NO_SCHEDULE for n in nodes for t in n.taints)
        if taint_w and tainted:
            by_tolerations: dict[object, FloatArray | None] = {}

            def taint_toleration(task: TaskInfo) -> Scorer | None:
                if task.tolerations not in by_tolerations:
                    raw = intolerable_prefer_no_schedule(task, nodes)
                    by_tolerations[task.tolerations] = raw if raw.any() else None
                found = by_tolerations[task.tolerations]
                if found is None:
                    return None
                raw_counts = found

                def score(candidates: BoolArray) -> FloatArray | None:
                    out = default_normalize(raw_counts, candidates, reverse=True)
                    return None if out is None else out * taint_w

                return score

            engine.add_dynamic_score(taint_toleration)
        pod_affinity_w = self.arguments.get_float(POD_AFFINITY_WEIGHT, 2.0)
        spread_w = self.arguments.get_float(POD_TOPOLOGY_SPREAD_WEIGHT, 2.0)
        if not pod_affinity_w and not spread_w:
            return
        counts = pod_counts(session)
        if pod_affinity_w:
            ipa = InterPodAffinity(counts)

            def inter_pod(task: TaskInfo) -> Scorer | None:
                if task.pod_affinity is None and not counts.has_owners:
                    return None
                raw = ipa.raw_score(task)
                if raw is None:
                    return None
                raw_scores = raw

                def score(candidates: BoolArray) -> FloatArray | None:
                    out = ipa.normalize(raw_scores, candidates)
                    return None if out is None else out * pod_affinity_w

                return score

            engine.add_dynamic_score(inter_pod)
        if spread_w:
            pts = PodTopologySpread(counts, spread_inclusion(nodes))

            def spread(task: TaskInfo) -> Scorer | None:
                if not any(not c.hard for c in task.spread):
                    return None

                def score(candidates: BoolArray) -> FloatArray | None:
                    out = pts.score(task, candidates)
                    return None if out is None else out * spread_w

                return score

            engine.add_dynamic_score(spread)

    def _resource_scores(self, session: Session) -> None:
        least_w = self.arguments.get_float("leastrequested.weight", 1.0)
        most_w = self.arguments.get_float("mostrequested.weight", 0.0)
        balanced_w = self.arguments.get_float("balancedresource.weight", 1.0)
        if least_w == most_w == balanced_w == 0:
            return
        tensor = session.tensor
        rows = [tensor.index[d] for d in (CPU, MEMORY) if d in tensor.index]
        if not rows:
            return
        requests: dict[Resources, FloatArray] = {}

        py_alloc, py_used, py_pip = tensor.py_allocatable, tensor.py_used, tensor.py_pipelined
        n_rows = len(rows)

        def score_one(req: list[float], i: int) -> float:
            least = most = 0.0
            fractions = []
            for r in rows:
                alloc = py_alloc[r][i]
                requested = py_used[r][i] + py_pip[r][i] + req[r]
                frac = requested / alloc if alloc > 0 else 1.0
                if frac <= 1.0:
                    least += (1.0 - frac) * MAX_NODE_SCORE
                    most += frac * MAX_NODE_SCORE
                fractions.append(min(frac, 1.0))
            std = abs(fractions[0] - fractions[1]) / 2.0 if n_rows == 2 else 0.0
            return (
                least_w * least / n_rows
                + most_w * most / n_rows
                + balanced_w * (1.0 - std) * MAX_NODE_SCORE
            )

        scalar_requests: dict[Resources, list[float]] = {}

        def score(task: TaskInfo, idx: IntArray) -> FloatArray:
            if len(idx) <= SMALL:
                sreq = scalar_requests.get(task.request)
                if sreq is None:
                    sreq = scalar_requests[task.request] = tensor.vector(task.request).tolist()
                return np.array([score_one(sreq, i) for i in idx.tolist()], dtype=np.float64)
            req = requests.get(task.request)
            if req is None:
                req = requests[task.request] = tensor.vector(task.request)
            total = np.zeros(len(idx), dtype=np.float64)
            fractions = []
            least = np.zeros(len(idx), dtype=np.float64)
            most = np.zeros(len(idx), dtype=np.float64)
            for r in rows:
                alloc = tensor.allocatable[r, idx]
                requested = tensor.used[r, idx] + tensor.pipelined[r, idx] + req[r]
                safe = np.where(alloc > 0, alloc, 1.0)
                frac = np.where(alloc > 0, requested / safe, 1.0)
                fits = frac <= 1.0
                least += np.where(fits, (1.0 - frac) * MAX_NODE_SCORE, 0.0)
                most += np.where(fits, frac * MAX_NODE_SCORE, 0.0)
                fractions.append(np.minimum(frac, 1.0))
            n = len(rows)
            if least_w:
                total += least_w * least / n
            if most_w:
                total += most_w * most / n
            if balanced_w:
                if n == 2:
                    std = np.abs(fractions[0] - fractions[1]) / 2.0
                else:
                    std = np.zeros(len(idx), dtype=np.float64)
                total += balanced_w * (1.0 - std) * MAX_NODE_SCORE
            return total

        session.add_batch_node_order_fn(self.name, score)
