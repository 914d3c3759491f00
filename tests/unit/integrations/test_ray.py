"""RayJob and RayCluster: koord-queue pkg/jobext/handles/rayjob_test.go and raycluster_test.go
transcribed (inputs and expected outcomes), plus the bad input the issue names."""

from __future__ import annotations

import pytest

from koordqueue.domain.integrations import (
    RAY_CLUSTER,
    RAY_JOB,
    InvalidJobError,
    JobStatus,
    WorkloadPatch,
    queue_unit_for,
)
from koordqueue.domain.integrations.ray import group_pod_set_name
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION as DEQUEUE,
)
from koordqueue.domain.names import (
    JOB_ENQUEUE_TIMESTAMP_ANNOTATION as ENQUEUE,
)
from koordqueue.domain.resources import Resources
from tests.unit.integrations.kq_kinds import pod_template, raycluster, rayjob

NOW = "2026-01-01 00:00:00 +0000 UTC"


# --- RayJob (rayjob_test.go) ----------------------------------------------------------------
def test_rayjob_kind_and_suffix() -> None:
    """GVK: RayJob of ray.io/v1; QueueUnitSuffix without PAI_ENV: ray-qu."""
    w = RAY_JOB.workload
    assert (w.group, w.version, w.kind) == ("ray.io", "v1", "RayJob")
    assert RAY_JOB.unit_name(rayjob("test-rayjob")) == "test-rayjob-ray-qu"


@pytest.mark.parametrize(
    ("annotations", "suspend", "status", "managed"),
    [
        ({ENQUEUE: NOW}, True, None, True),
        ({}, True, None, True),
        ({}, True, {"startTime": "2026-01-01T00:00:00Z"}, False),
    ],
    ids=["enqueue timestamp", "no start time and suspended", "has start time"],
)
def test_rayjob_managed_by_queue(
    annotations: dict[str, str], suspend: bool, status: dict[str, str] | None, managed: bool
) -> None:
    """ManagedByQueue: "should return true when job has enqueue timestamp annotation", "...
    true when job has no start time and is suspended", "... false when job has start time"."""
    job = rayjob(suspend=suspend, annotations=annotations, status=status)
    assert RAY_JOB.is_managed(job) is managed


def test_rayjob_pod_sets_head_then_worker_groups() -> None:
    """PodSet: "should generate correct pod sets": head of 1, worker-group-1 of 2."""
    job = rayjob(workers=[("worker-group-1", 2, pod_template(cpu=None))])
    assert [(ps.name, ps.count) for ps in RAY_JOB.pod_sets([job])] == [
        ("head", 1),
        ("worker-group-1", 2),
    ]


def test_rayjob_pod_sets_with_empty_group_name() -> None:
    """PodSet: "should generate correct pod sets with empty group name": worker of 1."""
    job = rayjob(workers=[("", 1, pod_template(cpu=None))])
    assert [(ps.name, ps.count) for ps in RAY_JOB.pod_sets([job])] == [("head", 1), ("worker", 1)]


def test_rayjob_resources_head_plus_each_worker() -> None:
    """Resources: head 2 cpu 4Gi + 3 workers of 1 cpu 2Gi = 5 cpu, 10Gi."""
    job = rayjob(
        head=pod_template("2", "4Gi"), workers=[("worker-group-1", 3, pod_template("1", "2Gi"))]
    )
    assert RAY_JOB.resource([job]) == Resources.parse({"cpu": "5", "memory": "10Gi"})


def test_gen_ps_name_lowers_and_names_the_unnamed_group() -> None:
    """genPsName: WorkerGroup -> workergroup, "" -> worker, GROUP -> group."""
    assert [group_pod_set_name(g) for g in ("WorkerGroup", "", "GROUP")] == [
        "workergroup",
        "worker",
        "group",
    ]


def test_rayjob_priority() -> None:
    """Priority: no class -> "" and no value; a class that exists -> its value (1000); one that
    does not -> the name, and no value (0 here: the template gives none)."""
    classes = {"test-priority-class": 1000}.get
    assert RAY_JOB.priority_class_name(rayjob()) == ""
    assert RAY_JOB.priority(rayjob(), classes) == 0
    job = rayjob(head=pod_template(priority_class="test-priority-class"))
    assert RAY_JOB.priority_class_name(job) == "test-priority-class"
    assert RAY_JOB.priority(job, classes) == 1000
    missing = rayjob(head=pod_template(priority_class="nonexistent-priority-class"))
    assert RAY_JOB.priority_class_name(missing) == "nonexistent-priority-class"
    assert RAY_JOB.priority(missing, classes) == 0


