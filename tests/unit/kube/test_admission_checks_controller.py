"""Admission checks in the controller, against the in-memory API (issue 35 point 5).

The e2e test (tests/e2e/test_admission_checks.py) shows the same on the real API server;
these pin each rule with a clock the test moves.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

import pytest

from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.resources import Resources
from koordqueue.kube.api import QUEUE, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_job_extension_controller import (
    feed_unit,
    job,
    make,
    submit,
    unit,
)

GATES = "QueueUnitRequeueState=true"


@pytest.fixture
def api() -> MemoryApi:
    return MemoryApi()


def set_checks(c: Controller, api: MemoryApi, checks: list[dict[str, Any]]) -> None:
    queue = copy.deepcopy(api.get(QUEUE, "q", "koord-queue"))
    assert queue is not None
    queue["spec"]["admissionChecks"] = checks
    queue = api.apply(QUEUE, queue)
    c.on_queue("MODIFIED", queue)


def set_state(c: Controller, api: MemoryApi, name: str, **states: str) -> None:
    """A check controller writes its states (a status patch), the watch delivers it."""
    obj = unit(api, name)
    for entry in obj["status"]["admissionChecks"]:
        entry["state"] = states.get(entry["name"], entry["state"])
    patch = {"status": {"admissionChecks": obj["status"]["admissionChecks"]}}
    api.merge_patch(QUEUE_UNIT, name, patch, "ns", "status")
    feed_unit(c, api, name)


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"].get("conditions", [])}


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def reserved(c: Controller, api: MemoryApi, name: str = "j", **settings: Any) -> None:
    set_checks(c, api, [{"name": "ad1"}, {"name": "ad2"}])
    submit(c, api, name)
    c.admission_round()
    feed_unit(c, api, name)


def test_reserved_waits_with_each_check_pending_and_the_job_suspended(api: MemoryApi) -> None:
    """Without the reservation (checks.reserve) the unit is Dequeued and the Job resumed."""
    c, _ = make(api, cpu="2")
    reserved(c, api)
    obj = unit(api, "j")
    assert obj["status"]["phase"] == "Reserved"
    assert obj["status"]["message"] == (
        "Reserved resources success, waiting admission checks to be ready"
    )
    assert [(s["name"], s["state"]) for s in obj["status"]["admissionChecks"]] == [
        ("ad1", "Pending"), ("ad2", "Pending"),
    ]
    assert conditions(obj)["QuotaReserved"] == ("True", "QuotaReserved")
    assert conditions(obj)["Admitted"] == ("False", "WaitingForAdmissionChecks")
    assert job(api, "j")["spec"]["suspend"] is True
    assert c.engine.tree.used("q") == Resources.parse({"cpu": "1"})
    c.close()
    reasons = [e for e in api.events if e["involvedObject"]["name"] == "j"]
    assert [e["message"] for e in reasons if e["reason"] == "QuotaReserved"] == [
        "quota reserved; waiting for admission checks ad1, ad2"
    ]
    assert "Admitted" not in [e["reason"] for e in reasons]


def test_one_ready_one_pending_stays_reserved_all_ready_dequeues(api: MemoryApi) -> None:
    c, _ = make(api, cpu="2")
    reserved(c, api)
    set_state(c, api, "j", ad1="Ready")
    assert unit(api, "j")["status"]["phase"] == "Reserved"
    set_state(c, api, "j", ad2="Ready")
    obj = unit(api, "j")
    assert obj["status"]["phase"] == "Dequeued"
    assert obj["status"]["message"] == "all admission checks success"
    assert conditions(obj)["Admitted"] == ("True", "Admitted")
    assert job(api, "j")["spec"]["suspend"] is False
    c.close()


@pytest.mark.parametrize("failed", ["Rejected", "Retry"])
def test_a_failed_check_backs_off_releases_and_requeues_at_requeue_at(
    api: MemoryApi, failed: str
) -> None:
    c, clock = make(api, cpu="2", feature_gates=GATES, backoff_base_seconds=2.0)
    reserved(c, api)
    set_state(c, api, "j", ad2=failed)
    obj = unit(api, "j")
    status = obj["status"]
    assert status["phase"] == "TimeoutBackoff"
    assert status["admissions"] == []
    assert conditions(obj)["Evicted"] == ("True", "BackoffTimeout")
    assert conditions(obj)["QuotaReserved"] == ("False", "BackoffTimeout")
    assert conditions(obj)["Admitted"][0] == "False"
    assert status["requeueState"]["count"] == 1
    assert epoch(status["requeueState"]["requeueAt"]) > epoch(status["lastUpdateTime"])
    assert c.engine.tree.used("q") == Resources.parse({})
    assert job(api, "j")["spec"]["suspend"] is True
    c.admission_round()
    assert unit(api, "j")["status"]["phase"] == "TimeoutBackoff"  # not before requeueAt
    clock.offset += 5
    c.admission_round()
    feed_unit(c, api, "j")
    again = unit(api, "j")["status"]
    assert again["phase"] == "Reserved"
    assert {s["state"] for s in again["admissionChecks"]} == {"Pending"}
    set_state(c, api, "j", ad1=failed)
    assert unit(api, "j")["status"]["requeueState"]["count"] == 2
    c.close()
    backoffs = [e for e in api.events if e["reason"] == "Backoff"]
    assert backoffs and f"ad2 is {failed}" in backoffs[0]["message"]


def test_a_check_removed_from_the_queue_counts_as_ready(api: MemoryApi) -> None:
    c, _ = make(api, cpu="2")
    reserved(c, api)
    set_state(c, api, "j", ad1="Ready")
    set_checks(c, api, [{"name": "ad1"}])
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    assert job(api, "j")["spec"]["suspend"] is False
    c.close()


def test_a_selector_asks_only_its_units(api: MemoryApi) -> None:
    c, _ = make(api, cpu="2")
    set_checks(c, api, [{"name": "gpu", "labelSelector": {"matchLabels": {"kind": "gpu"}}}])
    submit(c, api, "j")
    c.admission_round()
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    c.close()


def test_strict_dequeue_mode_writes_sched_ready_on_listed_queues_only(api: MemoryApi) -> None:
    c, _ = make(api, cpu="2", strict_dequeue_mode=True, queue_list="q")
    reserved(c, api)
    set_state(c, api, "j", ad1="Ready", ad2="Ready")
    assert unit(api, "j")["status"]["phase"] == "SchedReady"
    assert job(api, "j")["spec"]["suspend"] is True  # the scheduler's SchedSucceed resumes it
    set_checks(c, api, [])  # a queue without checks: strict mode dequeues to SchedReady too
    submit(c, api, "plain")
    c.admission_round()
    assert unit(api, "plain")["status"]["phase"] == "SchedReady"
    assert unit(api, "plain")["status"]["message"] == "Waiting scheduler to schedule this queueUnit"
    c.consumers["Job"].on_event("MODIFIED", job(api, "plain"))
    assert job(api, "plain")["spec"]["suspend"] is True
    c.close()
    other = MemoryApi()
    c, _ = make(other, cpu="2", strict_dequeue_mode=True, queue_list="elsewhere")
    reserved(c, other)
    set_state(c, other, "j", ad1="Ready", ad2="Ready")
    assert unit(other, "j")["status"]["phase"] == "Dequeued"
    c.close()


def test_a_bare_unit_is_reserved_backed_off_and_requeued_too(api: MemoryApi) -> None:
    """Koord-Queue re-queues only Job-owned units; a bare QueueUnit comes back here."""
    c, clock = make(api, cpu="2", feature_gates=GATES, backoff_base_seconds=1.0)
    set_checks(c, api, [{"name": "ad1"}])
    bare = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "QueueUnit",
        "metadata": {"name": "bare", "namespace": "ns", "labels": {QUOTA_NAME_LABEL: "q"}},
        "spec": {"resource": {"cpu": "1"}},
    }
    c.on_unit("ADDED", api.create(QUEUE_UNIT, bare, "ns"))
    c.admission_round()
    feed_unit(c, api, "bare")
    assert unit(api, "bare")["status"]["phase"] == "Reserved"
    set_state(c, api, "bare", ad1="Rejected")
    assert unit(api, "bare")["status"]["phase"] == "TimeoutBackoff"
    clock.offset += 3
    c.admission_round()
    assert unit(api, "bare")["status"]["phase"] == "Reserved"
    c.close()


def test_an_unreadable_check_list_asks_for_none_and_says_so(api: MemoryApi) -> None:
    c, _ = make(api, cpu="2")
    set_checks(c, api, [{"name": "a"}, {"name": "a"}])
    submit(c, api, "j")
    c.admission_round()
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    c.close()  # (the events are sent in the background: waits for them)
    events = [e for e in api.events if e["reason"] == "InvalidAdmissionChecks"]
    assert [e["involvedObject"]["name"] for e in events] == ["q"]
    assert "duplicate check 'a'" in events[0]["message"]


def test_a_restarted_controller_keeps_a_reserved_unit_waiting_and_counted(
    api: MemoryApi,
) -> None:
    """The Queue is folded before the units at start-up, so a Reserved unit is not released
    for want of its checks; its quota stays counted."""
    c, _ = make(api, cpu="2")
    reserved(c, api)
    set_state(c, api, "j", ad1="Ready")
    c.close()
    fresh = Controller(api, c.settings, writers=1)
    fresh.resync()
    assert unit(api, "j")["status"]["phase"] == "Reserved"
    assert fresh.engine.tree.used("q") == Resources.parse({"cpu": "1"})
    set_state(fresh, api, "j", ad2="Ready")
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    assert job(api, "j")["spec"]["suspend"] is False
    fresh.close()


def test_a_job_event_before_the_reservation_echo_does_not_resume_the_job(
    api: MemoryApi,
) -> None:
    """The engine records Reserved as the round decides: without that, the Job's reconcile
    reads the engine's Dequeued and resumes the Job while its checks are Pending."""
    c, _ = make(api, cpu="2")
    set_checks(c, api, [{"name": "ad1"}])
    submit(c, api, "j")
    c.admission_round()
    c.consumers["Job"].on_event("MODIFIED", job(api, "j"))  # before the unit's echo
    assert job(api, "j")["spec"]["suspend"] is True
    assert unit(api, "j")["status"]["phase"] == "Reserved"
    c.close()


