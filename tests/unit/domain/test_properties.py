"""Hypothesis properties of the pure quota core (SPEC 1, 2.2, 2.5).

Every property compares the implementation against an independent, deliberately naive
reference (Decimal arithmetic, dict-of-lists quota model, brute-force subtree sums, a plain
parent walk), so a shared bug in a helper cannot make both sides agree.
"""

from __future__ import annotations

import decimal
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from koordqueue.domain import (
    AdmissionRejected,
    Admitted,
    EmptyQuotaSpec,
    QuotaCycle,
    QuotaExceeded,
    QuotaMissing,
    QuotaSpec,
    QuotaTree,
    Resources,
    derive_queue,
    format_nanos,
    merge_queue,
)
from koordqueue.domain.names import (
    KNOWN_POLICIES,
    QUEUE_POLICY_KEY,
    QUOTA_PARENT_LABEL,
    ROOT_QUOTA,
    SYNCED_ANNOTATION_PREFIX,
)
from koordqueue.domain.quantity import NANO, parse_nanos
from koordqueue.domain.queue_derivation import queue_needs_update

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STATEFUL = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

RESOURCE_NAMES = ["cpu", "memory", "nvidia.com/gpu", "pods", "example.com/foo"]


# --- quantities -------------------------------------------------------------------------------

nanos_st = st.integers(min_value=-(10**30), max_value=10**30)


@FAST
@given(nanos_st)
def test_decimal_si_format_then_parse_gives_the_same_nanos(nanos: int) -> None:
    assert parse_nanos(format_nanos(nanos, "DecimalSI")) == nanos


@FAST
@given(nanos_st)
def test_binary_si_format_then_parse_gives_the_same_nanos(nanos: int) -> None:
    assert parse_nanos(format_nanos(nanos, "BinarySI")) == nanos


@FAST
@given(st.integers(-(2**40), 2**40), st.integers(0, 60))
def test_binary_si_format_of_power_of_two_multiples_round_trips(k: int, shift: int) -> None:
    nanos = k * (2**shift) * NANO
    text = format_nanos(nanos, "BinarySI")
    assert parse_nanos(text) == nanos


_DEC_SUFFIX = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BIN_SUFFIX = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


@st.composite
def quantity_text(draw: st.DrawFn) -> tuple[str, Fraction]:
    """A Kubernetes quantity string and its exact value, computed with Decimal independently."""
    sign = draw(st.sampled_from(["", "+", "-"]))
    int_digits = draw(st.text("0123456789", max_size=12))
    frac_digits = draw(st.one_of(st.none(), st.text("0123456789", max_size=12)))
    assume(int_digits or frac_digits)
    kind = draw(st.sampled_from(["dec", "bin", "exp"]))
    if kind == "dec":
        suffix = draw(st.sampled_from(sorted(_DEC_SUFFIX)))
        factor = decimal.Decimal(10) ** _DEC_SUFFIX[suffix]
    elif kind == "bin":
        suffix = draw(st.sampled_from(sorted(_BIN_SUFFIX)))
        factor = decimal.Decimal(2) ** _BIN_SUFFIX[suffix]
    else:
        exponent = draw(st.integers(-20, 20))
        letter = draw(st.sampled_from(["e", "E"]))
        exp_sign = "+" if exponent >= 0 and draw(st.booleans()) else ""
        suffix = f"{letter}{exp_sign}{exponent}"
        factor = decimal.Decimal(10) ** exponent
    mantissa = int_digits + ("" if frac_digits is None else "." + frac_digits)
    text = f"{sign}{mantissa}{suffix}"
    with decimal.localcontext() as ctx:
        ctx.prec = 200
        ctx.traps[decimal.Inexact] = True
        magnitude = decimal.Decimal((int_digits or "0") + "." + (frac_digits or "0"))
        value = magnitude * factor * NANO
        rounded_up = value.to_integral_value(rounding=decimal.ROUND_CEILING)
    nanos = int(rounded_up)
    return text, Fraction(-nanos if sign == "-" else nanos)


@FAST
@given(quantity_text())
def test_parse_of_generated_quantity_matches_exact_decimal_computation(
    case: tuple[str, Fraction],
) -> None:
    text, expected = case
    assert parse_nanos(text) == expected


# --- Resources algebra ------------------------------------------------------------------------

