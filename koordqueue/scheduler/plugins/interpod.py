"""Per-session pod counts behind inter-pod affinity and topology spread (kube-scheduler's
InterPodAffinity and PodTopologySpread PreFilter/PreScore state, kept incrementally).

Why a shared, incremental state: kube-scheduler rebuilds these counts for every pod in
PreFilter (a walk over all pods); here each distinct pod filter (a term, all required
terms of a pod, or a spread selector) keeps a per-node count of the pods it selects, built
once from a label index and moved by the session's allocate/deallocate events, together
with its sums per topology domain for each topology key asked about (one scalar update per
key and event). A query is then a few O(nodes) numpy operations, mostly one gather of a
per-domain verdict onto the nodes. Pods that use none of the features cost one attribute
check.

Counted pods are those placed on a node (Bound, Binding, Running, Allocated, Pipelined,
Releasing). As in Volcano, a pod the session evicts or un-allocates stops counting; a pod
already terminating when the session opens counts for inter-pod affinity but not for
spreading (kube-scheduler skips terminating pods there).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.selectors import LabelSelector
from koordqueue.scheduler.api.task_info import (
    POLICY_HONOR,
    TERMINATED_STATUSES,
    PodAffinity,
    PodAffinityTerm,
    TaskInfo,
    TaskStatus,
    TopologySpreadConstraint,
)
from koordqueue.scheduler.framework.interface import ExtensionPoint
from koordqueue.scheduler.framework.placement import BoolArray, FloatArray, IntArray
from koordqueue.scheduler.framework.session import EventHandler, Session

HOSTNAME_KEY: Final = "kubernetes.io/hostname"
MAX_NODE_SCORE: Final = 100
HARD_POD_AFFINITY_WEIGHT: Final = 1
"""kube-scheduler's InterPodAffinityArgs.hardPodAffinityWeight default."""

ERR_AFFINITY_RULES: Final = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY_RULES: Final = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_SPREAD_LABEL: Final = (
    "node(s) didn't match pod topology spread constraints (missing required label)"
)
ERR_SPREAD: Final = "node(s) didn't match pod topology spread constraints"

# Kinds of an existing pod's terms, as other pods see them.
_REQ_ANTI: Final = 0
_REQ_AFF: Final = 1
_PREF_AFF: Final = 2
_PREF_ANTI: Final = 3

Anchor = tuple[str, str] | None
CountArray = npt.NDArray[Any]
"""Pod counts per node (integers, as int or float arrays)."""


class _Domains:
    """One topology key over the session's nodes."""

    __slots__ = ("count", "ext", "full", "has", "ids", "unique")

    def __init__(self, ids: IntArray, count: int) -> None:
        self.ids = ids
        self.count = count
        self.has: BoolArray = ids >= 0
        self.full = bool(self.has.all())
        self.unique = self.full and count == len(ids)
        self.ext: IntArray = np.where(self.has, ids, count)
        """ids with the missing key mapped to one extra, always-zero slot."""


INTER_POD_AFFINITY: Final = "interpodaffinity"
POD_TOPOLOGY_SPREAD: Final = "podtopologyspread"
NODE_AFFINITY_TAINTS: Final = "nodeaffinity+tainttoleration"
"""Names the placement features' callback time is reported under (profiled sessions); the
counts' allocate/deallocate bookkeeping is reported under predicates."""

F = TypeVar("F", bound=Callable[..., Any])


def timed(session: Session, feature: str, fn: F) -> F:
    """`fn`, accumulating its time under `feature` when the session profiles callbacks
    (the same `PluginTiming` table as plugins; `fn` itself otherwise). The entry appears
    only once `fn` has run, so sessions that use no placement feature report plugins only."""
    if not session.profile_callbacks:
        return fn
    wrapped: list[F] = []

    def first_use(*args: Any) -> Any:
        if not wrapped:
            wrapped.append(session._timed(feature, fn))
        return wrapped[0](*args)

    return first_use  # type: ignore[return-value]


