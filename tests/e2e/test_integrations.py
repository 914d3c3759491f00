"""Issue 13 on the real API server: PyTorchJob, MPIJob, JobSet and a pod group, as kubectl shows.

The frameworks' CRDs (vendored in tests/crds/integrations/) are installed, then one controller
runs with `--integrations` naming every kind. For each kind, on a quota with room for one
workload: the first object, created held with the quota label, gets its unit (mapped to the
quota), is admitted (unit Dequeued, `Admitted` event naming the quota) and resumed; an
identical second one waits held; once the first is marked finished through its status (there
is no framework operator on this plane) its unit is released (Succeed, admissions cleared) and
the second takes the freed quota. The gang test: a multi-role PyTorchJob too big for the free
room stays held whole while a smaller one runs. (A kind whose CRD is missing being skipped:
tests/unit/kube/test_integration_wiring.py, on the in-memory API.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.domain.names import (
    POD_ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    QUOTA_NAME_LABEL,
)
from tests.e2e import kq
from tests.e2e.running_controller import RunningController

INTEGRATIONS = "batch/job,kubeflow.org/pytorchjob,kubeflow.org/mpijob,jobset.x-k8s.io/jobset,pod"
PYTORCH = "pytorchjobs.kubeflow.org"
MPI = "mpijobs.kubeflow.org"
JOBSET = "jobsets.jobset.x-k8s.io"
QU = "queueunits.scheduling.x-k8s.io"
NOW = "2026-01-01T00:00:00Z"

Make = Callable[[str, str, str], dict[str, Any]]
"""(name, namespace, quota) -> the held object's manifest."""


@pytest.fixture(scope="module")
def served(integration_crds: list[str], kubeconfig: Path) -> Iterator[RunningController]:
    with RunningController(kubeconfig, integrations=INTEGRATIONS) as rc:
        yield rc


@pytest.fixture
def ns(kubectl: Any) -> str:
    return kq.namespace(kubectl, kq.unique("integ"))


# --- manifests ------------------------------------------------------------------------------
def _pod_spec(cpu: str = "1") -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}},
            }
        ],
    }


def _labels(quota: str) -> dict[str, str]:
    return {QUOTA_NAME_LABEL: quota}


def pytorchjob(name: str, ns: str, quota: str, workers: int = 1) -> dict[str, Any]:
    role = {"restartPolicy": "Never", "template": {"spec": _pod_spec()}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns, "labels": _labels(quota)},
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, **role},
                "Worker": {"replicas": workers, **role},
            },
        },
    }


def mpijob(name: str, ns: str, quota: str) -> dict[str, Any]:
    role = {"replicas": 1, "template": {"spec": _pod_spec()}}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": ns, "labels": _labels(quota)},
        "spec": {
            "runPolicy": {"suspend": True},
            "mpiReplicaSpecs": {"Launcher": role, "Worker": role},
        },
    }


def jobset(name: str, ns: str, quota: str) -> dict[str, Any]:
    job = {"parallelism": 2, "completions": 2, "template": {"spec": _pod_spec()}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns, "labels": _labels(quota)},
        "spec": {
            "suspend": True,
            "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": job}}],
        },
    }


def pod_group(name: str, ns: str, quota: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": ns,
                "labels": {**_labels(quota), POD_GROUP_NAME_LABEL: name},
                "annotations": {POD_GROUP_TOTAL_COUNT_ANNOTATION: "2"},
            },
            "spec": {**_pod_spec(), "schedulingGates": [{"name": POD_ADMISSION_GATE}]},
        }
        for i in range(2)
    ]


def _condition(kind: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": kind,
        "message": "marked by the test",
        "lastTransitionTime": NOW,
        "lastUpdateTime": NOW,
    }


