"""The rules first written for batch/v1 Job hold for every kind on the one path (issue 25),
and the rules first written for the other kinds hold for Jobs.

JobSet stands in for the other kinds: its mark is annotations on one object, as a Job's is.
Each test fails before issue 25 (run at 5ff42c3: 5 of 5 fail) on the kind it names: JobSet
had its own reconciler, which wrote the mark before the unit, admitted only at a round and had
no stale-copy rule; Jobs had theirs, with no refusal event and no deletion of a unit whose Job
vanished unseen.
"""

from __future__ import annotations

import copy
from typing import Any

from koordqueue.domain import names
from koordqueue.domain.integrations import BATCH_JOB, JOBSET, POD
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE, QUEUE_UNIT, ApiError, Kind
from koordqueue.kube.api import POD as POD_KIND
from koordqueue.kube.controller import Controller
from koordqueue.kube.controller.integrations import kind_of, register_integrations, serve
from koordqueue.kube.settings import ControllerSettings
from tests.unit.integrations.helpers import jobset, pod, template
from tests.unit.kube.test_integration_wiring import install_crd
from tests.unit.kube.test_job_extension_controller import Clock, submit
from tests.unit.kube.test_job_writes import CountingApi

JOBSETS = kind_of(JOBSET)
UNIT = "jobset-js-qu"


def make(api: CountingApi, cpu: str = "4", **settings: Any) -> tuple[Controller, Clock]:
    install_crd(api, "jobsets", "jobset.x-k8s.io", "v1alpha2")
    api.create(
        ELASTIC_QUOTA,
        {
            "metadata": {
                "name": "q",
                "namespace": "default",
                "labels": {names.QUEUE_POLICY_KEY: "Priority"},
            },
            "spec": {"max": {"cpu": cpu}},
        },
        "default",
    )
    clock = Clock()
    config = ControllerSettings(integrations="batch/job,jobset.x-k8s.io/jobset", **settings)
    c = Controller(api, config, clock=clock, writers=1)
    register_integrations(c)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    return c, clock


def add_jobset(c: Controller, api: CountingApi, name: str = "jobset") -> dict[str, Any]:
    obj = api.create(JOBSETS, jobset([("w", 1, 1, 1, template("1"))], name=name), "ns")
    c.consumers["JobSet"].on_event("ADDED", obj)
    return obj


def current(api: CountingApi, name: str = "jobset") -> dict[str, Any]:
    found = api.get(JOBSETS, name, "ns")
    assert found is not None
    return found


def jobset_patches(api: CountingApi) -> int:
    return sum(1 for kind, _ in api.patches if kind == JOBSETS.plural)


def test_a_jobset_admitted_as_its_unit_is_made_is_marked_and_resumed_in_one_patch() -> None:
    api = CountingApi()
    c, _ = make(api)
    add_jobset(c, api)
    assert jobset_patches(api) == 1
    obj = current(api)
    notes = obj["metadata"]["annotations"]
    assert obj["spec"]["suspend"] is False
    assert notes[names.JOB_HAS_ENQUEUED_ANNOTATION] == "true"
    assert notes[names.JOB_DEQUEUE_TIMESTAMP_ANNOTATION]
    unit = api.get(QUEUE_UNIT, UNIT, "ns")
    assert unit is not None and unit["status"]["phase"] == "Dequeued"
    copied = unit["metadata"]["annotations"][names.JOB_ENQUEUE_TIMESTAMP_ANNOTATION]
    assert copied == notes[names.JOB_ENQUEUE_TIMESTAMP_ANNOTATION]
    c.close()


def test_a_copy_of_a_jobset_from_before_its_resume_does_not_resume_it_again() -> None:
    api = CountingApi()
    c, _ = make(api)
    add_jobset(c, api)
    before = copy.deepcopy(current(api))
    before["spec"]["suspend"] = True
    before["metadata"]["generation"] = 1
    del before["metadata"]["annotations"][names.JOB_DEQUEUE_TIMESTAMP_ANNOTATION]
    c.consumers["JobSet"].on_event("MODIFIED", before)
    assert jobset_patches(api) == 1
    c.close()


