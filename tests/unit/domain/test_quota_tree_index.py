"""SPEC 2.1 / 2.5: quotas are indexed by name across namespaces; last write wins; parent links."""

from __future__ import annotations

import pytest

from koordqueue.domain import Admitted, QuotaExceeded, QuotaMissing, QuotaSpec
from koordqueue.domain.names import ROOT_QUOTA
from koordqueue.domain.quota_tree import parse_oversell_rate

from .helpers import quota, res, tree


def test_quota_is_found_by_name_whatever_its_namespace() -> None:
    t = tree(quota("team-a", {"cpu": 1}, namespace="ns1"))
    assert "team-a" in t
    assert t.get("team-a") is not None and t.get("team-a").namespace == "ns1"  # type: ignore[union-attr]


def test_same_name_quotas_in_two_namespaces_are_one_quota() -> None:
    t = tree(quota("a", {"cpu": 1}, namespace="ns1"), quota("a", {"cpu": 2}, namespace="ns2"))
    assert len(t) == 1


def test_same_name_quotas_in_two_namespaces_last_write_wins() -> None:
    t = tree(quota("a", {"cpu": 1}, namespace="ns1"), quota("a", {"cpu": 2}, namespace="ns2"))
    assert t.get("a").namespace == "ns2"  # type: ignore[union-attr]
    assert t.limit("a") == res(cpu=2)


def test_same_name_quota_in_another_namespace_calls_on_duplicate_with_both() -> None:
    calls: list[tuple[QuotaSpec, QuotaSpec]] = []
    first = quota("a", {"cpu": 1}, namespace="ns1")
    second = quota("a", {"cpu": 2}, namespace="ns2")
    tree(first, second, on_duplicate=lambda prev, win: calls.append((prev, win)))
    assert calls == [(first, second)]


def test_update_in_the_same_namespace_is_not_a_duplicate() -> None:
    calls: list[object] = []
    tree(
        quota("a", {"cpu": 1}, namespace="ns1"),
        quota("a", {"cpu": 2}, namespace="ns1"),
        on_duplicate=lambda prev, win: calls.append(win),
    )
    assert calls == []


def test_rewriting_the_older_namespace_makes_it_win_again() -> None:
    calls: list[tuple[str, str]] = []
    t = tree(
        quota("a", {"cpu": 1}, namespace="ns1"),
        quota("a", {"cpu": 2}, namespace="ns2"),
        quota("a", {"cpu": 3}, namespace="ns1"),
        on_duplicate=lambda prev, win: calls.append((prev.namespace, win.namespace)),
    )
    assert t.get("a").namespace == "ns1"  # type: ignore[union-attr]
    assert t.limit("a") == res(cpu=3)
    assert calls == [("ns1", "ns2"), ("ns2", "ns1")]


def test_removing_the_winner_falls_back_to_the_other_namespaces_quota() -> None:
    t = tree(quota("a", {"cpu": 1}, namespace="ns1"), quota("a", {"cpu": 2}, namespace="ns2"))
    removed = t.remove("a", "ns2")
    assert removed is not None and removed.namespace == "ns2"
    assert t.get("a").namespace == "ns1"  # type: ignore[union-attr]
    assert t.limit("a") == res(cpu=1)


def test_removing_the_winner_falls_back_to_the_most_recently_written_remaining_quota() -> None:
    t = tree(
        quota("a", {"cpu": 1}, namespace="ns1"),
        quota("a", {"cpu": 2}, namespace="ns2"),
        quota("a", {"cpu": 3}, namespace="ns3"),
    )
    t.remove("a", "ns3")
    assert t.get("a").namespace == "ns2"  # type: ignore[union-attr]
    assert t.limit("a") == res(cpu=2)


def test_removing_the_loser_keeps_the_winner() -> None:
    t = tree(quota("a", {"cpu": 1}, namespace="ns1"), quota("a", {"cpu": 2}, namespace="ns2"))
    t.remove("a", "ns1")
    assert t.get("a").namespace == "ns2"  # type: ignore[union-attr]
    t.remove("a", "ns2")
    assert "a" not in t