amounts_st = st.integers(min_value=-(10**21), max_value=10**21)
resources_st = st.dictionaries(st.sampled_from(RESOURCE_NAMES), amounts_st, max_size=5).map(
    Resources
)


@FAST
@given(resources_st, resources_st)
def test_resource_addition_is_commutative(a: Resources, b: Resources) -> None:
    assert a + b == b + a


@FAST
@given(resources_st, resources_st, resources_st)
def test_resource_addition_is_associative(a: Resources, b: Resources, c: Resources) -> None:
    assert (a + b) + c == a + (b + c)


@FAST
@given(resources_st)
def test_empty_resources_are_the_additive_identity(a: Resources) -> None:
    assert a + Resources() == a == Resources() + a


@FAST
@given(resources_st, resources_st)
def test_adding_then_subtracting_gives_back_the_original(a: Resources, b: Resources) -> None:
    assert (a + b) - b == a


@FAST
@given(resources_st, resources_st)
def test_equal_resources_hash_equal(a: Resources, b: Resources) -> None:
    c = (a + b) - b
    assert hash(c) == hash(a)


# --- queue derivation and merge -----------------------------------------------------------------

synced_key_st = st.sampled_from(
    [
        "koord-queue/max-depth",
        "koord-queue/wait-for-pods-running",
        "koord-queue/enable-queueunit-preemption",
        "koord-queue/priority-threshold",
        "koord-queue/custom",
        QUEUE_POLICY_KEY,
    ]
)
foreign_key_st = st.sampled_from(
    ["note", "example.com/owner", "koord-queuex/a", "kubectl.kubernetes.io/last-applied", "x"]
)
value_st = st.text(max_size=5)
policy_st = st.one_of(st.sampled_from([*KNOWN_POLICIES, "FIFO", "", "priority"]), st.integers())


@st.composite
def elastic_quotas(draw: st.DrawFn) -> dict[str, Any]:
    labels: dict[str, Any] = {}
    if draw(st.booleans()):
        labels[QUEUE_POLICY_KEY] = draw(policy_st)
    if draw(st.booleans()):
        labels[QUOTA_PARENT_LABEL] = draw(st.sampled_from(["org", "team", "", ROOT_QUOTA]))
    if draw(st.booleans()):
        labels["app"] = draw(value_st)
    annotations = draw(
        st.dictionaries(st.one_of(synced_key_st, foreign_key_st), value_st, max_size=6)
    )
    return {
        "metadata": {
            "name": draw(st.sampled_from(["team-a", "b", "q1"])),
            "namespace": draw(st.sampled_from(["ns1", "ns2", "ns3"])),
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {"max": {"cpu": "1"}},
    }


@st.composite
def existing_queues(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.booleans()):
        return None
    metadata: dict[str, Any] = {"name": "team-a", "namespace": "koord-queue"}
    labels = draw(
        st.dictionaries(st.sampled_from(["owner", QUOTA_PARENT_LABEL, "env"]), value_st, max_size=3)
    )
    keep_empty_labels: bool = draw(st.booleans())
    if labels or keep_empty_labels:
        metadata["labels"] = labels
    annotations = draw(
        st.dictionaries(st.one_of(synced_key_st, foreign_key_st), value_st, max_size=6)
    )
    keep_empty_annotations: bool = draw(st.booleans())
    if annotations or keep_empty_annotations:
        metadata["annotations"] = annotations
    if draw(st.booleans()):
        metadata["resourceVersion"] = "7"
    queue: dict[str, Any] = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "Queue",
        "metadata": metadata,
    }
    if draw(st.booleans()):
        queue["spec"] = {
            "priority": draw(st.integers(-5, 2000)),
            "queuePolicy": draw(st.sampled_from([*KNOWN_POLICIES, "FIFO"])),
        }
    return queue


@FAST
@given(elastic_quotas(), existing_queues())
def test_merge_is_idempotent(quota: dict[str, Any], existing: dict[str, Any] | None) -> None:
    desired = derive_queue(quota)
    once = merge_queue(existing, desired)
    assert merge_queue(once, desired) == once
    assert merge_queue(once, desired, previously_synced=list(desired.annotations)) == once


