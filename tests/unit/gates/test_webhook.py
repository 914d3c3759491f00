"""The pod mutating webhook's review (pure: AdmissionReview in, AdmissionReview out)."""

from __future__ import annotations

import base64
import json
from typing import Any

from koordqueue.kube.gates.webhook import PodGating, pod_patch, review
from koordqueue.scheduler.gates import GATE_NAME, OPT_IN_ANNOTATION

OPT_IN = {OPT_IN_ANNOTATION: "true"}


def pod(
    annotations: dict[str, str] | None = None, gates: list[str] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if gates is not None:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"metadata": {"name": "p", "annotations": annotations or {}}, "spec": spec}


def gate_patch(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The webhook's patch for a pod when only the queue-allocation gate is on."""
    return pod_patch(obj, PodGating(allocation_gate=True))[0]


def admission(obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "operation": operation, "object": obj}}


def test_an_opted_in_pod_without_gates_gets_the_list_created() -> None:
    assert gate_patch(pod(OPT_IN)) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE_NAME}]}]


def test_an_opted_in_pod_with_gates_gets_ours_appended() -> None:
    assert gate_patch(pod(OPT_IN, ["other"])) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE_NAME}}]


def test_a_pod_that_already_has_our_gate_is_not_patched_again() -> None:
    assert gate_patch(pod(OPT_IN, ["other", GATE_NAME])) == []


def test_a_pod_that_did_not_opt_in_is_untouched() -> None:
    assert gate_patch(pod({OPT_IN_ANNOTATION: "false"})) == []


def test_the_review_allows_and_carries_the_patch_base64_encoded() -> None:
    answer = review(admission(pod(OPT_IN)))["response"]
    assert answer["uid"] == "u1" and answer["allowed"] is True
    assert answer["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(answer["patch"])) == gate_patch(pod(OPT_IN))


def test_the_review_patches_nothing_with_the_feature_gate_off() -> None:
    answer = review(admission(pod(OPT_IN)), enabled=False)["response"]
    assert answer == {"uid": "u1", "allowed": True}


def test_the_review_ignores_updates() -> None:
    assert "patch" not in review(admission(pod(OPT_IN), "UPDATE"))["response"]
