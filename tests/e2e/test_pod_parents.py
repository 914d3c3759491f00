"""StatefulSets and Deployments queued through their pods, on the real API server (issue 26).

The controller runs in-process with `--integrations batch/job,statefulset,deployment` (the
pod path enabled with them) and serves the pod webhook and the pod-parent webhook, which the
real kube-apiserver calls over loopback (configurations scoped to this module's namespace).
No kube-controller-manager runs here, so the test makes the pods the StatefulSet and
ReplicaSet controllers would make: from the stored (webhook-marked) template, owned by their
controller. What kubectl shows: the marked template; pods coming back gated; the group's
QueueUnit (replicas x request) admitted into its quota with its `Admitted` event; pods
ungated, a late replica too; a resize refused with the field named; scaled to 0, the unit
gone; scaled up again, a new unit admitted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.domain.names import (
    POD_ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_SERVING_ANNOTATION,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    QUOTA_NAME_LABEL,
)
from tests.e2e import kq
from tests.e2e.pod_parent_webhooks import serving_pod_parents
from tests.e2e.test_gates_admission import (
    gates_of,
    live_gates,
)

QU = "queueunits.scheduling.x-k8s.io"


@pytest.fixture(scope="module")
def served(
    kubectl: Any, kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A namespace whose pods, Deployments and StatefulSets go through our webhooks."""
    rule = {"apiGroups": ["apps"], "apiVersions": ["v1"],
            "resources": ["deployments", "statefulsets"]}
    with serving_pod_parents(
        kubectl, kubeconfig, tmp_path_factory.mktemp("certs"), prefix="parents",
        integrations="batch/job,statefulset,deployment", rule=rule,
    ) as ns:
        yield ns


def workload(kind: str, name: str, ns: str, quota: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": ns, "labels": {QUOTA_NAME_LABEL: quota}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "1", "memory": "256Mi"}},
                        }
                    ]
                },
            },
        },
    }


def make_pod(kubectl: Any, owner: dict[str, Any], name: str, owner_kind: str) -> dict[str, Any]:
    """The pod its controller would make from the stored template (kube-controller-manager
    does not run here), as kubectl shows it after the pod webhook."""
    template = owner["spec"]["template"]
    m = owner["metadata"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": m["namespace"],
            "labels": dict(template["metadata"].get("labels") or {}),
            "annotations": dict(template["metadata"].get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": owner_kind,
                    "name": m["name"],
                    "uid": m["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template["spec"],
    }
    created: dict[str, Any] = json.loads(
        kubectl("create", "-o", "json", "-f", "-", input=json.dumps(pod)).stdout
    )
    return created


def patch_replicas(kubectl: Any, ns: str, name: str, replicas: int) -> Any:
    body = json.dumps({"spec": {"replicas": replicas}})
    return kubectl("patch", "statefulset", name, "-n", ns, "--type=merge", "-p", body, check=False)


def admitted(kubectl: Any, ns: str, unit: str) -> None:
    kq.wait_for(
        lambda: kq.phase(kubectl, ns, unit) in ("Dequeued", "Running"),
        what=f"{unit} admitted",
        state=lambda: kq.get(kubectl, QU, unit, ns),
    )


def test_a_statefulset_is_one_group_admitted_whole_scaled_only_to_and_from_zero(
    kubectl: Any, served: str
) -> None:
    ns = served
    quota = kq.unique("sts")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "4Gi"}))
    kubectl.apply(workload("StatefulSet", "web", ns, quota, 2))
    sts = kq.get(kubectl, "statefulset", "web", ns)
    assert sts is not None
    marked = sts["spec"]["template"]["metadata"]
    assert marked["labels"][QUOTA_NAME_LABEL] == quota
    assert marked["labels"][POD_GROUP_NAME_LABEL] == "statefulset-web"
    assert marked["annotations"][POD_GROUP_TOTAL_COUNT_ANNOTATION] == "2"
    assert marked["annotations"][POD_GROUP_SERVING_ANNOTATION] == "true"

    # OrderedReady: only web-0 exists at first; the unit asks for both replicas at once
    assert gates_of(make_pod(kubectl, sts, "web-0", "StatefulSet")) == [POD_ADMISSION_GATE]
    unit = "statefulset-web-pod-qu"
    admitted(kubectl, ns, unit)
    made = kq.get(kubectl, QU, unit, ns)
    assert made is not None
    assert made["spec"]["resource"] == {"cpu": "2", "memory": "512Mi"}
    assert ("StatefulSet", "web") in [
        (r["kind"], r["name"]) for r in made["metadata"]["ownerReferences"]
    ]
    events = kq.wait_for(lambda: kq.events_for(kubectl, ns, unit, "Admitted"), what="Admitted")
    assert quota in events[0]["message"]
    kq.wait_for(lambda: live_gates(kubectl, ns, "web-0") == [], what="web-0 ungated")
    # the next replica comes gated and is let go: its group is admitted
    assert gates_of(make_pod(kubectl, sts, "web-1", "StatefulSet")) == [POD_ADMISSION_GATE]
    kq.wait_for(lambda: live_gates(kubectl, ns, "web-1") == [], what="late replica ungated")

    refused = patch_replicas(kubectl, ns, "web", 3)
    assert refused.returncode != 0
    assert "spec.replicas: field is immutable" in refused.stderr

    # scaled to 0: the pods go (as the StatefulSet controller deletes them), so does the unit
    assert patch_replicas(kubectl, ns, "web", 0).returncode == 0
    kubectl("delete", "pod", "web-0", "web-1", "-n", ns, "--wait=true")
    kq.wait_for(lambda: kq.get(kubectl, QU, unit, ns) is None, what="unit deleted")

    # scaled up from 0: its pods queue again and are admitted into the quota given back
    assert patch_replicas(kubectl, ns, "web", 2).returncode == 0
    sts = kq.get(kubectl, "statefulset", "web", ns)
    assert sts is not None
    assert gates_of(make_pod(kubectl, sts, "web-0", "StatefulSet")) == [POD_ADMISSION_GATE]
    admitted(kubectl, ns, unit)
    kq.wait_for(lambda: live_gates(kubectl, ns, "web-0") == [], what="web-0 ungated again")