def _finish(kubectl: Any, resource: str, name: str, ns: str, status: dict[str, Any]) -> None:
    kubectl(
        "patch",
        resource,
        name,
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


# --- what an operator reads ---------------------------------------------------------------
def unit(kubectl: Any, ns: str, name: str) -> dict[str, Any]:
    found = kq.get(kubectl, QU, name, ns)
    assert found is not None, f"no unit {ns}/{name}"
    return found


def admitted(kubectl: Any, ns: str, unit_name: str, quota: str) -> None:
    """The unit was admitted into `quota`, as its status and events say."""
    kq.wait_for(
        lambda: kq.phase(kubectl, ns, unit_name) in ("Dequeued", "Running"),
        what=f"{unit_name} admitted",
        state=lambda: kq.get(kubectl, QU, unit_name, ns),
    )
    status = unit(kubectl, ns, unit_name)["status"]
    assert status["admissions"], status
    events = kq.wait_for(
        lambda: kq.events_for(kubectl, ns, unit_name, "Admitted"),
        what=f"{unit_name} Admitted event",
    )
    assert quota in events[0]["message"]


def held_and_waiting(kubectl: Any, ns: str, unit_name: str, is_held: Callable[[], bool]) -> None:
    """After a few rounds the unit still waits, holds no quota, and its workload is held."""
    kq.wait_for(
        lambda: kq.phase(kubectl, ns, unit_name) == "Enqueued",
        what=f"{unit_name} queued",
        state=lambda: (
            kq.get(kubectl, QU, unit_name, ns),
            kubectl("get", f"pods,{QU}", "-n", ns, "-o", "wide").stdout,
        ),
    )
    time.sleep(1.0)  # five admission rounds
    status = unit(kubectl, ns, unit_name)["status"]
    assert status["phase"] == "Enqueued" and not status.get("admissions"), status
    assert is_held()


def released(kubectl: Any, ns: str, unit_name: str) -> None:
    kq.wait_for(lambda: kq.phase(kubectl, ns, unit_name) == "Succeed", what=f"{unit_name} Succeed")
    assert unit(kubectl, ns, unit_name)["status"]["admissions"] == []


def lifecycle(
    kubectl: Any,
    ns: str,
    make: Make,
    resource: str,
    suffix: str,
    kind: str,
    suspended: Callable[[dict[str, Any]], bool],
    finished: dict[str, Any],
) -> None:
    quota = kq.unique("integ")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "4Gi"}))  # room for one
    kubectl.create(make("first", ns, quota))
    first_unit = f"first-{suffix}"
    kq.wait_for(lambda: kq.get(kubectl, QU, first_unit, ns), what=f"{first_unit} created")
    spec = unit(kubectl, ns, first_unit)["spec"]
    assert spec["consumerRef"]["kind"] == kind and spec["consumerRef"]["name"] == "first"
    assert spec["resource"]["cpu"] == "2"
    admitted(kubectl, ns, first_unit, quota)
    kq.wait_for(
        lambda: not suspended(kq.get(kubectl, resource, "first", ns) or {}), what="first resumed"
    )

    kubectl.create(make("second", ns, quota))
    second = f"second-{suffix}"
    held_and_waiting(
        kubectl, ns, second, lambda: suspended(kq.get(kubectl, resource, "second", ns) or {})
    )

    _finish(kubectl, resource, "first", ns, finished)
    released(kubectl, ns, first_unit)
    admitted(kubectl, ns, second, quota)  # the freed quota goes to the one that waited
    kq.wait_for(
        lambda: not suspended(kq.get(kubectl, resource, "second", ns) or {}), what="second resumed"
    )


