"""Usage split (self / children, guaranteed / oversold), the oversold annotation, reserving
into another quota, and the ElasticQuota's annotations (issue 18, items 7 and 8)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.domain import InvalidQuotaError, QuotaSpec, QuotaTree, Resources, quota_from_object
from koordqueue.domain.admission import (
    AdmissionRejected,
    Admitted,
    AlreadyReserved,
    ReserveQuotaMissing,
)
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import (
    ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION,
    QUOTA_NAME_LABEL,
    QUOTA_OVERSOLD_TYPE_FORBIDDEN,
    QUOTA_OVERSOLD_TYPE_FORCE,
    ROOT_QUOTA,
)
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.quota import is_oversold

from .helpers import elastic_quota, quota, res, tree

# --- the annotation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION: QUOTA_OVERSOLD_TYPE_FORCE}, True),
        ({ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION: QUOTA_OVERSOLD_TYPE_FORBIDDEN}, False),
        ({ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION: "AcceptQuotaOverSold"}, False),
        ({ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION: "Force"}, False),
        ({"quota.scheduling.koordinator.sh/quota-oversold-type": QUOTA_OVERSOLD_TYPE_FORCE}, False),
        ({}, False),
        (None, False),
    ],
)
def test_only_the_actual_type_force_quota_oversold_counts_as_oversold(
    annotations: dict[str, str] | None, expected: bool
) -> None:
    assert is_oversold(annotations) is expected


# --- the split -------------------------------------------------------------------------------


def _three_levels() -> QuotaTree:
    t = tree(
        quota("org", {"cpu": 100}),
        quota("team", {"cpu": 100}, "org"),
        quota("leaf", {"cpu": 100}, "team"),
    )
    t.admit("g-leaf", "leaf", res(cpu=1))
    t.admit("o-leaf", "leaf", res(cpu=2), oversold=True)
    t.admit("g-team", "team", res(cpu=4))
    t.admit("o-org", "org", res(cpu=8), oversold=True)
    return t


def test_split_of_each_level_separates_own_units_from_descendants() -> None:
    t = _three_levels()
    leaf, team, org = (t.usage_split(n) for n in ("leaf", "team", "org"))
    assert (leaf.used, leaf.self_used, leaf.children_used) == (res(cpu=3), res(cpu=3), Resources())
    assert (team.used, team.self_used, team.children_used) == (res(cpu=7), res(cpu=4), res(cpu=3))
    assert (org.used, org.self_used, org.children_used) == (res(cpu=15), res(cpu=8), res(cpu=7))


def test_split_of_each_level_separates_oversold_from_guaranteed() -> None:
    t = _three_levels()
    team, org = t.usage_split("team"), t.usage_split("org")
    assert (team.guaranteed_used, team.oversold_used) == (res(cpu=5), res(cpu=2))
    assert (team.self_guaranteed_used, team.self_oversold_used) == (res(cpu=4), Resources())
    assert (team.children_guaranteed_used, team.children_oversold_used) == (
        res(cpu=1), res(cpu=2)
    )
    assert (org.self_oversold_used, org.children_oversold_used) == (res(cpu=8), res(cpu=2))


def test_oversold_usage_takes_part_in_check_usage_like_any_other() -> None:
    t = tree(quota("a", {"cpu": 4}))
    t.admit("o", "a", res(cpu=3), oversold=True)
    assert not t.check("u", "a", res(cpu=2)).admitted
    assert t.check("u", "a", res(cpu=1)).admitted


def test_release_gives_back_the_split_it_added() -> None:
    t = _three_levels()
    for uid in ("o-leaf", "g-team", "o-org", "g-leaf"):
        assert t.release(uid)
    split = t.usage_split("org")
    assert split.used == split.self_used == split.oversold_used == Resources()


def test_split_follows_a_reparent() -> None:
    t = tree(quota("p1", {"cpu": 10}), quota("p2", {"cpu": 10}), quota("a", {"cpu": 10}, "p1"))
    t.admit("o", "a", res(cpu=3), oversold=True)
    t.upsert(quota("a", {"cpu": 10}, "p2"))
    assert t.usage_split("p1").oversold_used == Resources()
    assert t.usage_split("p2").children_oversold_used == res(cpu=3)
    assert t.usage_split("a").self_oversold_used == res(cpu=3)
    assert t.is_oversold("o") and not t.is_oversold("never")


def test_a_reservation_into_a_missing_quota_is_refused_and_records_nothing() -> None:
    """Koord-Queue's Reserve: "quota not found" (cache.go), nothing reserved."""
    t = tree(quota("org", {"cpu": 10}))
    with pytest.raises(AdmissionRejected) as err:
        t.admit("u", "later", res(cpu=2), oversold=True, unit="ns/u")
    assert err.value.rejection == ReserveQuotaMissing("ns/u", "later")
    assert not t.is_admitted("u")
    assert t.usage_split("org").used == Resources()


