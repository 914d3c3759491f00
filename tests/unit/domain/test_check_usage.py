"""SPEC 2.5 CheckUsage: max × oversellrate − used < request fails, at every quota below the root."""

from __future__ import annotations

from fractions import Fraction

import pytest

from koordqueue.domain import (
    Admitted,
    EmptyQuotaSpec,
    QuotaCycle,
    QuotaExceeded,
    QuotaMissing,
    Resources,
)
from koordqueue.domain.names import ROOT_QUOTA

from .helpers import GPU, quota, res, tree


def test_unit_within_its_quota_max_is_admitted() -> None:
    t = tree(quota("a", {"cpu": 4}))
    assert t.try_admit("uid", "u", "a", res(cpu=4)) == Admitted("u", "a", ("a",))


def test_request_exactly_equal_to_remaining_is_admitted() -> None:
    t = tree(quota("a", {"cpu": "1"}))
    t.admit("u1", "a", res(cpu="600m"))
    assert t.check("u", "a", res(cpu="400m")).admitted


def test_request_one_nano_above_remaining_is_limited() -> None:
    t = tree(quota("a", {"cpu": "1"}))
    t.admit("u1", "a", res(cpu="600m"))
    assert t.check("u", "a", res(cpu="400000001n")) == QuotaExceeded("u", "a", "cpu", ("a",))


def test_unit_over_its_quota_max_is_limited_with_exact_message() -> None:
    t = tree(quota("team-a", {"cpu": 1}))
    decision = t.try_admit("uid", "ns/job", "team-a", res(cpu=2))
    assert isinstance(decision, QuotaExceeded)
    assert decision.message == "limited quotaName:team-a, limited resKey:cpu,"


def test_limited_message_names_the_resource_that_did_not_fit() -> None:
    t = tree(quota("a", {"cpu": 10, "memory": "1Gi", GPU: 1}))
    decision = t.check("u", "a", res({"cpu": 1, "memory": "1Mi", GPU: 2}))
    assert decision.message == "limited quotaName:a, limited resKey:nvidia.com/gpu,"


def test_used_is_the_sum_of_admitted_units_in_the_quota() -> None:
    t = tree(quota("a", {"cpu": 10}))
    t.try_admit("1", "u1", "a", res(cpu=3))
    t.try_admit("2", "u2", "a", res(cpu=4))
    assert t.used("a") == res(cpu=7)
    assert not t.check("u3", "a", res(cpu=4)).admitted
    assert t.check("u3", "a", res(cpu=3)).admitted


def test_used_of_a_parent_is_the_sum_over_its_subtree() -> None:
    t = tree(
        quota("org", {"cpu": 100}),
        quota("team", {"cpu": 100}, "org"),
        quota("leaf1", {"cpu": 100}, "team"),
        quota("leaf2", {"cpu": 100}, "team"),
    )
    t.admit("1", "leaf1", res(cpu=3))
    t.admit("2", "leaf2", res(cpu=4))
    t.admit("3", "team", res(cpu=5))
    assert t.used("leaf1") == res(cpu=3)
    assert t.used("team") == res(cpu=12)
    assert t.used("org") == res(cpu=12)


def test_admission_adds_the_request_to_its_quota_and_every_ancestor() -> None:
    t = tree(quota("org", {"cpu": 10}), quota("leaf", {"cpu": 10}, "org"))
    t.try_admit("1", "u", "leaf", res(cpu=2, memory="1Gi"))
    assert t.used("leaf") == t.used("org") == res(cpu=2, memory="1Gi")


def test_release_subtracts_the_request_from_its_quota_and_every_ancestor() -> None:
    t = tree(quota("org", {"cpu": 10}), quota("leaf", {"cpu": 10}, "org"))
    t.try_admit("1", "u", "leaf", res(cpu=2))
    t.try_admit("2", "u2", "leaf", res(cpu=3))
    assert t.release("1")
    assert t.used("leaf") == t.used("org") == res(cpu=3)


def test_ancestor_exhausted_blocks_unit_whose_own_quota_has_room() -> None:
    t = tree(
        quota("org", {"cpu": 4}),
        quota("team-a", {"cpu": 4}, "org"),
        quota("team-b", {"cpu": 4}, "org"),
    )
    assert t.try_admit("1", "a1", "team-a", res(cpu=3)).admitted
    decision = t.try_admit("2", "b1", "team-b", res(cpu=2))
    assert decision == QuotaExceeded("b1", "org", "cpu", ("team-b", "org"))
    assert decision.message == "limited quotaName:org, limited resKey:cpu,"


