"""`koordqueue explain` shows the usage split (self / children, guaranteed / oversold) of every
quota on the unit's chain and how the unit itself will count (issue 18, item 8)."""

from __future__ import annotations

import json
from typing import Any

from koordqueue.cli.explain_render import render_json, render_table
from koordqueue.domain.names import (
    ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION,
    QUOTA_NAME_LABEL,
    QUOTA_OVERSOLD_TYPE_FORCE,
    QUOTA_PARENT_LABEL,
)
from koordqueue.simulation.explain import ClusterView, explain


def _quota(name: str, cpu: str, parent: str | None = None) -> dict[str, Any]:
    labels = {QUOTA_PARENT_LABEL: parent} if parent else {}
    return {"metadata": {"name": name, "namespace": "team", "labels": labels},
            "spec": {"max": {"cpu": cpu}}}


def _queue(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "koord-queue"},
            "spec": {"queuePolicy": "Priority", "priority": 1000}}


def _unit(name: str, quota: str, cpu: str, phase: str, oversold: bool = False) -> dict[str, Any]:
    force = {ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION: QUOTA_OVERSOLD_TYPE_FORCE}
    annotations = force if oversold else {}
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "labels": {QUOTA_NAME_LABEL: quota}, "annotations": annotations,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"resource": {"cpu": cpu}}, "status": {"phase": phase}}


def _view() -> ClusterView:
    """org (cpu 10) <- leaf (cpu 10); in leaf a guaranteed unit (2) and an oversold one (3),
    in org itself an oversold unit (1); a waiting oversold unit in leaf."""
    return ClusterView.from_objects(
        [_quota("org", "10"), _quota("leaf", "10", parent="org")],
        [_queue("org"), _queue("leaf")],
        [
            _unit("g", "leaf", "2", "Running"),
            _unit("o", "leaf", "3", "Running", oversold=True),
            _unit("top", "org", "1", "Running", oversold=True),
            _unit("wait", "leaf", "1", "Enqueued", oversold=True),
        ],
    )


def test_explain_json_lists_the_usage_split_of_each_quota_on_the_chain() -> None:
    view = _view()
    ex = explain(view, "ns/wait")
    assert ex is not None
    doc = json.loads(render_json(ex, view))
    rows = {r["quota"]: r for r in doc["usageSplit"] if r["resource"] == "cpu"}
    assert rows["leaf"] == {"quota": "leaf", "resource": "cpu", "used": "5", "self": "5",
                            "children": "0", "guaranteed": "2", "oversold": "3"}
    assert rows["org"] == {"quota": "org", "resource": "cpu", "used": "6", "self": "1",
                           "children": "5", "guaranteed": "2", "oversold": "4"}
    assert doc["countsAs"] == (
        f"oversold ({ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION}={QUOTA_OVERSOLD_TYPE_FORCE})"
    )


def test_explain_table_shows_the_split_and_how_the_unit_counts() -> None:
    view = _view()
    ex = explain(view, "ns/wait")
    assert ex is not None
    text = render_table(ex, view)
    assert "Counts as:" in text and "oversold (" in text
    header = next(line for line in text.splitlines() if line.startswith("QUOTA "))
    assert header.split() == ["QUOTA", "RESOURCE", "USED", "SELF", "CHILDREN", "GUARANTEED",
                              "OVERSOLD"]
    assert any(line.split() == ["org", "cpu", "6", "1", "5", "2", "4"]
               for line in text.splitlines())


def test_a_unit_without_the_annotation_counts_as_guaranteed() -> None:
    view = _view()
    ex = explain(view, "ns/g")
    assert ex is not None
    assert json.loads(render_json(ex, view))["countsAs"] == "guaranteed"
