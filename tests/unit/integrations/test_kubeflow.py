"""PyTorchJob and MPIJob integrations: pod sets, priority, markers and state.

Cases transcribed from koordinator-sh/koord-queue pkg/jobext/handles/pytorchjob_test.go
(Describe "PytorchJob Controller") and kubernetes-sigs/kueue
pkg/controller/jobs/kubeflow/jobs/pytorchjob/pytorchjob_controller_test.go and
pkg/controller/jobs/mpijob/mpijob_controller_test.go; each test names its case.
"""

from __future__ import annotations

import pytest

from koordqueue.domain.integrations import MPI_JOB, PYTORCH_JOB, JobStatus, WorkloadPatch
from koordqueue.domain.integrations.base import queue_unit_for
from koordqueue.domain.names import (
    INTEGRATION_SUSPEND_ANNOTATION,
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
)
from koordqueue.domain.resources import Resources
from tests.unit.integrations.helpers import condition, kubeflow_job, template


def test_pytorch_pod_sets_are_master_then_worker_with_their_replicas() -> None:
    """koord-queue pytorchjob_test.go, Context "PodSet": "should generate correct pod sets"."""
    job = kubeflow_job("PyTorchJob", {"Worker": (2, template()), "Master": (1, template())})
    pod_sets = PYTORCH_JOB.pod_sets([job])
    assert [(ps.name, ps.count) for ps in pod_sets] == [("master", 1), ("worker", 2)]


def test_pytorch_resource_is_replicas_times_each_roles_request() -> None:
    """koord-queue pytorchjob_test.go, Context "Resources": 2 workers × (1 cpu, 2Gi) + 1 master
    × (2 cpu, 4Gi) = 4 cpu, 8Gi."""
    job = kubeflow_job(
        "PyTorchJob",
        {"Worker": (2, template("1", "2Gi")), "Master": (1, template("2", "4Gi"))},
    )
    assert PYTORCH_JOB.resource([job]) == Resources.parse({"cpu": "4", "memory": "8Gi"})


def test_pytorch_priority_comes_from_the_worker_and_its_class_value() -> None:
    """koord-queue pytorchjob_test.go, Context "Priority": "should return correct priority"."""
    worker = template(priority_class="test-priority-class", priority=100)
    job = kubeflow_job("PyTorchJob", {"Worker": (None, worker)})
    assert PYTORCH_JOB.priority_class_name(job) == "test-priority-class"
    assert PYTORCH_JOB.priority(job, {"test-priority-class": 100}.get) == 100


def test_pytorch_priority_skips_the_master_role() -> None:
    """koord-queue pytorchjob.go Priority(): the Master role's template is not looked at."""
    job = kubeflow_job(
        "PyTorchJob",
        {"Master": (1, template(priority_class="master-pc")), "Worker": (1, template())},
    )
    assert PYTORCH_JOB.priority_class_name(job) == ""


def test_pytorch_with_queuing_condition_is_managed() -> None:
    """koord-queue pytorchjob_test.go, ManagedByQueue: "should return true when job has
    queuing condition"."""
    job = kubeflow_job("PyTorchJob", {}, suspend=None, conditions=[condition("Queuing")])
    assert PYTORCH_JOB.is_managed(job)


def test_pytorch_without_queuing_condition_and_not_suspended_is_not_managed() -> None:
    """koord-queue pytorchjob_test.go, ManagedByQueue: "should return false when job has no
    queuing condition and start time" (suspend annotation "false")."""
    job = kubeflow_job(
        "PyTorchJob", {}, suspend=None, annotations={INTEGRATION_SUSPEND_ANNOTATION: "false"}
    )
    assert not PYTORCH_JOB.is_managed(job)


def test_pytorch_started_job_is_not_managed_even_if_suspended() -> None:
    """koord-queue pytorchjob.go ManagedByQueue(): startTime set and no Queuing condition."""
    job = kubeflow_job("PyTorchJob", {}, start_time="2026-01-01T00:00:00Z")
    assert not PYTORCH_JOB.is_managed(job)