def test_rayjob_suspend_and_resume() -> None:
    """Suspend: a running RayJob gets suspend true; a suspended one is left alone. Resume: a
    suspended one gets suspend false and a dequeue timestamp; a running one is left alone."""
    (hold,) = RAY_JOB.suspend(rayjob(suspend=False))
    assert isinstance(hold, WorkloadPatch) and hold.body["spec"] == {"suspend": True}
    assert RAY_JOB.suspend(rayjob(suspend=True)) == ()
    (release,) = RAY_JOB.resume(rayjob(suspend=True), NOW)
    assert isinstance(release, WorkloadPatch) and release.body["spec"] == {"suspend": False}
    assert release.body["metadata"]["annotations"][DEQUEUE] == NOW
    assert RAY_JOB.resume(rayjob(suspend=False), NOW) == ()


@pytest.mark.parametrize(
    ("status", "annotations", "expected"),
    [
        ({"jobDeploymentStatus": "Complete"}, {}, JobStatus.SUCCEEDED),
        ({"jobDeploymentStatus": "Failed"}, {}, JobStatus.FAILED),
        ({"jobDeploymentStatus": "Running"}, {}, JobStatus.RUNNING),
        (None, {DEQUEUE: NOW, ENQUEUE: NOW}, JobStatus.PENDING),
        (None, {ENQUEUE: NOW}, JobStatus.QUEUING),
        (None, {}, JobStatus.CREATED),
    ],
    ids=["complete", "failed", "running", "dequeued", "enqueued", "no timestamps"],
)
def test_rayjob_status(
    status: dict[str, str] | None, annotations: dict[str, str], expected: JobStatus
) -> None:
    """GetJobStatus, each "should return ..." case."""
    assert RAY_JOB.status([rayjob(annotations=annotations, status=status)]) is expected


def test_rayjob_enqueue_marks_it_once() -> None:
    """Enqueue: an enqueued job is not marked again; a new one gets the enqueue timestamp."""
    assert RAY_JOB.enqueue(rayjob(annotations={ENQUEUE: NOW}), NOW) == ()
    (mark,) = RAY_JOB.enqueue(rayjob(), NOW)
    assert mark.body["metadata"]["annotations"][ENQUEUE] == NOW


# --- RayCluster (raycluster_test.go) ----------------------------------------------------------
def test_raycluster_pod_sets_resources_suffix_priority() -> None:
    """PodSet: head of 1 and worker-group-1 of 2 (min 0, max 5); Resources: 5 cpu, 10Gi;
    QueueUnitSuffix: raycluster-qu; Priority: the head's class and its value (100)."""
    cluster = raycluster(workers=[("worker-group-1", 2, pod_template(cpu=None))])
    cluster["spec"]["workerGroupSpecs"][0].update(minReplicas=0, maxReplicas=5)
    assert [(p.name, p.count) for p in RAY_CLUSTER.pod_sets([cluster])] == [
        ("head", 1),
        ("worker-group-1", 2),
    ]
    sized = raycluster(
        head=pod_template("2", "4Gi"), workers=[("worker-group-1", 3, pod_template("1", "2Gi"))]
    )
    assert RAY_CLUSTER.resource([sized]) == Resources.parse({"cpu": "5", "memory": "10Gi"})
    assert RAY_CLUSTER.unit_name(sized) == "rc-raycluster-qu"
    classed = raycluster(head=pod_template(priority_class="test-priority-class", priority=100))
    assert RAY_CLUSTER.priority_class_name(classed) == "test-priority-class"
    assert RAY_CLUSTER.priority(classed, {"test-priority-class": 100}.get) == 100


def test_raycluster_suspend_and_resume() -> None:
    """Suspend: suspend false -> true; already true -> nothing. Resume: true -> false with a
    dequeue timestamp; false -> nothing."""
    (hold,) = RAY_CLUSTER.suspend(raycluster(suspend=False))
    assert isinstance(hold, WorkloadPatch) and hold.body["spec"] == {"suspend": True}
    assert RAY_CLUSTER.suspend(raycluster(suspend=True)) == ()
    (release,) = RAY_CLUSTER.resume(raycluster(suspend=True), NOW)
    assert isinstance(release, WorkloadPatch) and release.body["spec"] == {"suspend": False}
    assert release.body["metadata"]["annotations"][DEQUEUE] == NOW
    assert RAY_CLUSTER.resume(raycluster(suspend=False), NOW) == ()


