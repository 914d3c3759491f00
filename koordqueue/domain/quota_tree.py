"""The quota hierarchy and the CheckUsage walker (SPEC 2.1, 2.5).

Quotas are indexed by name across namespaces. Each quota keeps the usage of its whole subtree,
updated incrementally on admit/release. Limits and usage are packed into one integer per quota
(`quota_layout.Layout`), so a decision costs one subtraction and one mask per level of the
chain, whatever the number of resources; where that finds no room, the plain per-resource
walk names who refused. Parent chains, with their quotas' states, are resolved once and
cached until the structure changes.
Admissions are idempotent per unit UID, and each admission remembers exactly what it added
where, so releases in any order can never drive usage negative.

Besides the subtree total, each quota keeps the part admitted into itself ("self"; the rest is
"children") and the part of units marked oversold (`ForceQuotaOverSold`; the rest is
"guaranteed"), as Koord-Queue's ElasticQuotaInfo does. Only the total takes part in CheckUsage.
What the tree reports (level states, usage splits, the Queue's usage annotations) is in
`quota_usage.py`. Past 600 lines on purpose: `QuotaTree` is one class whose packed state and
the walks that read it change together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from koordqueue.domain.admission import (
    AdmissionRejected,
    Admitted,
    AlreadyReserved,
    Decision,
    EmptyQuotaSpec,
    QuotaCycle,
    QuotaExceeded,
    QuotaMissing,
    ReserveQuotaMissing,
)
from koordqueue.domain.names import ROOT_QUOTA
from koordqueue.domain.quota import QuotaSpec, precedence
from koordqueue.domain.quota_layout import MIN_FIELD_BITS, Layout
from koordqueue.domain.quota_usage import (
    LevelState,
    QuotaUsage,
    ResourceState,
    UsageSplit,
    changed_usage_annotations,
    queue_usage_values,
    render_usage,
)
from koordqueue.domain.resources import Resources

__all__ = [
    "DuplicateCallback",
    "LevelState",
    "QuotaTree",
    "QuotaUsage",
    "ResourceState",
    "UsageSplit",
    "changed_usage_annotations",
    "parse_oversell_rate",
    "queue_usage_values",
    "render_usage",
]
# (the reporting types are quota_usage's, re-exported: callers read a tree's reports here)

DuplicateCallback = Callable[[QuotaSpec, QuotaSpec], None]
"""Called with (in force, ignored) when a second namespace defines a quota of the same name."""


def _first(copies: Iterable[QuotaSpec]) -> QuotaSpec:
    """The definition in force among same-name ones (quota.precedence)."""
    return min(copies, key=lambda q: precedence(q.created, q.namespace))


class _Node:
    """One live quota's CheckUsage state in the current layout (mutated in place)."""

    __slots__ = ("base", "empty", "free", "limits", "name", "oversold", "own", "own_oversold")

    def __init__(self, name: str) -> None:
        self.name = name
        self.limits: tuple[tuple[str, int], ...] = ()
        self.empty = True
        self.base = 0
        """`free` at zero usage: per field GUARD + limit (or + unlimited)."""
        self.free = 0
        """base − packed subtree usage."""
        self.own = 0
        """Packed usage of units admitted into this quota itself."""
        self.oversold = 0
        """Packed usage of oversold units in the subtree."""
        self.own_oversold = 0
        """Packed usage of oversold units admitted into this quota itself."""


@dataclass(frozen=True, slots=True)
class _Chain:
    """A resolved parent chain: the path below the root, or where it broke.

    `nodes` are the path's quota states, `has_empty` whether one has an empty max (those
    refuse a non-empty request, which the packed check cannot see: such chains take the
    plain walk)."""

    path: tuple[str, ...]
    broken_at: str | None = None
    cycle: bool = False
    nodes: tuple[_Node, ...] = ()
    has_empty: bool = False