def test_an_admitted_unit_met_before_its_quota_counts_once_the_quota_appears() -> None:
    """The engine's rebuild after a restart may meet an admitted unit before its quota: the
    tree refuses the reservation, the engine keeps the unit and counts it when the quota
    arrives (no admission is lost)."""
    engine = AdmissionEngine()
    engine.upsert_quota(quota("org", {"cpu": 10}))
    engine.upsert_unit(
        QueueUnit(
            "ns", "u", "u", resource=res(cpu=2), phase=Phase.RUNNING,
            labels={QUOTA_NAME_LABEL: "later"},
            annotations={ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION: QUOTA_OVERSOLD_TYPE_FORCE},
        )
    )
    assert not engine.tree.is_admitted("u")
    engine.upsert_quota(quota("later", {"cpu": 10}, "org"))
    assert engine.tree.usage_split("later").self_oversold_used == res(cpu=2)
    assert engine.tree.usage_split("org").children_oversold_used == res(cpu=2)


def test_report_rows_carry_the_split_and_the_quota_annotations() -> None:
    t = QuotaTree()
    t.upsert(QuotaSpec(name="a", max=res(cpu=4), annotations={"team": "ml"}))
    t.admit("o", "a", res(cpu=1), oversold=True)
    (row,) = t.report()
    assert row.annotations == {"team": "ml"}
    assert row.split is not None and row.split.oversold_used == res(cpu=1)


SPLIT_SETTINGS = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
NAMES = ["a", "b", "c", "d"]


@SPLIT_SETTINGS
@given(
    parents=st.fixed_dictionaries({n: st.sampled_from([*NAMES, ROOT_QUOTA]) for n in NAMES}),
    ops=st.lists(
        st.tuples(st.booleans(), st.sampled_from(NAMES), st.integers(1, 5), st.booleans()),
        max_size=30,
    ),
)
def test_split_equals_a_brute_force_recount(
    parents: dict[str, str], ops: list[tuple[bool, str, int, bool]]
) -> None:
    t = QuotaTree()
    for name, parent in parents.items():
        t.upsert(QuotaSpec(name=name, max=res(cpu=100), parent=parent))
    units: dict[str, tuple[str, int, bool]] = {}
    for i, (admit, name, amount, oversold) in enumerate(ops):
        if admit or not units:
            t.admit(f"u{i}", name, res(cpu=amount), oversold=oversold)
            units[f"u{i}"] = (name, amount, oversold)
        else:
            uid = sorted(units)[amount % len(units)]
            t.release(uid)
            del units[uid]
    for name in NAMES:
        total = own = oversold_total = own_oversold = 0
        for quota_name, amount, oversold in units.values():
            path = t.path(quota_name)  # the counted path, cycles and missing ones included
            if name not in path:
                continue
            total += amount
            own += amount if quota_name == name else 0
            oversold_total += amount if oversold else 0
            own_oversold += amount if oversold and quota_name == name else 0
        split = t.usage_split(name)
        assert split.used == res(cpu=total)
        assert split.self_used == res(cpu=own)
        assert split.children_used == res(cpu=total - own)
        assert split.oversold_used == res(cpu=oversold_total)
        assert split.guaranteed_used == res(cpu=total - oversold_total)
        assert split.self_oversold_used == res(cpu=own_oversold)
        assert split.children_guaranteed_used == res(
            cpu=(total - oversold_total) - (own - own_oversold)
        )