def test_every_quota_on_the_path_is_checked_up_to_the_root() -> None:
    t = tree(
        quota("l1", {"cpu": 1}),
        quota("l2", {"cpu": 100}, "l1"),
        quota("l3", {"cpu": 100}, "l2"),
        quota("l4", {"cpu": 100}, "l3"),
    )
    assert t.check("u", "l4", res(cpu=2)) == QuotaExceeded(
        "u", "l1", "cpu", ("l4", "l3", "l2", "l1")
    )


def test_root_quota_max_is_not_checked() -> None:
    t = tree(quota(ROOT_QUOTA, {"cpu": 1}), quota("a", {"cpu": 10}))
    assert t.check("u", "a", res(cpu=5)).admitted


def test_own_quota_is_reported_before_an_ancestor_when_both_are_full() -> None:
    t = tree(quota("org", {"cpu": 1}), quota("leaf", {"cpu": 1}, "org"))
    assert t.check("u", "leaf", res(cpu=2)) == QuotaExceeded("u", "leaf", "cpu", ("leaf", "org"))


def test_resource_absent_from_max_is_not_limited() -> None:
    t = tree(quota("a", {"cpu": 1}))
    assert t.check("u", "a", res({"cpu": 1, GPU: 64, "memory": "1Ti"})).admitted


def test_resource_absent_from_an_ancestors_max_is_not_limited_by_it() -> None:
    t = tree(quota("org", {"cpu": 100}), quota("leaf", {GPU: 1, "cpu": 100}, "org"))
    t.admit("1", "leaf", res({GPU: 1}))
    assert t.check("u", "leaf", res({GPU: 1})) == QuotaExceeded("u", "leaf", GPU, ("leaf", "org"))
    t.upsert(quota("leaf", {GPU: 8, "cpu": 100}, "org"))
    assert t.check("u", "leaf", res({GPU: 7})).admitted


def test_resource_with_zero_max_admits_nothing_of_it() -> None:
    t = tree(quota("a", {"cpu": 10, GPU: 0}))
    assert t.check("u", "a", res({GPU: 1})) == QuotaExceeded("u", "a", GPU, ("a",))
    assert t.check("u", "a", res(cpu=1)).admitted


def test_empty_max_rejects_nonempty_request_with_exact_message() -> None:
    t = tree(quota("a"))
    decision = t.check("u", "a", res(cpu="1m"))
    assert decision == EmptyQuotaSpec("u", "a", ("a",))
    assert decision.message == (
        "limited quotaName:a, quota spec is empty but queue unit res is not empty"
    )


def test_empty_max_admits_an_empty_request() -> None:
    t = tree(quota("a"))
    assert t.check("u", "a", Resources()).admitted


def test_empty_max_rejects_a_request_of_zeros_as_koord_queue_counts_entries() -> None:
    """Koord-Queue tests `len(request) != 0`: a request listing `cpu: 0` is not empty."""
    t = tree(quota("a"))
    assert t.check("u", "a", res(cpu=0)) == EmptyQuotaSpec("u", "a", ("a",))


def test_empty_max_of_an_ancestor_rejects_a_nonempty_request() -> None:
    t = tree(quota("org"), quota("leaf", {"cpu": 10}, "org"))
    assert t.check("u", "leaf", res(cpu=1)) == EmptyQuotaSpec("u", "org", ("leaf", "org"))


def test_min_is_not_part_of_the_check() -> None:
    t = tree(quota("a", {"cpu": 10}, min={"cpu": 1}))
    assert t.check("u", "a", res(cpu=10)).admitted
    t2 = tree(quota("b", {"cpu": 1}, min={"cpu": 10}))
    assert not t2.check("u", "b", res(cpu=2)).admitted


def test_min_without_max_is_an_empty_max() -> None:
    t = tree(quota("a", min={"cpu": 10}))
    assert isinstance(t.check("u", "a", res(cpu=1)), EmptyQuotaSpec)


def test_oversell_rate_scales_every_limit() -> None:
    t = tree(quota("org", {"cpu": 4}), quota("leaf", {"cpu": 2}, "org"), rate=2)
    assert t.limit("leaf") == res(cpu=4) and t.limit("org") == res(cpu=8)
    assert t.check("u", "leaf", res(cpu=4)).admitted
    assert not t.check("u", "leaf", res(cpu="4001m")).admitted


def test_oversell_rate_scales_ancestor_limits_too() -> None:
    t = tree(quota("org", {"cpu": 4}), quota("leaf", {"cpu": 100}, "org"), rate=2)
    assert t.check("u", "leaf", res(cpu=8)).admitted
    assert t.check("u", "leaf", res(cpu=9)) == QuotaExceeded("u", "org", "cpu", ("leaf", "org"))


