"""The pod webhook's admission gate for the pod integration (issue 13), Kueue's cases.

Most inputs and outcomes are transcribed from kubernetes-sigs/kueue
pkg/controller/jobs/pod/pod_webhook_test.go (TestDefault for which pods get the gate,
TestValidateCreate for the pod-group checks, which Kueue refuses and we return as warnings)
with Kueue's names mapped to ours: queue-name label -> quota label, kueue.x-k8s.io/admission
-> koord-queue/admission, kueue.x-k8s.io/pod-group-* -> koord-queue/pod-group-*.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from koordqueue.domain.integrations import parse_integrations
from koordqueue.domain.integrations.pod_gate import (
    WARN_GROUP_COUNT_MISSING,
    WARN_GROUP_NAME_MISSING,
    admission_gating,
    group_warnings,
    wants_admission_gate,
)
from koordqueue.domain.names import (
    POD_ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    QUOTA_NAME_LABEL,
)
from koordqueue.kube.gates.webhook import PodGating, pod_admission_gating, pod_patch, review
from koordqueue.kube.settings import ControllerSettings
from koordqueue.scheduler.gates import GATE_NAME, OPT_IN_ANNOTATION

OWN_NAMESPACE = "koord-queue"
GATING = admission_gating(OWN_NAMESPACE, parse_integrations("batch/job,pod"))
assert GATING is not None
ADMISSION_ONLY = PodGating(allocation_gate=False, admission=GATING)
CREATE_LIST = [
    {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": POD_ADMISSION_GATE}]}
]


def make_pod(
    ns: str = "test-ns",
    *,
    quota: str | None = "team-a",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    gates: list[str] | None = None,
    owner: tuple[str, str] | None = None,
    node: str | None = None,
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if quota is not None:
        all_labels[QUOTA_NAME_LABEL] = quota
    metadata: dict[str, Any] = {
        "name": "test-pod",
        "namespace": ns,
        "labels": all_labels,
        "annotations": dict(annotations or {}),
    }
    if owner is not None:
        api_version, kind = owner
        metadata["ownerReferences"] = [
            {
                "apiVersion": api_version,
                "kind": kind,
                "name": "parent",
                "uid": "parent",
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if gates is not None:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def admission_request(obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": obj["metadata"].get("namespace"),
            "operation": operation,
            "object": obj,
        },
    }


def ops_of(pod: dict[str, Any], gating: PodGating = ADMISSION_ONLY) -> list[dict[str, Any]]:
    ops, _ = pod_patch(pod, gating)
    return ops


# --- TestDefault: which pods get the gate ----------------------------------------------------


def test_a_pod_naming_a_quota_gets_the_admission_gate() -> None:
    """Kueue pod_webhook_test.go TestDefault "pod with queue nil ns selector": a pod with the
    queue-name label in an ordinary namespace is gated."""
    assert ops_of(make_pod()) == CREATE_LIST


def test_a_pod_naming_no_quota_is_not_gated() -> None:
    """Kueue TestDefault "default queue isn't created, pod has no queue label": no queue
    name (and no default queue: we have none), the pod is left as it is."""
    assert ops_of(make_pod(quota=None)) == []


def test_an_empty_quota_label_is_no_quota() -> None:
    """Kueue's QueueNameForObject treats an empty queue-name label as no queue name."""
    assert ops_of(make_pod(quota="")) == []


def test_a_pod_in_kube_system_is_not_gated() -> None:
    """Kueue TestDefault "the namespace doesn't match the namespace selector" (and "doesn't
    match the managedJobsNamespaceSelector"): a pod with a queue name in kube-system is left
    as it is."""
    assert ops_of(make_pod("kube-system")) == []


def test_a_pod_in_the_controllers_own_namespace_is_not_gated() -> None:
    """Kueue pkg/config/validation_test.go TestValidate, default podOptions: the namespace
    selector excludes kube-system and Kueue's own namespace (kueue-system); ours is
    --namespace."""
    assert ops_of(make_pod(OWN_NAMESPACE)) == []
    other = admission_gating("queues", parse_integrations("pod"))
    assert other is not None
    assert pod_patch(make_pod(OWN_NAMESPACE), PodGating(False, other))[0] == CREATE_LIST


