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
    "ZERO",
    "Missing",
    "Resources",
    "add",
    "fits",
    "insufficient",
    "less_equal",
    "less_equal_in_dims",
    "min_dims",
    "scale",
    "share",
    "subtract",
    "sum_resources",
]


def add(left: Resources, right: Resources) -> Resources:
    """left + right; faster than `Resources.__add__` for the per-task event handlers."""
    out = left.as_dict()
    for name, amount in right.as_dict().items():
        out[name] = out.get(name, 0) + amount
    return Resources(out)


def subtract(left: Resources, right: Resources) -> Resources:
    """left - right (see `add`)."""
    out = left.as_dict()
    for name, amount in right.as_dict().items():
        out[name] = out.get(name, 0) - amount
    return Resources(out)


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


def share(allocated: Mapping[str, int], total: Mapping[str, int]) -> float:
    """Dominant share: max over resources of allocated/total (0/0 = 0, x/0 = 1)."""
    best = 0.0
    items = allocated.as_dict().items() if isinstance(allocated, Resources) else allocated.items()
    for name, amount in items:
        if amount <= 0:
            continue
        whole = total.get(name, 0)
        ratio = 1.0 if whole <= 0 else amount / whole
        best = max(best, ratio)
    return best


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
    for item in items:
        for name, amount in item.items():
            acc[name] = acc.get(name, 0) + amount
    return Resources(acc)
