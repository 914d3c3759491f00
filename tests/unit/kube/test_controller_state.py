"""Controller reconciliation against an in-memory API (the e2e suite uses the real one)."""

from __future__ import annotations

from typing import Any

from koordqueue.domain.names import QUEUE_POLICY_KEY, QUOTA_NAME_LABEL
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi


def quota(
    name: str, namespace: str = "default", policy: str = "Priority", cpu: str = "2"
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_POLICY_KEY: policy}},
        "spec": {"max": {"cpu": cpu}},
    }


def unit(name: str, quota_name: str, phase: str | None = None, cpu: str = "1") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "QueueUnit",
        "metadata": {"name": name, "namespace": "ns", "labels": {QUOTA_NAME_LABEL: quota_name}},
        "spec": {"resource": {"cpu": cpu}},
    }
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def controller(api: MemoryApi) -> Controller:
    return Controller(api, ControllerSettings(), writers=1)


def test_resync_creates_missing_queues_and_skips_matching_ones() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("a"), "default")
    api.create(ELASTIC_QUOTA, quota("b"), "default")
    c = controller(api)
    c.resync()
    assert sorted(api.applied) == ["a", "b"]
    api.applied.clear()
    c.resync()  # nothing changed: no writes
    assert api.applied == []
    c.close()


def test_resync_reverts_a_drifted_queue() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("a", policy="Block"), "default")
    c = controller(api)
    c.resync()
    queue = api.get(QUEUE, "a", "koord-queue")
    assert queue is not None
    queue["spec"]["queuePolicy"] = "Priority"  # a hand edit while we were down
    api.applied.clear()
    c.resync()
    assert api.applied == ["a"]
    assert (api.get(QUEUE, "a", "koord-queue") or {})["spec"]["queuePolicy"] == "Block"
    c.close()


def test_resync_with_twin_quotas_leaves_the_queue_of_the_live_definition() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("twin", "ns-a", policy="Block"), "ns-a")
    api.create(ELASTIC_QUOTA, quota("twin", "ns-b", policy="Intelligent"), "ns-b")
    c = controller(api)
    c.resync()
    live = c.engine.tree.get("twin")
    assert live is not None
    expected = "Block" if live.namespace == "ns-a" else "Intelligent"
    assert (api.get(QUEUE, "twin", "koord-queue") or {})["spec"]["queuePolicy"] == expected
    c.close()


def test_restart_rebuilds_usage_from_admitted_phases_and_admits_nothing_twice() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="2"), "default")
    api.create(QUEUE_UNIT, unit("running", "q", phase="Running"), "ns")
    api.create(QUEUE_UNIT, unit("dequeued", "q", phase="Dequeued"), "ns")
    api.create(QUEUE_UNIT, unit("waiting", "q", phase="Enqueued"), "ns")
    c = controller(api)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    result = c.admission_round()
    assert result.admitted == []
    assert [u.name for u, _ in result.rejected] == ["waiting"]
    assert (api.get(QUEUE_UNIT, "waiting", "ns") or {})["status"]["message"] == (
        "limited quotaName:q, limited resKey:cpu,"
    )
    c.close()


def test_suspended_job_becomes_an_admitted_unit_and_is_resumed() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="2"), "default")
    c = controller(api)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    job = api.create(
        JOB,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "labels": {QUOTA_NAME_LABEL: "q"}},
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                },
            },
        },
        "ns",
    )
    c.consumers["Job"].on_event("ADDED", job)
    created = api.get(QUEUE_UNIT, "j", "ns")
    assert (
        created is not None and created["status"]["phase"] == "Dequeued"
    )  # the idle-queue fast path
    assert (api.get(JOB, "j", "ns") or {})["spec"]["suspend"] is False
    c.close()


def test_a_late_answer_never_puts_an_older_unit_back() -> None:
    c = controller(MemoryApi())
    state = c.state
    seen = {"metadata": {"name": "u", "resourceVersion": "10"}, "status": {"phase": "Running"}}
    state.unit_objects["uid-u"] = seen
    late = {"metadata": {"name": "u", "resourceVersion": "7"}, "status": {"phase": "Enqueued"}}
    state.remember_unit("uid-u", late, "waiting")
    assert state.unit_objects["uid-u"] is seen
    assert state.reported["uid-u"] == "waiting"  # the write landed: its message is known
    fresh = {"metadata": {"name": "u", "resourceVersion": "12"}, "status": {"phase": "Succeed"}}
    state.remember_unit("uid-u", fresh)
    assert state.unit_objects["uid-u"] is fresh
    state.remember_unit("uid-v", late)  # nothing seen yet: taken
    assert state.unit_objects["uid-v"] is late
    c.close()
