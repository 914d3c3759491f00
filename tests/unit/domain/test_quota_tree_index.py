"""SPEC 2.1 / 2.5: quotas are indexed by name across namespaces; the oldest copy is in force
(issue 33); parent links."""

from __future__ import annotations

import pytest

from koordqueue.domain import Admitted, QuotaExceeded, QuotaMissing
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


T1 = "2026-01-01T10:00:00Z"
T2 = "2026-01-01T10:00:05Z"
T3 = "2026-01-01T10:01:00Z"


def test_of_same_name_quotas_the_oldest_is_in_force_whatever_the_order_they_arrive_in() -> None:
    old, new = (
        quota("a", {"cpu": 1}, namespace="ns2", created=T1),
        quota("a", {"cpu": 2}, namespace="ns1", created=T2),
    )
    for order in ((old, new), (new, old)):
        t = tree(*order)
        assert t.get("a").namespace == "ns2"  # type: ignore[union-attr]
        assert t.limit("a") == res(cpu=1)


def test_same_creation_time_or_none_puts_the_first_namespace_in_force() -> None:
    for created in ("", T1):
        t = tree(
            quota("a", {"cpu": 2}, namespace="ns2", created=created),
            quota("a", {"cpu": 1}, namespace="ns1", created=created),
        )
        assert t.get("a").namespace == "ns1"  # type: ignore[union-attr]


def test_a_resync_folding_both_copies_again_keeps_the_same_copy_in_force() -> None:
    """Issue 33: the copy in use flipped at each resync (the last reconciled won)."""
    first = quota("a", {"cpu": 1}, namespace="ns1", created=T1)
    second = quota("a", {"cpu": 2}, namespace="ns2", created=T2)
    t = tree(first, second)
    for _ in range(3):
        t.upsert(second)
        assert t.get("a") is first
        t.upsert(first)
        assert t.get("a") is first


def test_a_second_namespace_is_reported_once_with_the_copy_in_force_first() -> None:
    calls: list[tuple[str, str]] = []
    first = quota("a", {"cpu": 1}, namespace="ns1", created=T1)
    second = quota("a", {"cpu": 2}, namespace="ns2", created=T2)
    t = tree(
        first,
        second,
        on_duplicate=lambda live, ignored: calls.append((live.namespace, ignored.namespace)),
    )
    t.upsert(second)  # an update (or a resync) of a known copy is not news
    t.upsert(quota("a", {"cpu": 3}, namespace="ns1", created=T1))
    assert calls == [("ns1", "ns2")]


def test_an_older_copy_arriving_late_takes_over_and_names_the_displaced_one() -> None:
    calls: list[tuple[str, str]] = []
    t = tree(
        quota("a", {"cpu": 2}, namespace="ns2", created=T2),
        quota("a", {"cpu": 1}, namespace="ns1", created=T1),
        on_duplicate=lambda live, ignored: calls.append((live.namespace, ignored.namespace)),
    )
    assert t.limit("a") == res(cpu=1)
    assert calls == [("ns1", "ns2")]


def test_update_in_the_same_namespace_is_not_a_duplicate() -> None:
    calls: list[object] = []
    tree(
        quota("a", {"cpu": 1}, namespace="ns1"),
        quota("a", {"cpu": 2}, namespace="ns1"),
        on_duplicate=lambda prev, win: calls.append(win),
    )
    assert calls == []


def test_updating_the_ignored_copy_changes_nothing_in_force() -> None:
    t = tree(
        quota("a", {"cpu": 1}, namespace="ns1", created=T1),
        quota("a", {"cpu": 2}, namespace="ns2", created=T2),
        quota("a", {"cpu": 9}, namespace="ns2", created=T2),
    )
    assert t.get("a").namespace == "ns1"  # type: ignore[union-attr]
    assert t.limit("a") == res(cpu=1)


def test_removing_the_copy_in_force_falls_back_to_the_next_oldest() -> None:
    t = tree(
        quota("a", {"cpu": 3}, namespace="ns3", created=T3),
        quota("a", {"cpu": 1}, namespace="ns1", created=T1),
        quota("a", {"cpu": 2}, namespace="ns2", created=T2),
    )
    removed = t.remove("a", "ns1")
    assert removed is not None and removed.namespace == "ns1"
    assert t.get("a").namespace == "ns2"  # type: ignore[union-attr]
    assert t.limit("a") == res(cpu=2)
    assert [q.namespace for q in t.copies("a")] == ["ns2", "ns3"]


def test_removing_the_ignored_copy_keeps_the_one_in_force() -> None:
    t = tree(quota("a", {"cpu": 1}, namespace="ns1"), quota("a", {"cpu": 2}, namespace="ns2"))
    t.remove("a", "ns2")
    assert t.get("a").namespace == "ns1"  # type: ignore[union-attr]
    t.remove("a", "ns1")
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
    assert t.path("a") == ("a", "p1")
    t.remove("a", "ns1")
    assert t.path("a") == ("a", "p2")


def test_missing_parent_label_means_root_so_path_stops_below_root() -> None:
    t = tree(quota("a"))
    assert t.path("a") == ("a",)
    assert t.get("a").parent == ROOT_QUOTA  # type: ignore[union-attr]


def test_path_walks_from_quota_up_to_but_excluding_root() -> None:
    t = tree(
        quota(ROOT_QUOTA), quota("org"), quota("team", parent="org"), quota("leaf", parent="team")
    )
    assert t.path("leaf") == ("leaf", "team", "org")


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
