"""Vectorised node filtering and scoring with per-placement-key caches.

Node state is mirrored into numpy arrays (`node_tensor.py`: dimension x node, milli-units)
so that fit checks and scores run over all nodes at once. Each distinct static placement key
(request + node constraints, see `TaskInfo.static_key`) keeps its predicate, fit and score
vectors; every node change is logged, and a cached entry recomputes only the nodes changed
since it was last used. Pods of one gang are usually identical, so placing the next one
costs O(changed nodes) plus one argmax, instead of O(nodes) Python work.

Contract for plugins: batch predicate and score callbacks must depend only on the task's
static key and the state of the node they are asked about.

*Dynamic* predicates and scores (inter-pod affinity, topology spread, normalised scores) are
the exception: a placement on one node changes the answer on every node of its topology
domain, and kube-scheduler normalises scores over the feasible nodes. They are evaluated at
query time over all nodes, never cached, and cost nothing for a task they return None for.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np

from koordqueue.domain.quantity import MILLI_NANO
from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import names
from koordqueue.scheduler.api.fit_errors import FitErrors
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.resource import EPSILON_MILLI
from koordqueue.scheduler.api.task_info import PlacementKey, TaskInfo
from koordqueue.scheduler.framework.node_tensor import (
    BoolArray,
    FloatArray,
    IntArray,
    NodeTensor,
    items_of,
)

__all__ = [
    "SMALL",
    "BatchNodeOrderFn",
    "BatchPredicateFn",
    "BoolArray",
    "DynamicPredicateFn",
    "DynamicScoreFn",
    "FloatArray",
    "IntArray",
    "NodeOrderFn",
    "NodePredicate",
    "NodeScore",
    "NodeTensor",
    "PlacementEngine",
    "PredicateFn",
    "ScalarPredicate",
    "ScalarScore",
    "Scorer",
]
# (the array types and NodeTensor are node_tensor's, re-exported: plugins' callbacks take
# and return these arrays, and name them from here)

BatchPredicateFn = Callable[[TaskInfo, IntArray], BoolArray]
"""(task, node indices) -> passes per node."""
PredicateFn = Callable[[TaskInfo, NodeInfo], str | None]
"""(task, node) -> None when the node passes, else the reason it fails."""
BatchNodeOrderFn = Callable[[TaskInfo, IntArray], FloatArray]
"""(task, node indices) -> score per node."""
NodeOrderFn = Callable[[TaskInfo, NodeInfo], float]
DynamicPredicateFn = Callable[[TaskInfo], BoolArray | None]
"""task -> passes per node (all nodes), or None when it rejects no node for this task."""
Scorer = Callable[[FloatArray], FloatArray | None]
"""Candidate scores (-inf where a node is not a candidate) -> weighted extra scores over all
nodes, normalised over the candidates (None: the same for every candidate)."""
DynamicScoreFn = Callable[[TaskInfo], Scorer | None]
"""task -> None when it has no preference for this task, else its Scorer."""

NodePredicate = Callable[[int], bool]
"""node index -> passes (a task's scalar predicate, see `ScalarPredicate`)."""
NodeScore = Callable[[int], float]


class ScalarPredicate:
    """A batch predicate with a scalar twin: `prepare(task)` gives a function of one node
    index that must agree exactly with `batch(task, [i])`.

    Why: after each placement only a node or two changed; answering them with Python
    scalars skips building index and result arrays, and preparing once per cache entry
    (static key) moves the task's own look-ups out of the per-node call.
    """

    __slots__ = ("batch", "prepare")

    def __init__(
        self, batch: BatchPredicateFn, prepare: Callable[[TaskInfo], NodePredicate]
    ) -> None:
        self.batch = batch
        self.prepare = prepare

    def __call__(self, task: TaskInfo, idx: IntArray) -> BoolArray:
        return self.batch(task, idx)


class ScalarScore:
    """A batch score with a scalar twin (see `ScalarPredicate`): `prepare(task)(i)` must be
    the float `batch(task, [i])` gives."""

    __slots__ = ("batch", "prepare")

    def __init__(self, batch: BatchNodeOrderFn, prepare: Callable[[TaskInfo], NodeScore]) -> None:
        self.batch = batch
        self.prepare = prepare

    def __call__(self, task: TaskInfo, idx: IntArray) -> FloatArray:
        return self.batch(task, idx)


_ScalarFns = tuple[list[Callable[[TaskInfo], NodePredicate]], list[Callable[[TaskInfo], NodeScore]]]

_CACHE_SIZE = 256
SMALL: Final = 8
"""Below this many nodes, Python scalars beat numpy's per-call overhead."""
_SCALAR_MAX: Final = 48
"""Up to this many changed nodes, scalar twins (where every callback has one) beat numpy:
a node costs them a few microseconds, a numpy pass tens of microseconds whatever its size."""
_NEG_INF: Final = float("-inf")
_GENERIC_REASON: Final = "node(s) didn't pass the predicates"
RESOLVABLE_BY_EVICTION: Final = "resolvable_by_eviction"
"""Attribute of a query-time predicate whose refusals evictions may lift (Volcano's
Unschedulable status, e.g. deviceshare's GPUs): preempt and reclaim keep the node as a
candidate and ask the predicate again after each eviction."""


class _Entry:
    __slots__ = (
        "amounts",
        "dims",
        "future_ok",
        "idle_eff",
        "idle_ok",
        "pairs",
        "passes",
        "pos",
        "prepared",
        "scores",
    )

    def __init__(self, tensor: NodeTensor, request: Resources) -> None:
        dims: list[int] = []
        amounts: list[float] = []
        for name, amount in request.items():
            r = tensor.index.get(name)
            if amount > 0 and r is not None:
                dims.append(r)
                amounts.append(amount / MILLI_NANO - EPSILON_MILLI)
        self.dims = dims
        self.amounts = amounts
        self.pairs = list(zip(dims, amounts, strict=True))
        self.prepared: tuple[_ScalarFns, Callable[[int], None]] | None = None
        """One node's refresh through the scalar twins, with the twins it was made of."""
        n = tensor.size
        self.passes = np.zeros(n, dtype=np.bool_)
        self.idle_ok = np.zeros(n, dtype=np.bool_)
        self.future_ok = np.zeros(n, dtype=np.bool_)
        self.scores = np.zeros(n, dtype=np.float64)
        self.idle_eff = np.full(n, _NEG_INF, dtype=np.float64)
        self.pos = -1


class PlacementEngine:
    """Filters and scores nodes for tasks; the session feeds it the enabled callbacks."""

    def __init__(self, tensor: NodeTensor) -> None:
        self.tensor = tensor
        self.batch_predicates: list[tuple[BatchPredicateFn, PredicateFn | None]] = []
        self.predicates: list[PredicateFn] = []
        self.batch_scores: list[BatchNodeOrderFn] = []
        self.scores: list[NodeOrderFn] = []
        self.dynamic_predicates: list[tuple[DynamicPredicateFn, PredicateFn]] = []
        self.dynamic_scores: list[DynamicScoreFn] = []
        self._cache: OrderedDict[PlacementKey, _Entry] = OrderedDict()
        self._last_key: PlacementKey | None = None
        """The key `_entry` looked up last, and its entry (`_last_entry`)."""
        self._last_entry: _Entry | None = None
        self._all: IntArray = np.arange(tensor.size, dtype=np.intp)
        self._scalar_src: tuple[list[Any], ...] | None = None
        self._scalar: _ScalarFns | None = None

    def invalidate(self) -> None:
        """Forget cached vectors (the set of callbacks changed)."""
        self._cache.clear()
        self._last_key = None

    # --- cache maintenance ---------------------------------------------------------------
    def _entry(self, task: TaskInfo) -> _Entry:
        key = task.static_key()
        if key is self._last_key:
            # The pods of a gang share one interned key: the entry used last is already the
            # most recent (no hashing of the key, no LRU move), asked once per placement.
            entry = self._last_entry
            assert entry is not None
        else:
            cache = self._cache
            found = cache.get(key)
            if found is None:
                found = _Entry(self.tensor, task.request)
                cache[key] = found
                if len(cache) > _CACHE_SIZE:
                    cache.popitem(last=False)
            else:
                cache.move_to_end(key)
            entry = found
            self._last_key = key
            self._last_entry = found
        changes = self.tensor.changes
        pos, count = entry.pos, len(changes)
        if pos == count:
            return entry
        waiting = count - pos
        if pos < 0 or waiting > self.tensor.size // 4:
            self._compute(entry, task, self._all)
        elif waiting <= _SCALAR_MAX and (scalar := self._scalar_fns()) is not None:
            # `_compute_scalar`, inline: most placements refresh one node (the gang's last)
            prepared = entry.prepared
            if prepared is None or prepared[0] is not scalar:
                prepared = entry.prepared = (scalar, self._refresher(entry, task, scalar))
            refresh = prepared[1]
            if waiting == 1:
                refresh(changes[pos])
            else:
                for i in dict.fromkeys(changes[pos:]):
                    refresh(i)
        else:
            # each changed node once (in first-change order: every node's values are its own)
            unique = dict.fromkeys(changes[pos:])
            self._compute(entry, task, np.fromiter(unique, dtype=np.intp, count=len(unique)))
        entry.pos = count
        return entry

    def _scalar_fns(self) -> _ScalarFns | None:
        """The scalar twins of every batch callback, or None when one has none (or plain
        per-node callbacks are registered); resolved again when the session swaps lists."""
        cached = self._scalar_src
        if (
            cached is not None
            and cached[0] is self.batch_predicates
            and cached[1] is self.batch_scores
            and cached[2] is self.predicates
            and cached[3] is self.scores
        ):
            return self._scalar
        self._scalar_src = (self.batch_predicates, self.batch_scores, self.predicates, self.scores)
        preds = [fn.prepare for fn, _ in self.batch_predicates if isinstance(fn, ScalarPredicate)]
        scores = [fn.prepare for fn in self.batch_scores if isinstance(fn, ScalarScore)]
        complete = len(preds) == len(self.batch_predicates) and len(scores) == len(
            self.batch_scores
        )
        plain = not self.predicates and not self.scores
        self._scalar = (preds, scores) if complete and plain else None
        return self._scalar

    def _compute(self, entry: _Entry, task: TaskInfo, idx: IntArray) -> None:
        t = self.tensor
        if len(idx) <= SMALL and not self.predicates and not self.scores:
            self._compute_small(entry, task, idx)
            return
        full = idx is self._all
        if entry.dims:
            idle_ok: BoolArray | None = None
            fut_ok: BoolArray | None = None
            for r, amount in zip(entry.dims, entry.amounts, strict=True):
                irow = t.idle[r] if full else t.idle[r, idx]
                frow = t.future[r] if full else t.future[r, idx]
                i_ok, f_ok = irow >= amount, frow >= amount
                idle_ok = i_ok if idle_ok is None else idle_ok & i_ok
                fut_ok = f_ok if fut_ok is None else fut_ok & f_ok
            assert idle_ok is not None and fut_ok is not None
            entry.idle_ok[idx] = idle_ok
            entry.future_ok[idx] = fut_ok
        else:
            entry.idle_ok[idx] = True
            entry.future_ok[idx] = True
        passes = np.ones(len(idx), dtype=np.bool_)
        for fn, _explain in self.batch_predicates:
            passes &= fn(task, idx)
        if self.predicates:
            nodes = t.nodes
            for pred in self.predicates:
                passes &= np.fromiter(
                    (pred(task, nodes[i]) is None for i in idx.tolist()),
                    dtype=np.bool_,
                    count=len(idx),
                )
        entry.passes[idx] = passes
        scores = np.zeros(len(idx), dtype=np.float64)
        for score_fn in self.batch_scores:
            scores += score_fn(task, idx)
        if self.scores:
            nodes = t.nodes
            for node_fn in self.scores:
                scores += np.fromiter(
                    (node_fn(task, nodes[i]) for i in idx.tolist()),
                    dtype=np.float64,
                    count=len(idx),
                )
        entry.scores[idx] = scores
        entry.idle_eff[idx] = np.where(passes & entry.idle_ok[idx], scores, _NEG_INF)

    def _compute_small(self, entry: _Entry, task: TaskInfo, idx: IntArray) -> None:
        t = self.tensor
        passes: BoolArray | None = None
        for fn, _explain in self.batch_predicates:
            answer = fn(task, idx)
            passes = answer if passes is None else passes & answer
        scores: FloatArray | None = None
        for score_fn in self.batch_scores:
            part = score_fn(task, idx)
            scores = part if scores is None else scores + part
        pass_list = passes.tolist() if passes is not None else [True] * len(idx)
        score_list = scores.tolist() if scores is not None else [0.0] * len(idx)
        py_idle, py_future = t.py_idle, t.py_future
        pairs = entry.pairs
        idle_ok_arr, future_ok_arr = entry.idle_ok, entry.future_ok
        passes_arr, scores_arr, eff_arr = entry.passes, entry.scores, entry.idle_eff
        for i, ok, score in zip(idx.tolist(), pass_list, score_list, strict=True):
            idle_ok = True
            fut_ok = True
            for r, a in pairs:
                if py_idle[r][i] < a:
                    idle_ok = False
                if py_future[r][i] < a:
                    fut_ok = False
            idle_ok_arr[i] = idle_ok
            future_ok_arr[i] = fut_ok
            passes_arr[i] = ok
            scores_arr[i] = score
            eff_arr[i] = score if ok and idle_ok else _NEG_INF

    def _refresher(self, entry: _Entry, task: TaskInfo, fns: _ScalarFns) -> Callable[[int], None]:
        """One node's refresh of `entry` through every callback's scalar twin (what
        `_compute_small` does, with no arrays built per node), everything bound once per
        entry (the twins are prepared for its static key, which is all they may depend on)."""
        preds = [prepare(task) for prepare in fns[0]]
        score_fns = [prepare(task) for prepare in fns[1]]
        first_score = score_fns[0] if score_fns else None
        more_scores = score_fns[1:]
        t = self.tensor
        rows = [(t.py_idle[r], t.py_future[r], a) for r, a in entry.pairs]
        idle_ok_arr, future_ok_arr = items_of(entry.idle_ok), items_of(entry.future_ok)
        passes_arr, scores_arr = items_of(entry.passes), items_of(entry.scores)
        eff_arr = items_of(entry.idle_eff)
        neg_inf = _NEG_INF

        def refresh(i: int) -> None:
            ok = True
            for pred in preds:
                if not pred(i):
                    ok = False
                    break
            score = 0.0
            if first_score is not None:
                score = first_score(i)
                for score_fn in more_scores:
                    score = score + score_fn(i)
            idle_ok = True
            fut_ok = True
            for idle_row, future_row, amount in rows:
                if idle_row[i] < amount:
                    idle_ok = False
                if future_row[i] < amount:
                    fut_ok = False
            idle_ok_arr[i] = idle_ok
            future_ok_arr[i] = fut_ok
            passes_arr[i] = ok
            scores_arr[i] = score
            eff_arr[i] = score if ok and idle_ok else neg_inf

        return refresh

    # --- queries -------------------------------------------------------------------------
    def add_dynamic_predicate(self, fn: DynamicPredicateFn, explain: PredicateFn) -> None:
        """Register a query-time filter; `explain` gives one failing node's reason. A filter
        carrying RESOLVABLE_BY_EVICTION (true) is not asked for preemption's candidates."""
        self.dynamic_predicates.append((fn, explain))

    def add_dynamic_score(self, fn: DynamicScoreFn) -> None:
        """Register a query-time score normalised over the candidate nodes."""
        self.dynamic_scores.append(fn)

    def _dynamic_mask(self, task: TaskInfo) -> BoolArray | None:
        mask: BoolArray | None = None
        for fn, _explain in self.dynamic_predicates:
            part = fn(task)
            if part is not None:
                mask = part if mask is None else mask & part
        return mask

    def _dynamic_scorers(self, task: TaskInfo) -> Sequence[Scorer]:
        fns = self.dynamic_scores
        if len(fns) == 1:
            # The default plugins register one (nodeorder's), asked once per placement and
            # mostly answering None: no list comprehension (a call of its own on 3.11).
            scorer = fns[0](task)
            return () if scorer is None else (scorer,)
        return [s for fn in fns if (s := fn(task)) is not None]

    @staticmethod
    def _scored(scorers: Sequence[Scorer], eff: FloatArray) -> FloatArray:
        """`eff` (-inf off the candidates) plus every scorer's extra, all judged on `eff`."""
        total = eff
        for scorer in scorers:
            extra = scorer(eff)
            if extra is not None:
                total = total + extra
        return total

    def select(
        self, task: TaskInfo, within: BoolArray | None = None
    ) -> tuple[int, bool] | None:
        """Best node index and whether it is a pipeline (future-idle) placement, or None.

        Nodes where the request fits idle resources are preferred; only when there is none
        are nodes that fit future-idle (releasing) resources considered (SPEC 3.4). Dynamic
        scores are normalised over the idle candidates, or else the future-idle ones, as
        Volcano scores each group separately. `within` restricts the search to the nodes it
        marks (one HyperNode's: Volcano's allocate then scores only those).
        """
        entry = self._entry(task)
        if not len(entry.idle_eff):  # no ready node at all
            return None
        mask = self._dynamic_mask(task) if self.dynamic_predicates else None
        if within is not None:
            mask = within if mask is None else mask & within
        scorers = self._dynamic_scorers(task) if self.dynamic_scores else ()
        eff = entry.idle_eff if mask is None else np.where(mask, entry.idle_eff, _NEG_INF)
        best = int(eff.argmax())
        pipelined = False
        if eff.item(best) == _NEG_INF:
            passes = entry.passes & entry.future_ok
            if mask is not None:
                passes &= mask
            eff = np.where(passes, entry.scores, _NEG_INF)
            best = int(np.argmax(eff))
            if eff[best] == _NEG_INF:
                return None
            pipelined = True
        if scorers:
            best = int(np.argmax(self._scored(scorers, eff)))
        return best, pipelined

    def _dynamic_eff(self, task: TaskInfo, passes: BoolArray, scores: FloatArray) -> FloatArray:
        """Scores of the nodes in `passes` and the dynamic filters, plus dynamic scores."""
        dynamic = self._dynamic_mask(task) if self.dynamic_predicates else None
        if dynamic is not None:
            passes = passes & dynamic
        eff = np.where(passes, scores, _NEG_INF)
        if self.dynamic_scores:
            eff = self._scored(self._dynamic_scorers(task), eff)
        return eff

    def candidates(
        self, task: TaskInfo, *, future: bool = False, within: BoolArray | None = None
    ) -> tuple[IntArray, FloatArray]:
        """Feasible node indices (idle fit, or future-idle fit) and their scores (among the
        nodes `within` marks, when given)."""
        entry = self._entry(task)
        mask = entry.passes & (entry.future_ok if future else entry.idle_ok)
        if within is not None:
            mask = mask & within
        if not (self.dynamic_predicates or self.dynamic_scores):
            idx = np.flatnonzero(mask)
            return idx, entry.scores[idx]
        eff = self._dynamic_eff(task, mask, entry.scores)
        idx = np.flatnonzero(eff > _NEG_INF)
        return idx, eff[idx]

    def predicate_nodes(self, task: TaskInfo) -> IntArray:
        """Nodes passing the plugin predicates regardless of free resources, best score first.

        Preempt and reclaim use this: resources are what they are about to free.
        """
        entry = self._entry(task)
        scores = entry.scores
        if self.dynamic_predicates or self.dynamic_scores:
            eff = self._dynamic_eff(task, entry.passes, scores)
            idx = np.flatnonzero(eff > _NEG_INF)
            scores = eff
        else:
            idx = np.flatnonzero(entry.passes)
        order = np.argsort(-scores[idx], kind="stable")
        result: IntArray = idx[order]
        return result

    def fit_errors(self, task: TaskInfo, within: BoolArray | None = None) -> FitErrors:
        """Why no node fits: insufficient resources (future idle) first, else the predicates
        (over the nodes `within` marks, when given)."""
        if within is not None:
            every = self.fit_errors(task)
            names_in = {self.tensor.nodes[i].name for i in np.flatnonzero(within).tolist()}
            kept = {n: r for n, r in every.node_reasons.items() if n in names_in}
            return FitErrors(len(names_in), kept)
        entry = self._entry(task)
        t = self.tensor
        reasons: dict[str, tuple[str, ...]] = {}
        if entry.dims:
            short = {
                r: t.future[r] < amount for r, amount in zip(entry.dims, entry.amounts, strict=True)
            }
            for i in np.flatnonzero(~entry.future_ok).tolist():
                reasons[t.nodes[i].name] = tuple(
                    names.INSUFFICIENT_RESOURCE.format(resource=t.dims[r])
                    for r in sorted(short, key=lambda r: t.dims[r])
                    if short[r][i]
                )
        for i in np.flatnonzero(entry.future_ok & ~entry.passes).tolist():
            node = t.nodes[i]
            reasons[node.name] = (self._explain(task, node),)
        dynamic = self._dynamic_mask(task) if self.dynamic_predicates else None
        if dynamic is not None:
            for i in np.flatnonzero(entry.future_ok & entry.passes & ~dynamic).tolist():
                node = t.nodes[i]
                reasons[node.name] = (self._explain_dynamic(task, node),)
        return FitErrors(t.size, reasons)

    def _explain_dynamic(self, task: TaskInfo, node: NodeInfo) -> str:
        for _fn, explain in self.dynamic_predicates:
            reason = explain(task, node)
            if reason is not None:
                return reason
        return _GENERIC_REASON

    def _explain(self, task: TaskInfo, node: NodeInfo) -> str:
        idx = np.asarray([node.index], dtype=np.intp)
        for fn, explain in self.batch_predicates:
            if not bool(fn(task, idx)[0]):
                reason = explain(task, node) if explain is not None else None
                return reason or _GENERIC_REASON
        for pred in self.predicates:
            reason = pred(task, node)
            if reason is not None:
                return reason
        return _GENERIC_REASON