def plugin_enabled(session: Session, plugin: str, point: ExtensionPoint) -> bool:
    """Whether `plugin` is configured and its switch for `point` is on."""
    for tier in session.config.tiers:
        for option in tier.plugins:
            if option.name == plugin:
                return option.enabled(point)
    return False


def _anchor(selector: LabelSelector | None) -> Anchor:
    """A label pair every selected pod carries (for the index), or None."""
    if selector is None or not selector.match_labels:
        return None
    return selector.match_labels[0]


class _Vector:
    """Per-node counts of a set of pods, with its per-domain sums kept in step.

    Why: filters and scores ask for domain counts (the matching pods in a node's zone) on
    every query; updating the sums of each topology key in use on every event costs one
    scalar update per key, where a `bincount` per query cost an O(nodes) pass.
    """

    __slots__ = ("_nonzero", "_sums", "counts", "total")

    def __init__(self, counts: IntArray) -> None:
        self.counts = counts
        self.total = int(counts.sum())
        self._sums: dict[str, tuple[IntArray, IntArray]] = {}
        """Topology key -> (the nodes' `_Domains.ext` ids, the sum per domain id; the last
        slot sums the nodes without the key)."""
        self._nonzero: set[int] | None = None
        """The nodes with a count, once asked for (then kept by `add`)."""

    def add(self, node: int, delta: int) -> None:
        counts = self.counts
        counts[node] += delta
        self.total += delta
        for ext, sums in self._sums.values():
            sums[ext[node]] += delta
        nonzero = self._nonzero
        if nonzero is not None:
            if counts[node]:
                nonzero.add(node)
            else:
                nonzero.discard(node)

    def nonzero(self) -> set[int]:
        """The nodes holding a counted pod (read-only)."""
        if self._nonzero is None:
            self._nonzero = set(np.flatnonzero(self.counts).tolist())
        return self._nonzero

    def sums(self, key: str, d: _Domains) -> IntArray:
        """The count per domain of `key` (read-only; kept up to date by `add`)."""
        found = self._sums.get(key)
        if found is None:
            sums = np.bincount(d.ext, weights=self.counts, minlength=d.count + 1)
            found = self._sums[key] = (d.ext, sums.astype(np.intp))
        return found[1]


class _Filter:
    """A set of pods (by namespace and labels) with its per-node count."""

    __slots__ = ("anchor", "match", "skip_terminating", "vec")

    def __init__(
        self,
        match: Callable[[TaskInfo], bool],
        anchor: Anchor,
        vec: _Vector,
        skip_terminating: bool,
    ) -> None:
        self.match = match
        self.anchor = anchor
        self.skip_terminating = skip_terminating
        self.vec = vec


@dataclass(slots=True)
class _Placed:
    task: TaskInfo
    node: int
    terminating: bool
    """Terminating when the session opened (not counted for spreading)."""


