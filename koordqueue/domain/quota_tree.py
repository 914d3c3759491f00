"""The quota hierarchy and the CheckUsage walker (SPEC 2.1, 2.5).

Quotas are indexed by name across namespaces. Each quota keeps the usage of its whole subtree,
updated incrementally on admit/release, so a decision costs O(depth × resources named in max)
dictionary look-ups. Parent chains are resolved once and cached until the structure changes.
Admissions are idempotent per unit UID, and each admission remembers exactly what it added
where, so releases in any order can never drive usage negative.

Besides the subtree total, each quota keeps the part admitted into itself ("self"; the rest is
"children") and the part of units marked oversold (`ForceQuotaOverSold`; the rest is
"guaranteed"), as Koord-Queue's ElasticQuotaInfo does. Only the total takes part in CheckUsage.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
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
)
from koordqueue.domain.names import (
    QUEUE_CHILDREN_GUARANTEED_USED_ANNOTATION,
    QUEUE_CHILDREN_USED_ANNOTATION,
    QUEUE_GUARANTEED_USED_ANNOTATION,
    QUEUE_SELF_GUARANTEED_USED_ANNOTATION,
    QUEUE_SELF_USED_ANNOTATION,
    QUEUE_USED_ANNOTATION,
    ROOT_QUOTA,
)
from koordqueue.domain.quantity import NANO, ceil_div
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources

DuplicateCallback = Callable[[QuotaSpec, QuotaSpec], None]
"""Called with (previous, winner) when two namespaces define a quota of the same name."""


@dataclass(frozen=True, slots=True)
class _Chain:
    """A resolved parent chain: the path below the root, or where it broke."""

    path: tuple[str, ...]
    broken_at: str | None = None
    cycle: bool = False


class _Admission:
    """What one admission added where. A plain slots class: created on every admission, and a
    frozen dataclass's per-field `object.__setattr__` would cost the hot path."""

    __slots__ = ("oversold", "path", "quota", "request")

    def __init__(
        self,
        quota: str,
        request: tuple[tuple[str, int], ...],
        path: tuple[str, ...],
        oversold: bool,
    ) -> None:
        self.quota = quota
        self.request = request
        self.path = path
        self.oversold = oversold


@dataclass(frozen=True, slots=True)
class UsageSplit:
    """A quota's usage split as Koord-Queue's ElasticQuotaInfo splits it.

    `used` is the whole subtree; `self_used` the units admitted into this quota itself,
    `children_used` those admitted below it. `oversold_used` the units whose actual oversold
    type is `ForceQuotaOverSold`, `guaranteed_used` all others; each also split self/children.
    """

    used: Resources
    self_used: Resources
    children_used: Resources
    guaranteed_used: Resources
    self_guaranteed_used: Resources
    children_guaranteed_used: Resources
    oversold_used: Resources
    self_oversold_used: Resources
    children_oversold_used: Resources


def queue_usage_values(split: UsageSplit) -> dict[str, dict[str, int]]:
    """The six usage annotations Koord-Queue's queue controller keeps on a quota's Queue, as
    whole units per resource (Kubernetes `Quantity.Value()`: rounded up). Oversold usage is
    not among them upstream."""
    parts = {
        QUEUE_USED_ANNOTATION: split.used,
        QUEUE_GUARANTEED_USED_ANNOTATION: split.guaranteed_used,
        QUEUE_SELF_USED_ANNOTATION: split.self_used,
        QUEUE_SELF_GUARANTEED_USED_ANNOTATION: split.self_guaranteed_used,
        QUEUE_CHILDREN_USED_ANNOTATION: split.children_used,
        QUEUE_CHILDREN_GUARANTEED_USED_ANNOTATION: split.children_guaranteed_used,
    }
    return {
        key: {res: ceil_div(nanos, NANO) for res, nanos in amounts.items()}
        for key, amounts in parts.items()
    }


def render_usage(values: Mapping[str, int]) -> str:
    """A usage map as Go's `json.Marshal` writes it: keys sorted, no spaces."""
    return json.dumps(dict(values), sort_keys=True, separators=(",", ":"))


def changed_usage_annotations(
    current: Mapping[str, str], wanted: Mapping[str, Mapping[str, int]]
) -> dict[str, str]:
    """The annotations of `wanted` whose value differs from `current`, rendered.

    As Koord-Queue (`isQueueAnnotationDiff`), zero entries are ignored on both sides, so an
    absent annotation equals an all-zero usage. An unreadable current value is rewritten.
    """
    changed: dict[str, str] = {}
    for key, values in wanted.items():
        want = {res: v for res, v in values.items() if v}
        raw = current.get(key)
        have: object = {}
        if raw:
            try:
                have = json.loads(raw)
            except ValueError:
                have = None
        if not isinstance(have, dict) or {k: v for k, v in have.items() if v} != want:
            changed[key] = render_usage(values)
    return changed