def test_a_jobset_whose_marking_resume_was_lost_is_resumed_by_the_next_leader() -> None:
    api = CountingApi()
    c, clock = make(api)
    add_jobset(c, api)
    c.close()
    stored = api.objects[(JOBSETS.plural, "ns", "jobset")]
    stored["spec"]["suspend"] = True
    stored["metadata"]["annotations"] = {}
    successor, _ = make_successor(api, clock)
    successor.consumers["JobSet"].on_event("MODIFIED", current(api))
    resumed = current(api)
    assert resumed["spec"]["suspend"] is False
    assert resumed["metadata"]["annotations"][names.JOB_HAS_ENQUEUED_ANNOTATION] == "true"
    successor.close()


def make_successor(api: CountingApi, clock: Clock) -> tuple[Controller, Clock]:
    config = ControllerSettings(integrations="batch/job,jobset.x-k8s.io/jobset")
    c = Controller(api, config, clock=clock, writers=1)
    register_integrations(c)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    return c, clock


class RefusingUnitsApi(CountingApi):
    """Refuses the first QueueUnit creation (403: not retried by the client)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = False

    def create(self, kind: Kind, body: Any, namespace: str | None = None) -> dict[str, Any]:
        if kind == QUEUE_UNIT and not self.refused:
            self.refused = True
            raise ApiError(403, "Forbidden", "exceeded quota", "POST", kind.path())
        return super().create(kind, body, namespace)


def test_a_refused_unit_creation_of_a_job_records_a_warning_and_is_retried() -> None:
    api = RefusingUnitsApi()
    c, clock = make(api)
    submit(c, api, "j")
    assert api.get(QUEUE_UNIT, "j", "ns") is None
    (event,) = [e for e in api.events if e["reason"] == names.REASON_UNIT_CREATE_REFUSED]
    assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "Job"
    assert "exceeded quota" in event["message"]
    clock.offset = 1.0
    c.fire_timers()
    unit = api.get(QUEUE_UNIT, "j", "ns")
    assert unit is not None and unit["status"]["phase"] == "Dequeued"
    c.close()


def test_a_unit_whose_job_vanished_unseen_is_deleted_by_the_resync() -> None:
    api = CountingApi()
    c, clock = make(api, resync_period=60.0)
    submit(c, api, "j")
    uid = (api.get(QUEUE_UNIT, "j", "ns") or {})["metadata"]["uid"]
    api.delete(JOB, "j", "ns")  # the DELETED event lost, no garbage collector
    clock.offset = 61.0
    c.admission_round()  # the resync is due
    assert api.get(QUEUE_UNIT, "j", "ns") is None
    assert c.engine.unit(uid) is None
    c.close()


class RefusingGroupListApi(CountingApi):
    """Refuses the first list of a pod group's members (503 past the client's retries)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = False

    def list_objects(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        if kind == POD_KIND and label_selector and not self.refused:
            self.refused = True
            raise ApiError(503, "ServiceUnavailable", "busy", "GET", kind.path())
        return super().list_objects(kind, namespace, label_selector, field_selector)


def test_a_refused_read_of_a_pod_groups_members_is_looked_at_again_after_the_back_off() -> None:
    """Fails with that retry removed (tried): the look ended there and the group waited for its
    next event or the resync."""
    api = RefusingGroupListApi()
    c, clock = make(api)
    serve(c, [BATCH_JOB, POD])
    pods = [api.create(POD_KIND, pod(n, group="g", total="2"), "ns") for n in ("a", "b")]
    c.consumers["Pod"].on_event("ADDED", pods[1])
    assert api.refused and api.get(QUEUE_UNIT, "g-pod-qu", "ns") is None
    clock.offset = 1.0
    c.fire_timers()
    unit = api.get(QUEUE_UNIT, "g-pod-qu", "ns")
    assert unit is not None and unit["status"]["phase"] == "Dequeued"
    c.close()
