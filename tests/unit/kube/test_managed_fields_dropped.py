"""What the controller keeps of an object carries no metadata.managedFields (issue 36, RSS):
server-side apply's ownership record, read by nothing here, is a large part of every
QueueUnit and Job held (bench/bench_memory.py). Dropped as each answer and watch event is
decoded, so no copy of it is ever kept; everything else arrives unchanged."""

from __future__ import annotations

import json
from typing import Any

from koordqueue.kube.api import JOB, without_managed_fields
from koordqueue.kube.informer import WatchStream
from tests.unit.kube.test_api_loads import _api
from tests.unit.kube.test_informer_watch_stream import _Response

MANAGED = [
    {"manager": "kubectl", "operation": "Update", "apiVersion": "batch/v1",
     "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:suspend": {}}}},
]  # fmt: skip


def _job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "uid": "u-" + name,
                     "resourceVersion": "7", "managedFields": MANAGED},
        "spec": {"suspend": True, "managedFields": "not metadata: kept"},
    }  # fmt: skip


def _bare(name: str) -> dict[str, Any]:
    job = _job(name)
    del job["metadata"]["managedFields"]
    return job


def test_an_answer_is_decoded_without_managed_fields() -> None:
    got = _api(json.dumps(_job("a")).encode()).get(JOB, "a", "ns")
    assert got == _bare("a")


def test_a_list_answer_has_none_on_any_item() -> None:
    page = {"kind": "JobList", "metadata": {"resourceVersion": "9"},
            "items": [_job("a"), _job("b")]}  # fmt: skip
    items, version = _api(json.dumps(page).encode()).list_with_version(JOB, "ns")
    assert items == [_bare("a"), _bare("b")] and version == "9"


def test_a_watch_event_object_has_none() -> None:
    line = json.dumps({"type": "MODIFIED", "object": _job("a")}).encode() + b"\n"
    (event,) = WatchStream().events(_Response([line]))
    assert event["raw_object"] == _bare("a") and event["object"] is event["raw_object"]


def test_what_is_not_an_object_passes_unchanged() -> None:
    for value in ({}, {"metadata": None}, {"items": None}, [], "x", None):
        assert without_managed_fields(value) == value
