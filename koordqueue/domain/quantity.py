"""Exact Kubernetes quantity parsing and formatting.

Quantities are held as integers of nano-units (1e-9). That is Kubernetes' own smallest
precision (smaller amounts round up to 1n), so every legal quantity is represented without
float drift, and sums/comparisons are plain integer arithmetic, which keeps admission fast.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Literal

NANO: Final = 10**9
"""Nano-units per whole unit."""

MILLI_NANO: Final = 10**6
"""Nano-units per milli-unit."""

_BINARY: Final = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_EXP: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_QUANTITY_RE: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE]?)$"
)
_MAX_EXPONENT: Final = 64  # larger decimal exponents are refused rather than allocating huge ints
_MAX_DIGITS: Final = 1000  # longer mantissas are refused (int() itself stops at 4300 digits)
_CACHE_SIZE: Final = 4096  # distinct quantity strings remembered (a cluster uses a few dozen)
_CACHED_LENGTH: Final = 64  # longer strings are parsed each time (the cache stays small)

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]


class InvalidQuantityError(ValueError):
    """A quantity string (or number) that Kubernetes would refuse; names the field it came from."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"invalid quantity for {field}: {value!r}: {reason}")


@dataclass(frozen=True, slots=True)
class ParsedQuantity:
    """A parsed quantity: its exact value in nano-units and the suffix family it was written in."""

    nanos: int
    format: Format


class _Refused(Exception):
    """Why a quantity string is refused; raised, never returned, so the cache never holds it."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def parse_quantity(value: object, field: str = "quantity") -> ParsedQuantity:
    """Parse a quantity string or integer exactly; raise InvalidQuantityError naming `field`.

    Strings are parsed once each (a bounded cache: every Job and unit event parses the same
    few, "100m", "1Gi"); a refused string is not cached and raises afresh every time.
    """
    if isinstance(value, str):
        try:
            if len(value) <= _CACHED_LENGTH:
                return _parse_cached(value)
            return _parse_text(value)
        except _Refused as refused:
            raise InvalidQuantityError(field, value, refused.reason) from None
    return parse_quantity_uncached(value, field)


def parse_quantity_uncached(value: object, field: str = "quantity") -> ParsedQuantity:
    """`parse_quantity` without the cache (the reference the cached parse must equal)."""
    if isinstance(value, bool):
        raise InvalidQuantityError(field, value, "expected a string or integer, got a boolean")
    if isinstance(value, int):
        return ParsedQuantity(value * NANO, "DecimalSI")
    if isinstance(value, float):
        # YAML turns "0.5" without quotes into a float; accept it only when it is exact in
        # decimal (repr round-trips), so no binary float error sneaks into the arithmetic.
        if math.isnan(value) or math.isinf(value):
            raise InvalidQuantityError(field, value, "not a finite number")
        return parse_quantity(repr(value), field)
    if not isinstance(value, str):
        raise InvalidQuantityError(
            field, value, f"expected a string or integer, got {type(value).__name__}"
        )
    try:
        return _parse_text(value)
    except _Refused as refused:
        raise InvalidQuantityError(field, value, refused.reason) from None


def _parse_text(value: str) -> ParsedQuantity:
    """Parse a quantity string; raise _Refused with the reason Kubernetes would refuse it."""
    text = value.strip()
    if text != value:
        raise _Refused("leading or trailing whitespace")
    match = _QUANTITY_RE.match(text)
    if match is None:
        raise _Refused("does not match the quantity syntax")
    int_part, frac_part = match["int"], match["frac"] or ""
    if not int_part and not frac_part:
        raise _Refused("no digits")
    if len(int_part) + len(frac_part) > _MAX_DIGITS:
        raise _Refused(f"more than {_MAX_DIGITS} digits")
    suffix = match["suffix"]
    mantissa = Fraction(
        int(int_part or "0") * 10 ** len(frac_part) + int(frac_part or "0"), 10 ** len(frac_part)
    )
    fmt: Format
    if suffix in _BINARY:
        scaled = mantissa * _BINARY[suffix]
        fmt = "BinarySI"
    elif suffix in _DECIMAL_EXP:
        scaled = mantissa * Fraction(10) ** _DECIMAL_EXP[suffix]
        fmt = "DecimalSI"
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise _Refused(f"exponent {exponent} out of range")
        scaled = mantissa * Fraction(10) ** exponent
        fmt = "DecimalExponent"
    nanos = scaled * NANO
    # Kubernetes rounds amounts finer than 1n up (away from zero) to the next nano.
    whole = -((-nanos.numerator) // nanos.denominator)
    return ParsedQuantity(-whole if match["sign"] == "-" else whole, fmt)


_parse_cached: Final = functools.lru_cache(maxsize=_CACHE_SIZE)(_parse_text)
"""`_parse_text`, remembered per string (lru_cache keeps no exceptions: a refused string is
parsed, and refused, again each time)."""


def parse_nanos(value: object, field: str = "quantity") -> int:
    """Shorthand for parse_quantity(...).nanos."""
    return parse_quantity(value, field).nanos


def format_nanos(nanos: int, fmt: Format = "DecimalSI") -> str:
    """Canonical quantity text for a nano-unit amount; parse_nanos(format_nanos(x)) == x."""
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = abs(nanos)
    if fmt == "BinarySI" and magnitude % NANO == 0:
        whole = magnitude // NANO
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if whole % _BINARY[suffix] == 0:
                return f"{sign}{whole // _BINARY[suffix]}{suffix}"
        return f"{sign}{whole}"
    for suffix in ("E", "P", "T", "G", "M", "k", "", "m", "u", "n"):
        unit = 10 ** (_DECIMAL_EXP[suffix] + 9)
        if magnitude % unit == 0:
            return f"{sign}{magnitude // unit}{suffix}"
    raise AssertionError("unreachable: every integer is a multiple of 1n")  # pragma: no cover


def ceil_div(numerator: int, denominator: int) -> int:
    """Integer ceiling division (Kubernetes rounds Value()/MilliValue() up)."""
    return -((-numerator) // denominator)
