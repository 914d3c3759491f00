"""The dashboard's view model: what a person sees, from API objects and the visibility answer."""

from __future__ import annotations

import json
from typing import Any

from koordqueue.cli.dashboard_model import (
    EVENT_COMPONENT,
    admitted_units,
    dashboard_state,
    pending_queues,
    quota_rows,
    recent_events,
    resource_row,
)
from koordqueue.domain import names

NS = names.QUEUE_NAMESPACE


def quota(name: str, parent: str | None = None, min_: dict[str, str] | None = None,
          max_: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {names.QUOTA_PARENT_LABEL: parent} if parent else {}
    return {"metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"min": min_ or {}, "max": max_ or {"cpu": "4"}}}


def queue(name: str, used: dict[str, int], self_used: dict[str, int] | None = None,
          guaranteed: dict[str, int] | None = None, held: bool = False,
          namespace: str = NS) -> dict[str, Any]:
    annotations = {
        names.QUEUE_USED_ANNOTATION: json.dumps(used),
        names.QUEUE_SELF_USED_ANNOTATION: json.dumps(used if self_used is None else self_used),
        names.QUEUE_GUARANTEED_USED_ANNOTATION: json.dumps(
            used if guaranteed is None else guaranteed),
    }
    if held:
        annotations[names.STOP_POLICY_ANNOTATION] = names.STOP_POLICY_HOLD
    return {"metadata": {"name": name, "namespace": namespace, "annotations": annotations}}


def item(name: str, queue_name: str, position: int | None, in_queue: int | None,
         reason: str = "QuotaExceeded") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "team"}, "queueName": queue_name,
            "quotaName": queue_name, "priority": 1, "request": {"cpu": "1"},
            "phase": "Enqueued", "position": position, "positionInQueue": in_queue,
            "positionInQuota": in_queue, "reason": reason, "message": f"{name} waits"}


def unit(name: str, phase: str, quota_name: str = "a", ns: str = "team") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns,
                         "labels": {names.QUOTA_NAME_LABEL: quota_name}},
            "spec": {"resource": {"cpu": "1"}, "priority": 3},
            "status": {"phase": phase, "admissionTime": "2026-12-04T20:00:00Z"}}


def event(reason: str, at: str, component: str = EVENT_COMPONENT) -> dict[str, Any]:
    return {"metadata": {"name": f"e-{reason}", "namespace": "team"},
            "involvedObject": {"kind": "QueueUnit", "namespace": "team", "name": "u"},
            "reason": reason, "message": f"{reason} happened", "type": "Normal",
            "source": {"component": component}, "lastTimestamp": at, "count": 2}


def test_the_tree_is_depth_first_with_children_by_name_and_each_resource_a_row() -> None:
    quotas = [quota("org", max_={"cpu": "8", "memory": "4Gi"}), quota("b", parent="org"),
              quota("a", parent="org"), quota("solo")]
    rows = quota_rows(quotas, [queue("org", {"cpu": 3})], None)
    assert [(r["name"], r["depth"]) for r in rows] == [("org", 0), ("a", 1), ("b", 1),
                                                       ("solo", 0)]
    org = rows[0]
    assert [r["resource"] for r in org["resources"]] == ["cpu", "memory"]
    assert org["resources"][1]["max"] == "4Gi"  # bytes keep their binary suffix
    assert org["hasQueue"] and not rows[1]["hasQueue"]


def test_usage_numbers_split_self_children_and_guaranteed_oversold() -> None:
    quotas = [quota("org", min_={"cpu": "2"}, max_={"cpu": "8"}), quota("a", parent="org")]
    queues = [queue("org", {"cpu": 6}, self_used={"cpu": 1}, guaranteed={"cpu": 4}),
              queue("a", {"cpu": 5})]
    (cpu,) = quota_rows(quotas, queues, None)[0]["resources"]
    assert {k: cpu[k] for k in ("min", "max", "used", "self", "children", "guaranteed",
                                "oversold")} == {
        "min": "2", "max": "8", "used": "6", "self": "1", "children": "5", "guaranteed": "4",
        "oversold": "2"}
    # the bar is max long: guaranteed 4/8, oversold 2/8, the min mark at 2/8
    assert cpu["bar"] == {"guaranteed": 50.0, "oversold": 25.0, "min": 25.0, "max": 100.0}
    assert cpu["overMin"] and not cpu["overMax"]


