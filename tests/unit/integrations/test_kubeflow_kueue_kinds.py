"""XGBoostJob, PaddleJob, JAXJob: Kueue's training-operator kinds (kubeflow.org/v1), one shape
with TFJob and PyTorchJob. Kueue v0.17.0's {xgboostjob,paddlejob,jaxjob}_controller_test.go
transcribed: TestPriorityClass, TestOrderedReplicaTypes, TestPodSets (without topology
annotations: koordqueue has no topology-aware scheduling). Koord-Queue has no handle for them:
the queue's side (markers, state) is the one its Kubeflow handles share, checked here too."""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.domain.integrations import (
    INTEGRATIONS,
    JAX_JOB,
    PADDLE_JOB,
    XGBOOST_JOB,
    Integration,
    InvalidJobError,
    JobStatus,
    WorkloadPatch,
    by_kind,
    queue_unit_for,
)
from koordqueue.domain.names import INTEGRATION_SUSPEND_ANNOTATION as HOLD
from koordqueue.domain.names import JOB_DEQUEUE_TIMESTAMP_ANNOTATION as DEQUEUE
from koordqueue.domain.resources import Resources
from tests.unit.integrations.helpers import condition
from tests.unit.integrations.kq_kinds import kubeflow_job, pod_template

NOW = "2026-01-01 00:00:00 +0000 UTC"
KINDS = [XGBOOST_JOB, PADDLE_JOB, JAX_JOB]
TWO_ROLES = [XGBOOST_JOB, PADDLE_JOB]
"""Master and Worker; JAXJob has Worker only."""


def job(integration: Integration, **kw: Any) -> dict[str, Any]:
    return kubeflow_job(integration.workload.kind, **kw)


def _classes(**by_role: str | None) -> dict[str, tuple[int, dict[str, Any]]]:
    return {role: (1, pod_template(priority_class=pc)) for role, pc in by_role.items()}


@pytest.mark.parametrize(
    ("integration", "kind", "plural", "suffix"),
    [
        (XGBOOST_JOB, "XGBoostJob", "xgboostjobs", "xgb-qu"),
        (PADDLE_JOB, "PaddleJob", "paddlejobs", "paddle-qu"),
        (JAX_JOB, "JAXJob", "jaxjobs", "jax-qu"),
    ],
    ids=lambda v: v.name if isinstance(v, Integration) else None,
)
def test_flag_name_kind_and_unit_name(
    integration: Integration, kind: str, plural: str, suffix: str
) -> None:
    """The flag names are Kueue's (kubeflow.org/<kind in lower case>)."""
    w = integration.workload
    assert (w.group, w.version, w.kind, w.plural) == ("kubeflow.org", "v1", kind, plural)
    assert integration.name == f"kubeflow.org/{kind.lower()}"
    assert INTEGRATIONS[integration.name] is integration
    assert by_kind(kind, "kubeflow.org/v1") is integration
    assert integration.unit_name(job(integration, name="train")) == f"train-{suffix}"


# --- TestPriorityClass -----------------------------------------------------------------------
@pytest.mark.parametrize("integration", TWO_ROLES, ids=lambda i: i.name)
@pytest.mark.parametrize(
    ("roles", "scheduling", "expected"),
    [
        (_classes(Worker=None), None, ""),
        (
            _classes(Master="master-priority", Worker="worker-priority"),
            "scheduling-priority",
            "scheduling-priority",
        ),
        (_classes(Master="master-priority"), None, "master-priority"),
        (_classes(Master="master-priority", Worker="worker-priority"), None, "master-priority"),
        (_classes(Master=None, Worker="worker-priority"), None, "worker-priority"),
        (_classes(Worker="worker-priority"), None, "worker-priority"),
        (_classes(Master=None, Worker=None), None, ""),
    ],
    ids=[
        "none priority class name specified",
        "priority specified at runPolicy and replicas; use priority in runPolicy",
        "runPolicy present, but without priority; fallback to master",
        "specified on master takes precedence over worker",
        "master present, but without priority; fallback to worker",
        "specified on worker only",
        "worker present, but without priority; fallback to empty",
    ],
)
def test_priority_class(
    integration: Integration, roles: dict[str, Any], scheduling: str | None, expected: str
) -> None:
    """kueue TestPriorityClass (xgboostjob, paddlejob), the case in the id. Unlike Koord-Queue's
    PyTorchJob/TFJob rule, Master is read first."""
    obj = job(integration, roles=roles, scheduling_priority_class=scheduling)
    assert integration.priority_class_name(obj) == expected


