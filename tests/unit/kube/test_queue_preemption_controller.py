"""Issue 35 point 7 through the controller: what a queue-level preemption writes.

Koord-Queue's reserve_preemption_test and reclaim_reschedule_test on the in-memory API: quota
4 cpu with wait-for-pods-running, the victim (priority 10) Dequeued with admissions replicas 1
and no reclaimState; a preemptor (priority 100) marks it (reclaimState.replicas 1, Koord-Queue's
message, Warning Preempted); the next round reclaims it (Enqueued, admissions cleared, Normal
Reclaimed) and admits the preemptor; the victim is admitted again once the preemptor runs.
"""

from __future__ import annotations

import copy
from typing import Any

from koordqueue.domain.names import QUEUE_POLICY_KEY, QUOTA_NAME_LABEL
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi


def _unit(name: str, priority: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "QueueUnit",
        "metadata": {"name": name, "namespace": "ns", "labels": {QUOTA_NAME_LABEL: "q"}},
        "spec": {
            "resource": {"cpu": "1"}, "priority": priority,
            "podSet": [{"name": name, "count": 1, "template": {"spec": {"containers": []}}}],
        },
    }


def _get(api: MemoryApi, name: str) -> dict[str, Any]:
    obj = api.get(QUEUE_UNIT, name, "ns")
    assert obj is not None
    return obj


def _feed(c: Controller, api: MemoryApi, name: str) -> None:
    c.on_unit("MODIFIED", copy.deepcopy(_get(api, name)))


def _events(api: MemoryApi, name: str) -> list[tuple[str, str, str]]:
    return [
        (e["type"], e["reason"], e["message"]) for e in api.events
        if e["involvedObject"]["name"] == name
    ]


def reserving_quota(api: MemoryApi) -> Controller:
    """Quota q (4 cpu, Block, wait-for-pods-running) and a controller serving its queue."""
    api.create(ELASTIC_QUOTA, {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {
            "name": "q", "namespace": "default", "labels": {QUEUE_POLICY_KEY: "Block"},
            "annotations": {"koord-queue/wait-for-pods-running": "true"},
        },
        "spec": {"min": {"cpu": "4"}, "max": {"cpu": "4"}},
    }, "default")
    c = Controller(api, ControllerSettings(), writers=1)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    return c


def test_mark_then_reclaim_then_admit_again() -> None:
    api = MemoryApi()
    c = reserving_quota(api)
    c.on_unit("ADDED", api.create(QUEUE_UNIT, _unit("victim", 10), "ns"))
    c.admission_round()
    status = _get(api, "victim")["status"]
    assert status["phase"] == "Dequeued"
    assert status["admissions"] == [{"name": "victim", "replicas": 1}]
    assert status["lastAllocateTime"] == status["admissionTime"]
    _feed(c, api, "victim")

    c.on_unit("ADDED", api.create(QUEUE_UNIT, _unit("preemptor", 100), "ns"))
    c.admission_round()
    status = _get(api, "victim")["status"]
    assert status["phase"] == "Dequeued"  # still holds its quota
    assert status["admissions"] == [
        {"name": "victim", "replicas": 1, "reclaimState": {"replicas": 1}}
    ]
    assert status["message"] == "Waiting job extension to reclaim resources."
    assert _events(api, "victim")[-1] == (
        "Warning", "Preempted", "preempted by ns/preemptor; back in queue"
    )
    assert (_get(api, "preemptor").get("status") or {}).get("phase") != "Dequeued"
    _feed(c, api, "victim")

    c.admission_round()
    status = _get(api, "victim")["status"]
    assert (status["phase"], status["admissions"]) == ("Enqueued", [])
    evicted = {x["type"]: x for x in status["conditions"]}["Evicted"]
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
    assert _events(api, "victim")[-1][:2] == ("Normal", "Reclaimed")
    assert _get(api, "preemptor")["status"]["phase"] == "Dequeued"
    _feed(c, api, "victim")
    _feed(c, api, "preemptor")

    c.admission_round()
    assert _get(api, "victim")["status"]["phase"] == "Enqueued"  # the preemptor is not running
    api.merge_patch(QUEUE_UNIT, "preemptor", {"status": {"phase": "Running"}}, "ns", "status")
    _feed(c, api, "preemptor")
    c.admission_round()
    status = _get(api, "victim")["status"]
    assert status["phase"] == "Dequeued"
    assert status["admissions"] == [{"name": "victim", "replicas": 1}]  # no reclaimState
    c.close()


def test_an_intelligent_queue_asked_to_preempt_says_it_refuses() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {
            "name": "smart", "namespace": "default",
            "labels": {QUEUE_POLICY_KEY: "Intelligent"},
            "annotations": {"koord-queue/enable-queueunit-preemption": "true"},
        },
        "spec": {"max": {"cpu": "4"}},
    }, "default")
    c = Controller(api, ControllerSettings(), writers=1)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
        c.on_queue("MODIFIED", obj)  # once per edit, not per event
    refused = [e for e in api.events if e["reason"] == "PreemptionRefused"]
    assert [(e["type"], e["involvedObject"]["kind"], e["message"]) for e in refused] == [(
        "Warning", "Queue",
        "queue smart: preemption refused, the Intelligent policy does not implement preemption",
    )]
    c.close()
