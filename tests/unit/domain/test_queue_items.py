"""Queue.status.queueItemDetails (issue 35 point 8): Koord-Queue's shape, its refresh
annotations, and positions read from the round's record (never sorted a second time)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain import names
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.pending import pending_units
from koordqueue.domain.queue_items import (
    QueueItemsSchedule,
    parse_go_duration,
    queue_item_details,
    refresh_setting,
)
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15.0), ("30s", 30.0), ("2m", 120.0), ("1m30s", 90.0), ("1.5h", 5400.0),
     ("500ms", 0.5), ("0", 0.0), ("-1s", -1.0), ("1h0m0s", 3600.0)],
)
def test_go_durations_parse_as_go_parse_duration_reads_them(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "s", "1d", "abc", "1s2", "-"])
def test_a_bad_go_duration_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_go_duration(text)


@given(st.integers(0, 10_000), st.integers(0, 59), st.integers(0, 59))
def test_hms_durations_add_up(h: int, m: int, s: int) -> None:
    assert parse_go_duration(f"{h}h{m}m{s}s") == h * 3600 + m * 60 + s


def test_refresh_defaults_to_fifteen_seconds() -> None:
    setting = refresh_setting({})
    assert (setting.interval, setting.disabled, setting.error) == (15.0, False, None)


def test_the_interval_annotation_sets_the_refresh() -> None:
    assert refresh_setting({names.QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION: "30s"}).interval == 30


def test_the_disable_annotation_counts_by_presence_not_value() -> None:
    assert refresh_setting({names.DISABLE_SHOW_QUEUE_ITEMS_ANNOTATION: "false"}).disabled


@pytest.mark.parametrize("raw", ["soon", "0s", "-5s"])
def test_an_unusable_interval_keeps_the_default_and_says_why(raw: str) -> None:
    setting = refresh_setting({names.QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION: raw})
    assert setting.interval == 15.0 and not setting.disabled
    assert setting.error is not None
    assert names.QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION in setting.error


def test_each_queue_publishes_at_once_then_on_its_own_interval() -> None:
    schedule = QueueItemsSchedule()
    schedule.set("a", {})
    schedule.set("b", {names.QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION: "5s"})
    assert sorted(schedule.due(100.0)) == ["a", "b"]
    schedule.done("a", 100.0)
    schedule.done("b", 100.0)
    assert schedule.due(104.9) == []
    assert schedule.due(105.0) == ["b"]
    assert sorted(schedule.due(115.0)) == ["a", "b"]


def test_a_new_interval_publishes_at_once_and_an_unchanged_one_does_not() -> None:
    schedule = QueueItemsSchedule()
    schedule.set("a", {})
    schedule.done("a", 0.0)
    schedule.set("a", {})  # the same Queue again (e.g. an annotation echo)
    assert schedule.due(1.0) == []
    schedule.set("a", {names.QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION: "1m"})
    assert schedule.due(1.0) == ["a"]


def test_a_disabled_queue_is_never_due() -> None:
    schedule = QueueItemsSchedule()
    schedule.set("a", {names.DISABLE_SHOW_QUEUE_ITEMS_ANNOTATION: ""})
    assert schedule.due(1e9) == []


def _unit(name: str, priority: int, quota: str, created: float, cpu: str = "2") -> QueueUnit:
    return QueueUnit(
        uid=f"uid-{name}", namespace="ns", name=name, priority=priority,
        labels={names.QUOTA_NAME_LABEL: quota}, resource=Resources.parse({"cpu": cpu}),
        created=created,
    )


def _engine(policy: str = "Priority") -> AdmissionEngine:
    engine = AdmissionEngine()
    engine.upsert_quota(QuotaSpec("q", max=Resources.parse({"cpu": "2"})))
    engine.upsert_quota(QuotaSpec("r", max=Resources.parse({"cpu": "1"})))
    engine.upsert_queue("q", policy, {})
    engine.upsert_queue("r", policy, {})
    return engine


def test_details_list_the_waiting_units_of_each_queue_in_the_rounds_order() -> None:
    """Koord-Queue's SortedList: priority first, then arrival, positions 1..n per queue;
    `high` (priority 5) was admitted and is gone; priority 0 is omitted (Go's omitempty)."""
    engine = _engine()
    for unit in (
        _unit("first", 0, "q", 1.0), _unit("low", 0, "q", 2.0), _unit("high", 5, "q", 3.0),
        _unit("other", 0, "r", 1.0, cpu="2"),
    ):
        engine.upsert_unit(unit)
    result = engine.run_round(10.0)
    details = queue_item_details(result, ["q", "r", "idle"])
    assert details["q"] == {
        "active": [
            {"name": "first", "namespace": "ns", "position": 1},
            {"name": "low", "namespace": "ns", "position": 2},
        ]
    }
    assert details["r"] == {"active": [{"name": "other", "namespace": "ns", "position": 1}]}
    assert details["idle"] == {"active": []}


def test_positions_are_the_records_positions_in_queue() -> None:
    """No second sort: each item's position is the PendingUnit's position_in_queue, the
    order every reader of the record (explain, the visibility API) sees."""
    engine = _engine()
    engine.upsert_unit(_unit("big", 0, "q", 1.0, cpu="3"))
    for i in range(4):
        engine.upsert_unit(_unit(f"u{i}", i, "q", 2.0 + i, cpu="3"))
    result = engine.run_round(10.0)
    details = queue_item_details(result, ["q"])["q"]["active"]
    expected = [(p.unit.name, p.position_in_queue) for p in pending_units(result) if p.queue == "q"]
    assert [(d["name"], d["position"]) for d in details] == expected
    assert [d["name"] for d in details] == ["u3", "u2", "u1", "big", "u0"]
    assert [d.get("priority", 0) for d in details] == [3, 2, 1, 0, 0]
