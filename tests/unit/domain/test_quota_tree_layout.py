"""QuotaTree's packed CheckUsage layout decides exactly like a plain reference walk (issue 16).

The tree keeps each quota's limits and usage packed into integers and checks a whole level
with one subtraction and a mask; the packing re-lays itself out when a new resource name or
a larger amount appears. These tests drive random trees through random requests, checked and
unchecked admits, releases, limit edits, reparents (cycles, missing parents) and removals,
and compare every decision, usage table and count with a model written out plainly below:
a dict of definitions, a parent walk, and brute-force sums over the admitted units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.domain import (
    Admitted,
    EmptyQuotaSpec,
    QuotaCycle,
    QuotaExceeded,
    QuotaMissing,
    QuotaSpec,
    QuotaTree,
    Resources,
)
from koordqueue.domain.admission import AdmissionRejected, AlreadyReserved, Decision
from koordqueue.domain.names import ROOT_QUOTA
from koordqueue.domain.quantity import NANO

NAMES = ["a", "b", "c", "d", "e", "f"]
NAMESPACES = ["ns1", "ns2"]
LIMITED = ["cpu", "memory", "nvidia.com/gpu", "pods"]
REQUESTED = [*LIMITED, "example.com/foo", "example.com/late"]
RATES = [Fraction(1), Fraction(1, 2), Fraction(3, 2), Fraction(7, 3)]

small = st.integers(0, 8).map(lambda v: v * NANO // 2)
# Amounts around powers of two up to far beyond the first field width: they force re-layouts
# and sit at the edges of the fields, where a carry between fields would show.
huge = st.one_of(
    st.integers(-(2**140), 2**140),
    st.integers(60, 400).flatmap(lambda k: st.sampled_from([2**k - 1, 2**k, 1 - 2**k])),
)
amount_st = st.one_of(*[small] * 6, st.integers(-3, 3), huge)
limit_st = st.one_of(*[st.integers(0, 16).map(lambda v: v * NANO)] * 5, huge.map(abs), huge)
max_st = st.one_of(
    *[st.dictionaries(st.sampled_from(LIMITED), limit_st, min_size=1, max_size=4)] * 9,
    st.just({}),
)
request_st = st.dictionaries(st.sampled_from(REQUESTED), amount_st, max_size=3)
parent_st = st.sampled_from([*NAMES, ROOT_QUOTA, ROOT_QUOTA, "ghost"])

admit_st = st.tuples(
    st.just("admit"),
    st.integers(0, 30),
    st.sampled_from([*NAMES, "ghost"]),
    request_st,
    st.booleans(),
)
OP_KINDS = [
    # Weighted towards decisions on a mostly intact tree, with edits often enough to move it.
    *["try_admit"] * 8,
    *["check"] * 3,
    *["release"] * 4,
    *["admit"] * 2,
    *["upsert"] * 2,
    "remove",
]
_op_of_kind: dict[str, st.SearchStrategy[tuple[Any, ...]]] = {
    "upsert": st.tuples(
        st.just("upsert"), st.sampled_from(NAMES), st.sampled_from(NAMESPACES), parent_st, max_st
    ),
    "remove": st.tuples(
        st.just("remove"), st.sampled_from(NAMES), st.sampled_from([*NAMESPACES, None])
    ),
    "try_admit": admit_st.map(lambda op: ("try_admit", *op[1:])),
    "admit": admit_st.map(lambda op: ("admit", *op[1:])),
    "release": st.tuples(st.just("release"), st.integers(0, 30)),
    "check": st.tuples(
        st.just("check"), st.sampled_from([*NAMES, "ghost", ROOT_QUOTA]), request_st
    ),
}
op_st = st.sampled_from(OP_KINDS).flatmap(lambda kind: _op_of_kind[kind])


@st.composite
def forests(draw: st.DrawFn) -> list[tuple[str, str, dict[str, int]]]:
    """Every name defined once, each under the root or an earlier name: an intact start."""
    out = []
    for i, name in enumerate(NAMES):
        parent = draw(st.sampled_from([ROOT_QUOTA, *NAMES[:i]]))
        out.append((name, parent, draw(max_st)))
    return out


@dataclass
class Model:
    """The tree as plain data: definitions by namespace, admitted units, brute-force sums."""

    rate: Fraction
    defs: dict[str, list[tuple[str, str, dict[str, int]]]] = field(default_factory=dict)
    units: dict[str, tuple[str, dict[str, int], bool]] = field(default_factory=dict)

    def live(self) -> dict[str, tuple[str, dict[str, int]]]:
        """name -> (parent, max) of the definition in force: without creation times, the
        first namespace's (quota.precedence)."""
        return {
            name: (first[1], first[2])
            for name, entries in self.defs.items()
            for first in [min(entries, key=lambda e: e[0])]
        }

    def chain(self, quota: str) -> tuple[list[str], str | None, bool]:
        """(quotas walked below the root, where the walk broke, whether it was a cycle)."""
        live = self.live()
        visited: list[str] = []
        current = quota
        while current != ROOT_QUOTA:
            if current in visited:
                return visited, current, True
            if current not in live:
                return visited, current, False
            visited.append(current)
            current = live[current][0]
        return visited, None, False

    def limit(self, quota: str) -> dict[str, int]:
        _, max_ = self.live()[quota]
        return {res: (Fraction(v) * self.rate).__floor__() for res, v in max_.items()}

    def sums(self, own_only: bool, oversold_only: bool) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for quota, request, oversold in self.units.values():
            if oversold_only and not oversold:
                continue
            path = self.chain(quota)[0]
            for q in path[:1] if own_only else path:
                for res, v in request.items():
                    out.setdefault(q, {})[res] = out.setdefault(q, {}).get(res, 0) + v
        return out

    def decide(self, unit: str, quota: str, request: Mapping[str, int]) -> Decision:
        """Koord-Queue's CheckUsage, level by level, each max in its own resource order."""
        path, broken_at, cycle = self.chain(quota)
        used = self.sums(own_only=False, oversold_only=False)
        for q in path:
            limits = self.limit(q)
            if not limits:
                if len(request) != 0:
                    return EmptyQuotaSpec(unit, q, tuple(path))
                continue
            for res, limit in limits.items():
                if limit - used.get(q, {}).get(res, 0) < request.get(res, 0):
                    return QuotaExceeded(unit, q, res, tuple(path))
        if broken_at is not None and cycle:
            return QuotaCycle(unit, broken_at, tuple(path))
        if broken_at is not None:
            return QuotaMissing(unit, broken_at, (*path, broken_at))
        return Admitted(unit, quota, tuple(path))


