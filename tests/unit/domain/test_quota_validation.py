"""ElasticQuota validation (issue 33 part 4): what the webhook denies and what it warns about.

The properties drive the pure rules with random quotas and random trees of edits, against
oracles written here independently (a brute-force walk of the parents, plain integer
arithmetic for the amounts): every problem is reported at once with its field path, and a
cluster that only ever takes allowed edits never holds a cycle, two quotas of one name, or an
is-parent turned off under children.
"""

from __future__ import annotations

import graphlib
import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.names import (
    QUEUE_POLICY_KEY,
    QUOTA_IS_PARENT_LABEL,
    QUOTA_PARENT_LABEL,
    ROOT_QUOTA,
)
from koordqueue.domain.quota_validation import (
    IS_PARENT_FIELD,
    PARENT_FIELD,
    POLICY_FIELD,
    Rule,
    cycle_through,
    object_problems,
    review_quota,
    review_quota_delete,
)

RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "pods")
UNPARSEABLE = ("abc", "1.5.5", "12xyz", "", " 1", "--1", "1e999e", True, [1], {"a": 1})
NEGATIVE = ("-1", -3, "-500m", "-1Gi")


def eq(
    name: str,
    namespace: str = "default",
    *,
    parent: str | None = None,
    is_parent: bool = False,
    policy: str | None = None,
    max_: dict[str, Any] | None = None,
    min_: dict[str, Any] | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if parent is not None:
        labels[QUOTA_PARENT_LABEL] = parent
    if is_parent:
        labels[QUOTA_IS_PARENT_LABEL] = "true"
    if policy is not None:
        labels[QUEUE_POLICY_KEY] = policy
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if created is not None:
        metadata["creationTimestamp"] = created
    spec: dict[str, Any] = {"max": max_ if max_ is not None else {"cpu": "4"}}
    if min_ is not None:
        spec["min"] = min_
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": metadata,
        "spec": spec,
    }


def rules(problems: Any) -> set[tuple[str, Rule]]:
    return {(p.field, p.rule) for p in problems}


# --- one quota's own fields ---------------------------------------------------------------
# an entry: ("absent",) | ("ok", nanos, raw) | ("bad", raw) | ("neg", raw)
valid_amount = st.one_of(
    st.integers(0, 10**6).map(lambda n: (n * 10**9, n)),
    st.integers(0, 10**9).map(lambda n: (n * 10**6, f"{n}m")),
    st.integers(0, 4096).map(lambda n: (n * 2**30 * 10**9, f"{n}Gi")),
)
entry = st.one_of(
    st.just(("absent",)),
    valid_amount.map(lambda v: ("ok", v[0], v[1])),
    st.sampled_from(UNPARSEABLE).map(lambda raw: ("bad", raw)),
    st.sampled_from(NEGATIVE).map(lambda raw: ("neg", raw)),
)


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(RESOURCES), st.tuples(entry, entry), min_size=1))
def test_every_problem_of_a_quotas_own_fields_is_reported_at_once_with_its_path(
    plan: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]],
) -> None:
    max_: dict[str, Any] = {}
    min_: dict[str, Any] = {}
    expected: set[tuple[str, Rule]] = set()
    for resource, (mx, mn) in plan.items():
        for side, e, target in (("max", mx, max_), ("min", mn, min_)):
            if e[0] == "absent":
                continue
            target[resource] = e[-1]
            if e[0] == "bad":
                expected.add((f"spec.{side}[{resource}]", Rule.NOT_A_QUANTITY))
            elif e[0] == "neg":
                expected.add((f"spec.{side}[{resource}]", Rule.NEGATIVE))
        if mn[0] == "ok":
            if mx[0] == "absent":
                expected.add((f"spec.min[{resource}]", Rule.MIN_WITHOUT_MAX))
            elif mx[0] == "ok" and mn[1] > mx[1]:
                expected.add((f"spec.min[{resource}]", Rule.MIN_ABOVE_MAX))
    problems = object_problems(eq("q", max_=max_, min_=min_))
    assert rules(problems) == expected
    assert len(problems) == len(expected)  # one problem per field and rule
    for problem in problems:
        assert str(problem).startswith(problem.field + ": ")
        assert "^" not in problem.message  # a sentence, never a regular expression


def test_the_messages_say_what_is_wrong_in_words() -> None:
    problems = {
        p.field: p.message
        for p in object_problems(
            eq("q", max_={"cpu": "-1", "memory": "12xyz"}, min_={"gpu": 1, "memory": 1})
        )
    }
    assert problems["spec.max[cpu]"] == "'-1' must not be negative"
    assert problems["spec.max[memory]"].startswith("'12xyz' is not a Kubernetes quantity")
    assert "gpu has a min but no max" in problems["spec.min[gpu]"]
    assert "spec.min[memory]" not in problems  # its max is unreadable: nothing to compare


