"""How many API writes a Job costs (issue 11): the enqueue mark rides on the resume when the
unit is admitted as it is made, and a copy of the Job older than our own resume is not
reconciled (it would resume the Job a second time)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from koordqueue.domain import names
from koordqueue.kube.api import JOB, QUEUE, QUEUE_UNIT, Kind
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_job_extension_controller import (
    GO_TIME,
    Clock,
    job,
    make,
    submit,
    unit,
)

DEQUEUED = names.JOB_DEQUEUE_TIMESTAMP_ANNOTATION


class CountingApi(MemoryApi):
    """MemoryApi that logs every patch (kind, subresource) and bumps metadata.generation on a
    spec change, as the API server does."""

    def __init__(self) -> None:
        super().__init__()
        self.patches: list[tuple[str, str | None]] = []

    def create(
        self, kind: Kind, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        obj = super().create(kind, body, namespace)
        if kind.plural != "events":
            obj["metadata"]["generation"] = 1
        return obj

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        self.patches.append((kind.plural, subresource))
        obj = super().merge_patch(kind, name, patch, namespace, subresource)
        if "spec" in patch and obj:
            obj["metadata"]["generation"] = int(obj["metadata"].get("generation") or 0) + 1
        return copy.deepcopy(obj)

    def job_patches(self) -> int:
        return sum(1 for kind, _ in self.patches if kind == JOB.plural)


def test_a_job_admitted_as_its_unit_is_made_is_marked_and_resumed_in_one_patch() -> None:
    api = CountingApi()
    c, _ = make(api)
    submit(c, api, "j")
    assert api.job_patches() == 1
    obj = job(api, "j")
    notes = obj["metadata"]["annotations"]
    assert obj["spec"]["suspend"] is False
    assert notes[names.JOB_HAS_ENQUEUED_ANNOTATION] == "true"
    assert GO_TIME.match(notes[names.JOB_ENQUEUE_TIMESTAMP_ANNOTATION])
    assert GO_TIME.match(notes[names.JOB_DEQUEUE_TIMESTAMP_ANNOTATION])
    copied = unit(api, "j")["metadata"]["annotations"]
    assert copied[names.JOB_ENQUEUE_TIMESTAMP_ANNOTATION] == notes[
        names.JOB_ENQUEUE_TIMESTAMP_ANNOTATION
    ]
    c.close()


def test_a_job_whose_unit_waits_is_marked_before_its_units_first_status() -> None:
    api = CountingApi()
    c, _ = make(api)  # room for one Job
    submit(c, api, "first")
    c.admission_round()
    api.patches.clear()
    submit(c, api, "second")
    assert api.patches[:2] == [(JOB.plural, None), (QUEUE_UNIT.plural, "status")]
    assert job(api, "second")["spec"]["suspend"] is True
    notes = job(api, "second")["metadata"]["annotations"]
    assert notes[names.JOB_HAS_ENQUEUED_ANNOTATION] == "true"
    assert unit(api, "second")["status"]["phase"] == "Enqueued"
    c.close()


def test_a_copy_of_the_job_from_before_its_resume_does_not_resume_it_again() -> None:
    api = CountingApi()
    c, _ = make(api)
    submit(c, api, "j")
    assert api.job_patches() == 1
    # the Job marked enqueued but not yet resumed (generation 1), as a watch event held while
    # its unit was being made and admitted shows it
    before = copy.deepcopy(job(api, "j"))
    before["spec"]["suspend"] = True
    before["metadata"]["generation"] = 1
    del before["metadata"]["annotations"][DEQUEUED]
    c.consumers["Job"].on_event("MODIFIED", before)
    assert api.job_patches() == 1
    c.close()


def test_a_newer_suspended_job_whose_unit_is_admitted_is_resumed() -> None:
    api = CountingApi()
    c, _ = make(api)
    submit(c, api, "j")
    back = {"spec": {"suspend": True}, "metadata": {"annotations": {DEQUEUED: ""}}}
    suspended = api.merge_patch(JOB, "j", back, "ns")  # generation 3: not stale
    c.consumers["Job"].on_event("MODIFIED", suspended)
    assert api.job_patches() == 3
    assert job(api, "j")["spec"]["suspend"] is False
    c.close()


def test_a_job_whose_marking_resume_was_lost_is_resumed_by_the_next_leader() -> None:
    """The leader made and admitted the unit, then died before its one Job patch (mark and
    resume): the Job is still suspended and unmarked. The next leader must resume it (found
    by tests/e2e/test_failover.py's kill -9 mid-burst: such units stayed Dequeued)."""
    api = CountingApi()
    c, _ = make(api)
    submit(c, api, "j")
    c.close()
    stored = api.objects[(JOB.plural, "ns", "j")]
    stored["spec"]["suspend"] = True
    stored["metadata"].pop("annotations", None)
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    api.patches.clear()
    successor = Controller(api, ControllerSettings(), clock=Clock(), writers=1)
    successor.resync()
    for obj in api.list_objects(QUEUE):
        successor.on_queue("ADDED", obj)
    successor.consumers["Job"].on_event("MODIFIED", job(api, "j"))
    resumed = job(api, "j")
    assert resumed["spec"]["suspend"] is False
    notes = resumed["metadata"]["annotations"]
    assert notes[names.JOB_HAS_ENQUEUED_ANNOTATION] == "true"
    assert notes[names.JOB_ENQUEUE_TIMESTAMP_ANNOTATION] == unit(api, "j")["metadata"][
        "annotations"][names.JOB_ENQUEUE_TIMESTAMP_ANNOTATION]
    successor.close()