@FAST
@given(elastic_quotas(), existing_queues())
def test_deriving_again_from_the_merged_result_changes_nothing(
    quota: dict[str, Any], existing: dict[str, Any] | None
) -> None:
    desired = derive_queue(quota)
    merged = merge_queue(existing, desired)
    assert derive_queue(quota) == desired  # a pure function of the quota
    assert not queue_needs_update(merged, derive_queue(quota))
    # What the merged Queue says about the fields we own is exactly the derived queue.
    meta = merged["metadata"]
    assert (meta["name"], meta["namespace"]) == (desired.name, desired.namespace)
    assert merged["spec"] == {**(existing or {}).get("spec", {}), **merged["spec"]}
    assert (merged["spec"]["priority"], merged["spec"]["queuePolicy"]) == (
        desired.priority,
        desired.policy,
    )
    assert meta.get("labels", {}).get(QUOTA_PARENT_LABEL) == desired.parent
    for key, value in desired.annotations.items():
        assert meta["annotations"][key] == value


def _is_synced_key(key: str) -> bool:
    return key.startswith(SYNCED_ANNOTATION_PREFIX)


@FAST
@given(
    elastic_quotas(),
    existing_queues(),
    st.lists(st.one_of(synced_key_st, foreign_key_st), max_size=4),
)
def test_foreign_annotations_always_survive_a_merge(
    quota: dict[str, Any], existing: dict[str, Any] | None, previously_synced: list[str]
) -> None:
    desired = derive_queue(quota)
    # The controller only ever lists keys it synced, i.e. `koord-queue/` keys.
    previously_synced = [k for k in previously_synced if _is_synced_key(k)]
    merged = merge_queue(existing, desired, previously_synced=previously_synced)
    before: Mapping[str, str] = ((existing or {}).get("metadata") or {}).get("annotations") or {}
    after: Mapping[str, str] = merged["metadata"].get("annotations") or {}
    for key, value in before.items():
        if not _is_synced_key(key):
            assert after.get(key) == value, key  # foreign: untouched, always
        elif key not in previously_synced:
            assert key in after, key  # a `koord-queue/` key we never synced is never deleted
            if key not in desired.annotations:
                assert after[key] == value
    for key, value in desired.annotations.items():
        assert after[key] == value
    assert QUEUE_POLICY_KEY not in desired.annotations


# --- CheckUsage ---------------------------------------------------------------------------------

RATES = [Fraction(1), Fraction(1, 2), Fraction(3, 2), Fraction(2), Fraction(5, 4), Fraction(7, 3)]
small_amount = st.integers(min_value=0, max_value=12)


@st.composite
def quota_forests(draw: st.DrawFn) -> list[QuotaSpec]:
    """A valid forest: quota i's parent is the root or an earlier quota (no cycles, no gaps)."""
    n = draw(st.integers(1, 8))
    quotas = []
    for i in range(n):
        parent = ROOT_QUOTA
        if i > 0:
            parent = draw(
                st.one_of(st.just(ROOT_QUOTA), st.integers(0, i - 1).map(lambda j: f"q{j}"))
            )
        max_ = draw(st.dictionaries(st.sampled_from(RESOURCE_NAMES[:3]), small_amount, max_size=3))
        quotas.append(
            QuotaSpec(
                name=f"q{i}", parent=parent, max=Resources({k: v * NANO for k, v in max_.items()})
            )
        )
    return quotas