@pytest.mark.parametrize(
    ("roles", "scheduling", "expected"),
    [
        (_classes(Worker=None), None, ""),
        (_classes(Worker="worker-priority"), "scheduling-priority", "scheduling-priority"),
    ],
    ids=[
        "none priority class name specified",
        "priority specified at runPolicy and replicas; use priority in runPolicy",
    ],
)
def test_jax_priority_class(roles: dict[str, Any], scheduling: str | None, expected: str) -> None:
    """kueue jaxjob TestPriorityClass, the case in the id; else the Worker's."""
    obj = job(JAX_JOB, roles=roles, scheduling_priority_class=scheduling)
    assert JAX_JOB.priority_class_name(obj) == expected
    only_worker = job(JAX_JOB, roles=_classes(Worker="worker-priority"))
    assert JAX_JOB.priority_class_name(only_worker) == "worker-priority"


# --- TestOrderedReplicaTypes / TestPodSets ---------------------------------------------------
@pytest.mark.parametrize(
    ("integration", "roles", "expected"),
    [
        (XGBOOST_JOB, {}, []),
        (XGBOOST_JOB, {"Worker": (1, pod_template()), "Master": (1, pod_template())},
         ["master", "worker"]),
        (XGBOOST_JOB, {"Worker": (1, pod_template())}, ["worker"]),
        (PADDLE_JOB, {}, []),
        (PADDLE_JOB, {"Worker": (1, pod_template()), "Master": (1, pod_template())},
         ["master", "worker"]),
        (PADDLE_JOB, {"Worker": (1, pod_template())}, ["worker"]),
        (JAX_JOB, {}, []),
        (JAX_JOB, {"Worker": (1, pod_template())}, ["worker"]),
    ],
    ids=[
        "xgboost job has no replicas",
        "xgboost job has all replicas",
        "xgboost job has only worker replica",
        "paddle job has no replicas",
        "paddle job has all replicas",
        "paddle job has only worker replica",
        "jax job has no replicas",
        "jax job has worker replicas",
    ],
)
def test_ordered_replica_types(
    integration: Integration, roles: dict[str, Any], expected: list[str]
) -> None:
    """kueue TestOrderedReplicaTypes, the case in the id: one pod set per role present, in
    the operator's order whatever the order written."""
    obj = job(integration, roles=roles or None)
    if not roles:
        obj["spec"][next(k for k in obj["spec"] if k.endswith("ReplicaSpecs"))] = {}
    assert [p.name for p in integration.pod_sets([obj])] == expected


@pytest.mark.parametrize("integration", TWO_ROLES, ids=lambda i: i.name)
def test_pod_sets_no_annotations(integration: Integration) -> None:
    """kueue TestPodSets "no annotations": master 1 and worker 1, each with its role's
    template; the unit asks for count x request."""
    master, worker = pod_template("2", "4Gi"), pod_template("1", "2Gi")
    obj = job(integration, roles={"Master": (1, master), "Worker": (1, worker)})
    sets = integration.pod_sets([obj])
    assert [(p.name, p.count, p.template) for p in sets] == [
        ("master", 1, master), ("worker", 1, worker)]
    assert integration.resource([obj]) == Resources.parse({"cpu": "3", "memory": "6Gi"})


def test_jax_pod_sets_no_annotations() -> None:
    """kueue jaxjob TestPodSets "no annotations": worker 1 with its template."""
    worker = pod_template("4")
    (only,) = JAX_JOB.pod_sets([job(JAX_JOB, roles={"Worker": (1, worker)})])
    assert (only.name, only.count, only.template) == ("worker", 1, worker)