def admission_check(name: str, controller: str, active: str | None) -> dict[str, Any]:
    """Kueue's AdmissionCheck as its controller leaves it (Active condition, or none yet)."""
    obj: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": controller},
    }
    if active is not None:
        obj["status"] = {"conditions": [{
            "type": "Active", "status": active, "reason": "Ready" if active == "True" else
            "NoConfig", "message": "" if active == "True" else "ProvisioningRequestConfig missing",
        }]}
    return obj


def test_a_reservation_names_the_controller_of_each_admission_check_object(
    api: MemoryApi,
) -> None:
    """A check named by Kueue's AdmissionCheck object gets its controller (and whether the
    object is Active) in its Pending entry and in the QuotaReserved event; a free name (no
    object: Koord-Queue's way) none. Fails without on_admission_check's catalogue."""
    c, _ = make(api, cpu="2")
    c.on_admission_check("ADDED", admission_check("ad1", "example.com/burnin", "True"))
    c.on_admission_check("ADDED", admission_check("ad2", "kueue.x-k8s.io/provisioning-request",
                                                  "False"))
    c.on_admission_check("ADDED", admission_check("gone", "example.com/x", "True"))
    c.on_admission_check("DELETED", admission_check("gone", "example.com/x", "True"))
    set_checks(c, api, [{"name": "ad1"}, {"name": "ad2"}, {"name": "free"}, {"name": "gone"}])
    submit(c, api, "j")
    c.admission_round()
    feed_unit(c, api, "j")
    obj = unit(api, "j")
    assert obj["status"]["phase"] == "Reserved"
    assert [(s["name"], s["state"], s["message"]) for s in obj["status"]["admissionChecks"]] == [
        ("ad1", "Pending", "waiting for example.com/burnin"),
        ("ad2", "Pending", "AdmissionCheck ad2 (kueue.x-k8s.io/provisioning-request) is not "
                           "Active: NoConfig: ProvisioningRequestConfig missing"),
        ("free", "Pending", ""),
        ("gone", "Pending", ""),
    ]
    c.close()
    events = [e for e in api.events if e["involvedObject"]["name"] == "j"]
    assert [e["message"] for e in events if e["reason"] == "QuotaReserved"] == [
        "quota reserved; waiting for admission checks ad1 (example.com/burnin), "
        "ad2 (kueue.x-k8s.io/provisioning-request), free, gone"
    ]