def test_usage_past_max_stretches_the_bar_and_is_flagged() -> None:
    row = resource_row("cpu", minimum=0, maximum=2 * 10**9, used=4 * 10**9,
                       self_used=4 * 10**9, guaranteed=4 * 10**9)
    assert row["overMax"]
    assert row["bar"] == {"guaranteed": 100.0, "oversold": 0.0, "min": 0.0, "max": 50.0}


def test_a_resource_without_max_has_no_max_mark() -> None:
    row = resource_row("gpu", minimum=10**9, maximum=None, used=0, self_used=0, guaranteed=0)
    assert (row["max"], row["bar"]["max"], row["bar"]["min"]) == ("-", None, 100.0)


def test_queues_of_another_namespace_are_not_read() -> None:
    rows = quota_rows([quota("a")], [queue("a", {"cpu": 3}, namespace="elsewhere")], None)
    assert rows[0]["resources"][0]["used"] == "0" and not rows[0]["hasQueue"]


def test_pending_units_keep_the_answers_order_within_each_queue() -> None:
    items = [item("x1", "x", 1, 1), item("y1", "y", 2, 1), item("x2", "x", 3, 2),
             item("x-backing-off", "x", None, None, reason="BackingOff")]
    queues = pending_queues(items, held=["y"])
    assert [(q["name"], q["held"], q["total"]) for q in queues] == [("x", False, 3),
                                                                   ("y", True, 1)]
    assert [(u["name"], u["positionInQueue"]) for u in queues[0]["units"]] == [
        ("x1", 1), ("x2", 2), ("x-backing-off", None)]
    assert queues[0]["units"][2]["reason"] == "BackingOff"
    assert queues[0]["units"][0]["request"] == "cpu=1"


def test_a_long_queue_shows_its_head_and_its_total() -> None:
    items = [item(f"u{i}", "x", i, i) for i in range(1, 8)]
    (q,) = pending_queues(items, shown=3)
    assert q["total"] == 7 and [u["name"] for u in q["units"]] == ["u1", "u2", "u3"]


def test_admitted_units_are_those_in_an_admitted_phase_by_quota_then_name() -> None:
    units = [unit("w", "Enqueued"), unit("r2", "Running", "b"), unit("d", "Dequeued", "b"),
             unit("r1", "Running", "a"), unit("done", "Succeed")]
    rows, total = admitted_units(units)
    assert total == 3
    assert [(r["quota"], r["name"], r["phase"]) for r in rows] == [
        ("a", "r1", "Running"), ("b", "d", "Dequeued"), ("b", "r2", "Running")]
    assert rows[0]["since"] == "2026-12-04T20:00:00Z"


def test_events_are_the_controllers_newest_first() -> None:
    events = [event("Old", "2026-12-04T19:00:00Z"), event("New", "2026-12-04T20:00:00Z"),
              event("Scheduled", "2026-12-04T20:30:00Z", component="default-scheduler")]
    rows = recent_events(events)
    assert [r["reason"] for r in rows] == ["New", "Old"]
    assert rows[0]["object"] == "QueueUnit/team/u" and rows[0]["count"] == 2


def test_the_state_shows_the_visibility_apis_counts_per_quota_and_its_round() -> None:
    pending = {"round": {"number": 7, "time": "2026-12-04T20:00:00Z"}, "total": 3,
               "items": [item("x1", "a", 1, 1), item("x2", "a", 2, 2), item("y", "b", 3, 1)]}
    quotas = [quota("org"), quota("a", parent="org"), quota("b", parent="org"), quota("c")]
    state = dashboard_state(quotas, [queue("a", {})], [], [], pending,
                            quota_pending={"org": 3, "a": 2, "b": 1})
    assert [(r["name"], r["pending"]) for r in state["quotas"]] == [
        ("c", 0), ("org", 3), ("a", 2), ("b", 1)]
    assert state["round"]["number"] == 7 and state["pendingTotal"] == 3
    assert state["visibilityError"] is None


def test_without_the_visibility_api_no_order_is_shown_and_the_page_says_why() -> None:
    state = dashboard_state([quota("a")], [], [unit("w", "Enqueued")], [], None,
                            pending_error="the visibility API did not answer (503)")
    assert state["pending"] == [] and state["quotas"][0]["pending"] is None
    assert state["visibilityError"] == "the visibility API did not answer (503)"