request_st = st.dictionaries(
    st.sampled_from(RESOURCE_NAMES[:4]), st.integers(0, 6).map(lambda v: v * NANO // 2), max_size=3
).map(Resources)


def _ref_ancestors(parents: Mapping[str, str], name: str) -> list[str]:
    out = []
    while name != ROOT_QUOTA:
        out.append(name)
        name = parents[name]
    return out


def _ref_used(
    parents: Mapping[str, str], units: Mapping[str, tuple[str, Resources]]
) -> dict[str, dict[str, int]]:
    used: dict[str, dict[str, int]] = {q: {} for q in parents}
    for quota, request in units.values():
        for q in _ref_ancestors(parents, quota):
            for r, v in request.items():
                used[q][r] = used[q].get(r, 0) + v
    return used


@STATEFUL
@given(
    quota_forests(),
    st.sampled_from(RATES),
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 7), request_st, st.integers(0, 30)), max_size=40
    ),
)
def test_check_usage_never_admits_a_unit_that_would_push_any_ancestor_over_its_limit(
    quotas: list[QuotaSpec], rate: Fraction, ops: list[tuple[bool, int, Resources, int]]
) -> None:
    t = QuotaTree(oversell_rate=rate)
    for spec_ in quotas:
        t.upsert(spec_)
    specs = {s.name: s for s in quotas}
    parents = {s.name: s.parent for s in quotas}
    units: dict[str, tuple[str, Resources]] = {}
    for i, (is_admit, qi, request, victim) in enumerate(ops):
        if not is_admit and units:
            uid = sorted(units)[victim % len(units)]
            assert t.release(uid)
            del units[uid]
            continue
        quota = f"q{qi % len(quotas)}"
        used = _ref_used(parents, units)
        # Reference decision, straight from SPEC 2.5.
        expected: tuple[str, str, str] | None = None
        for q in _ref_ancestors(parents, quota):
            mx = specs[q].max
            if not mx and len(request):  # Koord-Queue: len(request) != 0, zeros included
                expected = ("empty", q, "")
                break
            bad = [r for r in mx if Fraction(mx[r]) * rate - used[q].get(r, 0) < request.get(r, 0)]
            if bad:
                expected = ("limited", q, bad[0])
                break
        decision = t.try_admit(f"uid{i}", f"unit{i}", quota, request)
        if expected is None:
            assert isinstance(decision, Admitted)
            units[f"uid{i}"] = (quota, request)
        elif expected[0] == "empty":
            assert decision == EmptyQuotaSpec(
                f"unit{i}", expected[1], tuple(_ref_ancestors(parents, quota))
            )
        else:
            assert decision == QuotaExceeded(
                f"unit{i}", expected[1], expected[2], tuple(_ref_ancestors(parents, quota))
            )
        # Invariant: every quota's subtree usage within max × oversellrate, and the
        # incremental usage equals a brute-force recomputation.
        used = _ref_used(parents, units)
        for q, spec in specs.items():
            for r, limit in spec.max.items():
                assert used[q].get(r, 0) <= Fraction(limit) * rate
            assert t.used(q) == Resources(used[q])


NAMES = ["a", "b", "c", "d", "e"]
parent_choice = st.sampled_from([*NAMES, ROOT_QUOTA, "ghost"])


def _ref_walk(live: Mapping[str, str], start: str) -> tuple[str, str | None, tuple[str, ...]]:
    """Plain parent walk: ('ok'|'cycle'|'missing', quota where it broke, visited)."""
    visited: list[str] = []
    current = start
    for _ in range(len(live) + 2):  # bounded: more steps would already be a revisit
        if current == ROOT_QUOTA:
            return ("ok", None, tuple(visited))
        if current in visited:
            return ("cycle", current, tuple(visited))
        if current not in live:
            return ("missing", current, tuple(visited))
        visited.append(current)
        current = live[current]
    raise AssertionError("reference walk did not terminate")


structure_op = st.one_of(
    st.tuples(
        st.just("upsert"),
        st.sampled_from([*NAMES, ROOT_QUOTA]),
        st.sampled_from(["ns1", "ns2", "ns3"]),
        parent_choice,
    ),
    st.tuples(
        st.just("remove"),
        st.sampled_from(NAMES),
        st.sampled_from(["ns1", "ns2", "ns3", None]),
        st.none(),
    ),
)


@STATEFUL
@given(st.lists(structure_op, min_size=1, max_size=25))
def test_walker_terminates_and_reports_a_cycle_exactly_when_the_chain_revisits_a_quota(
    ops: list[tuple[str, str, str | None, str | None]],
) -> None:
    t = QuotaTree()
    # Reference model of SPEC 2.1 indexing: name -> [(namespace, parent)]; the copy in force
    # is the oldest, and without creation times the first namespace (quota.precedence).
    defs: dict[str, list[tuple[str, str]]] = {}
    for op, name, ns, parent in ops:
        if op == "upsert":
            assert ns is not None and parent is not None
            entries = [e for e in defs.get(name, []) if e[0] != ns]
            defs[name] = [*entries, (ns, parent)]
            t.upsert(QuotaSpec(name=name, parent=parent, namespace=ns))
        else:
            if ns is None:
                defs.pop(name, None)
            elif name in defs:
                defs[name] = [e for e in defs[name] if e[0] != ns]
                if not defs[name]:
                    del defs[name]
            t.remove(name, ns)
        live = {n: min(entries)[1] for n, entries in defs.items()}
        for start in [*NAMES, "ghost", ROOT_QUOTA]:
            kind, broken, visited = _ref_walk(live, start)
            decision = t.check("u", start, Resources())
            if kind == "ok":
                assert decision == Admitted("u", start, visited)
            elif kind == "cycle":
                assert decision == QuotaCycle("u", broken, visited)  # type: ignore[arg-type]
                assert decision.message.endswith("visited quota: " + ",".join(visited))
            else:
                # Koord-Queue appends the missing quota to the path before it looks it up.
                assert decision == QuotaMissing(
                    "u",
                    broken,  # type: ignore[arg-type]
                    (*visited, broken),  # type: ignore[arg-type]
                )