def test_min_above_max_names_both_amounts() -> None:
    (problem,) = object_problems(eq("q", max_={"cpu": "2"}, min_={"cpu": "2500m"}))
    assert problem.field == "spec.min[cpu]"
    assert problem.message == "min 2500m is above max 2"


# --- among the other quotas -----------------------------------------------------------------
def test_a_second_quota_with_a_name_used_in_another_namespace_is_denied() -> None:
    existing = [eq("team", "ns-a", created="2026-01-01T00:00:00Z")]
    answer = review_quota(eq("team", "ns-b"), None, existing)
    assert rules(answer.denied) == {("metadata.name", Rule.DUPLICATE_NAME)}
    assert "namespace ns-a" in answer.denied[0].message
    assert "cluster-wide" in answer.denied[0].message


def test_updating_the_ignored_copy_of_a_name_is_allowed_with_a_warning() -> None:
    older = eq("team", "ns-a", created="2026-01-01T00:00:00Z")
    newer = eq("team", "ns-b", created="2026-01-02T00:00:00Z")
    answer = review_quota(newer, newer, [older, newer])
    assert answer.allowed
    assert rules(answer.warnings) == {("metadata.name", Rule.IGNORED_COPY)}
    assert review_quota(older, older, [older, newer]).warnings == ()


def test_a_parent_edge_that_closes_a_cycle_is_denied_with_the_cycle() -> None:
    existing = [
        eq("a", parent="c", is_parent=True),
        eq("b", parent="a", is_parent=True),
        eq("c", parent="b", is_parent=True),
    ]
    old = eq("a", is_parent=True)
    answer = review_quota(eq("a", parent="c", is_parent=True), old, [old, *existing[1:]])
    assert rules(answer.denied) == {(PARENT_FIELD, Rule.CYCLE)}
    assert "a -> c -> b -> a" in answer.denied[0].message


def test_a_quota_that_is_its_own_parent_is_denied() -> None:
    answer = review_quota(eq("a", parent="a"), None, [])
    assert rules(answer.denied) == {(PARENT_FIELD, Rule.CYCLE)}


def test_an_edit_that_leaves_an_old_cycle_alone_is_warned_not_denied() -> None:
    a, b = eq("a", parent="b", is_parent=True), eq("b", parent="a", is_parent=True)
    changed = eq("a", parent="b", is_parent=True, max_={"cpu": "8"})
    answer = review_quota(changed, a, [a, b])
    assert answer.allowed
    assert (PARENT_FIELD, Rule.CYCLE) in rules(answer.warnings)


def test_turning_is_parent_off_under_children_is_denied() -> None:
    parent = eq("p", is_parent=True)
    child = eq("c", parent="p")
    answer = review_quota(eq("p"), parent, [parent, child])
    assert rules(answer.denied) == {(IS_PARENT_FIELD, Rule.IS_PARENT_OFF)}
    assert "(c)" in answer.denied[0].message


def test_what_depends_on_apply_order_is_only_a_warning() -> None:
    # a child before its parent; then the parent without is-parent, its min below theirs
    child = eq("c", parent="p", min_={"cpu": "3"}, max_={"cpu": "4"}, policy="Round")
    first = review_quota(child, None, [])
    assert first.allowed
    assert rules(first.warnings) == {
        (PARENT_FIELD, Rule.PARENT_MISSING),
        (POLICY_FIELD, Rule.POLICY_NOT_SERVED),
    }
    parent = eq("p", min_={"cpu": "2"}, max_={"cpu": "8"}, policy="FIFO")
    second = review_quota(parent, None, [child])
    assert second.allowed
    assert rules(second.warnings) == {
        (IS_PARENT_FIELD, Rule.CHILDREN_NOT_IS_PARENT),
        ("spec.min", Rule.CHILDREN_MIN),
        (POLICY_FIELD, Rule.POLICY_UNKNOWN),
    }
    assert "cpu 3 > 2" in next(w.message for w in second.warnings if w.rule is Rule.CHILDREN_MIN)
    sibling = eq("s", parent="p", min_={"cpu": "1"}, max_={"cpu": "1"})
    third = review_quota(sibling, None, [child, parent])
    assert rules(third.warnings) == {
        (PARENT_FIELD, Rule.PARENT_NOT_IS_PARENT),
        ("spec.min", Rule.SIBLINGS_MIN),
    }


def test_every_problem_is_reported_at_once() -> None:
    existing = [eq("dup", "other", created="2026-01-01T00:00:00Z"), eq("x", parent="dup")]
    new = eq("dup", parent="dup", max_={"cpu": "-1"}, min_={"memory": "1Gi"})
    answer = review_quota(new, None, existing)
    assert rules(answer.denied) == {
        ("spec.max[cpu]", Rule.NEGATIVE),
        ("spec.min[memory]", Rule.MIN_WITHOUT_MAX),
        ("metadata.name", Rule.DUPLICATE_NAME),
        (PARENT_FIELD, Rule.CYCLE),
    }


