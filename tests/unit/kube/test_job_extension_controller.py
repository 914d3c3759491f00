"""The Job extension's live rules in the controller, against the in-memory API (issue 18, 11).

The e2e test (tests/e2e/test_job_extension.py) shows the same on the real API server; these
pin each rule on its own, with a clock the test moves.
"""

from __future__ import annotations

import copy
import re
import time
from typing import Any

import pytest

from koordqueue.domain import names
from koordqueue.domain.names import QUEUE_POLICY_KEY, QUOTA_NAME_LABEL
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi

GO_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,9})? \+0000 UTC m=\+\d+\.\d{9}$")


class Clock:
    """Wall time plus whatever the test adds (unit timestamps are written in real time)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def make(api: MemoryApi, cpu: str = "1", **settings: Any) -> tuple[Controller, Clock]:
    api.create(
        ELASTIC_QUOTA,
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {
                "name": "q",
                "namespace": "default",
                "labels": {QUEUE_POLICY_KEY: "Priority"},
            },
            "spec": {"max": {"cpu": cpu}},
        },
        "default",
    )
    clock = Clock()
    c = Controller(api, ControllerSettings(**settings), clock=clock, writers=1)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    return c, clock


def submit(c: Controller, api: MemoryApi, name: str, **spec: Any) -> dict[str, Any]:
    job = api.create(
        JOB,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "ns", "labels": {QUOTA_NAME_LABEL: "q"}},
            "spec": {
                "suspend": True,
                "parallelism": 1,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                },
                **spec,
            },
        },
        "ns",
    )
    c.consumers["Job"].on_event("ADDED", job)
    return job


def unit(api: MemoryApi, name: str) -> dict[str, Any]:
    obj = api.get(QUEUE_UNIT, name, "ns")
    assert obj is not None
    return obj


def job(api: MemoryApi, name: str) -> dict[str, Any]:
    obj = api.get(JOB, name, "ns")
    assert obj is not None
    return obj


def feed_unit(c: Controller, api: MemoryApi, name: str) -> None:
    """Hand the controller the unit's current version, as the watch would."""
    c.on_unit("MODIFIED", unit(api, name))


def set_job_status(c: Controller, api: MemoryApi, name: str, **status: Any) -> None:
    obj = job(api, name)
    obj["status"] = status
    c.consumers["Job"].on_event("MODIFIED", obj)


@pytest.fixture
def api() -> MemoryApi:
    return MemoryApi()


def test_enqueue_annotates_the_job_and_the_unit_copies_the_annotations(api: MemoryApi) -> None:
    c, _ = make(api)
    submit(c, api, "j")
    annotations = job(api, "j")["metadata"]["annotations"]
    assert annotations[names.JOB_HAS_ENQUEUED_ANNOTATION] == "true"
    assert GO_TIME.match(annotations[names.JOB_ENQUEUE_TIMESTAMP_ANNOTATION])
    copied = unit(api, "j")["metadata"]["annotations"]
    assert copied[names.JOB_HAS_ENQUEUED_ANNOTATION] == "true"
    assert unit(api, "j")["spec"]["podSet"][0]["name"] == "j"
    c.close()


def test_waiting_unit_starts_with_message_enqueued(api: MemoryApi) -> None:
    c, _ = make(api)
    submit(c, api, "first")
    submit(c, api, "second")  # the queue is not idle any more: no fast path
    status = dict(unit(api, "second")["status"])
    conditions = status.pop("conditions")  # QueueUnitConditions is on by default
    assert status == {
        "phase": "Enqueued",
        "message": "Enqueued",
        "lastUpdateTime": status["lastUpdateTime"],
    }
    assert [(x["type"], x["status"], x["reason"]) for x in conditions] == [
        ("QuotaReserved", "False", "Pending"),
        ("Admitted", "False", "Pending"),
    ]
    c.close()


def test_admission_resumes_the_job_with_a_dequeue_timestamp_and_lists_admissions(
    api: MemoryApi,
) -> None:
    c, _ = make(api)
    submit(c, api, "j", parallelism=1)
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    assert unit(api, "j")["status"]["admissions"] == [{"name": "j", "replicas": 1}]
    resumed = job(api, "j")
    assert resumed["spec"]["suspend"] is False
    assert GO_TIME.match(resumed["metadata"]["annotations"][names.JOB_DEQUEUE_TIMESTAMP_ANNOTATION])
    c.close()


