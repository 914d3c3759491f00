"""The workload webhook holds Koord-Queue's further kinds at creation (issues 26 and 33).

Each kind labelled for a quota and created running is stored held by its own hold (TFJob's
runPolicy.suspend, Ray's spec.suspend, Spark's annotation and spec.suspend, Argo's
spec.suspend, Aliyun's MPIJob's annotation), so the controller queues it like one created
held. The answer is applied as the API server applies it (jsonpatch)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import jsonpatch
import pytest

from koordqueue.domain.integrations import ALL, parse_integrations
from koordqueue.domain.integrations.workload_gate import workload_gating
from koordqueue.kube.webhooks import workloads
from tests.unit.integrations import kq_kinds

GATING = workload_gating("koord-queue", parse_integrations(ALL))

RUNNING: dict[str, Callable[[], dict[str, Any]]] = {
    "TFJob": lambda: kq_kinds.tfjob(suspend=False),
    "RayJob": lambda: kq_kinds.rayjob(suspend=False),
    "RayCluster": lambda: kq_kinds.raycluster(suspend=False),
    "SparkApplication": lambda: kq_kinds.sparkapp(suspended=False),
    "Workflow": lambda: kq_kinds.workflow(suspend=None),
    "MPIJob v1alpha1": lambda: kq_kinds.mpijob_v1alpha1(suspended=False),
}


def _review(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "operation": "CREATE",
            "namespace": obj["metadata"]["namespace"],
            "kind": {"kind": obj["kind"]},
            "object": obj,
        },
    }


@pytest.mark.parametrize("kind", sorted(RUNNING))
def test_a_labelled_workload_created_running_is_stored_held(kind: str) -> None:
    assert GATING is not None
    obj = RUNNING[kind]()
    integration = GATING.kinds[(obj["apiVersion"], obj["kind"])]
    assert not integration.is_suspended(obj)
    answer = workloads.review(_review(obj), GATING)["response"]
    assert answer["allowed"] is True
    stored = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(answer["patch"])))
    assert integration.is_suspended(stored), stored


@pytest.mark.parametrize("kind", sorted(RUNNING))
def test_one_without_the_quota_label_is_left_alone(kind: str) -> None:
    assert GATING is not None
    obj = RUNNING[kind]()
    del obj["metadata"]["labels"][kq_kinds.QUOTA_LABEL]
    assert "patch" not in workloads.review(_review(obj), GATING)["response"]


def test_the_ray_cluster_of_a_queued_ray_job_is_not_held_itself() -> None:
    """KubeRay creates it running once the RayJob is admitted: its RayJob was queued."""
    assert GATING is not None
    obj = kq_kinds.raycluster(suspend=False)
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "ray", "uid": "u", "controller": True}
    ]
    assert "patch" not in workloads.review(_review(obj), GATING)["response"]