def test_the_namespace_of_the_request_counts_when_the_pod_names_none() -> None:
    """A pod created from a manifest without metadata.namespace carries it only in the
    AdmissionReview request (Kueue reads it from the decoded object, set by the API)."""
    pod = make_pod()
    del pod["metadata"]["namespace"]
    assert not wants_admission_gate(pod, GATING, "kube-system")
    assert wants_admission_gate(pod, GATING, "test-ns")


def test_a_pod_owned_by_an_enabled_integrations_workload_is_not_gated() -> None:
    """Kueue TestDefault "pod with owner managed by kueue (Job)": the Job is queued, its
    pods are not gated (batch/job enabled)."""
    assert ops_of(make_pod(owner=("batch/v1", "Job"))) == []


def test_a_pod_owned_by_a_kind_whose_integration_is_off_is_gated() -> None:
    """Kueue TestDefault "pod with owner managed by kueue (Job) while not enabled": with
    batch/job not enabled, the pod itself is queued."""
    only_pods = admission_gating(OWN_NAMESPACE, parse_integrations("pod"))
    assert only_pods is not None
    pod = make_pod(owner=("batch/v1", "Job"))
    assert pod_patch(pod, PodGating(False, only_pods))[0] == CREATE_LIST


def test_a_pod_owned_by_a_pytorchjob_is_not_gated_when_that_integration_is_on() -> None:
    """Kueue TestDefault "pod with owner managed by kueue (PyTorchJob)"."""
    gating = admission_gating(OWN_NAMESPACE, parse_integrations("kubeflow.org/pytorchjob,pod"))
    assert gating is not None
    pod = make_pod(owner=("kubeflow.org/v1", "PyTorchJob"))
    assert pod_patch(pod, PodGating(False, gating))[0] == []


def test_an_owner_that_is_not_the_controller_does_not_count() -> None:
    """Kueue looks at metav1.GetControllerOf: only the controller owner reference."""
    pod = make_pod(owner=("batch/v1", "Job"))
    pod["metadata"]["ownerReferences"][0]["controller"] = False
    assert ops_of(pod) == CREATE_LIST


def test_a_pod_in_a_group_is_gated() -> None:
    """Kueue TestDefault "pod with a group name label": gated (Kueue also stamps its
    role-hash annotation; ours is computed by the controller)."""
    pod = make_pod(
        labels={POD_GROUP_NAME_LABEL: "test-group"},
        annotations={POD_GROUP_TOTAL_COUNT_ANNOTATION: "2"},
    )
    assert pod_patch(pod, ADMISSION_ONLY) == (CREATE_LIST, [])


def test_a_gated_pod_is_not_gated_again() -> None:
    """Kueue pkg/util/pod Gate(): the gate is added only when absent (idempotent on an
    apiserver retry or a reinvocation)."""
    assert ops_of(make_pod(gates=[POD_ADMISSION_GATE])) == []


def test_the_gate_is_appended_to_other_gates() -> None:
    """Kueue's gate() appends to spec.schedulingGates; so does our JSON patch."""
    assert ops_of(make_pod(gates=["example.com/other"])) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": POD_ADMISSION_GATE}}
    ]


def test_a_pod_created_on_a_node_is_never_gated() -> None:
    """Not in Kueue: the API server refuses a pod with nodeName and a scheduling gate, and
    our webhook must never make a creation fail, so a bound pod is let through."""
    assert ops_of(make_pod(node="node-1")) == []


def test_without_the_pod_integration_nothing_is_gated() -> None:
    """`--integrations` without `pod`: the webhook adds no admission gate."""
    assert admission_gating(OWN_NAMESPACE, parse_integrations("batch/job")) is None
    assert pod_admission_gating(ControllerSettings()) is None
    answer = review(admission_request(make_pod()), enabled=True, admission=None)["response"]
    assert answer == {"uid": "u1", "allowed": True}


def test_the_settings_give_the_gating_of_the_controller() -> None:
    settings = ControllerSettings(integrations="batch/job,pod", namespace="queues")
    gating = pod_admission_gating(settings)
    assert gating is not None
    assert gating.excluded_namespaces == {"kube-system", "queues"}
    assert gating.owner_kinds == {("batch/v1", "Job")}


# --- both gates, one patch -----------------------------------------------------------------


