"""The session's pod counts behind inter-pod affinity and topology spread (kube-scheduler's
InterPodAffinity and PodTopologySpread PreFilter/PreScore state, kept incrementally), and
how the placement features hook into a session (`pod_counts`, `preemption_candidates`,
`timed`, `plugin_enabled`).

Counted pods are those placed on a node (Bound, Binding, Running, Allocated, Pipelined,
Releasing). As in Volcano, a pod the session evicts or un-allocates stops counting; a pod
already terminating when the session opens counts for inter-pod affinity but not for
spreading (kube-scheduler skips terminating pods there).
"""

from __future__ import annotations

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
    TERMINATED_STATUSES,
    PodAffinity,
    PodAffinityTerm,
    TaskInfo,
    TaskStatus,
)
from koordqueue.scheduler.framework.interface import ExtensionPoint
from koordqueue.scheduler.framework.placement import BoolArray, IntArray
from koordqueue.scheduler.framework.session import EventHandler, Session

# Kinds of an existing pod's terms, as other pods see them.
REQ_ANTI: Final = 0
REQ_AFF: Final = 1
PREF_AFF: Final = 2
PREF_ANTI: Final = 3

Anchor = tuple[str, str] | None
CountArray = npt.NDArray[Any]
"""Pod counts per node (integers, as int or float arrays)."""


class Domains:
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


class Vector:
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
        """Topology key -> (the nodes' `Domains.ext` ids, the sum per domain id; the last
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

    def sums(self, key: str, d: Domains) -> IntArray:
        """The count per domain of `key` (read-only; kept up to date by `add`)."""
        found = self._sums.get(key)
        if found is None:
            sums = np.bincount(d.ext, weights=self.counts, minlength=d.count + 1)
            found = self._sums[key] = (d.ext, sums.astype(np.intp))
        return found[1]


class PodFilter:
    """A set of pods (by namespace and labels) with its per-node count."""

    __slots__ = ("anchor", "match", "skip_terminating", "vec")

    def __init__(
        self,
        match: Callable[[TaskInfo], bool],
        anchor: Anchor,
        vec: Vector,
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
        self._domains: dict[str, Domains] = {}
        self._placed: dict[str, _Placed] | None = None
        self._by_pair: dict[tuple[str, str], set[str]] = {}
        self._filters: dict[object, PodFilter] = {}
        self._by_identity: dict[tuple[int, str], tuple[object, PodFilter]] = {}
        """(id of a term, a terms tuple or a selector; namespace) -> (that object, its
        filter): pods of one job share these objects, and hashing them (frozen dataclasses)
        on every query cost more than the query's own work. Bounded by the distinct objects
        seen: the key holds the object alive, so its id is not reused."""
        self._anchored: dict[tuple[str, str], list[PodFilter]] = {}
        self._unanchored: list[PodFilter] = []
        # Existing pods' own terms: (kind, term) -> per-node count of pods carrying it.
        self._owners: dict[tuple[int, PodAffinityTerm], Vector] = {}
        self._owner_anchored: dict[tuple[str, str], set[tuple[int, PodAffinityTerm]]] = {}
        self._owner_unanchored: set[tuple[int, PodAffinityTerm]] = set()
        self._owner_version = 0
        self._owner_vecs: dict[int, tuple[PodAffinity, list[Vector]]] = {}
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
    def topology(self, key: str) -> Domains:
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
            found = self._domains[key] = Domains(out, len(ids))
        return found

    def domains(self, key: str) -> tuple[IntArray, int]:
        """Per node, the id of its value for topology `key` (-1 without it); and how many."""
        d = self.topology(key)
        return d.ids, d.count

    def spread_over(self, key: str, vec: Vector, among: BoolArray | None = None) -> CountArray:
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

    def occupied(self, key: str, vec: Vector) -> BoolArray | None:
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
    ) -> PodFilter:
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
        flt = PodFilter(match, anchor, Vector(counts), skip_terminating)
        self._filters[key] = flt
        if anchor is None:
            self._unanchored.append(flt)
        else:
            self._anchored.setdefault(anchor, []).append(flt)
        return flt

    def term_filter(self, terms: tuple[PodAffinityTerm, ...]) -> PodFilter:
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

    def spread_filter(self, namespace: str, selector: LabelSelector) -> PodFilter:
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

    def _owner_vectors(self, pa: PodAffinity) -> list[Vector]:
        """The owner counts a pod with these terms moves (created on first sight)."""
        out = []
        for kind, terms in (
            (REQ_ANTI, pa.anti_required),
            (REQ_AFF, pa.required),
            (PREF_AFF, pa.preferred),
            (PREF_ANTI, pa.anti_preferred),
        ):
            for term in terms:
                if term.selector is None:
                    continue  # selects nothing, never matters
                key = (kind, term)
                vec = self._owners.get(key)
                if vec is None:
                    vec = self._owners[key] = Vector(np.zeros(self.size, dtype=np.intp))
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
    ) -> list[tuple[int, PodAffinityTerm, Vector]]:
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