def test_deleting_a_parent_warns_about_its_children() -> None:
    parent, child = eq("p", is_parent=True), eq("c", parent="p")
    answer = review_quota_delete(parent, [parent, child])
    assert answer.allowed and rules(answer.warnings) == {("metadata.name", Rule.DELETE_PARENT)}
    assert review_quota_delete(child, [parent, child]).warnings == ()


# --- random trees and edits --------------------------------------------------------------
NAMES = ("a", "b", "c", "d", "e")
NAMESPACES = ("ns1", "ns2")
op = st.one_of(
    st.tuples(
        st.just("create"),
        st.sampled_from(NAMES),
        st.sampled_from(NAMESPACES),
        st.sampled_from((None, *NAMES)),
        st.booleans(),
    ),
    st.tuples(
        st.just("reparent"),
        st.sampled_from(NAMES),
        st.sampled_from(NAMESPACES),
        st.sampled_from((None, *NAMES)),
        st.booleans(),
    ),
    st.tuples(
        st.just("delete"),
        st.sampled_from(NAMES),
        st.sampled_from(NAMESPACES),
        st.none(),
        st.booleans(),
    ),
)


def _oracle_cycle(name: str, parent: str, parents: dict[str, str]) -> bool:
    """Brute force: follow parents from `parent` for as many steps as there are quotas."""
    current = parent
    for _ in range(len(parents) + 2):
        if current == name:
            return True
        if current not in parents:
            return False
        current = parents[current]
    return False


@settings(max_examples=300)
@given(st.lists(op, min_size=1, max_size=30))
def test_a_cluster_taking_only_allowed_edits_never_holds_a_cycle_or_a_duplicate_name(
    ops: list[tuple[str, str, str, str | None, bool]],
) -> None:
    stored: dict[tuple[str, str], dict[str, Any]] = {}
    for step, (kind, name, ns, parent, is_parent) in enumerate(ops):
        existing = list(stored.values())
        old = stored.get((ns, name))
        parents = {
            o["metadata"]["name"]: o["metadata"]["labels"].get(QUOTA_PARENT_LABEL, ROOT_QUOTA)
            for o in existing
        }
        if kind == "delete":
            if old is not None:
                assert review_quota_delete(old, existing).allowed
                del stored[(ns, name)]
            continue
        if kind == "reparent" and old is None:
            continue
        new = eq(
            name, ns, parent=parent, is_parent=is_parent, created=f"2026-01-01T00:00:{step:02d}Z"
        )
        if old is not None:
            new["metadata"]["creationTimestamp"] = old["metadata"]["creationTimestamp"]
        answer = review_quota(new, old, existing)
        others = {k: v for k, v in parents.items() if k != name}
        closes = _oracle_cycle(name, parent or ROOT_QUOTA, others)
        parent_changed = old is None or old["metadata"]["labels"].get(QUOTA_PARENT_LABEL) != parent
        expected: set[Rule] = set()
        if closes and parent_changed:
            expected.add(Rule.CYCLE)
        if old is None and any(k[1] == name and k[0] != ns for k in stored):
            expected.add(Rule.DUPLICATE_NAME)
        children = {k for k, v in others.items() if v == name}
        was_parent = old is not None and old["metadata"]["labels"].get(QUOTA_IS_PARENT_LABEL)
        if children and was_parent and not is_parent:
            expected.add(Rule.IS_PARENT_OFF)
        assert {p.rule for p in answer.denied} == expected, (answer, stored)
        if answer.allowed:
            stored[(ns, name)] = new
        # the invariants of a cluster behind the webhook
        names = [k[1] for k in stored]
        assert len(names) == len(set(names))
        graph = {
            o["metadata"]["name"]: {o["metadata"]["labels"].get(QUOTA_PARENT_LABEL, ROOT_QUOTA)}
            for o in stored.values()
        }
        graphlib.TopologicalSorter(graph).prepare()  # raises CycleError on a cycle


@given(
    st.dictionaries(st.sampled_from(NAMES), st.sampled_from((ROOT_QUOTA, *NAMES))),
    st.sampled_from(NAMES),
    st.sampled_from((ROOT_QUOTA, *NAMES)),
)
def test_cycle_through_agrees_with_a_brute_force_walk(
    parents: dict[str, str], name: str, parent: str
) -> None:
    others = {k: v for k, v in parents.items() if k != name}
    found = cycle_through(name, parent, others)
    assert (found is not None) == _oracle_cycle(name, parent, others)
    if found is not None:
        assert found[0] == found[-1] == name
        for child, up in itertools.pairwise(found):
            assert (parent if child == name else others[child]) == up