class _Admission:
    """What one admission added where. A plain slots class: created on every admission, and a
    frozen dataclass's per-field `object.__setattr__` would cost the hot path."""

    __slots__ = ("nodes", "oversold", "packed", "path", "quota", "request")

    def __init__(
        self,
        quota: str,
        request: Resources,
        packed: int,
        chain: _Chain,
        oversold: bool,
    ) -> None:
        self.quota = quota
        self.request = request
        self.packed = packed
        """`request` in the layout current when it was recorded (re-packed on a re-layout)."""
        self.path = chain.path
        self.nodes = chain.nodes
        self.oversold = oversold


_EMPTY_MAX = ""
"""`_refusal`'s answer for a level whose max is empty (no resource is named "")."""


def parse_oversell_rate(rate: float | int | str | Fraction) -> Fraction:
    """The `--oversellrate` flag as an exact fraction; must be positive."""
    try:
        value = Fraction(str(rate)) if not isinstance(rate, Fraction) else rate
    except (ValueError, ZeroDivisionError) as exc:
        raise ValueError(f"invalid oversell rate {rate!r}: not a number") from exc
    if value <= 0:
        raise ValueError(f"invalid oversell rate {rate!r}: must be > 0")
    return value


class QuotaTree:
    """Quotas by name, their parent chains, subtree usage, and CheckUsage."""

    def __init__(
        self,
        oversell_rate: float | int | str | Fraction = 1,
        on_duplicate: DuplicateCallback | None = None,
    ) -> None:
        self._rate = parse_oversell_rate(oversell_rate)
        self._on_duplicate = on_duplicate
        # name -> namespace -> spec; the first by quota.precedence (the oldest) is live.
        self._defs: dict[str, dict[str, QuotaSpec]] = {}
        self._live: dict[str, QuotaSpec] = {}
        self._nodes: dict[str, _Node] = {}
        """Live quotas' limits and packed usage (subtree, self, oversold)."""
        self._layout = Layout((), MIN_FIELD_BITS)
        self._chains: dict[str, _Chain] = {}
        self._units: dict[str, _Admission] = {}
        self._unit_count: dict[str, int] = {}
        self._broken: set[str] = set()
        """Admitted units whose chain is broken (missing ancestor): a new quota may repair them."""

    # --- structure ----------------------------------------------------------------------
    @property
    def oversell_rate(self) -> Fraction:
        return self._rate

    def upsert(self, quota: QuotaSpec) -> None:
        """Add or replace a quota definition. Of same-name definitions in several namespaces
        the one first by `precedence` (the oldest) is live; `on_duplicate` hears of a second
        namespace's definition once, when it appears (not at each update of either)."""
        per_ns = self._defs.setdefault(quota.name, {})
        previous = self._live.get(quota.name)
        added = quota.namespace not in per_ns
        per_ns[quota.namespace] = quota
        live = _first(per_ns.values())
        if added and len(per_ns) > 1 and self._on_duplicate:
            ignored = quota if live is not quota else previous
            if ignored is not None:
                self._on_duplicate(live, ignored)
        if live is quota:
            self._set_live(quota.name, quota, previous)

    def remove(self, name: str, namespace: str | None = None) -> QuotaSpec | None:
        """Remove a quota definition; a same-name quota from another namespace takes over."""
        per_ns = self._defs.get(name)
        if not per_ns:
            return None
        if namespace is None:
            removed = self._live[name]
            per_ns.clear()
        else:
            found = per_ns.pop(namespace, None)
            if found is None:
                return None
            removed = found
        previous = self._live.get(name)
        if per_ns:
            live = _first(per_ns.values())
            if live is not previous:
                self._set_live(name, live, previous)
        else:
            del self._defs[name]
            self._live.pop(name, None)
            self._nodes.pop(name, None)
            self._invalidate_structure()
        return removed

    def copies(self, name: str) -> list[QuotaSpec]:
        """Every namespace's definition of `name`, the live one first."""
        return sorted(
            self._defs.get(name, {}).values(), key=lambda q: precedence(q.created, q.namespace)
        )

    def _set_live(self, name: str, quota: QuotaSpec, previous: QuotaSpec | None) -> None:
        self._live[name] = quota
        num, den = self._rate.numerator, self._rate.denominator
        limits = tuple((res, (amount * num) // den) for res, amount in quota.max.items())
        self._ensure_layout([res for res, _ in limits], max((abs(v) for _, v in limits), default=0))
        node = self._nodes.get(name)
        if node is None:
            node = self._nodes[name] = _Node(name)
        was_empty = node.empty
        node.limits = limits
        node.empty = not limits
        base = self._layout.base(dict(limits))
        node.free += base - node.base  # the usage (base − free) is unchanged
        node.base = base
        if previous is None and not self._broken:
            # A brand-new quota cannot be on any admitted unit's (intact) path: only the
            # cached chains that ended at this missing name change. O(1), not O(units).
            self._chains.clear()
        elif previous is None or previous.parent != quota.parent:
            self._invalidate_structure()
        elif was_empty != node.empty:
            self._chains.clear()  # chains cache whether a level has an empty max

    def _invalidate_structure(self) -> None:
        """Parent links changed: forget chains and recompute subtree usage from the units."""
        self._chains.clear()
        for node in self._nodes.values():
            node.free = node.base
            node.own = node.oversold = node.own_oversold = 0
        self._unit_count.clear()
        self._broken.clear()
        units = self._units
        for uid, adm in list(units.items()):
            chain = self._chain(adm.quota)
            if chain.broken_at is not None:
                self._broken.add(uid)
            units[uid] = _Admission(adm.quota, adm.request, adm.packed, chain, adm.oversold)
            self._apply(chain.nodes, adm.packed, adm.oversold)
            self._unit_count[adm.quota] = self._unit_count.get(adm.quota, 0) + 1

    def _ensure_layout(self, names: Iterable[str], magnitude: int) -> None:
        """Re-lay the packed state out if a name has no field yet or `magnitude` is too large
        for the fields: every quota's and every admission's packed values are re-encoded."""
        old = self._layout
        names = list(names)
        if old.holds(names, magnitude):
            return
        width = max(old.width, Layout.width_for(magnitude))
        new = Layout([*old.shifts, *dict.fromkeys(n for n in names if n not in old.shifts)], width)
        for node in self._nodes.values():
            used = old.unpack(node.base - node.free)
            node.base = new.base(dict(node.limits))
            node.free = node.base - new.pack(used.items())
            node.own = new.pack(old.unpack(node.own).items())
            node.oversold = new.pack(old.unpack(node.oversold).items())
            node.own_oversold = new.pack(old.unpack(node.own_oversold).items())
        for adm in self._units.values():
            adm.packed = new.pack(adm.request.items())
        self._layout = new

    def _pack(self, request: Resources) -> int:
        """`request` in the current layout (cached on the request while the layout lives)."""
        nonzero = [(k, v) for k, v in request._amounts.items() if v]
        self._ensure_layout([k for k, _ in nonzero], max((abs(v) for _, v in nonzero), default=0))
        layout = self._layout
        packed = layout.pack(nonzero)
        request._packed = (layout, packed)
        return packed

    def __contains__(self, name: object) -> bool:
        return name in self._live

    def __iter__(self) -> Iterator[QuotaSpec]:
        return iter(self._live.values())

    def __len__(self) -> int:
        return len(self._live)

    def get(self, name: str) -> QuotaSpec | None:
        return self._live.get(name)

    # --- chains -------------------------------------------------------------------------
    def _chain(self, name: str) -> _Chain:
        chain = self._chains.get(name)
        if chain is None:
            chain = self._walk(name)
            self._chains[name] = chain
        return chain

    def _walk(self, name: str) -> _Chain:
        visited: list[str] = []
        seen: set[str] = set()
        current = name
        broken_at: str | None = None
        cycle = False
        while current != ROOT_QUOTA:
            if current in seen:
                broken_at, cycle = current, True
                break
            quota = self._live.get(current)
            if quota is None:
                broken_at = current
                break
            visited.append(current)
            seen.add(current)
            current = quota.parent
        nodes = tuple(self._nodes[n] for n in visited)
        has_empty = any(node.empty for node in nodes)
        return _Chain(tuple(visited), broken_at, cycle, nodes, has_empty)

    def path(self, name: str) -> tuple[str, ...]:
        """Quotas from `name` up to, not including, the root (as far as the chain is intact)."""
        return self._chain(name).path

    # --- CheckUsage ---------------------------------------------------------------------
    def check(self, unit: str, quota: str, request: Resources) -> Decision:
        """Decide whether `request` fits every quota from `quota` to the root; changes nothing.

        Koord-Queue's walk: each level's usage is checked before the walk moves to its
        parent, so a limit hit below a missing ancestor or a cycle is what gets reported.
        A quota with an empty max refuses any non-empty request (even one of zeros).
        """
        chain = self._chains.get(quota) or self._chain(quota)
        cached = request._packed
        packed = cached[1] if cached is not None and cached[0] is self._layout else None
        if packed is None:
            packed = self._pack(request)
        return self._decide(unit, quota, request, chain, packed)

    def _decide(
        self, unit: str, quota: str, request: Resources, chain: _Chain, packed: int
    ) -> Decision:
        """The packed check of every level; the plain walk from the level where it finds no
        room (the levels below it have room: the packed check is exact when it passes)."""
        if chain.has_empty:
            return self._walk_check(unit, quota, request._amounts, chain)
        guard = self._layout.guard_mask
        nodes = chain.nodes
        for node in nodes:
            if (node.free - packed) & guard != guard:
                return self._walk_check(unit, quota, request._amounts, chain, nodes.index(node))
        return self._outcome(unit, quota, chain)

    def _outcome(self, unit: str, quota: str, chain: _Chain) -> Decision:
        """The decision once every level of the intact part of `chain` has room."""
        broken_at = chain.broken_at
        if broken_at is not None:
            if chain.cycle:
                return QuotaCycle(unit, broken_at, chain.path)
            return QuotaMissing(unit, broken_at, (*chain.path, broken_at))
        return Admitted(unit, quota, chain.path)

    def _walk_check(
        self, unit: str, quota: str, req: Mapping[str, int], chain: _Chain, start: int = 0
    ) -> Decision:
        """Koord-Queue's walk, level by level (from level `start`) and in each max's resource
        order: where the packed check found no room, or a level has an empty max, this names
        who refused."""
        nodes = chain.nodes
        for level in range(start, len(nodes)):
            node = nodes[level]
            refused = self._refusal(node, req)
            if refused is not None:
                if refused == _EMPTY_MAX:
                    return EmptyQuotaSpec(unit, node.name, chain.path)
                return QuotaExceeded(unit, node.name, refused, chain.path)
        return self._outcome(unit, quota, chain)

    def _room(self, node: _Node, res: str) -> int:
        """limit − used of `res` at `node`, read from its field of `free`."""
        layout = self._layout
        return ((node.free >> layout.shifts[res]) & layout.mask) - layout.guard

    def _refusal(self, node: _Node, req: Mapping[str, int]) -> str | None:
        """Why one level refuses a request: the first resource of its max without room,
        `_EMPTY_MAX` for an empty max (which refuses any non-empty request, even one of
        zeros), or None when the level has room."""
        limits = node.limits
        if not limits:
            return _EMPTY_MAX if req else None
        layout = self._layout
        shifts, mask, guard, free = layout.shifts, layout.mask, layout.guard, node.free
        for res, _ in limits:
            if ((free >> shifts[res]) & mask) - guard < req.get(res, 0):  # `_room`, inline
                return res
        return None

    def levels(self, quota: str, request: Resources) -> list[LevelState]:
        """Every level of `quota`'s intact chain as CheckUsage reads it for `request`, each
        with its own verdict (the walk stops at the first refusal; this goes on), for a
        reader that shows the whole chain (explain)."""
        req = request._amounts
        out: list[LevelState] = []
        for node in self._chain(quota).nodes:
            spec = self._live[node.name]
            used = self._usage(node.name)
            checks = tuple(
                ResourceState(res, limit, used.get(res, 0), req.get(res, 0),
                              self._room(node, res) >= req.get(res, 0))
                for res, limit in sorted(node.limits)
            )
            out.append(LevelState(
                node.name, spec.parent, checks, empty_max=not node.limits,
                refuses=self._refusal(node, req) is not None,
            ))
        return out

    def try_admit(
        self, uid: str, unit: str, quota: str, request: Resources, *, oversold: bool = False
    ) -> Decision:
        """CheckUsage and, when it passes, record the admission; idempotent per UID.

        A UID already admitted into `quota` gets `Admitted` again (no change); one admitted
        into another quota gets `AlreadyReserved` (Koord-Queue's Reserve refuses it).
        """
        units = self._units
        adm = units.get(uid)
        if adm is not None:
            if adm.quota == quota:
                return Admitted(unit, adm.quota, adm.path)
            return AlreadyReserved(unit, quota, adm.quota)
        chain = self._chains.get(quota) or self._chain(quota)
        cached = request._packed
        packed = cached[1] if cached is not None and cached[0] is self._layout else None
        if packed is None:
            packed = self._pack(request)
        nodes = chain.nodes
        if not chain.has_empty and chain.broken_at is None:
            # The hot path: check every level, then take the request off every level.
            guard = self._layout.guard_mask
            for node in nodes:
                if (node.free - packed) & guard != guard:
                    # No room at this level (the ones below have room): name who refused.
                    level = nodes.index(node)
                    decision = self._walk_check(unit, quota, request._amounts, chain, level)
                    break
            else:
                for node in nodes:
                    node.free -= packed
                if nodes:
                    nodes[0].own += packed
                    if oversold:
                        nodes[0].own_oversold += packed
                        for node in nodes:
                            node.oversold += packed
                units[uid] = _Admission(quota, request, packed, chain, oversold)
                count = self._unit_count
                count[quota] = count.get(quota, 0) + 1
                return Admitted(unit, quota, chain.path)
        else:
            # A broken chain, or an empty max on the way (which still admits an empty
            # request): the packed check and the plain walk decide.
            decision = self._decide(unit, quota, request, chain, packed)
        if decision.admitted:
            self._record(uid, quota, request, oversold, chain)
        return decision

    def admit(
        self,
        uid: str,
        quota: str,
        request: Resources,
        *,
        oversold: bool = False,
        unit: str | None = None,
    ) -> bool:
        """Record an admission without checking (Koord-Queue's Reserve; used to rebuild state
        after a restart).

        Returns False if the UID was already admitted into `quota` (nothing changes); raises
        AdmissionRejected(AlreadyReserved) if it is admitted into another quota, and
        AdmissionRejected(ReserveQuotaMissing) if `quota` does not exist (nothing recorded;
        a missing ancestor only ends the path, as in Koord-Queue). `unit` only names the
        unit in those messages (the UID otherwise).
        """
        adm = self._units.get(uid)
        if adm is not None:
            if adm.quota == quota:
                return False
            raise AdmissionRejected(AlreadyReserved(unit or uid, quota, adm.quota))
        if quota not in self._live:
            raise AdmissionRejected(ReserveQuotaMissing(unit or uid, quota))
        self._record(uid, quota, request, oversold, self._chain(quota))
        return True

    def _record(
        self, uid: str, quota: str, request: Resources, oversold: bool, chain: _Chain
    ) -> None:
        cached = request._packed
        packed = cached[1] if cached is not None and cached[0] is self._layout else None
        if packed is None:
            packed = self._pack(request)
        if chain.broken_at is not None:
            self._broken.add(uid)
        self._units[uid] = _Admission(quota, request, packed, chain, oversold)
        self._apply(chain.nodes, packed, oversold)
        self._unit_count[quota] = self._unit_count.get(quota, 0) + 1

    def release(self, uid: str) -> bool:
        """Give back what an admission added; False (and no change) if it was not admitted."""
        adm = self._units.pop(uid, None)
        if adm is None:
            return False
        self._broken.discard(uid)
        packed = adm.packed
        nodes = adm.nodes
        for node in nodes:
            node.free += packed
        if nodes:
            nodes[0].own -= packed
            if adm.oversold:
                nodes[0].own_oversold -= packed
                for node in nodes:
                    node.oversold -= packed
        count = self._unit_count.get(adm.quota, 0) - 1
        if count > 0:
            self._unit_count[adm.quota] = count
        else:
            self._unit_count.pop(adm.quota, None)
        return True

    @staticmethod
    def _apply(nodes: tuple[_Node, ...], packed: int, oversold: bool) -> None:
        """Add one admission's packed request along `nodes` (its own quota first)."""
        for node in nodes:
            node.free -= packed
        if nodes:
            nodes[0].own += packed
            if oversold:
                nodes[0].own_oversold += packed
                for node in nodes:
                    node.oversold += packed

    # --- queries ------------------------------------------------------------------------
    def is_admitted(self, uid: str) -> bool:
        return uid in self._units

    def admitted_uids(self) -> list[str]:
        return list(self._units)

    def _usage(self, name: str) -> dict[str, int]:
        node = self._nodes.get(name)
        return {} if node is None else self._layout.unpack(node.base - node.free)

    def used(self, name: str) -> Resources:
        """Usage of the subtree rooted at `name` (admitted units only)."""
        return Resources(self._usage(name))

    def limit(self, name: str) -> Resources:
        """max × oversellrate (rounded down to the nano-unit) for `name`."""
        node = self._nodes.get(name)
        return Resources(dict(node.limits) if node is not None else {})

    def usage_split(self, name: str) -> UsageSplit:
        """`name`'s usage split into self / children and guaranteed / oversold."""
        node = self._nodes.get(name)
        unpack = self._layout.unpack
        used = self._usage(name)
        own = unpack(node.own) if node is not None else {}
        oversold = unpack(node.oversold) if node is not None else {}
        own_oversold = unpack(node.own_oversold) if node is not None else {}
        guaranteed = _minus(used, oversold)
        own_guaranteed = _minus(own, own_oversold)
        return UsageSplit(
            used=Resources(used),
            self_used=Resources(own),
            children_used=Resources(_minus(used, own)),
            guaranteed_used=Resources(guaranteed),
            self_guaranteed_used=Resources(own_guaranteed),
            children_guaranteed_used=Resources(_minus(guaranteed, own_guaranteed)),
            oversold_used=Resources(oversold),
            self_oversold_used=Resources(own_oversold),
            children_oversold_used=Resources(_minus(oversold, own_oversold)),
        )

    def reserved_quota(self, uid: str) -> str | None:
        """The quota `uid` is admitted into (Koord-Queue's `GetReserved`), or None."""
        adm = self._units.get(uid)
        return None if adm is None else adm.quota

    def reserved_request(self, uid: str) -> Resources | None:
        """What `uid` holds (its request when admitted), or None."""
        adm = self._units.get(uid)
        return None if adm is None else adm.request

    def is_oversold(self, uid: str) -> bool:
        """Whether `uid`'s admission counts as oversold (False if it is not admitted)."""
        adm = self._units.get(uid)
        return adm is not None and adm.oversold

    def report(self) -> list[QuotaUsage]:
        """One row per live quota, sorted by name, for status, metrics and `explain`."""
        return [
            QuotaUsage(
                name=q.name,
                parent=q.parent,
                min=q.min,
                max=q.max,
                used=self.used(q.name),
                admitted_units=self._unit_count.get(q.name, 0),
                split=self.usage_split(q.name),
                annotations=q.annotations,
            )
            for q in sorted(self._live.values(), key=lambda q: q.name)
        ]


def _minus(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """a − b per resource, without zero entries (b is always a part of a)."""
    out = dict(a)
    for res, amount in b.items():
        value = out.get(res, 0) - amount
        if value:
            out[res] = value
        else:
            out.pop(res, None)
    return out