def test_running_then_succeeded_job_moves_its_unit_and_clears_admissions(api: MemoryApi) -> None:
    c, _ = make(api)
    submit(c, api, "j")
    set_job_status(c, api, "j", active=1, ready=1)
    assert (unit(api, "j")["status"]["phase"], unit(api, "j")["status"]["message"]) == (
        "Running",
        "Running",
    )
    set_job_status(c, api, "j", succeeded=1, conditions=[{"type": "Complete", "status": "True"}])
    status = unit(api, "j")["status"]
    assert (status["phase"], status["message"], status["admissions"]) == (
        "Succeed",
        "Succeeded",
        [],
    )
    assert not c.engine.is_admitted(unit(api, "j")["metadata"]["uid"])
    c.close()


def test_failed_job_fails_its_unit(api: MemoryApi) -> None:
    c, _ = make(api)
    submit(c, api, "j")
    set_job_status(c, api, "j", failed=1, conditions=[{"type": "Failed", "status": "True"}])
    assert (unit(api, "j")["status"]["phase"], unit(api, "j")["status"]["message"]) == (
        "Failed",
        "Failed",
    )
    c.close()


def test_failure_target_alone_does_not_finish_the_unit(api: MemoryApi) -> None:
    c, _ = make(api)
    submit(c, api, "j")
    set_job_status(c, api, "j", conditions=[{"type": "FailureTarget", "status": "True"}])
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    c.close()


def test_running_timeout_backs_off_suspends_and_later_enqueues_again(api: MemoryApi) -> None:
    c, clock = make(api, job_running_timeout=30.0, job_backoff_time=60.0)
    submit(c, api, "j")
    uid = unit(api, "j")["metadata"]["uid"]
    c.consumers["Job"].on_event("MODIFIED", job(api, "j"))  # resumed, no pod yet: Pending
    clock.offset = 10.0
    c.fire_timers()
    assert unit(api, "j")["status"]["phase"] == "Dequeued"  # not yet
    clock.offset = 31.0
    c.fire_timers()
    status = unit(api, "j")["status"]
    assert (status["phase"], status["message"]) == (
        "TimeoutBackoff",
        "Backoff due to running timeout",
    )
    suspended = job(api, "j")
    assert suspended["spec"]["suspend"] is True
    assert suspended["metadata"]["annotations"][names.JOB_DEQUEUE_TIMESTAMP_ANNOTATION] == ""
    assert not c.engine.is_admitted(uid)  # its quota is free again
    c.admission_round()
    assert unit(api, "j")["status"]["phase"] == "TimeoutBackoff"  # not admitted while backed off
    clock.offset = 31.0 + 61.0
    c.admission_round()  # fires the back-off timer, then admits it again
    feed_unit(c, api, "j")
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    assert job(api, "j")["spec"]["suspend"] is False
    c.close()


def test_backoff_timeout_writes_enqueued_because_backoff_timeout(api: MemoryApi) -> None:
    c, clock = make(api, job_running_timeout=30.0, job_backoff_time=5.0)
    submit(c, api, "j")
    c.consumers["Job"].on_event("MODIFIED", job(api, "j"))
    clock.offset = 31.0
    c.fire_timers()
    submit(c, api, "other")  # takes the freed quota while j is backed off
    c.admission_round()
    assert unit(api, "other")["status"]["phase"] == "Dequeued"
    clock.offset = 31.0 + 6.0
    c.fire_timers()  # (the next round then reports why it still waits)
    status = unit(api, "j")["status"]
    assert (status["phase"], status["message"]) == ("Enqueued", "Enqueued because backoff timeout")
    c.close()


def test_a_suspended_jobs_last_running_pod_does_not_make_its_backed_off_unit_running(
    api: MemoryApi,
) -> None:
    """The running timeout suspends j just as its pod turns ready: the Job's status still
    shows it until the Job controller deletes it. j's unit holds no quota (other took it):
    written Running, it would be counted over the quota's max, then stay Running with its
    Job suspended for good (QUEUING with phase Running calls for nothing)."""
    c, clock = make(api, job_running_timeout=30.0, job_backoff_time=5.0)
    submit(c, api, "j")
    uid = unit(api, "j")["metadata"]["uid"]
    c.consumers["Job"].on_event("MODIFIED", job(api, "j"))
    clock.offset = 31.0
    c.fire_timers()
    submit(c, api, "other")
    c.admission_round()
    assert unit(api, "other")["status"]["phase"] == "Dequeued"
    set_job_status(c, api, "j", active=1, ready=1)  # the pod, going
    assert unit(api, "j")["status"]["phase"] == "TimeoutBackoff"
    assert not c.engine.is_admitted(uid)
    set_job_status(c, api, "j")  # gone
    clock.offset = 31.0 + 6.0
    c.fire_timers()
    status = unit(api, "j")["status"]
    assert (status["phase"], status["message"]) == ("Enqueued", "Enqueued because backoff timeout")
    assert job(api, "j")["spec"]["suspend"] is True
    c.close()