def _run_policy_suspended(obj: dict[str, Any]) -> bool:
    return bool(((obj.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


def _spec_suspended(obj: dict[str, Any]) -> bool:
    return bool((obj.get("spec") or {}).get("suspend"))


# --- the tests ------------------------------------------------------------------------------
def test_pytorchjob_mapped_admitted_resumed_and_released(
    kubectl: Any, served: RunningController, ns: str
) -> None:
    lifecycle(
        kubectl,
        ns,
        pytorchjob,
        PYTORCH,
        "py-qu",
        "PyTorchJob",
        _run_policy_suspended,
        {"conditions": [_condition("Succeeded")]},
    )


def test_mpijob_mapped_admitted_resumed_and_released(
    kubectl: Any, served: RunningController, ns: str
) -> None:
    lifecycle(
        kubectl,
        ns,
        mpijob,
        MPI,
        "mpi-qu",
        "MPIJob",
        _run_policy_suspended,
        {"conditions": [_condition("Succeeded")]},
    )


def test_jobset_mapped_admitted_resumed_and_released(
    kubectl: Any, served: RunningController, ns: str
) -> None:
    lifecycle(
        kubectl,
        ns,
        jobset,
        JOBSET,
        "js-qu",
        "JobSet",
        _spec_suspended,
        {"conditions": [_condition("Completed")]},
    )


def test_pod_group_mapped_admitted_ungated_and_released(
    kubectl: Any, served: RunningController, ns: str
) -> None:
    quota = kq.unique("integ")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "4Gi"}))  # room for one group

    def gated(group: str) -> bool:
        pods = [kq.get(kubectl, "pod", f"{group}-{i}", ns) or {} for i in range(2)]
        return all(
            any(g.get("name") == POD_ADMISSION_GATE for g in p["spec"].get("schedulingGates") or [])
            for p in pods
        )

    def ungated(group: str) -> bool:
        pods = [kq.get(kubectl, "pod", f"{group}-{i}", ns) or {} for i in range(2)]
        return all(not p["spec"].get("schedulingGates") for p in pods)

    for pod in pod_group("first", ns, quota):
        kubectl.create(pod)
    kq.wait_for(lambda: kq.get(kubectl, QU, "first-pod-qu", ns), what="group unit created")
    spec = unit(kubectl, ns, "first-pod-qu")["spec"]
    assert (spec["consumerRef"]["kind"], spec["consumerRef"]["name"]) == ("Pod", "first")
    assert spec["resource"]["cpu"] == "2"
    admitted(kubectl, ns, "first-pod-qu", quota)
    kq.wait_for(lambda: ungated("first"), what="both pods ungated")

    for pod in pod_group("second", ns, quota):
        kubectl.create(pod)
    held_and_waiting(kubectl, ns, "second-pod-qu", lambda: gated("second"))

    for i in range(2):
        _finish(kubectl, "pod", f"first-{i}", ns, {"phase": "Succeeded"})
    released(kubectl, ns, "first-pod-qu")
    admitted(kubectl, ns, "second-pod-qu", quota)
    kq.wait_for(lambda: ungated("second"), what="second group ungated")


def test_a_multi_role_pytorchjob_too_big_for_the_free_room_is_held_whole(
    kubectl: Any, served: RunningController, ns: str
) -> None:
    quota = kq.unique("gang")
    kubectl.apply(kq.quota(quota, max_={"cpu": "4", "memory": "8Gi"}))
    kubectl.create(pytorchjob("small", ns, quota, workers=1))  # Master + 1 Worker: 2 cpu
    admitted(kubectl, ns, "small-py-qu", quota)
    kubectl.create(pytorchjob("big", ns, quota, workers=3))  # Master + 3 Workers: 4 > 2 free
    held_and_waiting(
        kubectl,
        ns,
        "big-py-qu",
        lambda: _run_policy_suspended(kq.get(kubectl, PYTORCH, "big", ns) or {}),
    )
    assert unit(kubectl, ns, "big-py-qu")["spec"]["resource"]["cpu"] == "4"  # every role counted
    assert not kq.events_for(kubectl, ns, "big-py-qu", "Admitted")
    small = kq.get(kubectl, PYTORCH, "small", ns) or {}
    assert not _run_policy_suspended(small)