def test_a_deployments_pods_are_each_queued_and_a_scale_down_gives_quota_back(
    kubectl: Any, served: str
) -> None:
    ns = served
    quota = kq.unique("deploy")
    kubectl.apply(kq.quota(quota, max_={"cpu": "1", "memory": "4Gi"}))
    kubectl.apply(workload("Deployment", "api", ns, quota, 2))
    deployment = kq.get(kubectl, "deployment", "api", ns)
    assert deployment is not None
    marked = deployment["spec"]["template"]["metadata"]
    assert marked["labels"][QUOTA_NAME_LABEL] == quota
    assert POD_GROUP_NAME_LABEL not in marked["labels"]  # each pod is queued alone
    replica_set = {**deployment, "metadata": {**deployment["metadata"], "name": "api-5d8f"}}

    first = make_pod(kubectl, replica_set, "api-5d8f-a", "ReplicaSet")
    second = make_pod(kubectl, replica_set, "api-5d8f-b", "ReplicaSet")
    assert gates_of(first) == gates_of(second) == [POD_ADMISSION_GATE]
    admitted(kubectl, ns, "api-5d8f-a-pod-qu")
    kq.wait_for(lambda: live_gates(kubectl, ns, "api-5d8f-a") == [], what="first ungated")
    # one cpu in the quota: the second pod waits, gated, until the first one goes
    kq.wait_for(lambda: kq.phase(kubectl, ns, "api-5d8f-b-pod-qu") == "Enqueued", what="waits")
    assert live_gates(kubectl, ns, "api-5d8f-b") == [POD_ADMISSION_GATE]

    kubectl("delete", "pod", "api-5d8f-a", "-n", ns, "--wait=true")  # scaled down
    kq.wait_for(lambda: kq.get(kubectl, QU, "api-5d8f-a-pod-qu", ns) is None, what="unit gone")
    admitted(kubectl, ns, "api-5d8f-b-pod-qu")
    kq.wait_for(lambda: live_gates(kubectl, ns, "api-5d8f-b") == [], what="second ungated")