def test_fractional_oversell_rate_is_exact() -> None:
    t = tree(quota("a", {"cpu": 3}), rate="1.5")
    assert t.oversell_rate == Fraction(3, 2)
    assert t.check("u", "a", res(cpu="4500m")).admitted
    assert not t.check("u", "a", res(cpu="4500000001n")).admitted


def test_oversell_rate_below_one_shrinks_limits() -> None:
    t = tree(quota("a", {"memory": "1Gi"}), rate=0.5)
    assert t.check("u", "a", res(memory="512Mi")).admitted
    assert not t.check("u", "a", res(memory="513Mi")).admitted


def test_check_changes_nothing() -> None:
    t = tree(quota("a", {"cpu": 10}))
    t.check("u", "a", res(cpu=1))
    assert t.used("a") == Resources()
    assert not t.is_admitted("u")


def test_rejected_unit_adds_no_usage() -> None:
    t = tree(quota("a", {"cpu": 1}))
    assert not t.try_admit("uid", "u", "a", res(cpu=2)).admitted
    assert t.used("a") == Resources() and not t.is_admitted("uid")


def test_admission_is_idempotent_per_uid() -> None:
    t = tree(quota("a", {"cpu": 10}))
    assert t.try_admit("uid", "u", "a", res(cpu=6)).admitted
    assert t.try_admit("uid", "u", "a", res(cpu=6)).admitted
    assert t.used("a") == res(cpu=6)
    assert not t.admit("uid", "a", res(cpu=6))
    assert t.used("a") == res(cpu=6)


def test_release_is_idempotent() -> None:
    t = tree(quota("a", {"cpu": 10}))
    t.try_admit("uid", "u", "a", res(cpu=6))
    assert t.release("uid")
    assert not t.release("uid")
    assert t.used("a") == Resources()


def test_releasing_a_never_admitted_unit_changes_nothing() -> None:
    t = tree(quota("a", {"cpu": 10}))
    t.admit("x", "a", res(cpu=1))
    assert not t.release("never")
    assert t.used("a") == res(cpu=1)


def test_released_capacity_can_be_admitted_again() -> None:
    t = tree(quota("a", {"cpu": 1}))
    t.try_admit("1", "u1", "a", res(cpu=1))
    assert not t.check("u2", "a", res(cpu=1)).admitted
    t.release("1")
    assert t.try_admit("2", "u2", "a", res(cpu=1)).admitted


def test_release_gives_back_what_was_added_even_if_max_changed_meanwhile() -> None:
    t = tree(quota("a", {"cpu": 10}))
    t.try_admit("1", "u", "a", res(cpu=5))
    t.upsert(quota("a", {"cpu": 1}))
    t.release("1")
    assert t.used("a") == Resources()


def test_release_after_reparent_subtracts_from_the_current_ancestors() -> None:
    t = tree(quota("p1", {"cpu": 10}), quota("p2", {"cpu": 10}), quota("a", {"cpu": 10}, "p1"))
    t.try_admit("1", "u", "a", res(cpu=5))
    t.upsert(quota("a", {"cpu": 10}, "p2"))
    assert t.used("p1") == Resources() and t.used("p2") == res(cpu=5)
    t.release("1")
    assert t.used("p1") == t.used("p2") == t.used("a") == Resources()


def test_admitted_usage_moves_with_its_subtree_on_reparent() -> None:
    t = tree(quota("p1", {"cpu": 5}), quota("p2", {"cpu": 5}), quota("a", {"cpu": 10}, "p1"))
    t.try_admit("1", "u", "a", res(cpu=5))
    assert not t.check("v", "a", res(cpu=1)).admitted
    t.upsert(quota("a", {"cpu": 10}, "p2"))
    assert t.check("v", "p1", res(cpu=5)).admitted
    assert not t.check("v", "p2", res(cpu=1)).admitted


def test_self_parent_reports_a_cycle_with_exact_message() -> None:
    t = tree(quota("a", {"cpu": 10}, "a"))
    decision = t.try_admit("uid", "ns/job", "a", res(cpu=1))
    assert decision == QuotaCycle("ns/job", "a", ("a",))
    assert decision.message == (
        "CheckUsage found cycle reference, item:ns/job, quotaName:a, visited quota: a"
    )


def test_cycle_between_ancestors_reports_the_revisited_quota_and_the_visited_path() -> None:
    t = tree(
        quota("leaf", {"cpu": 10}, "x"), quota("x", {"cpu": 10}, "y"), quota("y", {"cpu": 10}, "x")
    )
    decision = t.check("ns/job", "leaf", res(cpu=1))
    assert decision == QuotaCycle("ns/job", "x", ("leaf", "x", "y"))
    assert decision.message == (
        "CheckUsage found cycle reference, item:ns/job, quotaName:x, visited quota: leaf,x,y"
    )