@pytest.mark.parametrize(
    ("conditions", "annotations", "expected"),
    [
        ([condition("Succeeded")], {}, JobStatus.SUCCEEDED),
        ([condition("Failed")], {}, JobStatus.FAILED),
        ([condition("Running")], {}, JobStatus.RUNNING),
        ([condition("Queuing")], {INTEGRATION_SUSPEND_ANNOTATION: "true"}, JobStatus.QUEUING),
    ],
    ids=["succeeded", "failed", "running", "queuing"],
)
def test_pytorch_status_from_conditions(
    conditions: list[dict[str, str]], annotations: dict[str, str], expected: JobStatus
) -> None:
    """koord-queue pytorchjob_test.go, GetJobStatus: "should return succeeded / failed /
    running / queuing status"."""
    job = kubeflow_job(
        "PyTorchJob", {}, suspend=None, annotations=annotations, conditions=conditions
    )
    assert PYTORCH_JOB.status([job]) is expected


def test_kubeflow_status_resumed_without_running_condition_is_pending() -> None:
    """koord-queue pytorchjob.go GetJobStatus(): not suspended and no Running -> Pending."""
    job = kubeflow_job("PyTorchJob", {}, suspend=False, conditions=[condition("Queuing", "False")])
    assert PYTORCH_JOB.status([job]) is JobStatus.PENDING


def test_kubeflow_status_held_without_queuing_condition_is_created() -> None:
    job = kubeflow_job("MPIJob", {}, suspend=True)
    assert MPI_JOB.status([job]) is JobStatus.CREATED


def test_kubeflow_finished_condition_wins_over_running() -> None:
    job = kubeflow_job("MPIJob", {}, conditions=[condition("Running"), condition("Failed")])
    assert MPI_JOB.status([job]) is JobStatus.FAILED


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        ({}, []),
        ({"Worker": (1, template()), "Master": (1, template())}, ["master", "worker"]),
        ({"Worker": (1, template())}, ["worker"]),
    ],
    ids=["job has no replicas", "job has all replicas", "job only has the worker replica"],
)
def test_pytorch_ordered_replica_types(
    roles: dict[str, tuple[int, dict[str, object]]], expected: list[str]
) -> None:
    """kueue pytorchjob_controller_test.go TestOrderedReplicaTypes, the case in the id."""
    job = kubeflow_job("PyTorchJob", roles)
    assert [ps.name for ps in PYTORCH_JOB.pod_sets([job])] == expected


def test_kubeflow_replicas_default_to_one() -> None:
    """kueue kubeflowjob podsCount: ptr.Deref(replicas, 1)."""
    job = kubeflow_job("MPIJob", {"Launcher": (None, template()), "Worker": (4, template())})
    assert [(ps.name, ps.count) for ps in MPI_JOB.pod_sets([job])] == [
        ("launcher", 1),
        ("worker", 4),
    ]


@pytest.mark.parametrize(
    ("scheduling", "launcher", "worker", "expected"),
    [
        (None, None, None, ""),
        ("scheduling-priority", "launcher-priority", "worker-priority", "scheduling-priority"),
        (None, "launcher-priority", None, "launcher-priority"),
        (None, "launcher-priority", "worker-priority", "launcher-priority"),
        (None, "", "worker-priority", "worker-priority"),
        (None, None, "", ""),
    ],
    ids=[
        "none priority class name specified",
        "priority specified at runPolicy and replicas; use priority in runPolicy",
        "runPolicy present, but without priority; fallback to launcher",
        "specified on launcher takes precedence over worker",
        "launcher present, but without priority; fallback to worker",
        "worker present, but without priority; fallback to empty",
    ],
)
def test_mpijob_priority_class_name(
    scheduling: str | None, launcher: str | None, worker: str | None, expected: str
) -> None:
    """kueue mpijob_controller_test.go TestCalcPriorityClassName, the case in the id."""
    roles = {}
    if launcher is not None:
        roles["Launcher"] = (1, template(priority_class=launcher or None))
    if worker is not None:
        roles["Worker"] = (1, template(priority_class=worker or None))
    job = kubeflow_job("MPIJob", roles, scheduling_priority_class=scheduling)
    assert MPI_JOB.priority_class_name(job) == expected