@pytest.mark.parametrize(
    ("annotations", "status", "expected"),
    [
        ({}, {"readyWorkerReplicas": 1}, JobStatus.RUNNING),
        ({ENQUEUE: ""}, None, JobStatus.CREATED),
        ({ENQUEUE: NOW}, None, JobStatus.QUEUING),
        ({ENQUEUE: NOW, DEQUEUE: NOW}, {"readyWorkerReplicas": 0}, JobStatus.PENDING),
    ],
    ids=["worker ready", "not enqueued", "enqueued", "dequeued, no worker ready"],
)
def test_raycluster_status(
    annotations: dict[str, str], status: dict[str, int] | None, expected: JobStatus
) -> None:
    """GetJobStatus, each "should return ... status" case."""
    cluster = raycluster(annotations=annotations, status=status)
    assert RAY_CLUSTER.status([cluster]) is expected


def test_raycluster_managed_by_queue() -> None:
    """ManagedByQueue: owned by a RayJob -> false; labelled as originated from the RayCluster
    CRD -> false; enqueued -> true; suspended -> true. (Koord-Queue's managedAllJobs switch,
    "true when managing all jobs", has no counterpart here.)"""
    owned = raycluster()
    owned["metadata"]["ownerReferences"] = [{"kind": "RayJob", "name": "j", "uid": "u"}]
    assert not RAY_CLUSTER.is_managed(owned)
    labelled = raycluster()
    labelled["metadata"]["labels"]["ray.io/originated-from-crd"] = "RayCluster"
    assert not RAY_CLUSTER.is_managed(labelled)
    assert RAY_CLUSTER.is_managed(raycluster(suspend=None, annotations={ENQUEUE: "timestamp"}))
    assert RAY_CLUSTER.is_managed(raycluster(suspend=True))
    assert not RAY_CLUSTER.is_managed(raycluster(suspend=None))


def test_raycluster_ready_cluster_runs_as_kueue_reads_it() -> None:
    """Kueue's IsActive (state ready): a head-only cluster has no ready worker but runs."""
    cluster = raycluster(annotations={ENQUEUE: NOW, DEQUEUE: NOW}, status={"state": "ready"})
    assert RAY_CLUSTER.status([cluster]) is JobStatus.RUNNING


# --- counts and bad input -----------------------------------------------------------------
def test_worker_count_is_replicas_times_hosts_and_defaults_to_the_crds_zero() -> None:
    job = rayjob(workers=[("tpu", 2, pod_template("1")), ("idle", None, pod_template("1"))])
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["numOfHosts"] = 4
    assert [(p.name, p.count) for p in RAY_JOB.pod_sets([job])] == [
        ("head", 1),
        ("tpu", 8),
        ("idle", 0),
    ]
    assert RAY_JOB.resource([job]) == Resources.parse({"cpu": "9"})


@pytest.mark.parametrize(
    ("workers", "field"),
    [
        ([("w", -1, pod_template())], "spec.rayClusterSpec.workerGroupSpecs[0].replicas"),
        ([("head", 1, pod_template())], "spec.rayClusterSpec.workerGroupSpecs[0].groupName"),
        (
            [("W", 1, pod_template()), ("w", 1, pod_template())],
            "spec.rayClusterSpec.workerGroupSpecs[1].groupName",
        ),
    ],
    ids=["negative replicas", "a group named head", "two groups of one name"],
)
def test_bad_worker_groups_are_refused_naming_the_field(
    workers: list[tuple[str, int, dict[str, object]]], field: str
) -> None:
    with pytest.raises(InvalidJobError) as caught:
        queue_unit_for(RAY_JOB, [rayjob(workers=workers)])
    assert caught.value.field == field and caught.value.kind == "RayJob"


def test_limits_only_stand_in_for_requests() -> None:
    job = rayjob(head=pod_template("2", "1Gi", limits_only=True))
    assert RAY_JOB.resource([job]) == Resources.parse({"cpu": "2", "memory": "1Gi"})
