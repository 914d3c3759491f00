"""Resource helpers with Volcano's comparison rules (SPEC 3.6) over the domain `Resources`.

Why a separate module: the domain type is exact (nano-units) and knows nothing about the
scheduler's epsilon or shares; these helpers add exactly those rules and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Final

from koordqueue.domain.quantity import MILLI_NANO
from koordqueue.domain.resources import ZERO, Missing, Resources

EPSILON_NANOS: Final = MILLI_NANO // 10
"""0.1 milli-unit: Volcano's minimum resource difference (SPEC 3.6)."""
EPSILON_MILLI: Final = 0.1

__all__ = [
    "EPSILON_MILLI",
    "EPSILON_NANOS",
    "IGNORED_SCALARS",
    "STANDARD_RESOURCES",
    "ZERO",
    "Missing",
    "Resources",
    "add",
    "capacity_share",
    "deserved_share",
    "fits",
    "greater_partly_in_relevant_dims",
    "insufficient",
    "insufficient_in_requested_dims",
    "intersection",
    "less_equal",
    "less_equal_in_dims",
    "less_equal_partly_zero_filtered",
    "min_dims",
    "requested_dims",
    "scale",
    "subtract",
    "sum_resources",
    "volcano_empty",
]


def add(left: Resources, right: Resources) -> Resources:
    """left + right (`Resources.__add__`, which reads its own dict directly, is the faster)."""
    return left + right


def subtract(left: Resources, right: Resources) -> Resources:
    """left - right (see `add`)."""
    return left - right


def less_equal(left: Resources, right: Mapping[str, int], missing: Missing = Missing.ZERO) -> bool:
    """left <= right with the 0.1 milli-unit tolerance."""
    return left.less_equal(right, missing, EPSILON_NANOS)


def fits(request: Resources, available: Mapping[str, int]) -> bool:
    """A request fits when every named amount is <= available (absent counts as 0)."""
    return request.less_equal(available, Missing.ZERO, EPSILON_NANOS)


def less_equal_in_dims(left: Resources, right: Mapping[str, int], dims: Iterable[str]) -> bool:
    """left <= right compared only over `dims` (a dimension absent on the right is unlimited).

    Used for capability checks: a queue limits only what it names, and only what the candidate
    actually requests is examined.
    """
    limits = right.as_dict() if isinstance(right, Resources) else right
    amounts = left.as_dict()
    for name in dims:
        limit = limits.get(name)
        if limit is not None and amounts.get(name, 0) > limit + EPSILON_NANOS:
            return False
    return True


def insufficient(request: Resources, available: Mapping[str, int]) -> list[str]:
    """Names of the resources for which `request` exceeds `available` (sorted)."""
    return sorted(
        name for name, amount in request.items() if amount > available.get(name, 0) + EPSILON_NANOS
    )