def test_removing_by_name_only_removes_every_namespace() -> None:
    t = tree(quota("a", namespace="ns1"), quota("a", namespace="ns2"))
    t.remove("a")
    assert "a" not in t


def test_removing_an_unknown_quota_returns_none() -> None:
    t = tree(quota("a", namespace="ns1"))
    assert t.remove("b") is None
    assert t.remove("a", "other-ns") is None
    assert "a" in t


def test_fallback_quota_parent_is_used_after_the_winner_is_removed() -> None:
    t = tree(
        quota("p1", {"cpu": 10}),
        quota("p2", {"cpu": 10}),
        quota("a", {"cpu": 10}, "p1", namespace="ns1"),
        quota("a", {"cpu": 10}, "p2", namespace="ns2"),
    )
    assert t.path("a") == ("a", "p2")
    t.remove("a", "ns2")
    assert t.path("a") == ("a", "p1")


def test_missing_parent_label_means_root_so_path_stops_below_root() -> None:
    t = tree(quota("a"))
    assert t.path("a") == ("a",)
    assert t.parent_of("a") == ROOT_QUOTA


def test_root_has_no_parent() -> None:
    t = tree(quota(ROOT_QUOTA, {"cpu": 1}))
    assert t.parent_of(ROOT_QUOTA) is None


def test_path_walks_from_quota_up_to_but_excluding_root() -> None:
    t = tree(
        quota(ROOT_QUOTA), quota("org"), quota("team", parent="org"), quota("leaf", parent="team")
    )
    assert t.path("leaf") == ("leaf", "team", "org")


def test_children_are_listed_by_name() -> None:
    t = tree(quota("org"), quota("b", parent="org"), quota("a", parent="org"), quota("c"))
    assert t.children_of("org") == ["a", "b"]


def test_quota_appearing_later_makes_a_waiting_unit_map_without_restart() -> None:
    t = tree()
    assert isinstance(t.check("u", "team-a", res(cpu=1)), QuotaMissing)
    t.upsert(quota("team-a", {"cpu": 2}))
    assert isinstance(t.check("u", "team-a", res(cpu=1)), Admitted)


def test_deleted_quota_makes_units_report_not_found_until_it_reappears() -> None:
    t = tree(quota("team-a", {"cpu": 2}))
    t.remove("team-a")
    assert isinstance(t.check("u", "team-a", res(cpu=1)), QuotaMissing)
    t.upsert(quota("team-a", {"cpu": 2}))
    assert isinstance(t.check("u", "team-a", res(cpu=1)), Admitted)


def test_parent_appearing_later_repairs_the_chain() -> None:
    t = tree(quota("leaf", {"cpu": 2}, "org"))
    assert isinstance(t.check("u", "leaf", res(cpu=1)), QuotaMissing)
    t.upsert(quota("org", {"cpu": 1}))
    assert t.check("u", "leaf", res(cpu=2)) == QuotaExceeded("u", "org", "cpu", ("leaf", "org"))


def test_reparenting_changes_which_ancestors_are_checked() -> None:
    t = tree(
        quota("small", {"cpu": 1}), quota("big", {"cpu": 10}), quota("leaf", {"cpu": 10}, "small")
    )
    assert not t.check("u", "leaf", res(cpu=5)).admitted
    t.upsert(quota("leaf", {"cpu": 10}, "big"))
    assert t.check("u", "leaf", res(cpu=5)).admitted


def test_changing_max_takes_effect_on_the_next_check() -> None:
    t = tree(quota("a", {"cpu": 1}))
    assert not t.check("u", "a", res(cpu=2)).admitted
    t.upsert(quota("a", {"cpu": 2}))
    assert t.check("u", "a", res(cpu=2)).admitted


@pytest.mark.parametrize("rate", [0, -1, "0", "abc", "1/0", ""])
def test_invalid_oversell_rate_is_rejected(rate: object) -> None:
    with pytest.raises(ValueError, match="oversell rate"):
        parse_oversell_rate(rate)  # type: ignore[arg-type]


def test_oversell_rate_defaults_to_one() -> None:
    assert tree().oversell_rate == 1