def test_running_timeout_off_by_default(api: MemoryApi) -> None:
    c, clock = make(api)
    submit(c, api, "j")
    c.consumers["Job"].on_event("MODIFIED", job(api, "j"))
    clock.offset = 10_000.0
    c.admission_round()
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    assert job(api, "j")["spec"]["suspend"] is False
    c.close()


def test_sched_succeed_resumes_a_suspended_job_and_records_resume(api: MemoryApi) -> None:
    c, _ = make(api)
    submit(c, api, "j")
    # someone (a scheduler's reservation step) suspended the Job and reports SchedSucceed
    stopped = job(api, "j")
    stopped["spec"]["suspend"] = True
    stopped["metadata"]["annotations"][names.JOB_DEQUEUE_TIMESTAMP_ANNOTATION] = ""
    obj = unit(api, "j")
    obj["status"]["phase"] = "SchedSucceed"
    c.on_unit("MODIFIED", obj)
    assert job(api, "j")["spec"]["suspend"] is False
    resume = [e for e in api.events if e["reason"] == "Resume"]
    assert len(resume) == 1
    assert resume[0]["message"] == "Job is resumed by job-extension"
    assert resume[0]["involvedObject"]["kind"] == "Job"
    c.close()


def test_job_that_started_before_it_was_suspended_is_not_managed(api: MemoryApi) -> None:
    c, _ = make(api)
    started = api.create(
        JOB,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "old", "namespace": "ns", "labels": {QUOTA_NAME_LABEL: "q"}},
            "spec": {"suspend": True, "template": {"spec": {"containers": []}}},
            "status": {"startTime": "2026-01-01T00:00:00Z"},
        },
        "ns",
    )
    c.consumers["Job"].on_event("ADDED", started)
    assert api.get(QUEUE_UNIT, "old", "ns") is None
    assert "annotations" not in job(api, "old")["metadata"]
    c.close()


def test_running_timeout_backoff_survives_a_controller_restart(api: MemoryApi) -> None:
    settings: dict[str, Any] = {"job_running_timeout": 30.0, "job_backoff_time": 60.0}
    c, clock = make(api, **settings)
    submit(c, api, "j")
    c.consumers["Job"].on_event("MODIFIED", job(api, "j"))
    clock.offset = 31.0
    c.fire_timers()
    assert unit(api, "j")["status"]["phase"] == "TimeoutBackoff"
    c.close()
    restarted = Controller(api, ControllerSettings(**settings), clock=clock, writers=1)
    restarted.resync()
    for obj in api.list_objects(QUEUE):
        restarted.on_queue("ADDED", obj)
    restarted.admission_round()
    assert unit(api, "j")["status"]["phase"] == "TimeoutBackoff"  # the back-off still holds
    clock.offset = 31.0 + 61.0
    restarted.fire_timers()
    status = unit(api, "j")["status"]
    assert (status["phase"], status["message"]) == ("Enqueued", "Enqueued because backoff timeout")
    restarted.close()


def test_sched_succeed_seen_before_our_enqueued_write_answers_still_resumes_the_job(
    api: MemoryApi,
) -> None:
    """The watch can hand over a newer unit before the answer of our own phase write comes
    back (CI's e2e run, 2026-12-05): the answer, older than what the watch showed, must not
    take the unit back to Enqueued, or the scheduler's SchedSucceed is lost until a resync."""
    c, clock = make(api, job_running_timeout=30.0, job_backoff_time=5.0)
    submit(c, api, "j")
    c.consumers["Job"].on_event("MODIFIED", job(api, "j"))
    clock.offset = 31.0
    c.fire_timers()  # the running timeout: TimeoutBackoff, the Job suspended again
    submit(c, api, "other")
    c.admission_round()  # other takes the freed quota
    patch = api.merge_patch

    def racing(kind: Any, name: str, body: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        answer = copy.deepcopy(patch(kind, name, body, *args, **kwargs))
        if kind is QUEUE_UNIT and name == "j" and body["status"].get("phase") == "Enqueued":
            c.on_unit("MODIFIED", copy.deepcopy(answer))  # the write's own watch event
            placed = {"status": {"phase": "SchedSucceed", "message": "placed"}}
            c.on_unit("MODIFIED", copy.deepcopy(patch(kind, name, placed, "ns", "status")))
        return answer  # ...and only then the write's answer

    api.merge_patch = racing  # type: ignore[method-assign]
    clock.offset = 31.0 + 6.0
    c.fire_timers()  # the back-off ends: Enqueued, answered after the watch's SchedSucceed
    assert unit(api, "j")["status"]["phase"] == "SchedSucceed"
    assert job(api, "j")["spec"]["suspend"] is False
    assert [e["involvedObject"]["name"] for e in api.events if e["reason"] == "Resume"] == ["j"]
    c.close()
