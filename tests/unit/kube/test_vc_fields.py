"""The kube adapter reads what nodegroup, sla and cdp need off API objects."""

from __future__ import annotations

from koordqueue.kube.scheduler.convert import (
    job_info,
    placed_again,
    queue_info,
    same_but_placement,
    task_info,
)
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.api.queue_info import NodeGroupAffinity


def test_queue_affinity_and_limits_annotation() -> None:
    queue = queue_info({
        "metadata": {"name": "q1", "annotations": {
            vn.NODE_GROUP_LIMITS_ANNOTATION: '{"group1":{"cpu":"3"}}'}},
        "spec": {"affinity": {
            "nodeGroupAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": ["group1", "group3"],
                "preferredDuringSchedulingIgnoredDuringExecution": ["group3", "group1"]},
            "nodeGroupAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": ["group2"]}}},
    })
    assert queue.node_group_affinity == NodeGroupAffinity(
        frozenset({"group1", "group3"}), ("group3", "group1"), frozenset({"group2"}))
    assert queue.node_group_limits == '{"group1":{"cpu":"3"}}'
    bare = queue_info({"metadata": {"name": "q2"}, "spec": {}})
    assert bare.node_group_affinity is None and bare.node_group_limits is None


def test_podgroup_keeps_only_the_sla_annotations() -> None:
    job = job_info({"metadata": {"uid": "u", "name": "pg", "annotations": {
        vn.SLA_WAITING_TIME_ANNOTATION: "1h", "other": "x"}}, "spec": {}})
    assert dict(job.annotations) == {vn.SLA_WAITING_TIME_ANNOTATION: "1h"}
    assert dict(job.clone().annotations) == {vn.SLA_WAITING_TIME_ANNOTATION: "1h"}


def _pod(condition_time: str | None, cooldown: str = "10m") -> dict[str, object]:
    status: dict[str, object] = {"phase": "Running"}
    if condition_time is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "True",
                                 "lastTransitionTime": condition_time}]
    return {"metadata": {"uid": "p", "name": "p", "namespace": "ns",
                         "annotations": {vn.COOLDOWN_TIME: cooldown, "other": "y"}},
            "spec": {"containers": [{"name": "c"}], "nodeName": "n1"}, "status": status}


def test_pod_cooldown_and_scheduled_time() -> None:
    task = task_info(_pod("2026-01-01T00:00:00Z"))
    assert dict(task.vc) == {vn.COOLDOWN_TIME: "10m"}
    assert task.scheduled_at == 1767225600.0
    assert task.clone().scheduled_at == 1767225600.0
    assert task_info(_pod(None)).scheduled_at is None


def test_a_new_cooldown_is_converted_again_and_a_new_condition_taken() -> None:
    """same_but_placement compares the cool-down; placed_again takes the condition."""
    old = _pod(None)
    assert not same_but_placement(old, _pod(None, "1h"))
    newer = _pod("2026-01-01T00:00:00Z")
    assert same_but_placement(old, newer)
    assert placed_again(task_info(old), newer).scheduled_at == 1767225600.0


def test_task_spec_annotation_then_label_is_the_tasks_role() -> None:
    """Volcano's getTaskRole: what task-topology and minTaskMember call the pod's task."""
    def pod(annotations: dict[str, str], labels: dict[str, str]) -> dict[str, object]:
        return {"metadata": {"uid": "p", "name": "p", "annotations": annotations,
                             "labels": labels}, "spec": {"containers": [{"name": "c"}]}}

    assert task_info(pod({vn.TASK_SPEC: "ps"}, {vn.TASK_SPEC: "worker"})).role == "ps"
    assert task_info(pod({}, {vn.TASK_SPEC: "worker"})).role == "worker"
    assert task_info(pod({}, {})).role == ""
    assert not same_but_placement(pod({vn.TASK_SPEC: "ps"}, {}), pod({}, {}))


def test_resource_quotas_are_their_status_in_name_order() -> None:
    from koordqueue.domain.resources import Resources
    from koordqueue.kube.scheduler.vc_fields import resource_quotas

    quotas = resource_quotas([
        {"metadata": {"namespace": "b", "name": "q"},
         "spec": {"hard": {"cpu": "9"}}, "status": {"hard": {"cpu": "2"}, "used": {"cpu": "1"}}},
        {"metadata": {"namespace": "a", "name": "q"}, "spec": {"hard": {"cpu": "1"}}},
        {"metadata": {"namespace": "c", "name": "bad"}, "status": {"hard": {"cpu": "x"}}},
    ])
    assert [(q.namespace, q.hard, q.used) for q in quotas] == [
        ("a", Resources(), Resources()),  # no status yet: nothing to check (as Volcano)
        ("b", Resources.of({"cpu": "2"}), Resources.of({"cpu": "1"})),
        ("c", Resources(), Resources()),  # unparsable: logged, empty
    ]


def test_tdm_fields_revocable_zone_and_podgroup_preemptable() -> None:
    """Volcano's GetPodRevocableZone ("*" only; else from volcano.sh/preemptable) and
    extractPreemptable (annotation, else label) as tdm reads them."""
    def pod(annotations: dict[str, str]) -> dict[str, object]:
        return {"metadata": {"uid": "p", "name": "p", "annotations": annotations},
                "spec": {"containers": [{"name": "c"}]}}

    assert task_info(pod({vn.REVOCABLE_ZONE: "*"})).vc == {vn.REVOCABLE_ZONE: "*"}
    assert vn.REVOCABLE_ZONE not in task_info(pod({vn.REVOCABLE_ZONE: "rz1"})).vc
    assert task_info(pod({vn.PREEMPTABLE: "true"})).vc == {vn.REVOCABLE_ZONE: "*"}
    assert vn.REVOCABLE_ZONE not in task_info(pod({vn.PREEMPTABLE: "false"})).vc
    group = {"metadata": {"uid": "u", "name": "pg", "labels": {vn.PREEMPTABLE: "true"},
                          "annotations": {vn.JDB_MIN_AVAILABLE: "2"}}, "spec": {}}
    assert dict(job_info(group).annotations) == {vn.PREEMPTABLE: "true",
                                                 vn.JDB_MIN_AVAILABLE: "2"}