@dataclass(frozen=True, slots=True)
class QuotaUsage:
    """Reporting row: a quota's limits, annotations and its subtree usage (with its split)."""

    name: str
    parent: str
    min: Resources
    max: Resources
    used: Resources
    admitted_units: int
    split: UsageSplit | None = None
    annotations: Mapping[str, str] = field(default_factory=dict, hash=False)


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
        # name -> namespace -> spec, in write order; the last written is the live one.
        self._defs: dict[str, dict[str, QuotaSpec]] = {}
        self._live: dict[str, QuotaSpec] = {}
        self._limits: dict[str, tuple[tuple[str, int], ...]] = {}
        self._used: dict[str, dict[str, int]] = {}
        # Per quota: usage of units admitted into the quota itself, of oversold units in the
        # subtree, and of oversold units admitted into the quota itself (the rest is derived).
        self._self: dict[str, dict[str, int]] = {}
        self._oversold: dict[str, dict[str, int]] = {}
        self._self_oversold: dict[str, dict[str, int]] = {}
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
        """Add or replace a quota; a same-name quota in another namespace is superseded."""
        per_ns = self._defs.setdefault(quota.name, {})
        previous = self._live.get(quota.name)
        if previous is not None and previous.namespace != quota.namespace and self._on_duplicate:
            self._on_duplicate(previous, quota)
        per_ns.pop(quota.namespace, None)
        per_ns[quota.namespace] = quota  # re-insert so dict order is write order
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
            self._set_live(name, next(reversed(per_ns.values())), previous)
        else:
            del self._defs[name]
            self._live.pop(name, None)
            self._limits.pop(name, None)
            self._invalidate_structure()
        return removed

    def _set_live(self, name: str, quota: QuotaSpec, previous: QuotaSpec | None) -> None:
        self._live[name] = quota
        self._limits[name] = tuple(
            (res, (amount * self._rate.numerator) // self._rate.denominator)
            for res, amount in quota.max.items()
        )
        self._used.setdefault(name, {})
        if previous is None and not self._broken:
            # A brand-new quota cannot be on any admitted unit's (intact) path: only the
            # cached chains that ended at this missing name change. O(1), not O(units).
            self._chains.clear()
        elif previous is None or previous.parent != quota.parent:
            self._invalidate_structure()

    def _invalidate_structure(self) -> None:
        """Parent links changed: forget chains and recompute subtree usage from the units."""
        self._chains.clear()
        for used in self._used.values():
            used.clear()
        self._self.clear()
        self._oversold.clear()
        self._self_oversold.clear()
        self._unit_count.clear()
        self._broken.clear()
        for uid, adm in list(self._units.items()):
            path = self._reachable_path(adm.quota)
            if self._chain(adm.quota).broken_at is not None:
                self._broken.add(uid)
            self._units[uid] = _Admission(adm.quota, adm.request, path, adm.oversold)
            self._apply(path, adm.request, 1, adm.oversold)
            self._unit_count[adm.quota] = self._unit_count.get(adm.quota, 0) + 1
        for name in [n for n in self._used if n not in self._live]:
            if not self._used[name]:
                del self._used[name]

    def __contains__(self, name: object) -> bool:
        return name in self._live

    def __iter__(self) -> Iterator[QuotaSpec]:
        return iter(self._live.values())

    def __len__(self) -> int:
        return len(self._live)

    def get(self, name: str) -> QuotaSpec | None:
        return self._live.get(name)

    def parent_of(self, name: str) -> str | None:
        """The parent's name, or None for the root and unknown quotas."""
        quota = self._live.get(name)
        return None if quota is None or name == ROOT_QUOTA else quota.parent

    def children_of(self, name: str) -> list[str]:
        return sorted(q.name for q in self._live.values() if q.parent == name and q.name != name)

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
        while current != ROOT_QUOTA:
            if current in seen:
                return _Chain(tuple(visited), broken_at=current, cycle=True)
            quota = self._live.get(current)
            if quota is None:
                return _Chain(tuple(visited), broken_at=current)
            visited.append(current)
            seen.add(current)
            current = quota.parent
        return _Chain(tuple(visited))

    def _reachable_path(self, name: str) -> tuple[str, ...]:
        return self._chain(name).path

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
        return self._check(unit, quota, request._amounts, chain)

    def _check(self, unit: str, quota: str, req: Mapping[str, int], chain: _Chain) -> Decision:
        limits_of = self._limits
        used_of = self._used
        for name in chain.path:
            limits = limits_of[name]
            if not limits:
                if req:
                    return EmptyQuotaSpec(unit, name, chain.path)
                continue
            used = used_of[name]
            for res, limit in limits:
                if limit - used.get(res, 0) < req.get(res, 0):
                    return QuotaExceeded(unit, name, res, chain.path)
        broken_at = chain.broken_at
        if broken_at is not None:
            if chain.cycle:
                return QuotaCycle(unit, broken_at, chain.path)
            return QuotaMissing(unit, broken_at, (*chain.path, broken_at))
        return Admitted(unit, quota, chain.path)

    def try_admit(
        self, uid: str, unit: str, quota: str, request: Resources, *, oversold: bool = False
    ) -> Decision:
        """CheckUsage and, when it passes, record the admission; idempotent per UID.

        A UID already admitted into `quota` gets `Admitted` again (no change); one admitted
        into another quota gets `AlreadyReserved` (Koord-Queue's Reserve refuses it).
        """
        adm = self._units.get(uid)
        if adm is not None:
            if adm.quota == quota:
                return Admitted(unit, adm.quota, adm.path)
            return AlreadyReserved(unit, quota, adm.quota)
        chain = self._chains.get(quota) or self._chain(quota)
        decision = self._check(unit, quota, request._amounts, chain)
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
        """Record an admission without checking (used to rebuild state after a restart).

        Returns False if the UID was already admitted into `quota` (nothing changes); raises
        AdmissionRejected(AlreadyReserved) if it is admitted into another quota. `unit` only
        names the unit in that message (the UID otherwise).
        """
        adm = self._units.get(uid)
        if adm is not None:
            if adm.quota == quota:
                return False
            raise AdmissionRejected(AlreadyReserved(unit or uid, quota, adm.quota))
        self._record(uid, quota, request, oversold)
        return True

    def _record(
        self,
        uid: str,
        quota: str,
        request: Resources,
        oversold: bool,
        chain: _Chain | None = None,
    ) -> None:
        items = tuple([(k, v) for k, v in request._amounts.items() if v])
        if chain is None:
            chain = self._chain(quota)
        if chain.broken_at is not None:
            self._broken.add(uid)
        path = chain.path
        self._units[uid] = _Admission(quota, items, path, oversold)
        self._apply(path, items, 1, oversold)
        self._unit_count[quota] = self._unit_count.get(quota, 0) + 1

    def release(self, uid: str) -> bool:
        """Give back what an admission added; False (and no change) if it was not admitted."""
        adm = self._units.pop(uid, None)
        if adm is None:
            return False
        self._broken.discard(uid)
        self._apply(adm.path, adm.request, -1, adm.oversold)
        count = self._unit_count.get(adm.quota, 0) - 1
        if count > 0:
            self._unit_count[adm.quota] = count
        else:
            self._unit_count.pop(adm.quota, None)
        return True

    def _apply(
        self,
        path: tuple[str, ...],
        request: tuple[tuple[str, int], ...],
        sign: int,
        oversold: bool,
    ) -> None:
        # Hot path (every admission and release): the two common tables are updated inline.
        used_of = self._used
        for name in path:
            used = used_of.get(name)
            if used is None:
                used = used_of[name] = {}
            for res, amount in request:
                value = used.get(res, 0) + sign * amount
                if value:
                    used[res] = value
                else:
                    used.pop(res, None)
        if not path:
            return
        own_quota = path[0]  # the unit's own quota whenever the path is not empty
        own = self._self.get(own_quota)
        if own is None:
            own = self._self[own_quota] = {}
        for res, amount in request:
            value = own.get(res, 0) + sign * amount
            if value:
                own[res] = value
            else:
                own.pop(res, None)
        if oversold:
            _add_along(self._oversold, path, request, sign)
            _add_along(self._self_oversold, (own_quota,), request, sign)

    # --- queries ------------------------------------------------------------------------
    def is_admitted(self, uid: str) -> bool:
        return uid in self._units

    def admitted_uids(self) -> list[str]:
        return list(self._units)

    def used(self, name: str) -> Resources:
        """Usage of the subtree rooted at `name` (admitted units only)."""
        return Resources(self._used.get(name, {}))

    def limit(self, name: str) -> Resources:
        """max × oversellrate (rounded down to the nano-unit) for `name`."""
        return Resources(dict(self._limits.get(name, ())))

    def usage_split(self, name: str) -> UsageSplit:
        """`name`'s usage split into self / children and guaranteed / oversold."""
        used = self._used.get(name, {})
        own = self._self.get(name, {})
        oversold = self._oversold.get(name, {})
        own_oversold = self._self_oversold.get(name, {})
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


def _add_along(
    table: dict[str, dict[str, int]],
    names: Iterable[str],
    request: tuple[tuple[str, int], ...],
    sign: int,
) -> None:
    """Add `sign` × `request` to every quota in `names`; zero entries are dropped."""
    for name in names:
        amounts = table.get(name)
        if amounts is None:
            amounts = table[name] = {}
        for res, amount in request:
            value = amounts.get(res, 0) + sign * amount
            if value:
                amounts[res] = value
            else:
                amounts.pop(res, None)


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
