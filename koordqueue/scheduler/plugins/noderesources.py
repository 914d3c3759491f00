"""The resource scores nodeorder runs: kube-scheduler v1.36's NodeResourcesFit scoring
(LeastAllocated with cpu and memory weighted 50/50, MostAllocated 1/1) and
NodeResourcesBalancedAllocation (cpu, memory and nvidia.com/gpu), configured as Volcano's
nodeorder configures them, each times its nodeorder weight.

Why integer arithmetic: kube-scheduler scores are int64 (least and most allocated floor
each resource's score and their weighted mean; balanced allocation truncates each balance
score). Summed with binpack's float score, the floors decide which node wins: with them a
gang of 1-cpu / 1Gi pods fills a 32-cpu / 256Gi node to 17 pods before the next (Volcano's
gang benchmark), with exact fractions the two scores cancel and every node gets the same
share.

Balanced allocation scores the change in balance (kubernetes PR 135573, v1.36): 50 plus half
of (50 + balance with the pod - balance without it), in [50, 100]; a pod requesting none of
its resources is skipped (kube-scheduler's PreScore skip for best-effort pods).

Requested amounts are the node's placed and pipelined tasks' requests plus the pod's
(kube-scheduler's NodeInfo.Requested, which Volcano's predicates keep in step with the
session's placements), in kube-scheduler's units (milli-cpu, bytes: the tensor's memory
milli-units / 1000). The integer arithmetic runs on floats holding integers: below 2^53
every product and floor division is exact (a node under 90 TB of memory), and float
arithmetic is what keeps a node's refresh cheap (it runs for every node a placement
changes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

import numpy as np

from koordqueue.domain.resources import CPU, GPU, MEMORY, Resources
from koordqueue.scheduler.api import TaskInfo
from koordqueue.scheduler.framework.placement import (
    SMALL,
    BoolArray,
    FloatArray,
    IntArray,
    NodeTensor,
    ScalarScore,
)

MAX_NODE_SCORE: Final = 100
HALF_SCORE: Final = MAX_NODE_SCORE // 2
FIT_RESOURCES: Final = (CPU, MEMORY)
"""The resources Volcano's nodeorder gives NodeResourcesFit's scoring strategies."""
BALANCED_RESOURCES: Final = (CPU, MEMORY, GPU)
"""The resources Volcano's nodeorder gives NodeResourcesBalancedAllocation."""
_SCALAR: Final = frozenset({GPU})
"""Extended resources: left out of balanced allocation for a pod that does not request them."""


def balance(fractions: list[float]) -> int:
    """kube-scheduler's balancedResourceScore: (1 - standard deviation of the fractions)
    x 100, truncated (half the difference for two resources, as kube-scheduler writes it)."""
    count = len(fractions)
    std = 0.0
    if count == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif count > 2:
        total = 0.0
        for fraction in fractions:
            total += fraction
        mean = total / count
        spread = 0.0
        for fraction in fractions:
            spread = spread + (fraction - mean) * (fraction - mean)
        std = math.sqrt(spread / count)
    return int((1 - std) * float(MAX_NODE_SCORE))


def balanced_allocation(
    requests: list[float], allocated: list[float], capacity: list[float]
) -> int:
    """kube-scheduler v1.36 balancedResourceScorer over the resources with capacity."""
    with_pod: list[float] = []
    without_pod: list[float] = []
    for request, held, cap in zip(requests, allocated, capacity, strict=True):
        if cap == 0:
            continue
        with_pod.append(min((held + request) / cap, 1.0))
        without_pod.append(min(held / cap, 1.0))
    return HALF_SCORE + (HALF_SCORE + balance(with_pod) - balance(without_pod)) // 2


def least_allocated(requested: float, capacity: float) -> float:
    """kube-scheduler's leastRequestedScore: the unused share, floored to an integer."""
    if capacity == 0 or requested > capacity:
        return 0.0
    return (capacity - requested) * _TOP // capacity


def most_allocated(requested: float, capacity: float) -> float:
    """kube-scheduler's mostRequestedScore: the used share (capped at 1), floored."""
    if capacity == 0:
        return 0.0
    return (requested if requested < capacity else capacity) * _TOP // capacity


_TOP: Final = float(MAX_NODE_SCORE)
_UNITS: Final = {MEMORY: 1000.0}
"""Tensor milli-units per kube-scheduler unit (bytes for memory; milli-cpu as they are)."""

_Fit = list[tuple[int, float, float]]
"""Per fit resource: tensor row, the pod's request (tensor units), units per kube unit."""
_Balanced = list[tuple[int, float]]
"""Per balanced resource: tensor row, the pod's request."""