def test_sched_succeed_seen_while_our_sched_ready_write_is_in_flight_is_not_lost(
    api: MemoryApi,
) -> None:
    """Strict mode: a scheduler quick enough to write SchedSucceed before our SchedReady
    write's answer comes back. Its event arrives while the round's phase write is in flight
    (when an older event of ours is dropped); once the write lands, the newer one counts."""
    c, _ = make(api, cpu="2", strict_dequeue_mode=True)
    patch = api.merge_patch

    def racing(kind: Any, name: str, body: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        answer = copy.deepcopy(patch(kind, name, body, *args, **kwargs))
        if kind is QUEUE_UNIT and (body.get("status") or {}).get("phase") == "SchedReady":
            c.on_unit("MODIFIED", copy.deepcopy(answer))  # the write's own watch event
            placed = {"status": {"phase": "SchedSucceed", "message": "placed"}}
            c.on_unit("MODIFIED", copy.deepcopy(patch(kind, name, placed, "ns", "status")))
        return answer  # ...and only then the write's answer

    api.merge_patch = racing  # type: ignore[method-assign]
    submit(c, api, "plain")  # an idle queue admits it at once
    assert unit(api, "plain")["status"]["phase"] == "SchedSucceed"
    assert job(api, "plain")["spec"]["suspend"] is False
    c.close()