class PodCounts:
    """The session's counted pods, their label index, and the pod filters in use."""

    def __init__(self, session: Session) -> None:
        self.nodes: list[NodeInfo] = session.node_list
        self._by_name: Mapping[str, NodeInfo] = session.nodes
        self.size = len(self.nodes)
        self.namespace_labels: Mapping[str, Mapping[str, str]] = session.namespace_labels
        self._domains: dict[str, _Domains] = {}
        self._placed: dict[str, _Placed] | None = None
        self._by_pair: dict[tuple[str, str], set[str]] = {}
        self._filters: dict[object, _Filter] = {}
        self._by_identity: dict[tuple[int, str], tuple[object, _Filter]] = {}
        """(id of a term, a terms tuple or a selector; namespace) -> (that object, its
        filter): pods of one job share these objects, and hashing them (frozen dataclasses)
        on every query cost more than the query's own work. Bounded by the distinct objects
        seen: the key holds the object alive, so its id is not reused."""
        self._anchored: dict[tuple[str, str], list[_Filter]] = {}
        self._unanchored: list[_Filter] = []
        # Existing pods' own terms: (kind, term) -> per-node count of pods carrying it.
        self._owners: dict[tuple[int, PodAffinityTerm], _Vector] = {}
        self._owner_anchored: dict[tuple[str, str], set[tuple[int, PodAffinityTerm]]] = {}
        self._owner_unanchored: set[tuple[int, PodAffinityTerm]] = set()
        self._owner_version = 0
        self._owner_vecs: dict[int, tuple[PodAffinity, list[_Vector]]] = {}
        """id of a pod's PodAffinity (shared by a job's pods) -> (it, the owner counts its
        pods move): saves hashing every term on every placement."""
        self._match_cache: dict[
            int, tuple[Mapping[str, str], str, int, list[tuple[int, PodAffinityTerm]]]
        ] = {}
        self.preempting = False
        """While preempt/reclaim pick candidate nodes: the filters reject only nodes that
        evicting pods cannot help (see `preemption_candidates`)."""
        self._gone: set[str] = set()
        """Tasks the session evicted or un-allocated before `_placed` was built (an evicted
        task stays on its node, Releasing, but no longer counts)."""
        if session.existing_affinity_pods() != 0 or session.tensor.changes:
            # Existing pods' terms repel or attract every incoming pod (symmetry): walk
            # them now. With none (the index says so) and nothing placed yet, later owners
            # arrive by the allocate events.
            for node in self.nodes:
                for task in node.tasks.values():
                    if task.pod_affinity is not None and _counted(task):
                        self._add_owner(task, node.index, 1)
        session.add_event_handler(
            "predicates", EventHandler(allocate=self._allocated, deallocate=self._deallocated)
        )

    # --- topology ------------------------------------------------------------------------
    def topology(self, key: str) -> _Domains:
        """The nodes' domains for topology `key` (computed once per session)."""
        found = self._domains.get(key)
        if found is None:
            ids: dict[str, int] = {}
            out = np.fromiter(
                (
                    ids.setdefault(v, len(ids)) if (v := n.labels.get(key)) is not None else -1
                    for n in self.nodes
                ),
                dtype=np.intp,
                count=self.size,
            )
            found = self._domains[key] = _Domains(out, len(ids))
        return found

    def domains(self, key: str) -> tuple[IntArray, int]:
        """Per node, the id of its value for topology `key` (-1 without it); and how many."""
        d = self.topology(key)
        return d.ids, d.count

    def spread_over(self, key: str, vec: _Vector, among: BoolArray | None = None) -> CountArray:
        """Each node gets the count of `vec` over its domain (nodes in `among` only); nodes
        without the key get 0."""
        d = self.topology(key)
        if d.count == 0:
            return np.zeros(self.size, dtype=np.intp)
        if among is None:
            if d.unique:
                return vec.counts  # every node is its own domain (the hostname key)
            sums = vec.sums(key, d)
            if d.full:
                return sums[d.ids]
            sums = sums.copy()
            sums[d.count] = 0
            return sums[d.ext]
        sel = d.has & among
        part = np.bincount(d.ids[sel], weights=vec.counts[sel], minlength=d.count)
        out: CountArray = np.append(part, 0.0)[d.ext]
        return out

    def occupied(self, key: str, vec: _Vector) -> BoolArray | None:
        """Nodes whose domain of `key` holds a pod of `vec` (never a node without the key);
        None when no node's does."""
        if vec.total == 0:
            return None
        d = self.topology(key)
        if d.count == 0:
            return None
        if d.unique:
            out: BoolArray = vec.counts > 0
            return out
        positive = vec.sums(key, d) > 0
        positive[d.count] = False
        if not positive.any():
            return None
        out = positive[d.ext]
        return out

    def ns_labels(self, namespace: str) -> Mapping[str, str]:
        return self.namespace_labels.get(namespace) or {}

    # --- counted pods and filters ----------------------------------------------------------
    def _placed_pods(self) -> dict[str, _Placed]:
        if self._placed is None:
            placed: dict[str, _Placed] = {}
            by_pair = self._by_pair
            gone = self._gone
            for node in self.nodes:
                for task in node.tasks.values():
                    if _counted(task) and task.uid not in gone:
                        placed[task.uid] = _Placed(
                            task, node.index, task.status is TaskStatus.RELEASING
                        )
                        for pair in task.labels.items():
                            by_pair.setdefault(pair, set()).add(task.uid)
            self._placed = placed
        return self._placed

    def pod_filter(
        self,
        key: object,
        match: Callable[[TaskInfo], bool],
        anchor: Anchor,
        *,
        skip_terminating: bool = False,
    ) -> _Filter:
        """The filter registered under `key`, built from the counted pods on first use."""
        found = self._filters.get(key)
        if found is not None:
            return found
        placed = self._placed_pods()
        uids: Iterable[str] = self._by_pair.get(anchor, ()) if anchor is not None else placed
        counts = np.zeros(self.size, dtype=np.intp)
        for uid in uids:
            entry = placed[uid]
            if (skip_terminating and entry.terminating) or not match(entry.task):
                continue
            counts[entry.node] += 1
        flt = _Filter(match, anchor, _Vector(counts), skip_terminating)
        self._filters[key] = flt
        if anchor is None:
            self._unanchored.append(flt)
        else:
            self._anchored.setdefault(anchor, []).append(flt)
        return flt

    def term_filter(self, terms: tuple[PodAffinityTerm, ...]) -> _Filter:
        """Pods matching every term (one term: that term)."""
        # Callers pass a fresh 1-tuple for a single term: key that case by the term.
        ident: object = terms[0] if len(terms) == 1 else terms
        known = self._by_identity.get((id(ident), ""))
        if known is not None and known[0] is ident:
            return known[1]
        labels_of = self.ns_labels
        if len(terms) == 1:
            only = terms[0]

            def match(task: TaskInfo) -> bool:
                return only.matches(task.namespace, task.labels, labels_of(task.namespace))

        else:

            def match(task: TaskInfo) -> bool:
                ns = labels_of(task.namespace)
                return all(t.matches(task.namespace, task.labels, ns) for t in terms)

        anchor = next((a for t in terms if (a := _anchor(t.selector)) is not None), None)
        flt = self.pod_filter(("terms", terms), match, anchor)
        self._by_identity[(id(ident), "")] = (ident, flt)
        return flt

    def spread_filter(self, namespace: str, selector: LabelSelector) -> _Filter:
        """Pods of `namespace` the selector matches, not terminating."""
        known = self._by_identity.get((id(selector), namespace))
        if known is not None and known[0] is selector:
            return known[1]

        def match(task: TaskInfo) -> bool:
            return task.namespace == namespace and selector.matches(task.labels)

        flt = self.pod_filter(
            ("spread", namespace, selector), match, _anchor(selector), skip_terminating=True
        )
        self._by_identity[(id(selector), namespace)] = (selector, flt)
        return flt

    # --- existing pods' terms ---------------------------------------------------------------
    def _add_owner(self, task: TaskInfo, node: int, delta: int) -> None:
        pa = task.pod_affinity
        assert pa is not None
        known = self._owner_vecs.get(id(pa))
        if known is None or known[0] is not pa:
            known = self._owner_vecs[id(pa)] = (pa, self._owner_vectors(pa))
        for vec in known[1]:
            vec.add(node, delta)

    def _owner_vectors(self, pa: PodAffinity) -> list[_Vector]:
        """The owner counts a pod with these terms moves (created on first sight)."""
        out = []
        for kind, terms in (
            (_REQ_ANTI, pa.anti_required),
            (_REQ_AFF, pa.required),
            (_PREF_AFF, pa.preferred),
            (_PREF_ANTI, pa.anti_preferred),
        ):
            for term in terms:
                if term.selector is None:
                    continue  # selects nothing, never matters
                key = (kind, term)
                vec = self._owners.get(key)
                if vec is None:
                    vec = self._owners[key] = _Vector(np.zeros(self.size, dtype=np.intp))
                    self._owner_version += 1
                    anchor = _anchor(term.selector)
                    if anchor is None:
                        self._owner_unanchored.add(key)
                    else:
                        self._owner_anchored.setdefault(anchor, set()).add(key)
                out.append(vec)
        return out

    @property
    def has_owners(self) -> bool:
        """Whether any counted pod carries (anti-)affinity terms."""
        return bool(self._owners)

    def selects(self, task: TaskInfo) -> bool:
        """Whether any counted pod's own term selects the task (the gate every pod passes:
        the cache of `_matching_owner_terms` is read inline)."""
        if not self._owners:
            return False
        labels = task.labels
        cached = self._match_cache.get(id(labels))
        if (
            cached is not None
            and cached[0] is labels
            and cached[1] == task.namespace
            and cached[2] == self._owner_version
        ):
            return bool(cached[3])
        return bool(self._matching_owner_terms(task))

    def owner_terms(
        self, task: TaskInfo, kinds: frozenset[int]
    ) -> list[tuple[int, PodAffinityTerm, _Vector]]:
        """Existing pods' terms of these kinds that select `task`, with their owner counts
        (terms whose owners are all gone are left out)."""
        if not self._owners:
            return []
        out = []
        for key in self._matching_owner_terms(task):
            if key[0] in kinds:
                vec = self._owners[key]
                if vec.total:
                    out.append((key[0], key[1], vec))
        return out

    def _matching_owner_terms(self, task: TaskInfo) -> list[tuple[int, PodAffinityTerm]]:
        """Owner terms selecting the task's namespace and labels, cached per labels object
        until a new term appears (pods of one job usually share one labels object)."""
        labels = task.labels
        cached = self._match_cache.get(id(labels))
        if (
            cached is not None
            and cached[0] is labels
            and cached[1] == task.namespace
            and cached[2] == self._owner_version
        ):
            return cached[3]
        candidates: set[tuple[int, PodAffinityTerm]] = set(self._owner_unanchored)
        for pair in labels.items():
            found = self._owner_anchored.get(pair)
            if found:
                candidates |= found
        ns = self.ns_labels(task.namespace)
        # Order does not matter: masks are ANDed and integer scores summed.
        matching = [key for key in candidates if key[1].matches(task.namespace, labels, ns)]
        self._match_cache[id(labels)] = (labels, task.namespace, self._owner_version, matching)
        return matching

    # --- events ---------------------------------------------------------------------------
    def _node_of(self, task: TaskInfo) -> int:
        placed = self._placed
        if placed is not None:
            entry = placed.get(task.uid)
            if entry is not None:
                return entry.node
        node = self._by_name.get(task.node_name or "")
        return node.index if node is not None else -1

    def _move(self, task: TaskInfo, node: int, delta: int) -> None:
        for flt in self._unanchored:
            if flt.match(task):
                flt.vec.add(node, delta)
        anchored = self._anchored
        if not anchored:
            return
        for pair in task.labels.items():
            found = anchored.get(pair)
            if found:
                for flt in found:
                    if flt.match(task):
                        flt.vec.add(node, delta)

    def _allocated(self, task: TaskInfo) -> None:
        if self._placed is None and task.pod_affinity is None and not self._gone:
            # Nothing to record: no pod index yet (built on first query, from the nodes),
            # no term of this pod, no eviction to forget. Most placements end here.
            return
        node = self._by_name.get(task.node_name or "")
        if node is None:
            return
        i = node.index
        if task.pod_affinity is not None:
            self._add_owner(task, i, 1)
        placed = self._placed
        if placed is None:
            self._gone.discard(task.uid)
            return
        uid = task.uid
        placed[uid] = _Placed(task, i, False)
        # `_move(task, i, 1)` folded into the label walk: this runs for every placement.
        by_pair, anchored = self._by_pair, self._anchored
        for pair in task.labels.items():
            uids = by_pair.get(pair)
            if uids is None:
                by_pair[pair] = {uid}
            else:
                uids.add(uid)
            found = anchored.get(pair) if anchored else None
            if found:
                for flt in found:
                    if flt.match(task):
                        flt.vec.add(i, 1)
        for flt in self._unanchored:
            if flt.match(task):
                flt.vec.add(i, 1)

    def _deallocated(self, task: TaskInfo) -> None:
        i = self._node_of(task)
        if i < 0:
            return
        if task.pod_affinity is not None:
            self._add_owner(task, i, -1)
        placed = self._placed
        if placed is None:
            self._gone.add(task.uid)
            return
        entry = placed.pop(task.uid, None)
        if entry is None:
            return
        for pair in task.labels.items():
            uids = self._by_pair.get(pair)
            if uids is not None:
                uids.discard(task.uid)
        self._move(task, i, -1)