def _same(tree_value: Resources, expected: Mapping[str, int]) -> bool:
    """Equal amounts and no zero entries kept in the tree's table."""
    return tree_value == Resources(expected) and all(tree_value.values())


def assert_tree_matches(t: QuotaTree, m: Model) -> None:
    used = m.sums(own_only=False, oversold_only=False)
    own = m.sums(own_only=True, oversold_only=False)
    oversold = m.sums(own_only=False, oversold_only=True)
    own_oversold = m.sums(own_only=True, oversold_only=True)
    live = m.live()
    for q in [*NAMES, "ghost", ROOT_QUOTA]:
        assert _same(t.used(q), used.get(q, {})), q
        split = t.usage_split(q)
        assert _same(split.self_used, own.get(q, {})), q
        assert _same(split.oversold_used, oversold.get(q, {})), q
        assert _same(split.self_oversold_used, own_oversold.get(q, {})), q
        if q in live:
            assert t.limit(q) == Resources(m.limit(q)), q
            assert t.path(q) == tuple(m.chain(q)[0]), q
    counts = {row.name: row.admitted_units for row in t.report()}
    for q in live:
        assert counts[q] == sum(1 for quota, _, _ in m.units.values() if quota == q), q
    assert sorted(t.admitted_uids()) == sorted(m.units)