@pytest.mark.parametrize("integration", KINDS, ids=lambda i: i.name)
def test_replicas_default_to_one(integration: Integration) -> None:
    obj = job(integration, roles={"Worker": (None, pod_template("2"))})
    assert integration.resource([obj]) == Resources.parse({"cpu": "2"})


# --- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("integration", "role"),
    [(XGBOOST_JOB, "Chief"), (PADDLE_JOB, "PS"), (JAX_JOB, "Master")],
    ids=lambda v: v.name if isinstance(v, Integration) else v,
)
def test_a_role_the_operator_does_not_know_is_refused(integration: Integration, role: str) -> None:
    """The operator's own validation knows only its roles; a unit counting others would hold
    quota for pods never made."""
    obj = job(integration, roles={"Worker": (1, pod_template()), role: (1, pod_template())})
    with pytest.raises(InvalidJobError, match="unknown role") as caught:
        queue_unit_for(integration, [obj])
    field = next(k for k in obj["spec"] if k.endswith("ReplicaSpecs"))
    assert caught.value.field == f"spec.{field}.{role}"
    assert caught.value.kind == integration.workload.kind


@pytest.mark.parametrize("integration", KINDS, ids=lambda i: i.name)
@pytest.mark.parametrize("replicas", [-1, "2"], ids=["negative", "not an integer"])
def test_bad_replicas_are_refused_naming_the_field(integration: Integration, replicas: Any) -> None:
    obj = job(integration, roles={"Worker": (replicas, pod_template())})
    with pytest.raises(InvalidJobError) as caught:
        queue_unit_for(integration, [obj])
    field = next(k for k in obj["spec"] if k.endswith("ReplicaSpecs"))
    assert caught.value.field == f"spec.{field}.Worker.replicas"


# --- the queue's side ----------------------------------------------------------------------
@pytest.mark.parametrize("integration", KINDS, ids=lambda i: i.name)
def test_held_released_and_marked_as_the_other_kubeflow_jobs(integration: Integration) -> None:
    held = job(integration, suspend=True)
    assert integration.is_suspended(held) and integration.is_managed(held)
    assert integration.status([held]) is JobStatus.CREATED
    (mark,) = integration.enqueue(held, NOW, "2026-01-01T00:00:00Z")
    assert isinstance(mark, WorkloadPatch) and mark.subresource == "status"
    assert mark.body["status"]["conditions"][0]["type"] == "Queuing"
    (condition_patch, release) = integration.resume(held, NOW, "2026-01-01T00:00:00Z")
    assert isinstance(condition_patch, WorkloadPatch) and condition_patch.subresource == "status"
    assert isinstance(release, WorkloadPatch)
    assert release.body["spec"] == {"runPolicy": {"suspend": False}}
    assert release.body["metadata"]["annotations"] == {HOLD: "false", DEQUEUE: NOW}
    (hold,) = integration.suspend(job(integration, suspend=False))
    assert isinstance(hold, WorkloadPatch)
    assert hold.body["spec"] == {"runPolicy": {"suspend": True}}
    assert hold.body["metadata"]["annotations"] == {HOLD: "true"}


@pytest.mark.parametrize("integration", KINDS, ids=lambda i: i.name)
@pytest.mark.parametrize(
    ("conditions", "suspend", "expected"),
    [
        ([condition("Succeeded")], False, JobStatus.SUCCEEDED),
        ([condition("Failed")], False, JobStatus.FAILED),
        ([condition("Running")], False, JobStatus.RUNNING),
        ([condition("Created")], False, JobStatus.PENDING),
        ([condition("Queuing")], True, JobStatus.QUEUING),
    ],
    ids=["succeeded", "failed", "running", "released, not running yet", "queuing"],
)
def test_status(
    integration: Integration, conditions: list[dict[str, str]], suspend: bool, expected: JobStatus
) -> None:
    obj = job(integration, suspend=suspend)
    obj["status"] = {"conditions": conditions}
    assert integration.status([obj]) is expected
