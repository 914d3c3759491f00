"""MPIJob v1alpha1: koord-queue pkg/jobext/handles/mpijob_v1alpha1_test.go transcribed (inputs
and expected outcomes; its annotations are the koord-queue/ ones the handle writes), plus the
bad input the issue names."""

from __future__ import annotations

import pytest

from koordqueue.domain.integrations import (
    MPI_JOB,
    InvalidJobError,
    JobStatus,
    WorkloadPatch,
    by_kind,
    queue_unit_for,
)
from koordqueue.domain.integrations import (
    MPI_JOB_V1ALPHA1 as MPI,
)
from koordqueue.domain.names import (
    INTEGRATION_SUSPEND_ANNOTATION as HOLD,
)
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION as DEQUEUE,
)
from koordqueue.domain.names import (
    JOB_ENQUEUE_TIMESTAMP_ANNOTATION as ENQUEUE,
)
from koordqueue.domain.names import (
    JOB_HAS_ENQUEUED_ANNOTATION as ENQUEUED,
)
from koordqueue.domain.resources import Resources
from tests.unit.integrations.kq_kinds import mpijob_v1alpha1, pod_template

NOW = "2026-01-01 00:00:00 +0000 UTC"


def test_kind_version_suffix_and_the_v2beta1_twin() -> None:
    """GVK: kubeflow.org/v1alpha1 MPIJob; QueueUnitSuffix: mpi-qu. The same kind at v2beta1
    is MPI_JOB's: each version finds its own integration."""
    w = MPI.workload
    assert (w.group, w.version, w.kind) == ("kubeflow.org", "v1alpha1", "MPIJob")
    assert MPI.unit_name(mpijob_v1alpha1("test-job")) == "test-job-mpi-qu"
    assert by_kind("MPIJob", "kubeflow.org/v1alpha1") is MPI
    assert by_kind("MPIJob", "kubeflow.org/v2beta1") is MPI_JOB


def test_pod_set_named_after_the_job() -> None:
    """PodSet: one pod set named test-job of 4."""
    job = mpijob_v1alpha1("test-job", replicas=4, template=pod_template(cpu=None))
    assert [(p.name, p.count) for p in MPI.pod_sets([job])] == [("test-job", 4)]


def test_resources() -> None:
    """Resources: 4 workers of 1 cpu, 2Gi = 4 cpu, 8Gi."""
    job = mpijob_v1alpha1(replicas=4, template=pod_template("1", "2Gi"))
    assert MPI.resource([job]) == Resources.parse({"cpu": "4", "memory": "8Gi"})


def test_priority() -> None:
    """Priority: the template's class (test-priority-class) and its value (100)."""
    job = mpijob_v1alpha1(template=pod_template(priority_class="test-priority-class", priority=100))
    assert MPI.priority_class_name(job) == "test-priority-class"
    assert MPI.priority(job, {"test-priority-class": 100}.get) == 100
    assert MPI.priority(job) == 100  # no such class: the template's own priority


def test_enqueue() -> None:
    """Enqueue: "should not enqueue already enqueued job"; "should enqueue job correctly"
    (has-enqueued "true" and an enqueue timestamp)."""
    assert MPI.enqueue(mpijob_v1alpha1(annotations={ENQUEUED: "true"}), NOW) == ()
    (mark,) = MPI.enqueue(mpijob_v1alpha1(), NOW)
    assert mark.body["metadata"]["annotations"] == {ENQUEUED: "true", ENQUEUE: NOW}


def test_suspend_and_resume() -> None:
    """Suspend: already suspended -> nothing; else the hold annotation "true". Resume: not
    held ("false") -> nothing; held -> the annotation removed and the dequeue time set."""
    assert MPI.suspend(mpijob_v1alpha1(annotations={HOLD: "true"})) == ()
    (hold,) = MPI.suspend(mpijob_v1alpha1(suspended=False))
    assert isinstance(hold, WorkloadPatch)
    assert hold.body["metadata"]["annotations"][HOLD] == "true"
    assert MPI.resume(mpijob_v1alpha1(suspended=False, annotations={HOLD: "false"}), NOW) == ()
    (release,) = MPI.resume(mpijob_v1alpha1(annotations={HOLD: "true"}), NOW)
    assert isinstance(release, WorkloadPatch)
    assert release.body["metadata"]["annotations"] == {HOLD: None, DEQUEUE: NOW}


@pytest.mark.parametrize(
    ("launcher", "annotations", "expected"),
    [
        ("Succeeded", {}, JobStatus.SUCCEEDED),
        ("Failed", {}, JobStatus.FAILED),
        ("Active", {}, JobStatus.RUNNING),
        ("", {ENQUEUE: NOW, DEQUEUE: NOW, HOLD: "false"}, JobStatus.PENDING),
        ("", {ENQUEUED: "true", ENQUEUE: NOW, HOLD: "true"}, JobStatus.QUEUING),
        ("", {HOLD: "true"}, JobStatus.CREATED),
    ],
    ids=["succeeded", "failed", "running", "pending", "queuing", "created"],
)
def test_status(launcher: str, annotations: dict[str, str], expected: JobStatus) -> None:
    """GetJobStatus, each "should return ... status" case (created: the reference's job has
    no annotation at all and so reads Pending there; held here, as a new queued job is)."""
    job = mpijob_v1alpha1(suspended=False, annotations=annotations, launcher_status=launcher)
    assert MPI.status([job]) is expected


def test_no_hold_annotation_reads_released() -> None:
    """The reference's rule behind its "created" case: no annotation means released."""
    assert MPI.status([mpijob_v1alpha1(suspended=False)]) is JobStatus.PENDING


@pytest.mark.parametrize(
    ("annotations", "launcher", "managed"),
    [
        ({ENQUEUED: "true"}, None, True),
        ({HOLD: "true"}, "", True),
        ({HOLD: "true"}, "Active", False),
    ],
    ids=["enqueue annotation", "no launcher status and suspended", "has launcher status"],
)
def test_managed_by_queue(annotations: dict[str, str], launcher: str | None, managed: bool) -> None:
    """ManagedByQueue, each case (managedAllJobs has no counterpart here)."""
    job = mpijob_v1alpha1(suspended=False, annotations=annotations, launcher_status=launcher)
    assert MPI.is_managed(job) is managed


@pytest.mark.parametrize(
    ("replicas", "why"),
    [(None, "must be set"), (-2, "must not be negative")],
    ids=["replicas missing (gpus sizing)", "negative replicas"],
)
def test_replicas_are_required_and_whole(replicas: int | None, why: str) -> None:
    """Koord-Queue dereferences spec.replicas (a job sized by spec.gpus crashes its handle);
    here it is a clear refusal naming the field."""
    job = mpijob_v1alpha1(replicas=replicas)
    if replicas is None:
        job["spec"]["gpus"] = 8
    with pytest.raises(InvalidJobError, match=why) as caught:
        queue_unit_for(MPI, [job])
    assert caught.value.field == "spec.replicas"


def test_limits_only_stand_in_for_requests() -> None:
    job = mpijob_v1alpha1(replicas=2, template=pod_template("1", limits_only=True))
    assert MPI.resource([job]) == Resources.parse({"cpu": "2"})
