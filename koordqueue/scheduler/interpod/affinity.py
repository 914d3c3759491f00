"""kube-scheduler's InterPodAffinity filter and score over the session's pod counts."""

from __future__ import annotations

from typing import Final

import numpy as np

from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.task_info import PodAffinityTerm, TaskInfo
from koordqueue.scheduler.framework.placement import BoolArray, FloatArray
from koordqueue.scheduler.interpod.counts import (
    PREF_AFF,
    PREF_ANTI,
    REQ_AFF,
    REQ_ANTI,
    PodCounts,
    Vector,
)
from koordqueue.scheduler.interpod.names import (
    ERR_AFFINITY_RULES,
    ERR_ANTI_AFFINITY_RULES,
    ERR_EXISTING_ANTI_AFFINITY,
    HARD_POD_AFFINITY_WEIGHT,
    MAX_NODE_SCORE,
)

_EXISTING_ANTI: Final = frozenset({REQ_ANTI})
_SCORING_KINDS: Final = frozenset({REQ_AFF, PREF_AFF, PREF_ANTI})


class InterPodAffinity:
    """kube-scheduler's InterPodAffinity filter and score over the shared counts."""

    def __init__(self, counts: PodCounts, hard_weight: int = HARD_POD_AFFINITY_WEIGHT) -> None:
        self.counts = counts
        self.hard_weight = hard_weight
        self._everywhere: BoolArray = np.ones(counts.size, dtype=np.bool_)
        self._everywhere.flags.writeable = False

    def _affinity_ok(self, task: TaskInfo, terms: tuple[PodAffinityTerm, ...]) -> BoolArray:
        c = self.counts
        vec = c.term_filter(terms).vec
        all_keys: BoolArray | None = None
        exist: BoolArray | None = None
        any_match = False
        for term in terms:
            has = c.topology(term.topology_key).has
            all_keys = has if all_keys is None else all_keys & has
            occupied = c.occupied(term.topology_key, vec)
            if occupied is None:
                exist = np.zeros(c.size, dtype=np.bool_)
            else:
                any_match = True
                exist = occupied if exist is None else exist & occupied
        assert all_keys is not None and exist is not None  # a required list is never empty
        if not any_match:
            # The first of a series of pods with affinity to each other: allowed where the
            # node has every topology key, if the pod matches its own terms.
            ns = c.ns_labels(task.namespace)
            if all(t.matches(task.namespace, task.labels, ns) for t in terms):
                return all_keys
        # `exist` is False wherever a key is missing (occupied never marks such a node).
        return exist

    def _anti_ok(self, terms: tuple[PodAffinityTerm, ...]) -> BoolArray | None:
        """None when no node is rejected."""
        c = self.counts
        ok: BoolArray | None = None
        for term in terms:
            occupied = c.occupied(term.topology_key, c.term_filter((term,)).vec)
            if occupied is not None:
                ok = ~occupied if ok is None else ok & ~occupied
        return ok

    def _existing_ok(self, task: TaskInfo) -> BoolArray | None:
        """None when no node is rejected."""
        c = self.counts
        ok: BoolArray | None = None
        for _kind, term, owners in c.owner_terms(task, _EXISTING_ANTI):
            occupied = c.occupied(term.topology_key, owners)
            if occupied is not None:
                ok = ~occupied if ok is None else ok & ~occupied
        return ok

    def filter(self, task: TaskInfo) -> BoolArray | None:
        """Nodes passing the filter, or None when the filter cannot reject any node."""
        pa = task.pod_affinity
        mask: BoolArray | None = None
        if pa is not None:
            if pa.required:
                mask = self._affinity_ok(task, pa.required)
            if self.counts.preempting:
                return mask  # anti-affinity (own or existing) may be lifted by evictions
            if pa.anti_required:
                # A pod with required anti-affinity always gets a mask (all True when no
                # node is rejected), as before the sparse path.
                anti = self._anti_ok(pa.anti_required)
                if anti is None:
                    anti = self._everywhere
                mask = anti if mask is None else mask & anti
        if self.counts.has_owners and not self.counts.preempting:
            existing = self._existing_ok(task)
            if existing is not None:
                mask = existing if mask is None else mask & existing
        return mask

    def explain(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """The filter's reason for one node (kube-scheduler's order of checks)."""
        i = node.index
        pa = task.pod_affinity
        if pa is not None and pa.required and not self._affinity_ok(task, pa.required)[i]:
            return ERR_AFFINITY_RULES
        anti = self._anti_ok(pa.anti_required) if pa is not None and pa.anti_required else None
        if anti is not None and not anti[i]:
            return ERR_ANTI_AFFINITY_RULES
        existing = self._existing_ok(task) if self.counts.has_owners else None
        if existing is not None and not existing[i]:
            return ERR_EXISTING_ANTI_AFFINITY
        return None

    def raw_score(self, task: TaskInfo) -> FloatArray | None:
        """The summed topology score per node before normalisation, or None when no term
        (the pod's preferred terms, existing pods' terms selecting it) applies."""
        c = self.counts
        pa = task.pod_affinity
        total: FloatArray | None = None

        def add(key: str, vec: Vector, weight: int) -> None:
            nonlocal total
            if weight == 0 or vec.total == 0:
                return
            part = c.spread_over(key, vec) * float(weight)
            total = part if total is None else total + part

        if pa is not None:
            for term in pa.preferred:
                if term.selector is not None:
                    add(term.topology_key, c.term_filter((term,)).vec, term.weight)
            for term in pa.anti_preferred:
                if term.selector is not None:
                    add(term.topology_key, c.term_filter((term,)).vec, -term.weight)
        if c.has_owners:
            for kind, term, owners in c.owner_terms(task, _SCORING_KINDS):
                if kind == REQ_AFF:
                    add(term.topology_key, owners, self.hard_weight)
                elif kind == PREF_AFF:
                    add(term.topology_key, owners, term.weight)
                else:
                    add(term.topology_key, owners, -term.weight)
        if total is None or not total.any():
            return None
        return total

    @staticmethod
    def normalize(raw: FloatArray, candidates: BoolArray) -> FloatArray | None:
        """(score - min) / (max - min) x 100, truncated, over the candidates."""
        values = raw[candidates]
        if not len(values):
            return None
        low, high = float(values.min()), float(values.max())
        if high - low <= 0:
            return None
        out: FloatArray = np.floor(MAX_NODE_SCORE * (raw - low) / (high - low))
        return out