def test_a_full_quota_before_a_cycle_is_reported_as_limited() -> None:
    """Each level is checked before the walk moves up, so the limit wins over the cycle."""
    t = tree(quota("a", {"cpu": 0}, "b"), quota("b", {"cpu": 0}, "a"))
    assert t.check("u", "a", res(cpu=1)) == QuotaExceeded("u", "a", "cpu", ("a", "b"))


def test_cycle_is_reported_when_every_quota_on_it_has_room() -> None:
    t = tree(quota("a", {"cpu": 5}, "b"), quota("b", {"cpu": 5}, "a"))
    assert t.check("u", "a", res(cpu=1)) == QuotaCycle("u", "a", ("a", "b"))


def test_unknown_parent_reports_missing_quota_with_exact_message() -> None:
    t = tree(quota("leaf", {"cpu": 10}, "team"), quota("team", {"cpu": 10}, "ghost"))
    decision = t.try_admit("uid", "ns/job", "leaf", res(cpu=1))
    assert decision == QuotaMissing("ns/job", "ghost", ("leaf", "team", "ghost"))
    assert decision.message == (
        "CheckUsage found quota not exist, item:ns/job, quotaName:ghost, "
        "visited quota: leaf,team,ghost"
    )
    assert not t.is_admitted("uid")


def test_unit_naming_an_unknown_quota_reports_it_as_the_visited_path() -> None:
    decision = tree().check("ns/job", "nope", res(cpu=1))
    assert decision == QuotaMissing("ns/job", "nope", ("nope",))
    assert decision.message == (
        "CheckUsage found quota not exist, item:ns/job, quotaName:nope, visited quota: nope"
    )


def test_empty_quota_name_reports_missing_quota_rather_than_crashing() -> None:
    assert isinstance(tree(quota("a", {"cpu": 1})).check("u", "", res(cpu=1)), QuotaMissing)


def test_a_full_quota_below_a_missing_ancestor_is_reported_as_limited() -> None:
    """Each level is checked before the walk moves up: `leaf` is full, `ghost` never looked at."""
    t = tree(quota("leaf", {"cpu": 0}, "ghost"))
    decision = t.check("u", "leaf", res(cpu=1))
    assert decision == QuotaExceeded("u", "leaf", "cpu", ("leaf",))
    assert decision.message == "limited quotaName:leaf, limited resKey:cpu,"


def test_missing_ancestor_is_reported_when_the_levels_below_it_have_room() -> None:
    t = tree(quota("leaf", {"cpu": 5}, "ghost"))
    assert t.check("u", "leaf", res(cpu=1)) == QuotaMissing(
        "u", "ghost", ("leaf", "ghost")
    )


def test_admitted_message_names_quota_and_checked_path() -> None:
    t = tree(quota("org", {"cpu": 10}), quota("leaf", {"cpu": 10}, "org"))
    assert t.check("u", "leaf", res(cpu=1)).message == "admitted into quota leaf (checked leaf,org)"


def test_report_lists_every_quota_with_limits_and_subtree_usage() -> None:
    t = tree(
        quota("org", {"cpu": 10}, min={"cpu": 1}),
        quota("leaf", {"cpu": 4}, "org", min={"cpu": 2}),
    )
    t.admit("1", "leaf", res(cpu=3))
    t.admit("2", "org", res(cpu=1))
    rows = {r.name: r for r in t.report()}
    assert [r.name for r in t.report()] == ["leaf", "org"]
    assert rows["leaf"].used == res(cpu=3) and rows["org"].used == res(cpu=4)
    assert rows["leaf"].min == res(cpu=2) and rows["org"].max == res(cpu=10)
    assert rows["leaf"].parent == "org"
    assert (rows["leaf"].admitted_units, rows["org"].admitted_units) == (1, 1)


def test_report_unit_count_drops_on_release() -> None:
    t = tree(quota("a", {"cpu": 10}))
    t.admit("1", "a", res(cpu=1))
    t.release("1")
    assert t.report()[0].admitted_units == 0


@pytest.mark.parametrize("uids", [["1", "2", "3"], ["3", "1", "2"], ["2", "3", "1"]])
def test_release_in_any_order_returns_usage_to_zero(uids: list[str]) -> None:
    t = tree(quota("org", {"cpu": 10}), quota("leaf", {"cpu": 10}, "org"))
    for i, uid in enumerate(["1", "2", "3"]):
        t.try_admit(uid, f"u{uid}", "leaf", res(cpu=i + 1))
    for uid in uids:
        t.release(uid)
    assert t.used("leaf") == t.used("org") == Resources()
    assert t.admitted_uids() == []
