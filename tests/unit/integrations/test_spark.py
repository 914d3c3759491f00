"""SparkApplication: koord-queue pkg/jobext/handles/sparkapp_test.go transcribed (inputs and
expected outcomes), plus the bad input the issue names."""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.domain.integrations import (
    SPARK_APPLICATION as SPARK,
)
from koordqueue.domain.integrations import (
    InvalidJobError,
    JobStatus,
    WorkloadPatch,
    queue_unit_for,
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
from koordqueue.domain.resources import Resources
from tests.unit.integrations.kq_kinds import spark_role, sparkapp

NOW = "2026-01-01 00:00:00 +0000 UTC"


def test_kind_suffix_and_pod_set_names() -> None:
    """GVK: sparkoperator.k8s.io/v1beta2 SparkApplication; QueueUnitSuffix: spark-qu."""
    w = SPARK.workload
    assert (w.group, w.version, w.kind) == ("sparkoperator.k8s.io", "v1beta2", "SparkApplication")
    assert SPARK.unit_name(sparkapp("test-spark")) == "test-spark-spark-qu"


def test_cluster_mode_pod_sets() -> None:
    """PodSet: "should generate correct pod sets for cluster mode": driver 1, executor 2."""
    app = sparkapp(driver=spark_role(1, "2g"), executor=spark_role(1, "1g"), instances=2)
    assert {(p.name, p.count) for p in SPARK.pod_sets([app])} == {("driver", 1), ("executor", 2)}


def test_client_mode_has_executors_only() -> None:
    """PodSet: "should generate only executor pod set for client mode": executor 3."""
    app = sparkapp(mode="client", executor=spark_role(1, "1g"), instances=3)
    assert [(p.name, p.count) for p in SPARK.pod_sets([app])] == [("executor", 3)]


def test_cluster_mode_resources() -> None:
    """Resources, cluster mode: driver 2 cores 4g + 2 executors of 1 core 2g = 4 cpu, 8Gi."""
    app = sparkapp(driver=spark_role(2, "4g"), executor=spark_role(1, "2g"), instances=2)
    assert SPARK.resource([app]) == Resources.parse({"cpu": "4", "memory": "8Gi"})


def test_client_mode_resources() -> None:
    """Resources, client mode: 3 executors of 2 cores 2g = 6 cpu, 6Gi (no driver)."""
    app = sparkapp(mode="client", executor=spark_role(2, "2g"), instances=3)
    assert SPARK.resource([app]) == Resources.parse({"cpu": "6", "memory": "6Gi"})


def test_priority_from_batch_scheduler_options() -> None:
    """Priority: none -> "" and no value; high-priority that exists -> 1000."""
    assert SPARK.priority_class_name(sparkapp()) == ""
    assert SPARK.priority(sparkapp(), {"high-priority": 1000}.get) == 0
    app = sparkapp(priority_class="high-priority")
    assert SPARK.priority_class_name(app) == "high-priority"
    assert SPARK.priority(app, {"high-priority": 1000}.get) == 1000


def test_enqueue_sets_the_timestamp_once() -> None:
    """Enqueue: "should set enqueue timestamp"; "should skip if already enqueued"."""
    (mark,) = SPARK.enqueue(sparkapp(), NOW)
    assert mark.body["metadata"]["annotations"][ENQUEUE] == NOW
    assert SPARK.enqueue(sparkapp(annotations={ENQUEUE: "already-set"}), NOW) == ()


def test_suspend_and_resume() -> None:
    """Suspend: "should set queue annotation to true", "should skip if already suspended";
    Resume: "should set queue annotation to false for suspended job", "should skip if not
    suspended". The upstream operator's spec.suspend is written with it."""
    (hold,) = SPARK.suspend(sparkapp(suspended=False))
    assert isinstance(hold, WorkloadPatch)
    assert hold.body["metadata"]["annotations"][HOLD] == "true"
    assert hold.body["spec"] == {"suspend": True}
    assert SPARK.suspend(sparkapp(annotations={HOLD: "true"})) == ()
    (release,) = SPARK.resume(sparkapp(annotations={HOLD: "true"}), NOW)
    assert isinstance(release, WorkloadPatch)
    assert release.body["metadata"]["annotations"] == {HOLD: "false", DEQUEUE: NOW}
    assert release.body["spec"] == {"suspend": False}
    assert SPARK.resume(sparkapp(suspended=False, annotations={HOLD: "false"}), NOW) == ()


@pytest.mark.parametrize(
    ("state", "annotations", "expected"),
    [
        ("COMPLETED", {}, JobStatus.SUCCEEDED),
        ("FAILED", {}, JobStatus.FAILED),
        ("RUNNING", {}, JobStatus.RUNNING),
        (None, {HOLD: "false", DEQUEUE: NOW}, JobStatus.PENDING),
        (None, {ENQUEUE: NOW, HOLD: "true"}, JobStatus.QUEUING),
        (None, {HOLD: "true"}, JobStatus.CREATED),
    ],
    ids=["completed", "failed", "running", "not queued", "queued", "new"],
)
def test_status(state: str | None, annotations: dict[str, str], expected: JobStatus) -> None:
    """GetJobStatus, each "should return ... status" case (the reference's spec carries only
    the annotation; spec.suspend follows it here)."""
    held = annotations.get(HOLD) == "true"
    app = sparkapp(suspended=held, annotations=annotations, state=state)
    assert SPARK.status([app]) is expected


@pytest.mark.parametrize("state", ["FAILING", "SUCCEEDING"])
def test_failing_and_succeeding_still_run(state: str) -> None:
    assert SPARK.status([sparkapp(state=state)]) is JobStatus.RUNNING


@pytest.mark.parametrize(
    ("app", "managed"),
    [
        (sparkapp(suspended=False, annotations={ENQUEUE: "some-timestamp"}), True),
        (sparkapp(annotations={HOLD: "true"}), True),
        (sparkapp(suspended=False), False),
    ],
    ids=["enqueue timestamp", "new and queued", "not managed"],
)
def test_managed_by_queue(app: dict[str, Any], managed: bool) -> None:
    """ManagedByQueue: "true when enqueue timestamp exists", "true when application is new and
    queued", "false when not managed"."""
    assert SPARK.is_managed(app) is managed


def test_a_submitted_app_is_not_taken_by_the_queue() -> None:
    assert not SPARK.is_managed(sparkapp(state="SUBMITTED"))


# --- Spark's own fields ---------------------------------------------------------------------
def test_core_request_wins_over_cores_and_core_limit_stands_in() -> None:
    app = sparkapp(
        driver=spark_role(4, "1g", coreRequest="500m"),
        executor=spark_role(None, "512m", coreLimit="2"),
        instances=2,
    )
    assert SPARK.resource([app]) == Resources.parse({"cpu": "4500m", "memory": "2Gi"})


def test_memory_overhead_and_gpu_are_asked_for() -> None:
    executor = spark_role(
        1, "1g", memoryOverhead="512m", gpu={"name": "nvidia.com/gpu", "quantity": 1}
    )
    app = sparkapp(mode="client", executor=executor, instances=2)
    assert SPARK.resource([app]) == Resources.parse(
        {"cpu": "2", "memory": "3Gi", "nvidia.com/gpu": "2"}
    )


def test_initial_executors_when_instances_are_not_given() -> None:
    app = sparkapp(mode="client", instances=None)
    app["spec"]["dynamicAllocation"] = {"enabled": True, "initialExecutors": 3}
    assert [(p.name, p.count) for p in SPARK.pod_sets([app])] == [("executor", 3)]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"instances": -1}, "spec.executor.instances"),
        ({"mode": "local"}, "spec.mode"),
        ({"executor": spark_role(1, "lots")}, "spec.executor.memory"),
        ({"driver": spark_role(1, gpu={"name": "nvidia.com/gpu"})}, "spec.driver.gpu.quantity"),
    ],
    ids=["negative instances", "unknown mode", "bad memory", "gpu without a quantity"],
)
def test_bad_input_is_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidJobError) as caught:
        queue_unit_for(SPARK, [sparkapp(**change)])
    assert caught.value.field == field and caught.value.kind == "SparkApplication"