LAYOUT = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@LAYOUT
@given(st.sampled_from(RATES), forests(), st.lists(op_st, min_size=10, max_size=60))
def test_packed_check_usage_decides_and_counts_exactly_like_a_plain_walk(
    rate: Fraction, forest: list[tuple[str, str, dict[str, int]]], ops: list[tuple[Any, ...]]
) -> None:
    t = QuotaTree(oversell_rate=rate)
    m = Model(rate)
    start = [("upsert", name, "ns1", parent, max_) for name, parent, max_ in forest]
    for step, op in enumerate([*start, *ops]):
        kind = op[0]
        if kind == "upsert":
            _, name, ns, parent, max_ = op
            entries = [e for e in m.defs.get(name, []) if e[0] != ns]
            m.defs[name] = [*entries, (ns, parent, max_)]
            t.upsert(QuotaSpec(name=name, parent=parent, namespace=ns, max=Resources(max_)))
        elif kind == "remove":
            _, name, ns = op
            if ns is None:
                m.defs.pop(name, None)
            elif name in m.defs:
                m.defs[name] = [e for e in m.defs[name] if e[0] != ns]
                if not m.defs[name]:
                    del m.defs[name]
            t.remove(name, ns)
        elif kind == "try_admit":
            _, n, quota, request, oversold = op
            uid, unit = f"uid{n}", f"unit{step}"
            if uid in m.units:
                held = m.units[uid][0]
                expected: Decision = (
                    Admitted(unit, quota, tuple(m.chain(quota)[0]))
                    if held == quota
                    else AlreadyReserved(unit, quota, held)
                )
            else:
                expected = m.decide(unit, quota, request)
                if expected.admitted:
                    m.units[uid] = (quota, request, oversold)
            got = t.try_admit(uid, unit, quota, Resources(request), oversold=oversold)
            assert got == expected
        elif kind == "admit":
            _, n, quota, request, oversold = op
            uid = f"uid{n}"
            if (uid in m.units and m.units[uid][0] != quota) or (
                uid not in m.units and quota not in m.defs  # Reserve into a missing quota
            ):
                with pytest.raises(AdmissionRejected):
                    t.admit(uid, quota, Resources(request), oversold=oversold)
            else:
                assert t.admit(uid, quota, Resources(request), oversold=oversold) == (
                    uid not in m.units
                )
                m.units.setdefault(uid, (quota, request, oversold))
        elif kind == "release":
            uid = f"uid{op[1]}"
            assert t.release(uid) == (uid in m.units)
            m.units.pop(uid, None)
        else:
            _, quota, request = op
            assert t.check("probe", quota, Resources(request)) == m.decide("probe", quota, request)
        assert_tree_matches(t, m)
    for uid in list(m.units):
        assert t.release(uid)
        del m.units[uid]
    assert_tree_matches(t, m)


def test_a_larger_amount_re_lays_the_tree_out_and_keeps_its_usage() -> None:
    t = QuotaTree()
    t.upsert(QuotaSpec(name="org", max=Resources({"cpu": 10 * NANO, "memory": 2**200})))
    t.upsert(QuotaSpec(name="team", parent="org", max=Resources({"cpu": 4 * NANO})))
    assert t.try_admit("u1", "u1", "team", Resources({"cpu": 3 * NANO}), oversold=True).admitted
    big = Resources({"memory": 2**199, "cpu": NANO})
    assert t.try_admit("u2", "u2", "team", big).admitted
    assert t.used("org") == Resources({"cpu": 4 * NANO, "memory": 2**199})
    assert t.usage_split("team").oversold_used == Resources({"cpu": 3 * NANO})
    assert t.check("u3", "team", Resources({"memory": 2**199 + 1})) == QuotaExceeded(
        "u3", "org", "memory", ("team", "org")
    )
    assert t.check("u3", "team", Resources({"cpu": 1})) == QuotaExceeded(
        "u3", "team", "cpu", ("team", "org")
    )
    assert t.release("u1") and t.release("u2")
    assert t.used("org") == Resources() and t.usage_split("team").oversold_used == Resources()


def test_one_request_object_decides_right_in_two_trees_with_different_layouts() -> None:
    first, second = QuotaTree(), QuotaTree()
    first.upsert(QuotaSpec(name="q", max=Resources({"cpu": 2 * NANO})))
    second.upsert(QuotaSpec(name="q", max=Resources({"memory": NANO, "cpu": NANO})))
    request = Resources({"cpu": 2 * NANO})
    for _ in range(2):  # the second round reads the request's cached encoding
        assert first.check("u", "q", request).admitted
        assert second.check("u", "q", request) == QuotaExceeded("u", "q", "cpu", ("q",))


def test_a_level_already_over_its_limit_refuses_a_request_that_does_not_name_it() -> None:
    t = QuotaTree()
    t.upsert(QuotaSpec(name="q", max=Resources({"cpu": 4 * NANO, "memory": 4 * NANO})))
    t.admit("u1", "q", Resources({"memory": 5 * NANO}))  # unchecked, as a restart rebuilds
    assert t.check("u2", "q", Resources({"cpu": NANO})) == QuotaExceeded(
        "u2", "q", "memory", ("q",)
    )
