"""Resource lists (cpu, memory, any extended resource) with exact arithmetic.

A `Resources` is an immutable mapping from resource name to an amount in nano-units. The
same type serves quota limits, unit requests and the scheduler's node/queue accounting, so
there is one definition of "fits" in the whole code base.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from enum import Enum
from typing import Any, Final

from koordqueue.domain.quantity import (
    MILLI_NANO,
    NANO,
    Format,
    InvalidQuantityError,
    ceil_div,
    format_nanos,
    parse_quantity,
)

CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"
GPU: Final = "nvidia.com/gpu"

_BINARY_RESOURCES: Final = frozenset({MEMORY, "ephemeral-storage", "storage"})
_NAME_MAX: Final = 316  # DNS-1123 subdomain (253) + "/" + qualified name (63 minus slack)


class Missing(Enum):
    """How a resource absent from the right-hand side of a comparison is treated."""

    ZERO = "zero"
    """Absent means 0 (Volcano's LessEqual with Zero)."""
    INFINITY = "infinity"
    """Absent means unlimited (Volcano's LessEqual with Infinity)."""


class Resources(Mapping[str, int]):
    """An immutable resource list in nano-units; zero entries are kept (a limit of 0 is a limit)."""

    __slots__ = ("_amounts", "_hash", "_packed")

    _amounts: dict[str, int]

    def __init__(self, amounts: Mapping[str, int] | None = None) -> None:
        self._amounts = dict(amounts) if amounts else {}
        self._hash: int | None = None
        self._packed: tuple[object, int] | None = None
        """(layout, packed int): QuotaTree's encoding of this list, kept while its layout lives
        (a unit's request is checked every round; encoding it once per layout pays)."""

    # --- construction -------------------------------------------------------------------
    @classmethod
    def parse(
        cls, raw: object, field: str = "resources", *, allow_negative: bool = False
    ) -> Resources:
        """Parse a Kubernetes resource list (`{"cpu": "500m", ...}`); None means empty.

        Errors name the exact field (`spec.max.cpu`) so an operator can find the typo.
        """
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise InvalidQuantityError(field, raw, "expected a map of resource name to quantity")
        amounts: dict[str, int] = {}
        for name, value in raw.items():
            if not isinstance(name, str) or not name or len(name) > _NAME_MAX:
                raise InvalidQuantityError(f"{field}[{name!r}]", value, "invalid resource name")
            try:
                nanos = parse_quantity(value).nanos
            except InvalidQuantityError as exc:  # the field is named only when it is needed
                raise InvalidQuantityError(f"{field}.{name}", value, exc.reason) from None
            if nanos < 0 and not allow_negative:
                raise InvalidQuantityError(f"{field}.{name}", value, "must not be negative")
            amounts[name] = nanos
        return cls(amounts)

    @classmethod
    def of(
        cls, raw: Mapping[str, str | int] | None = None, /, **quantities: str | int
    ) -> Resources:
        """Convenience: Resources.of(cpu="1") or Resources.of({"nvidia.com/gpu": 1})."""
        merged: dict[str, str | int] = dict(raw or {})
        merged.update(quantities)
        return cls.parse(merged)

    # --- Mapping protocol ---------------------------------------------------------------
    def __getitem__(self, name: str) -> int:
        return self._amounts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._amounts)

    def __len__(self) -> int:
        return len(self._amounts)

    # Delegate the hot Mapping methods to the dict (the generic mixins go through __getitem__).
    def __contains__(self, name: object) -> bool:
        return name in self._amounts

    def get(self, name: str, default: Any = None) -> Any:
        return self._amounts.get(name, default)

    def items(self) -> ItemsView[str, int]:
        return self._amounts.items()

    def keys(self) -> KeysView[str]:
        return self._amounts.keys()

    def values(self) -> ValuesView[int]:
        return self._amounts.values()

    def get_nanos(self, name: str) -> int:
        """Amount in nano-units, 0 when absent."""
        return self._amounts.get(name, 0)

    def milli(self, name: str) -> int:
        """Amount in milli-units rounded up (cpu millicores), 0 when absent."""
        return ceil_div(self._amounts.get(name, 0), MILLI_NANO)

    def value(self, name: str) -> int:
        """Amount in whole units rounded up (memory bytes, GPUs), 0 when absent."""
        return ceil_div(self._amounts.get(name, 0), NANO)

    def as_dict(self) -> dict[str, int]:
        """A mutable copy of the nano-unit amounts (for accumulators)."""
        return dict(self._amounts)

    # --- algebra -----------------------------------------------------------------------
    def __add__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._amounts)
        for name, amount in other.items():
            out[name] = out.get(name, 0) + amount
        return Resources(out)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        out = dict(self._amounts)
        for name, amount in other.items():
            out[name] = out.get(name, 0) - amount
        return Resources(out)

    def __mul__(self, factor: int) -> Resources:
        return Resources({name: amount * factor for name, amount in self._amounts.items()})

    __rmul__ = __mul__

    def __neg__(self) -> Resources:
        return Resources({name: -amount for name, amount in self._amounts.items()})

    def is_empty(self) -> bool:
        """True when no resource is named at all (an empty quota spec)."""
        return not self._amounts

    def is_zero(self) -> bool:
        """True when every named amount is zero (an empty request)."""
        return not any(self._amounts.values())

    def nonzero(self) -> Resources:
        """The same list without zero entries."""
        return Resources({k: v for k, v in self._amounts.items() if v})

    def max(self, other: Mapping[str, int]) -> Resources:
        """Element-wise maximum (the init-container rule)."""
        out = dict(self._amounts)
        for name, amount in other.items():
            out[name] = max(out.get(name, 0), amount)
        return Resources(out)

    def min(self, other: Mapping[str, int]) -> Resources:
        """Element-wise minimum over the union of names (absent counts as 0)."""
        names = set(self._amounts) | set(other)
        return Resources({n: min(self._amounts.get(n, 0), other.get(n, 0)) for n in names})

    def clamp_nonnegative(self) -> Resources:
        """Negative entries raised to 0 (used for idle/remaining amounts)."""
        return Resources({k: max(v, 0) for k, v in self._amounts.items()})

    def less_equal(
        self, other: Mapping[str, int], missing: Missing = Missing.ZERO, epsilon: int = 0
    ) -> bool:
        """True when every amount here is <= the other's (+epsilon nano-units)."""
        for name, amount in self._amounts.items():
            if name in other:
                if amount > other[name] + epsilon:
                    return False
            elif missing is Missing.ZERO and amount > epsilon:
                return False
        return True

    # --- identity and display ----------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        names = set(self._amounts) | set(other)
        return all(self._amounts.get(n, 0) == other.get(n, 0) for n in names)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset((k, v) for k, v in self._amounts.items() if v))
        return self._hash

    def to_quantities(self) -> dict[str, str]:
        """Kubernetes-style quantity strings (binary suffixes for byte-valued resources)."""
        return {
            name: format_nanos(amount, _format_for(name))
            for name, amount in sorted(self._amounts.items())
        }

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.to_quantities().items())
        return f"Resources({inner})"

    def __str__(self) -> str:
        return ",".join(f"{k}:{v}" for k, v in self.to_quantities().items()) or "<none>"


def _format_for(name: str) -> Format:
    return "BinarySI" if name in _BINARY_RESOURCES else "DecimalSI"


ZERO: Final = Resources()