def _counted(task: TaskInfo) -> bool:
    return task.status not in TERMINATED_STATUSES and task.status is not TaskStatus.PENDING


_STATES: weakref.WeakKeyDictionary[Session, PodCounts] = weakref.WeakKeyDictionary()


def pod_counts(session: Session) -> PodCounts:
    """The session's shared counts (created, with its event handler, on first request)."""
    state = _STATES.get(session)
    if state is None:
        state = _STATES[session] = PodCounts(session)
    return state


@contextmanager
def preemption_candidates(session: Session) -> Iterator[None]:
    """While open, the inter-pod filters keep every node that evicting pods could make pass:
    they reject only kube-scheduler's UnschedulableAndUnresolvable cases (required affinity
    not matched, a spread constraint's topology key missing), not anti-affinity or spread
    skew, which a victim may cause (kube-scheduler's nodesWherePreemptionMightHelp, Volcano's
    PredicateForPreemptAction). Preempt and reclaim then re-run the full filters after each
    eviction: the counts follow the session's evict events."""
    state = _STATES.get(session)
    if state is None:
        yield
        return
    state.preempting = True
    try:
        yield
    finally:
        state.preempting = False


# --- inter-pod affinity -------------------------------------------------------------------
_EXISTING_ANTI: Final = frozenset({_REQ_ANTI})
_SCORING_KINDS: Final = frozenset({_REQ_AFF, _PREF_AFF, _PREF_ANTI})


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

        def add(key: str, vec: _Vector, weight: int) -> None:
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
                if kind == _REQ_AFF:
                    add(term.topology_key, owners, self.hard_weight)
                elif kind == _PREF_AFF:
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


# --- topology spread ----------------------------------------------------------------------
class PodTopologySpread:
    """kube-scheduler's PodTopologySpread filter (DoNotSchedule) and score (ScheduleAnyway)
    over the shared counts. Only the pod's own constraints: the system default constraints
    need Services/ReplicaSets to select pods, which the scheduler does not watch."""

    def __init__(
        self, counts: PodCounts, included: Callable[[TaskInfo, TopologySpreadConstraint], BoolArray]
    ) -> None:
        self.counts = counts
        self._none = _Vector(np.zeros(counts.size, dtype=np.intp))
        """The count of a nil or empty selector (never moved)."""
        self.included = included
        """Nodes a constraint's inclusion policies (node affinity, taints) keep."""
        self._keys: dict[tuple[str, ...], BoolArray] = {}
        self._eligible: dict[object, BoolArray | None] = {}

    def _node_counts(self, task: TaskInfo, constraint: TopologySpreadConstraint) -> _Vector:
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
