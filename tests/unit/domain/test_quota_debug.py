"""Koord-Queue's `GET /apis/v1/elasticquota` answer from our quota tree (issue 35 point 8):
its keys, milli-units, the self/children and guaranteed/oversold split, the units held.
Expected numbers transcribed from Koord-Queue's elasticquotav1alpha1 cache tests (a parent
with two children; a Force-oversold unit counts as oversold, others as guaranteed)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain import names
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.quota_debug import quota_view
from koordqueue.domain.resources import Resources

KEYS = [
    "Count", "Max", "Min", "Used", "SelfUsed", "ChildrenUsed", "GuaranteedUsed",
    "SelfGuaranteedUsed", "ChildrenGuaranteedUsed", "OverSoldUsed", "SelfOverSoldUsed",
    "ChildrenOverSoldUsed", "Items",
]


def _unit(name: str, quota: str, cpu: str, **annotations: str) -> QueueUnit:
    return QueueUnit(
        namespace="ns", name=name, uid=f"uid-{name}", priority=3,
        labels={names.QUOTA_NAME_LABEL: quota}, annotations=annotations,
        resource=Resources.parse({"cpu": cpu}), created=1_700_000_000.0,
    )


def _engine() -> AdmissionEngine:
    engine = AdmissionEngine()
    engine.upsert_quota(QuotaSpec("test2", max=Resources.parse({"cpu": "20"}),
                                  min=Resources.parse({"cpu": "10"})))
    for child in ("test31", "test32"):
        engine.upsert_quota(QuotaSpec(child, max=Resources.parse({"cpu": "10"}), parent="test2"))
    for name in ("test2", "test31", "test32"):
        engine.upsert_queue(name, "Priority", {})
    return engine


def test_a_parent_reports_its_childrens_units_as_children_used() -> None:
    engine = _engine()
    engine.upsert_unit(_unit("a", "test31", "2"))
    engine.upsert_unit(_unit("b", "test32", "3", **{
        names.ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION: names.QUOTA_OVERSOLD_TYPE_FORCE,
        names.QUOTA_OVERSOLD_TYPE_ANNOTATION: names.QUOTA_OVERSOLD_TYPE_FORCE,
    }))
    engine.upsert_unit(_unit("c", "test2", "5"))
    assert len(engine.run_round(10.0).admitted) == 3
    view = quota_view(engine)
    parent = view["test2"]
    assert list(parent) == KEYS
    assert parent["Count"] == 1
    assert parent["Max"] == {"cpu": 20000} and parent["Min"] == {"cpu": 10000}
    assert (parent["Used"], parent["SelfUsed"], parent["ChildrenUsed"]) == (
        {"cpu": 10000}, {"cpu": 5000}, {"cpu": 5000})
    assert (parent["GuaranteedUsed"], parent["OverSoldUsed"]) == ({"cpu": 7000}, {"cpu": 3000})
    assert parent["ChildrenOverSoldUsed"] == {"cpu": 3000} and parent["SelfOverSoldUsed"] == {}
    assert list(parent["Items"]) == ["ns/c"]
    oversold = view["test32"]["Items"]["ns/b"]
    assert oversold == {
        "Name": "b", "Resource": {"cpu": "3"}, "Priority": 3,
        "OversoldType": names.QUOTA_OVERSOLD_TYPE_FORCE,
        "ActualOversoldType": names.QUOTA_OVERSOLD_TYPE_FORCE,
        "CreationTimestamp": "2023-11-14T22:13:20Z", "InReserveCache": True,
    }
    assert view["test31"]["Used"] == {"cpu": 2000} and view["test31"]["Count"] == 1


def test_a_released_unit_leaves_the_view() -> None:
    engine = _engine()
    engine.upsert_unit(_unit("a", "test31", "2"))
    engine.run_round(10.0)
    engine.remove_unit("uid-a")
    view = quota_view(engine)
    assert view["test31"]["Count"] == 0 and view["test31"]["Items"] == {}
    assert view["test2"]["Used"] == {} and view["test2"]["ChildrenUsed"] == {}


def test_no_quota_known_answers_an_empty_object() -> None:
    assert quota_view(AdmissionEngine()) == {}


@given(st.lists(st.integers(1, 4000), min_size=1, max_size=6))
def test_used_is_self_plus_children_and_guaranteed_plus_oversold(millis: list[int]) -> None:
    engine = _engine()
    for i, m in enumerate(millis):
        quota = ("test2", "test31", "test32")[i % 3]
        extra = {names.ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION: names.QUOTA_OVERSOLD_TYPE_FORCE}
        engine.upsert_unit(_unit(f"u{i}", quota, f"{m}m", **(extra if i % 2 else {})))
    engine.run_round(10.0)
    for info in quota_view(engine).values():
        used = info["Used"].get("cpu", 0)
        assert used == info["SelfUsed"].get("cpu", 0) + info["ChildrenUsed"].get("cpu", 0)
        assert used == info["GuaranteedUsed"].get("cpu", 0) + info["OverSoldUsed"].get("cpu", 0)
        assert info["Count"] == len(info["Items"])
