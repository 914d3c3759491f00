"""TrainJob (trainer.kubeflow.org/v1alpha1): pod sets from its runtime's JobSet template with
the TrainJob's overrides, as Kueue v0.17.0 reads them (pkg/controller/jobs/trainjob: its
TestReconciler and TestRunWithPodsetsInfo cases; the trainer v2.2.0 runtime rules Kueue
calls: numNodes per ML policy, initializer and trainer replicas, resourcesPerNode), its hold,
its state, and bad input (an InvalidJobError naming the field, never a unit)."""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.domain.integrations import (
    INTEGRATIONS,
    TRAIN_JOB,
    InvalidJobError,
    JobStatus,
    WorkloadPatch,
    by_kind,
    parse_integrations,
    queue_unit_for,
)
from koordqueue.domain.integrations.trainjob import TrainJob
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
)
from koordqueue.domain.resources import Resources
from tests.unit.integrations.trainer_kinds import (
    Obj,
    kueue_runtime,
    node_template,
    replicated_job,
    runtime,
    trainjob,
)


def bound(job: Obj, *runtimes: Obj) -> TrainJob:
    """TRAIN_JOB reading `runtimes` as the API has them (what the kube edge hands it)."""
    found: dict[Any, Obj | None] = {}
    for ref in TRAIN_JOB.references(job):
        found[ref] = next(
            (
                r for r in runtimes
                if r["kind"] == ref.kind.kind and r["metadata"]["name"] == ref.name
                and r["metadata"].get("namespace") == ref.namespace
            ),
            None,
        )
    return TRAIN_JOB.resolved(found)


def counts(job: Obj, *runtimes: Obj) -> list[tuple[str, int]]:
    return [(p.name, p.count) for p in bound(job, *runtimes).pod_sets([job])]


def condition(kind: str, status: str = "True") -> Obj:
    return {"type": kind, "status": status}


# --- the registry -------------------------------------------------------------------------
def test_served_under_kueues_framework_name() -> None:
    assert INTEGRATIONS["trainer.kubeflow.org/trainjob"] is TRAIN_JOB
    assert parse_integrations("trainer.kubeflow.org/trainjob") == (TRAIN_JOB,)
    assert by_kind("TrainJob", "trainer.kubeflow.org/v1alpha1") is TRAIN_JOB
    assert TRAIN_JOB.workload.plural == "trainjobs"
    assert TRAIN_JOB.unit_name(trainjob(name="train")) == "train-tj-qu"


# --- Kueue's TestReconciler -----------------------------------------------------------------
def test_kueue_workload_is_created_with_the_corresponding_podsets() -> None:
    assert counts(trainjob(), kueue_runtime()) == [("node", 1), ("foo", 1)]


def test_kueue_podset_count_for_the_trainer_job_is_trainer_num_nodes() -> None:
    assert counts(trainjob(num_nodes=2), kueue_runtime()) == [("node", 2), ("foo", 1)]


def test_kueue_unknown_training_runtime_is_an_error() -> None:
    """Kueue's RunWithPodSetsInfo: "should return an error if the trainjob references an
    unknown training runtime"; here the unit is never made and the error names the field."""
    job = trainjob(runtime_name="nowhere")
    with pytest.raises(InvalidJobError) as err:
        queue_unit_for(bound(job, kueue_runtime()), [job])
    assert err.value.field == "spec.runtimeRef"
    assert "ClusterTrainingRuntime 'nowhere' not found" in str(err.value)
    assert err.value.kind == "TrainJob"


def test_the_registrys_own_instance_has_read_no_runtime() -> None:
    with pytest.raises(InvalidJobError, match="not found"):
        TRAIN_JOB.pod_sets([trainjob()])


# --- which runtime ---------------------------------------------------------------------------
def test_a_cluster_runtime_is_cluster_scoped_and_the_default_kind() -> None:
    (ref,) = TRAIN_JOB.references(trainjob(runtime_kind=None))
    assert (ref.kind.kind, ref.kind.plural, ref.name, ref.namespace) == (
        "ClusterTrainingRuntime", "clustertrainingruntimes", "test", None,
    )


def test_a_training_runtime_is_read_in_the_trainjobs_namespace() -> None:
    job = trainjob(runtime_kind="TrainingRuntime", namespace="team")
    (ref,) = TRAIN_JOB.references(job)
    assert (ref.kind.plural, ref.namespace) == ("trainingruntimes", "team")
    rt = runtime(replicated_job("node", ancestor="trainer"), namespace="team")
    assert counts(job, rt) == [("node", 1)]
    other_ns = runtime(replicated_job("node", ancestor="trainer"), namespace="elsewhere")
    with pytest.raises(InvalidJobError, match="TrainingRuntime 'test' not found"):
        counts(job, other_ns)


