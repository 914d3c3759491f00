"""Usage annotations on each quota's Queue (Koord-Queue's queue controller; issue 18, item 8)."""

from __future__ import annotations

import json
from typing import Any

from koordqueue.domain.names import (
    ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION,
    QUEUE_CHILDREN_USED_ANNOTATION,
    QUEUE_GUARANTEED_USED_ANNOTATION,
    QUEUE_SELF_USED_ANNOTATION,
    QUEUE_USED_ANNOTATION,
    QUOTA_NAME_LABEL,
    QUOTA_OVERSOLD_TYPE_FORCE,
)
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.quota_tree import QuotaTree
from koordqueue.domain.resources import Resources
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.quota_status import QueueUsageWriter
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi

NS = "koord-queue"


def _queue(api: MemoryApi, name: str, annotations: dict[str, str] | None = None) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if annotations:
        meta["annotations"] = annotations
    api.create(QUEUE, {"metadata": meta, "spec": {}}, NS)


def _annotations(api: MemoryApi, name: str) -> dict[str, str]:
    return dict(((api.get(QUEUE, name, NS) or {}).get("metadata") or {}).get("annotations") or {})


def _tree() -> QuotaTree:
    t = QuotaTree()
    t.upsert(QuotaSpec(name="org", max=Resources.of(cpu=10)))
    t.upsert(QuotaSpec(name="leaf", max=Resources.of(cpu=10), parent="org"))
    t.admit("a", "leaf", Resources.of(cpu="1500m"))
    t.admit("b", "org", Resources.of(cpu=1, memory="1Gi"), oversold=True)
    return t


def test_sync_writes_the_six_annotations_in_whole_units() -> None:
    api = MemoryApi()
    _queue(api, "org")
    _queue(api, "leaf")
    assert QueueUsageWriter(api, NS).sync(_tree().report()) == 2
    org = _annotations(api, "org")
    assert org[QUEUE_USED_ANNOTATION] == '{"cpu":3,"memory":1073741824}'  # 1500m rounds up
    assert org[QUEUE_GUARANTEED_USED_ANNOTATION] == '{"cpu":2}'
    assert org[QUEUE_SELF_USED_ANNOTATION] == '{"cpu":1,"memory":1073741824}'
    assert org[QUEUE_CHILDREN_USED_ANNOTATION] == '{"cpu":2}'
    assert json.loads(_annotations(api, "leaf")[QUEUE_USED_ANNOTATION]) == {"cpu": 2}


def test_an_unchanged_usage_is_not_written_again() -> None:
    api = MemoryApi()
    _queue(api, "org")
    _queue(api, "leaf")
    writer = QueueUsageWriter(api, NS)
    t = _tree()
    writer.sync(t.report())
    assert writer.sync(t.report()) == 0
    t.release("b")
    assert writer.sync(t.report()) == 1  # only org changed
    assert json.loads(_annotations(api, "org")[QUEUE_USED_ANNOTATION]) == {"cpu": 2}


def test_annotations_already_on_the_queue_are_not_rewritten_after_a_restart() -> None:
    api = MemoryApi()
    _queue(api, "org", {QUEUE_USED_ANNOTATION: '{"cpu":3,"memory":1073741824}', "other": "x"})
    t = QuotaTree()
    t.upsert(QuotaSpec(name="org", max=Resources.of(cpu=10)))
    t.admit("b", "org", Resources.of(cpu=3, memory="1Gi"))
    writes = QueueUsageWriter(api, NS).sync(t.report())
    annotations = _annotations(api, "org")
    assert writes == 1  # the other five were missing
    assert annotations[QUEUE_USED_ANNOTATION] == '{"cpu":3,"memory":1073741824}'
    assert annotations["other"] == "x"


def test_a_quota_without_a_queue_is_skipped() -> None:
    api = MemoryApi()
    assert QueueUsageWriter(api, NS).sync(_tree().report()) == 0


def test_the_controller_writes_usage_on_its_metrics_cadence() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, {
        "metadata": {"name": "q", "namespace": "default", "labels": {}},
        "spec": {"max": {"cpu": "4"}},
    }, "default")
    api.create(QUEUE_UNIT, {
        "metadata": {
            "name": "running", "namespace": "ns",
            "labels": {QUOTA_NAME_LABEL: "q"},
            "annotations": {ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION: QUOTA_OVERSOLD_TYPE_FORCE},
        },
        "spec": {"resource": {"cpu": "2"}},
        "status": {"phase": "Running"},
    }, "ns")
    c = Controller(api, ControllerSettings(), writers=1)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    c.admission_round()
    c.close()  # waits for the writer pool
    annotations = _annotations(api, "q")
    assert json.loads(annotations[QUEUE_USED_ANNOTATION]) == {"cpu": 2}
    # the unit is oversold: no guaranteed usage, and an all-zero usage is not written
    assert QUEUE_GUARANTEED_USED_ANNOTATION not in annotations