def test_kubeflow_enqueue_writes_the_queuing_condition_on_status() -> None:
    """koord-queue tfjob.go / pytorchjob.go Enqueue(): Queuing True, "Job Enqueued"."""
    job = kubeflow_job("PyTorchJob", {"Worker": (1, template())})
    (patch,) = PYTORCH_JOB.enqueue(job, "go-now", "2026-01-01T00:00:00Z")
    assert patch.subresource == "status"
    (cond,) = patch.body["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["message"]) == ("Queuing", "True", "Job Enqueued")
    assert cond["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def test_kubeflow_enqueue_twice_writes_nothing() -> None:
    job = kubeflow_job("PyTorchJob", {}, conditions=[condition("Queuing")])
    assert PYTORCH_JOB.enqueue(job, "now") == ()


def test_kubeflow_resume_flips_the_condition_and_releases_the_job() -> None:
    """koord-queue pytorchjob.go Resume(): Queuing False "Job Dequeued", annotation "false",
    runPolicy.suspend false and the dequeue timestamp; other conditions are kept."""
    job = kubeflow_job("MPIJob", {}, conditions=[condition("Created"), condition("Queuing")])
    status_patch, spec_patch = MPI_JOB.resume(job, "go-now", "2026-01-02T00:00:00Z")
    assert isinstance(status_patch, WorkloadPatch) and isinstance(spec_patch, WorkloadPatch)
    conditions = status_patch.body["status"]["conditions"]
    assert [(c["type"], c["status"]) for c in conditions] == [
        ("Created", "True"),
        ("Queuing", "False"),
    ]
    assert conditions[1]["message"] == "Job Dequeued"
    assert spec_patch.body == {
        "metadata": {
            "annotations": {
                INTEGRATION_SUSPEND_ANNOTATION: "false",
                JOB_DEQUEUE_TIMESTAMP_ANNOTATION: "go-now",
            }
        },
        "spec": {"runPolicy": {"suspend": False}},
    }


def test_kubeflow_resume_of_a_running_job_writes_only_the_condition() -> None:
    job = kubeflow_job("PyTorchJob", {}, suspend=False, conditions=[condition("Queuing")])
    (only,) = PYTORCH_JOB.resume(job, "now")
    assert isinstance(only, WorkloadPatch) and only.subresource == "status"


def test_kubeflow_suspend_sets_the_annotation_and_run_policy() -> None:
    """koord-queue pytorchjob.go Suspend(): annotation "true" and runPolicy.suspend true."""
    job = kubeflow_job("PyTorchJob", {}, suspend=False)
    (patch,) = PYTORCH_JOB.suspend(job)
    assert patch == WorkloadPatch(
        {
            "metadata": {"annotations": {INTEGRATION_SUSPEND_ANNOTATION: "true"}},
            "spec": {"runPolicy": {"suspend": True}},
        }
    )
    assert PYTORCH_JOB.suspend(kubeflow_job("PyTorchJob", {})) == ()


def test_kubeflow_suspend_annotation_alone_holds_the_job() -> None:
    """koord-queue isJobSuspended(): the annotation "true" holds it whatever runPolicy says."""
    job = kubeflow_job(
        "PyTorchJob", {}, suspend=False, annotations={INTEGRATION_SUSPEND_ANNOTATION: "true"}
    )
    assert PYTORCH_JOB.is_suspended(job)


def test_pytorch_queue_unit_names_the_job_and_lists_both_roles() -> None:
    job = kubeflow_job(
        "PyTorchJob",
        {"Master": (1, template("2", "4Gi")), "Worker": (2, template("1", "2Gi"))},
    )
    unit = queue_unit_for(PYTORCH_JOB, [job])
    assert unit["metadata"]["name"] == "test-job-py-qu"  # Koord-Queue's QueueUnitSuffix()
    assert unit["spec"]["consumerRef"] == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "test-job",
        "namespace": "default",
        "uid": "uid-test-job",
    }
    assert unit["spec"]["resource"] == {"cpu": "4", "memory": "8Gi"}
    assert [(ps["name"], ps["count"]) for ps in unit["spec"]["podSet"]] == [
        ("master", 1),
        ("worker", 2),
    ]
    (owner,) = unit["metadata"]["ownerReferences"]
    assert owner["kind"] == "PyTorchJob" and owner["controller"] is True