def resource_scores(
    tensor: NodeTensor, least_w: int, most_w: int, balanced_w: int
) -> ScalarScore | None:
    """The weighted sum of the three scores as a batch score with its scalar twin, or None
    when every weight is 0 or the nodes have neither cpu nor memory."""
    if least_w == most_w == balanced_w == 0:
        return None
    index = tensor.index
    fit_names = [d for d in FIT_RESOURCES if d in index]
    if not fit_names:
        return None
    fit_rows = [index[d] for d in fit_names]
    units = [_UNITS.get(d, 1.0) for d in fit_names]
    fit_w = least_w or most_w
    py_alloc, py_used, py_pip = tensor.py_allocatable, tensor.py_used, tensor.py_pipelined
    shapes: dict[Resources, tuple[_Fit, _Balanced]] = {}

    def shape(request: Resources) -> tuple[_Fit, _Balanced]:
        """The fit rows, and the balanced rows (empty for a pod requesting none of them:
        skipped, as kube-scheduler's PreScore skips a best-effort pod)."""
        found = shapes.get(request)
        if found is None:
            vector = tensor.vector(request).tolist()
            fit = [(r, vector[r], unit) for r, unit in zip(fit_rows, units, strict=True)]
            balanced = [
                (index[d], vector[index[d]])
                for d in BALANCED_RESOURCES
                if d in index and (d not in _SCALAR or vector[index[d]] > 0)
            ]
            if not any(amount > 0 for _r, amount in balanced):
                balanced = []
            found = shapes[request] = (fit, balanced)
        return found

    def score_one(fit: _Fit, balanced: _Balanced, i: int) -> float:
        total = 0.0
        if fit_w:
            least = most = 0.0
            count = 0
            for r, request, unit in fit:
                capacity = py_alloc[r][i] / unit
                if capacity == 0:
                    continue
                requested = (py_used[r][i] + py_pip[r][i] + request) / unit
                least += least_allocated(requested, capacity)
                most += most_allocated(requested, capacity)
                count += 1
            if count:
                total += least_w * (least // count) + most_w * (most // count)
        if balanced_w and balanced:
            total += balanced_w * balanced_allocation(
                [amount for _r, amount in balanced],
                [py_used[r][i] + py_pip[r][i] for r, _a in balanced],
                [py_alloc[r][i] for r, _a in balanced],
            )
        return total

    def score(task: TaskInfo, idx: IntArray) -> FloatArray:
        fit, balanced = shape(task.request)
        if len(idx) <= SMALL or len(balanced) > 2:
            one = prepare(task)
            return np.array([one(i) for i in idx.tolist()], np.float64)
        total = np.zeros(len(idx), dtype=np.float64)
        if fit_w:
            least = np.zeros(len(idx), dtype=np.float64)
            most = np.zeros(len(idx), dtype=np.float64)
            count = np.zeros(len(idx), dtype=np.float64)
            for r, request, unit in fit:
                capacity = tensor.allocatable[r, idx] / unit
                held = capacity != 0
                divisor = np.where(held, capacity, 1.0)
                requested = (tensor.used[r, idx] + tensor.pipelined[r, idx] + request) / unit
                if least_w:
                    fits = held & (requested <= capacity)
                    least += np.where(fits, (capacity - requested) * _TOP // divisor, 0.0)
                if most_w:
                    capped = np.minimum(requested, capacity)
                    most += np.where(held, capped * _TOP // divisor, 0.0)
                count += held
            some = count > 0
            counts = np.where(some, count, 1.0)
            total += np.where(some, least_w * (least // counts) + most_w * (most // counts), 0.0)
        if balanced_w and balanced:
            total += balanced_w * _balanced_vector(tensor, balanced, idx)
        return total

    two_rows = len(fit_rows) == 2
    # per node: the cpu and memory held when its balance without a pod was last computed,
    # and that balance (NaN held: never computed)
    memo: tuple[list[float], list[float], list[int]] = (
        [math.nan] * tensor.size,
        [math.nan] * tensor.size,
        [0] * tensor.size,
    )

    def prepare(task: TaskInfo) -> Callable[[int], float]:
        fit, balanced = shape(task.request)
        if two_rows and (not balanced or [r for r, _a in balanced] == fit_rows):
            return _two_rows(tensor, fit, bool(balanced), (least_w, most_w, balanced_w), memo)

        def one(i: int) -> float:
            return score_one(fit, balanced, i)

        return one

    return ScalarScore(score, prepare)


def _two_rows(
    tensor: NodeTensor,
    fit: _Fit,
    balanced_on: bool,
    weights: tuple[int, int, int],
    memo: tuple[list[float], list[float], list[int]],
) -> Callable[[int], float]:
    """`score_one` for cpu and memory (the pod requesting one of them, both or neither),
    unrolled: the same operations in the same order, so the same score. Called for every
    node a placement changed, once per pod shape."""
    least_w, most_w, balanced_w = weights
    balanced_w = balanced_w if balanced_on else 0
    (r0, req0, unit0), (r1, req1, unit1) = fit
    assert unit0 == 1.0, "the first fit resource is cpu, in milli-cpu as the tensor holds it"
    alloc0, alloc1 = tensor.py_allocatable[r0], tensor.py_allocatable[r1]
    used0, used1 = tensor.py_used[r0], tensor.py_used[r1]
    pip0, pip1 = tensor.py_pipelined[r0], tensor.py_pipelined[r1]
    top = _TOP
    half = float(HALF_SCORE)
    memo_held0, memo_held1, memo_score = memo

    def general(i: int) -> float:
        # a node without cpu or without memory (rare): each resource on its own
        total = 0.0
        least = most = 0.0
        count = 0
        for alloc, used, pip, request, unit in (
            (alloc0, used0, pip0, req0, unit0),
            (alloc1, used1, pip1, req1, unit1),
        ):
            capacity = alloc[i] / unit
            if capacity != 0:
                requested = (used[i] + pip[i] + request) / unit
                least += least_allocated(requested, capacity)
                most += most_allocated(requested, capacity)
                count += 1
        if count:
            total = least_w * (least // count) + most_w * (most // count)
        if balanced_w:  # one fraction or none: no deviation with or without the pod
            total += balanced_w * (HALF_SCORE + HALF_SCORE // 2)
        return total

    def one(i: int) -> float:
        cap0 = alloc0[i]
        cap1 = alloc1[i]
        if cap0 == 0 or cap1 == 0:
            return general(i)
        held0 = used0[i] + pip0[i]
        held1 = used1[i] + pip1[i]
        sum0 = held0 + req0  # cpu: milli-cpu, kube-scheduler's unit already
        sum1 = held1 + req1
        total = 0.0
        if least_w or most_w:
            capacity1 = cap1 / unit1
            requested1 = sum1 / unit1
            if least_w:
                least = 0.0
                if sum0 <= cap0:
                    least = (cap0 - sum0) * top // cap0
                if requested1 <= capacity1:
                    least += (capacity1 - requested1) * top // capacity1
                total = least_w * (least // 2)
            if most_w:
                most = (sum0 if sum0 < cap0 else cap0) * top // cap0
                most += (requested1 if requested1 < capacity1 else capacity1) * top // capacity1
                total += most_w * (most // 2)
        if balanced_w:
            # min(x, 1.0) and abs without a call each
            with0 = sum0 / cap0
            with0 = with0 if with0 <= 1.0 else 1.0
            with1 = sum1 / cap1
            with1 = with1 if with1 <= 1.0 else 1.0
            diff = (with0 - with1) / 2
            score_with = int((1 - (diff if diff >= 0 else -diff)) * top)
            # the balance without the pod depends on the node alone: every pod shape
            # refreshing this node after a placement reads it from the memo
            if memo_held0[i] == held0 and memo_held1[i] == held1:
                score_without = memo_score[i]
            else:
                without0 = held0 / cap0
                without0 = without0 if without0 <= 1.0 else 1.0
                without1 = held1 / cap1
                without1 = without1 if without1 <= 1.0 else 1.0
                diff = (without0 - without1) / 2
                score_without = int((1 - (diff if diff >= 0 else -diff)) * top)
                memo_held0[i] = held0
                memo_held1[i] = held1
                memo_score[i] = score_without
            total += balanced_w * (half + (HALF_SCORE + score_with - score_without) // 2)
        return total

    return one


def _balanced_vector(tensor: NodeTensor, balanced: _Balanced, idx: IntArray) -> FloatArray:
    """`balanced_allocation` over many nodes for one or two resources (numpy, the same
    float operations in the same order)."""
    with_pod: list[FloatArray] = []
    without_pod: list[FloatArray] = []
    held: list[BoolArray] = []
    for r, request in balanced:
        capacity = tensor.allocatable[r, idx]
        has = capacity != 0
        divisor = np.where(has, capacity, 1.0)
        allocated = tensor.used[r, idx] + tensor.pipelined[r, idx]
        with_pod.append(np.minimum((allocated + request) / divisor, 1.0))
        without_pod.append(np.minimum(allocated / divisor, 1.0))
        held.append(has)
    if len(balanced) == 2:
        both = held[0] & held[1]
        std_with = np.where(both, np.abs((with_pod[0] - with_pod[1]) / 2), 0.0)
        std_without = np.where(both, np.abs((without_pod[0] - without_pod[1]) / 2), 0.0)
    else:
        std_with = std_without = np.zeros(len(idx), dtype=np.float64)
    score_with = np.trunc((1 - std_with) * _TOP)
    score_without = np.trunc((1 - std_without) * _TOP)
    out: FloatArray = HALF_SCORE + (HALF_SCORE + score_with - score_without) // 2
    return out
