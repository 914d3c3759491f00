"""How a quota tree packs resource lists into integers (SWAR), so that CheckUsage compares
every resource of a level with one subtraction and one mask (see `Layout`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

MIN_FIELD_BITS = 160
"""Field width of the packed layout to start with: amounts below 2**88 nano-units (300 PB of
memory) fit without a re-layout."""
_SPARE_BITS = 72
"""Bits a field keeps above the largest amount: room for 2**64 units summed, plus guards."""


class Layout:
    """How a tree packs a resource list into one integer: one `width`-bit field per resource.

    CheckUsage compares every requested and every limited resource at every level of a chain.
    Packed, a level costs one big-integer subtraction and one mask instead of a dict look-up
    per resource: a quota's `free` holds, per field, `GUARD + limit − used` (unlimited
    resources have a limit of `unlimited`), so `free − request` keeps every field's top bit
    set exactly when `limit − used >= request` for every resource (SWAR: fields never borrow
    from each other because every value stays far below the field width; the width grows
    whenever a larger amount appears). Usage tables (self, oversold) pack signed fields.
    Immutable: a new resource name or a larger amount makes a new layout.
    """

    __slots__ = ("bound", "guard", "guard_mask", "mask", "shifts", "unlimited", "width")

    def __init__(self, names: Iterable[str], width: int) -> None:
        self.width = width
        self.shifts: dict[str, int] = {name: i * width for i, name in enumerate(names)}
        self.mask = (1 << width) - 1
        self.guard = 1 << (width - 1)
        self.unlimited = 1 << (width - 4)
        self.bound = 1 << (width - _SPARE_BITS)
        """Largest magnitude (exclusive) of a limit or request amount this layout holds."""
        self.guard_mask = sum(self.guard << shift for shift in self.shifts.values())

    @staticmethod
    def width_for(magnitude: int) -> int:
        """The field width (a multiple of 32 bits) for amounts up to `magnitude`."""
        bits = max(MIN_FIELD_BITS, magnitude.bit_length() + _SPARE_BITS + 1)
        return -(-bits // 32) * 32

    def holds(self, names: Iterable[str], magnitude: int) -> bool:
        """Whether every name has a field and amounts up to `magnitude` are small enough."""
        shifts = self.shifts
        return magnitude < self.bound and all(name in shifts for name in names)

    def pack(self, amounts: Iterable[tuple[str, int]]) -> int:
        """Signed fields: Σ amount << shift (the caller made sure every name has a field)."""
        shifts = self.shifts
        return sum(v << shifts[k] for k, v in amounts if v)

    def unpack(self, packed: int) -> dict[str, int]:
        """The signed fields of `packed`, zero fields left out, in field order."""
        out: dict[str, int] = {}
        mask, guard, span = self.mask, self.guard, 1 << self.width
        for name, shift in self.shifts.items():
            value = (packed >> shift) & mask
            if value >= guard:
                value -= span
            packed -= value << shift
            if value:
                out[name] = value
        return out

    def base(self, limits: Mapping[str, int]) -> int:
        """`free` of a quota with these limits and no usage."""
        guard, unlimited = self.guard, self.unlimited
        return sum(
            (guard + limits.get(name, unlimited)) << shift for name, shift in self.shifts.items()
        )