# --- the trainer's runtime rules (v2.2.0, which Kueue's PodSets calls) ------------------------
def test_ml_policy_num_nodes_sizes_the_trainer_job_unless_the_trainjob_says() -> None:
    rt = runtime(
        replicated_job("node", parallelism=5, ancestor="trainer"),
        replicated_job("other", parallelism=3, replicas=2),
        ml_policy={"numNodes": 4, "torch": {}},
    )
    assert counts(trainjob(), rt) == [("node", 4), ("other", 6)]
    assert counts(trainjob(num_nodes=7), rt) == [("node", 7), ("other", 6)]


def test_without_an_ml_policy_the_trainer_job_takes_its_parallelism() -> None:
    rt = runtime(replicated_job("node", parallelism=3, ancestor="trainer"))
    assert counts(trainjob(), rt) == [("node", 3)]
    assert counts(trainjob(num_nodes=2), rt) == [("node", 2)]  # plainml's override


def test_trainer_and_initializer_jobs_run_one_replica() -> None:
    rt = runtime(
        replicated_job("dataset-initializer", replicas=3, ancestor="dataset-initializer"),
        replicated_job("model-initializer", replicas=2, ancestor="model-initializer"),
        replicated_job("node", replicas=4, ancestor="trainer"),
        replicated_job("sidecar", replicas=2),
    )
    assert counts(trainjob(num_nodes=3), rt) == [
        ("dataset-initializer", 1), ("model-initializer", 1), ("node", 3), ("sidecar", 2),
    ]


def test_mpi_num_nodes_sizes_the_job_named_node() -> None:
    launcher = replicated_job("launcher", ancestor="trainer")
    node = replicated_job("node")
    rt = runtime(launcher, node, ml_policy={"numNodes": 1, "mpi": {}})
    assert counts(trainjob(num_nodes=4), rt) == [("launcher", 1), ("node", 4)]


def test_mpi_launcher_as_node_leaves_one_node_to_the_launcher() -> None:
    rt = runtime(
        replicated_job("launcher", ancestor="trainer", pod_template=node_template("1")),
        replicated_job("node", pod_template=node_template("1")),
        ml_policy={"numNodes": 1, "mpi": {"runLauncherAsNode": True}},
    )
    assert counts(trainjob(num_nodes=4), rt) == [("launcher", 1), ("node", 3)]
    assert counts(trainjob(num_nodes=1), rt) == [("launcher", 1), ("node", 1)]  # at least 1
    per_node = {"requests": {"cpu": "3"}}
    sets = bound(job := trainjob(num_nodes=2, resources_per_node=per_node), rt).pod_sets([job])
    assert [p.request.to_quantities()["cpu"] for p in sets] == ["3", "3"]


def test_resources_per_node_replaces_the_trainer_node_containers_resources() -> None:
    trainer_pod = {
        "spec": {
            "containers": [
                {"name": "node", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "helper", "resources": {"requests": {"cpu": "500m"}}},
            ]
        }
    }
    rt = runtime(
        replicated_job("node", ancestor="trainer", pod_template=trainer_pod),
        replicated_job("other", pod_template=node_template("2")),  # not the trainer's
    )
    job = trainjob(num_nodes=2, resources_per_node={"limits": {"cpu": "4", "nvidia.com/gpu": "1"}})
    unit = queue_unit_for(bound(job, rt), [job])
    # node: (4 cpu from limits, 1 gpu; helper 0.5 cpu; the runtime's memory gone) x 2; other: 2
    assert Resources.parse(unit["spec"]["resource"]) == Resources.parse(
        {"cpu": "11", "nvidia.com/gpu": "2"}
    )
    node_containers = unit["spec"]["podSet"][0]["template"]["spec"]["containers"]
    assert node_containers[0]["resources"] == {"limits": {"cpu": "4", "nvidia.com/gpu": "1"}}
    assert rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"  # runtime untouched


def test_empty_resources_per_node_keeps_the_runtimes() -> None:
    job = trainjob(resources_per_node={})
    (node, _) = bound(job, kueue_runtime()).pod_sets([job])
    assert node.request.to_quantities() == {"cpu": "1"}


def test_a_runtime_patch_label_can_make_a_job_the_trainer() -> None:
    """runtimePatches merge into the Job templates before the ancestor is read (trainer's
    mergeRuntimePatches); nothing else in a patch can change a count or a request."""
    rt = runtime(replicated_job("worker", parallelism=2))
    patch = {
        "manager": "example.com/user",
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": "worker", "template": {"metadata": {"labels": {
                "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}}},
        ]}}},
    }
    assert counts(trainjob(num_nodes=5), rt) == [("worker", 2)]
    assert counts(trainjob(num_nodes=5, runtime_patches=[patch]), rt) == [("worker", 5)]


def test_unit_resource_is_the_sum_over_pod_sets() -> None:
    job = trainjob(num_nodes=3)
    unit = queue_unit_for(bound(job, kueue_runtime()), [job])
    assert unit["spec"]["resource"] == {"cpu": "4"}  # node 3 x 1 + foo 1 x 1
    assert unit["spec"]["consumerRef"]["kind"] == "TrainJob"
    assert [(p["name"], p["count"]) for p in unit["spec"]["podSet"]] == [("node", 3), ("foo", 1)]