def test_both_gates_come_in_one_patch_creating_the_list() -> None:
    pod = make_pod(annotations={OPT_IN_ANNOTATION: "true"})
    assert ops_of(pod, PodGating(True, GATING)) == [
        {
            "op": "add",
            "path": "/spec/schedulingGates",
            "value": [{"name": POD_ADMISSION_GATE}, {"name": GATE_NAME}],
        }
    ]


def test_both_gates_are_appended_to_existing_gates_each_once() -> None:
    pod = make_pod(annotations={OPT_IN_ANNOTATION: "true"}, gates=["x", GATE_NAME])
    assert ops_of(pod, PodGating(True, GATING)) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": POD_ADMISSION_GATE}}
    ]


def test_the_review_allows_with_the_patch_and_ignores_updates() -> None:
    answer = review(admission_request(make_pod()), enabled=False, admission=GATING)["response"]
    assert answer["allowed"] is True and answer["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(answer["patch"])) == CREATE_LIST
    update = review(admission_request(make_pod(), "UPDATE"), enabled=False, admission=GATING)
    assert update["response"] == {"uid": "u1", "allowed": True}


# --- TestValidateCreate: group metadata, as warnings -----------------------------------------


def test_a_group_without_a_total_count_is_gated_with_a_warning() -> None:
    """Kueue TestValidateCreate "pod with group name and no group total count": Required
    metadata.annotations[...pod-group-total-count]. Kueue refuses; we gate and warn."""
    pod = make_pod(labels={POD_GROUP_NAME_LABEL: "test-group"})
    answer = review(admission_request(pod), enabled=False, admission=GATING)["response"]
    assert answer["allowed"] is True
    assert json.loads(base64.b64decode(answer["patch"])) == CREATE_LIST
    assert answer["warnings"] == [WARN_GROUP_COUNT_MISSING]


def test_a_total_count_without_a_group_name_warns() -> None:
    """Kueue TestValidateCreate "pod with group total count and no group name": Required
    metadata.labels[...pod-group-name]."""
    pod = make_pod(annotations={POD_GROUP_TOTAL_COUNT_ANNOTATION: "3"})
    assert group_warnings(pod) == [WARN_GROUP_NAME_MISSING]


def test_a_zero_total_count_warns() -> None:
    """Kueue TestValidateCreate "pod with 0 group total count": Invalid total count."""
    pod = make_pod(
        labels={POD_GROUP_NAME_LABEL: "test-group"},
        annotations={POD_GROUP_TOTAL_COUNT_ANNOTATION: "0"},
    )
    [warning] = group_warnings(pod)
    assert POD_GROUP_TOTAL_COUNT_ANNOTATION in warning and "at least 1" in warning


def test_an_empty_total_count_warns() -> None:
    """Kueue TestValidateCreate "pod with empty group total count": Invalid total count."""
    pod = make_pod(
        labels={POD_GROUP_NAME_LABEL: "test-group"},
        annotations={POD_GROUP_TOTAL_COUNT_ANNOTATION: ""},
    )
    [warning] = group_warnings(pod)
    assert "not a number" in warning


def test_a_group_name_that_is_no_dns_subdomain_warns() -> None:
    """Kueue TestValidateCreate "pod with incorrect group name" (notAdns1123Subdomain*) and
    "invalid group name" ("group name"): Invalid metadata.labels[...pod-group-name]."""
    for name in ("notAdns1123Subdomain*", "group name"):
        pod = make_pod(
            labels={POD_GROUP_NAME_LABEL: name},
            annotations={POD_GROUP_TOTAL_COUNT_ANNOTATION: "2"},
        )
        [warning] = group_warnings(pod)
        assert POD_GROUP_NAME_LABEL in warning and repr(name) in warning


def test_a_valid_group_has_no_warning() -> None:
    """Kueue TestValidateCreate "prebuilt workload for pod group valid" (group-name, 3)."""
    pod = make_pod(
        labels={POD_GROUP_NAME_LABEL: "group-name"},
        annotations={POD_GROUP_TOTAL_COUNT_ANNOTATION: "3"},
    )
    assert group_warnings(pod) == []


def test_a_pod_that_is_not_gated_gets_no_warning() -> None:
    """Warnings come with our gate only: a pod the pod integration does not queue is none of
    its business."""
    pod = make_pod(quota=None, labels={POD_GROUP_NAME_LABEL: "test-group"})
    assert pod_patch(pod, ADMISSION_ONLY) == ([], [])