# --- reserving into another quota ------------------------------------------------------------


def test_try_admit_into_another_quota_is_already_reserved_with_the_reference_message() -> None:
    t = tree(quota("a", {"cpu": 10}), quota("b", {"cpu": 10}))
    assert t.try_admit("uid", "ns/job", "a", res(cpu=1)).admitted
    decision = t.try_admit("uid", "ns/job", "b", res(cpu=1))
    assert decision == AlreadyReserved("ns/job", "b", "a")
    assert decision.message == (
        "reserve item failed, itemName:ns/job, quotaName:b, already reserved in another quota a"
    )
    assert t.used("b") == Resources() and t.reserved_quota("uid") == "a"


def test_try_admit_into_the_same_quota_is_admitted_again_without_counting_twice() -> None:
    t = tree(quota("a", {"cpu": 10}))
    assert t.try_admit("uid", "ns/job", "a", res(cpu=6)).admitted
    assert t.try_admit("uid", "ns/job", "a", res(cpu=6)) == Admitted("ns/job", "a", ("a",))
    assert t.used("a") == res(cpu=6)


def test_admit_into_another_quota_raises_and_changes_nothing() -> None:
    t = tree(quota("a", {"cpu": 10}), quota("b", {"cpu": 10}))
    assert t.admit("uid", "a", res(cpu=1))
    with pytest.raises(AdmissionRejected) as err:
        t.admit("uid", "b", res(cpu=1))
    assert isinstance(err.value.rejection, AlreadyReserved)
    assert err.value.rejection.reserved == "a"
    assert "itemName:uid," in str(err.value)  # no unit name given: the UID names it
    assert t.used("a") == res(cpu=1) and t.used("b") == Resources()


# --- the engine reads the unit annotation ---------------------------------------------------


def _unit(uid: str, quota_name: str, cpu: int, *, force: bool, phase: Phase) -> QueueUnit:
    forced = {ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION: QUOTA_OVERSOLD_TYPE_FORCE}
    annotations = forced if force else {}
    return QueueUnit(
        namespace="ns", name=uid, uid=uid, resource=res(cpu=cpu),
        labels={QUOTA_NAME_LABEL: quota_name}, annotations=annotations, phase=phase,
    )


def test_engine_counts_oversold_units_it_admits_and_rebuilds() -> None:
    engine = AdmissionEngine()
    engine.upsert_quota(quota("a", {"cpu": 10}))
    engine.upsert_queue("a")
    engine.upsert_unit(_unit("rebuilt", "a", 2, force=True, phase=Phase.RUNNING))
    engine.upsert_unit(_unit("new", "a", 3, force=True, phase=Phase.ENQUEUED))
    engine.upsert_unit(_unit("plain", "a", 1, force=False, phase=Phase.ENQUEUED))
    engine.run_round(now=0.0)
    split = engine.tree.usage_split("a")
    assert split.used == res(cpu=6)
    assert (split.oversold_used, split.guaranteed_used) == (res(cpu=5), res(cpu=1))


# --- the quota keeps its annotations -----------------------------------------------------------


def test_quota_object_keeps_its_annotations() -> None:
    obj: dict[str, Any] = elastic_quota(annotations={"a": "b", "koord-queue/x": "1"})
    assert quota_from_object(obj).annotations == {"a": "b", "koord-queue/x": "1"}
    assert quota_from_object(elastic_quota()).annotations == {}


def test_annotations_that_are_not_a_map_make_the_quota_invalid() -> None:
    obj = elastic_quota()
    obj["metadata"]["annotations"] = ["not", "a", "map"]
    with pytest.raises(InvalidQuotaError) as err:
        quota_from_object(obj)
    assert err.value.field == "metadata.annotations"