def _ref_partial_path(live: Mapping[str, str], quota: str) -> list[str]:
    """Quotas a unit's usage counts against: its chain as far as it is intact."""
    return list(_ref_walk(live, quota)[2])


usage_op = st.one_of(
    st.tuples(st.just("admit"), st.sampled_from(NAMES), request_st, st.booleans()),
    st.tuples(st.just("release"), st.integers(0, 50), st.none(), st.none()),
    st.tuples(
        st.just("reparent"),
        st.sampled_from(NAMES),
        parent_choice,
        st.sampled_from(["ns1", "ns2", "ns3"]),
    ),
    st.tuples(
        st.just("remove"),
        st.sampled_from(NAMES),
        st.sampled_from(["ns1", "ns2", "ns3", None]),
        st.none(),
    ),
)


@STATEFUL
@given(
    st.lists(usage_op, max_size=40),
    st.randoms(use_true_random=False),
)
def test_admitted_usage_never_goes_negative_and_returns_to_zero_across_tree_changes(
    ops: list[tuple[str, Any, Any, Any]], rnd: Any
) -> None:
    t = QuotaTree()
    defs: dict[str, list[tuple[str, str]]] = {}

    def upsert(name: str, parent: str, ns: str) -> None:
        defs[name] = [*(e for e in defs.get(name, []) if e[0] != ns), (ns, parent)]
        t.upsert(
            QuotaSpec(name=name, parent=parent, namespace=ns, max=Resources({"cpu": 100 * NANO}))
        )

    for i, name in enumerate(NAMES):  # start from a valid chain e -> d -> ... -> a -> root
        upsert(name, NAMES[i - 1] if i else ROOT_QUOTA, "ns1")
    units: dict[str, tuple[str, Resources]] = {}
    counter = 0
    for op in ops:
        kind = op[0]
        if kind == "admit":
            _, quota, request, checked = op
            uid = f"u{counter}"
            counter += 1
            if checked:
                if t.try_admit(uid, uid, quota, request).admitted:
                    units[uid] = (quota, request)
            elif quota in defs:
                assert t.admit(uid, quota, request)
                units[uid] = (quota, request)
            else:  # Koord-Queue's Reserve: a missing quota refuses, nothing is recorded
                with pytest.raises(AdmissionRejected):
                    t.admit(uid, quota, request)
                assert not t.is_admitted(uid)
        elif kind == "release":
            if units:
                uid = sorted(units)[op[1] % len(units)]
                assert t.release(uid)
                del units[uid]
        elif kind == "reparent":
            upsert(op[1], op[2], op[3])
        else:
            _, name, ns, _ = op
            if ns is None:
                defs.pop(name, None)
            elif name in defs:
                defs[name] = [e for e in defs[name] if e[0] != ns]
                if not defs[name]:
                    del defs[name]
            t.remove(name, ns)
        live = {n: min(entries)[1] for n, entries in defs.items()}
        expected: dict[str, dict[str, int]] = {}
        for quota, request in units.values():
            for q in _ref_partial_path(live, quota):
                for r, v in request.items():
                    expected.setdefault(q, {})[r] = expected.setdefault(q, {}).get(r, 0) + v
        for q in [*NAMES, "ghost", ROOT_QUOTA]:
            used = t.used(q)
            assert all(v >= 0 for v in used.values()), (q, used)
            assert used == Resources(expected.get(q, {})), q
    order = sorted(units)
    rnd.shuffle(order)
    for uid in order:
        assert t.release(uid)
        assert not t.release(uid)
    for q in [*NAMES, "ghost", ROOT_QUOTA]:
        assert t.used(q) == Resources()
        assert dict(t.used(q)) == {}
    assert t.admitted_uids() == []
    assert all(row.admitted_units == 0 for row in t.report())
