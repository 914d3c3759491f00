"""Admission checks' rules (issue 35 point 5): which checks a unit needs, and what its check
states call for. Inputs and outcomes follow Koord-Queue's admissioncheck suite (two checks,
both Ready -> Dequeued; one Rejected or Retry -> back-off; one Ready, one Pending -> stays)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain import admission_checks as ac
from koordqueue.domain.admission_checks import CheckState, Verdict


def states(**by_name: str) -> list[CheckState]:
    return [CheckState(name, state) for name, state in by_name.items()]


@pytest.mark.parametrize(
    ("given_states", "verdict"),
    [
        ({"ad1": "Ready", "ad2": "Ready"}, Verdict.READY),
        ({"ad1": "Pending", "ad2": "Rejected"}, Verdict.BACK_OFF),
        ({"ad1": "Pending", "ad2": "Retry"}, Verdict.BACK_OFF),
        ({"ad1": "Pending", "ad2": "Ready"}, Verdict.WAIT),
        ({"ad1": "Ready"}, Verdict.WAIT),  # ad2 has no state yet: Pending
    ],
)
def test_koord_queue_suite_cases(given_states: dict[str, str], verdict: Verdict) -> None:
    assert ac.evaluate(states(**given_states), ["ad1", "ad2"]).verdict is verdict


def test_the_failed_check_is_named() -> None:
    got = ac.evaluate(states(ad1="Retry", ad2="Rejected"), ["ad1", "ad2"])
    assert got.failed == CheckState("ad1", "Retry")
    assert "ad1 is Retry" in ac.failure_message(CheckState("ad1", "Retry", "", "no room"), 10)


def test_a_check_removed_from_the_queue_counts_as_ready() -> None:
    """ad2 was Rejected, then taken off the queue: only ad1 counts (Koord-Queue would still
    back the unit off on ad2)."""
    assert ac.evaluate(states(ad1="Ready", ad2="Rejected"), ["ad1"]).verdict is Verdict.READY
    assert ac.evaluate(states(ad1="Pending"), []).verdict is Verdict.READY


def test_nil_selector_selects_every_unit_and_a_selector_only_its_units() -> None:
    checks = ac.parse_checks(
        [
            {"name": "all"},
            {"name": "gpu", "labelSelector": {"matchLabels": {"kind": "gpu"}}},
            {
                "name": "big",
                "labelSelector": {
                    "matchExpressions": [{"key": "size", "operator": "In", "values": ["l"]}]
                },
            },
            {"name": "empty", "labelSelector": {}},
        ]
    )
    assert ac.required(checks, {}) == ("all", "empty")
    assert ac.required(checks, {"kind": "gpu", "size": "l"}) == ("all", "gpu", "big", "empty")


EXPRESSION = "spec.admissionChecks[0].labelSelector.matchExpressions[0]"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("ad1", "spec.admissionChecks"),
        ([{"labelSelector": {}}], "spec.admissionChecks[0].name"),
        ([{"name": "a"}, {"name": "a"}], "spec.admissionChecks[1].name"),
        (
            [{"name": "a", "labelSelector": {"matchExpressions": [{"key": "k", "operator": "X"}]}}],
            f"{EXPRESSION}.operator",
        ),
        (
            [{"name": "a", "labelSelector": {"matchExpressions": [{"key": "k","operator": "In"}]}}],
            f"{EXPRESSION}.values",
        ),
    ],
)
def test_bad_checks_name_their_field(raw: object, field: str) -> None:
    with pytest.raises(ac.InvalidAdmissionCheckError) as err:
        ac.parse_checks(raw)
    assert err.value.field == field


def test_strict_dequeue_mode_is_scoped_to_the_queue_list() -> None:
    listed = ac.parse_queue_list(" a, b ,")
    assert listed == {"a", "b"}
    assert ac.strict_for("a", True, listed) and not ac.strict_for("c", True, listed)
    assert ac.strict_for("c", True, frozenset())  # no list: every queue
    assert not ac.strict_for("a", False, listed)


def test_states_round_trip_and_a_fresh_reservation_is_all_pending() -> None:
    written = ac.pending_states(["a", "b"], "2026-01-01T00:00:00Z")
    assert [s["state"] for s in written] == ["Pending", "Pending"]
    assert ac.states_from_objects(written) == (
        CheckState("a", "Pending", "2026-01-01T00:00:00Z"),
        CheckState("b", "Pending", "2026-01-01T00:00:00Z"),
    )
    assert ac.states_from_objects([{"state": "Ready"}, "junk"]) == ()


names_st = st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4)
state_st = st.sampled_from(ac.STATES)


@given(names_st, st.dictionaries(st.sampled_from(["a", "b", "c", "d", "x"]), state_st))
def test_verdict_is_the_worst_state_of_the_asked_checks(
    asked: list[str], by_name: dict[str, str]
) -> None:
    """Any Retry/Rejected among the asked -> back-off; else all Ready -> ready; else wait.
    States of checks not asked for (x, or removed) never change the verdict."""
    got = ac.evaluate(states(**by_name), asked)
    seen = [by_name.get(n, "Pending") for n in asked]
    if any(s in ("Retry", "Rejected") for s in seen):
        assert got.verdict is Verdict.BACK_OFF and got.failed is not None
        assert got.failed.name in asked
    elif all(s == "Ready" for s in seen):
        assert got.verdict is Verdict.READY
    else:
        assert got.verdict is Verdict.WAIT
    others = {n: s for n, s in by_name.items() if n in asked}
    assert ac.evaluate(states(**others), asked) == got


@given(
    st.dictionaries(st.sampled_from(["k", "l"]), st.sampled_from(["1", "2"])),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    st.lists(st.sampled_from(["1", "2"]), min_size=1, max_size=2),
)
def test_expressions_follow_kubernetes_semantics(
    labels: dict[str, str], operator: str, values: list[str]
) -> None:
    vals = values if operator in ("In", "NotIn") else []
    expr = {"key": "k", "operator": operator, **({"values": vals} if vals else {})}
    (check,) = ac.parse_checks([{"name": "c", "labelSelector": {"matchExpressions": [expr]}}])
    has = "k" in labels
    expected = {
        "In": has and labels.get("k") in vals,
        "NotIn": not has or labels.get("k") not in vals,
        "Exists": has,
        "DoesNotExist": not has,
    }[operator]
    assert check.applies_to(labels) is expected


def test_checks_on_a_queue_survive_the_quota_reconcile() -> None:
    """The quota sync owns priority and policy only: a Queue with checks is not drifted, a
    merge keeps them, and the server-side apply body does not name the field (so it never
    takes ownership away from the operator who set it)."""
    from koordqueue.domain.queue_derivation import derive_queue, merge_queue, queue_needs_update

    quota = {"metadata": {"name": "q", "labels": {"koord-queue/queue-policy": "Block"}}}
    desired = derive_queue(quota)
    checks = [{"name": "ad1"}, {"name": "gpu", "labelSelector": {"matchLabels": {"k": "v"}}}]
    queue = merge_queue(None, desired)
    queue["spec"]["admissionChecks"] = checks
    assert not queue_needs_update(queue, desired)
    assert merge_queue(queue, derive_queue({"metadata": {"name": "q"}}))["spec"][
        "admissionChecks"
    ] == checks
    assert "admissionChecks" not in desired.to_manifest()["spec"]


def test_an_admission_check_object_is_active_only_with_active_true() -> None:
    base = {"metadata": {"name": "ad"}, "spec": {"controllerName": "example.com/c"}}
    assert ac.check_object(base) == ac.CheckObject(
        "ad", "example.com/c", False, "", "no Active condition"
    )
    on = dict(base, status={"conditions": [{"type": "Active", "status": "True"}]})
    assert ac.check_object(on) == ac.CheckObject("ad", "example.com/c", True)
    assert ac.pending_message(ac.check_object(on)) == "waiting for example.com/c"
    off = dict(base, status={"conditions": [
        {"type": "Other", "status": "True"},
        {"type": "Active", "status": "False", "reason": "R", "message": "m"},
    ]})
    assert ac.pending_message(ac.check_object(off)) == (
        "AdmissionCheck ad (example.com/c) is not Active: R: m"
    )
    assert ac.check_object({"metadata": {}}) is None
    assert ac.pending_message(None) == ""


def test_pending_states_carry_each_checks_message_when_given() -> None:
    written = ac.pending_states(["a", "b"], "2026-01-01T00:00:00Z", ["waiting for x"])
    assert [(s["name"], s["message"]) for s in written] == [("a", "waiting for x"), ("b", "")]