def test_priority_class_is_read_from_the_runtimes_templates() -> None:
    rt = runtime(
        replicated_job("init", pod_template=node_template("1")),
        replicated_job("node", ancestor="trainer",
                       pod_template=node_template("1", priorityClassName="high")),
    )
    job = trainjob()
    unit = queue_unit_for(bound(job, rt), [job], {"high": 100}.get)
    assert (unit["spec"]["priorityClassName"], unit["spec"]["priority"]) == ("high", 100)
    assert TRAIN_JOB.priority_class_name(job) == ""  # unbound: nothing read, no guess


# --- holding and state (Kueue's IsSuspended / IsActive / Finished / PodsReady) ----------------
def test_held_and_released_by_spec_suspend() -> None:
    job = trainjob(suspend=True)
    assert TRAIN_JOB.is_suspended(job) and TRAIN_JOB.is_managed(job)
    (resume,) = TRAIN_JOB.resume(job, "now")
    assert isinstance(resume, WorkloadPatch)
    assert resume.body["spec"] == {"suspend": False}
    assert resume.body["metadata"]["annotations"] == {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: "now"}
    released = trainjob(suspend=False, annotations={JOB_HAS_ENQUEUED_ANNOTATION: "true"})
    (suspend,) = TRAIN_JOB.suspend(released)
    assert isinstance(suspend, WorkloadPatch) and suspend.body["spec"] == {"suspend": True}
    assert TRAIN_JOB.resume(released, "now") == () and TRAIN_JOB.suspend(job) == ()


def test_a_trainjob_created_running_is_not_the_queues() -> None:
    running = trainjob(suspend=False, jobs_status=[{"name": "node", "active": 1}])
    assert not TRAIN_JOB.is_managed(running)


@pytest.mark.parametrize(
    ("job", "status"),
    [
        (trainjob(conditions=[condition("Complete")]), JobStatus.SUCCEEDED),
        (trainjob(conditions=[condition("Failed")]), JobStatus.FAILED),
        (trainjob(conditions=[condition("Complete", "False")]), JobStatus.CREATED),
        (trainjob(jobs_status=[{"name": "node", "ready": 1}]), JobStatus.RUNNING),
        (trainjob(jobs_status=[{"name": "node", "active": 2}]), JobStatus.PENDING),
        (trainjob(annotations={JOB_HAS_ENQUEUED_ANNOTATION: "true"}), JobStatus.QUEUING),
        (trainjob(annotations={JOB_DEQUEUE_TIMESTAMP_ANNOTATION: "t"}), JobStatus.PENDING),
        (trainjob(), JobStatus.CREATED),
    ],
    ids=["complete", "failed", "complete-false", "ready", "active", "enqueued", "released",
         "new"],
)
def test_state(job: Obj, status: JobStatus) -> None:
    assert TRAIN_JOB.status([job], bool(TRAIN_JOB.pod_running([job]))) is status


# --- bad input: the field named, no unit ------------------------------------------------------
@pytest.mark.parametrize(
    ("job", "rt", "field"),
    [
        (trainjob(num_nodes=-1), kueue_runtime(), "spec.trainer.numNodes"),
        (trainjob(num_nodes="2"), kueue_runtime(), "spec.trainer.numNodes"),
        (trainjob(runtime_name=""), kueue_runtime(), "spec.runtimeRef.name"),
        (trainjob(runtime_kind="JobSet"), kueue_runtime(), "spec.runtimeRef.kind"),
        (trainjob(resources_per_node={"requests": {"cpu": "lots"}}), kueue_runtime(),
         "spec.trainer.resourcesPerNode.requests"),
        (trainjob(), runtime(), "spec.runtimeRef"),  # no replicated Jobs
        (trainjob(), runtime(replicated_job("w", replicas=-2)),
         "ClusterTrainingRuntime test: spec.template.spec.replicatedJobs[0].replicas"),
        (trainjob(), runtime(replicated_job("w", parallelism=1.5)),  # type: ignore[arg-type]
         "spec.template.spec.replicatedJobs[0].template.spec.parallelism"),
        (trainjob(), runtime(replicated_job("w", pod_template=node_template("x"))),
         "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0]"),
    ],
    ids=["negative-nodes", "string-nodes", "no-runtime-name", "unsupported-kind",
         "bad-quantity", "no-jobs", "negative-replicas", "fractional-parallelism",
         "bad-runtime-quantity"],
)
def test_bad_input_names_the_field_and_makes_no_unit(job: Obj, rt: Obj, field: str) -> None:
    with pytest.raises(InvalidJobError) as err:
        queue_unit_for(bound(job, rt), [job])
    assert field in f"{err.value.field}", err.value
    assert err.value.key == "ns/trainjob" and err.value.kind == "TrainJob"


def test_requests_in_limits_only_count_as_requests() -> None:
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]}}
    job = trainjob()
    rt = runtime(replicated_job("w", replicas=2, pod_template=pod))
    assert queue_unit_for(bound(job, rt), [job])["spec"]["resource"] == {"cpu": "4"}