def scale(resources: Mapping[str, int], factor: float | Fraction) -> Resources:
    """Every amount times `factor`, rounded down (overcommit, weight fractions)."""
    frac = Fraction(factor)
    return Resources({k: (v * frac.numerator) // frac.denominator for k, v in resources.items()})


def min_dims(left: Resources, cap: Mapping[str, int]) -> Resources:
    """Element-wise min over left's dimensions; a dimension absent from `cap` is unlimited."""
    return Resources({k: min(v, cap[k]) if k in cap else v for k, v in left.items()})


def sum_resources(items: Iterable[Mapping[str, int]]) -> Resources:
    """Sum of many resource lists with one accumulator (cheaper than chained `+`)."""
    acc: dict[str, int] = {}
    get = acc.get
    for item in items:
        for name, amount in item.items():
            acc[name] = get(name, 0) + amount
    return Resources(acc)


# --- Volcano's dimension-aware comparisons (SPEC 3.6, issue 18 item 3) ----------------------

IGNORED_SCALARS: Final = frozenset({"pods"})
"""Volcano skips the `pods` count in every dimension check (every pod asks for one)."""
STANDARD_RESOURCES: Final = frozenset({"cpu", "memory"})
"""Volcano keeps cpu and memory as fixed fields: an absent one is 0, never "not named"."""


def requested_dims(request: Mapping[str, int]) -> list[str]:
    """The dimensions a request really asks for: quantity above zero, `pods` ignored.

    Why: `memory: 0` in a pod is not a demand, so it must not be checked against a queue.
    """
    return [n for n, v in request.items() if v > 0 and n not in IGNORED_SCALARS]


def insufficient_in_requested_dims(
    left: Mapping[str, int], limit: Mapping[str, int], request: Mapping[str, int]
) -> list[str]:
    """Volcano's `LessEqualWithDimensionAndResourcesName`: for every dimension the request
    asks for (> 0), `left` must not exceed `limit` (absent from the limit = 0). Returns the
    names that do exceed (empty = fits)."""
    out: list[str] | None = None
    left_get, limit_get = left.get, limit.get
    for name, amount in request.items():  # requested_dims, inlined: asked once per placement
        if amount > 0 and name not in IGNORED_SCALARS and left_get(name, 0) > limit_get(name, 0):
            if out is None:
                out = []
            out.append(name)
    return sorted(out) if out else []


def less_equal_partly_zero_filtered(
    left: Mapping[str, int], right: Mapping[str, int], request: Mapping[str, int]
) -> bool:
    """Volcano's `LessEqualPartlyWithDimensionZeroFiltered`: is `left <= right` on at least one
    requested dimension, ignoring dimensions that are ~0 on both sides."""
    for name in requested_dims(request):
        lv, rv = left.get(name, 0), right.get(name, 0)
        if lv < EPSILON_NANOS and rv < EPSILON_NANOS:
            continue
        if lv <= rv + EPSILON_NANOS:
            return True
    return False


def greater_partly_in_relevant_dims(
    left: Mapping[str, int], right: Mapping[str, int], request: Mapping[str, int]
) -> list[str]:
    """Volcano's `GreaterPartlyWithRelevantDimensions`: the requested dimensions on which
    `left > right`, looking only at the dimensions `right` names (cpu/memory: above ~0;
    other resources: present, even at 0)."""
    out = []
    for name in requested_dims(request):
        if name in STANDARD_RESOURCES:
            if right.get(name, 0) < EPSILON_NANOS:
                continue
        elif name not in right:
            continue
        if left.get(name, 0) > right.get(name, 0):
            out.append(name)
    return sorted(out)


def _names(res: Mapping[str, int]) -> set[str]:
    return {n for n, v in res.items() if v >= EPSILON_NANOS}


def intersection(left: Mapping[str, int], right: Mapping[str, int]) -> set[str]:
    """Volcano's `IntersectionWithIgnoredScalarResources`: non-zero names in both, no `pods`."""
    return (_names(left) & _names(right)) - IGNORED_SCALARS


def volcano_empty(res: Mapping[str, int]) -> bool:
    """Volcano's `Resource.IsEmpty`: every amount (but `pods`) is ~0."""
    return all(v < EPSILON_NANOS for n, v in res.items() if n not in IGNORED_SCALARS)


def capacity_share(allocated: Mapping[str, int], deserved: Mapping[str, int]) -> float:
    """Volcano's queue share: max over the dimensions the deserved names of allocated /
    deserved; a queue with no deserved (best effort) has share 1, so it goes after every
    queue still under its deserved (capacity `updateQueueAttrShare`)."""
    if volcano_empty(deserved):
        return 1.0
    return deserved_share(allocated, deserved)


def deserved_share(allocated: Mapping[str, int], deserved: Mapping[str, int]) -> float:
    """max over deserved's non-zero dimensions of allocated/deserved (0 when none);
    resources the deserved does not name do not count (proportion `updateQueueAttrShare`)."""
    best = 0.0
    get = allocated.get
    for name, whole in deserved.items():  # `_names(deserved)` without building the set
        if whole >= EPSILON_NANOS:
            ratio = get(name, 0) / whole
            best = max(best, ratio)
    return best
