"""SPEC 2.6: the batch/v1 Job extension's rules, without a cluster."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain.job_extension import (
    InvalidJobError,
    JobAction,
    JobStatus,
    backoff_delay,
    enqueue_patch,
    go_time_string,
    is_managed,
    job_resource,
    job_status,
    pod_requests,
    pod_set_count,
    queue_unit_for_job,
    reconcile_job,
    resume_patch,
    suspend_patch,
)
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_ENQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
    LAST_APPLIED_ANNOTATION,
)
from koordqueue.domain.queue_unit import Phase, queue_unit_from_object
from koordqueue.domain.resources import Resources


def container(
    cpu: str | None = None,
    memory: str | None = None,
    limits: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


def job(
    parallelism: int | None = 1,
    completions: int | None = None,
    succeeded: int = 0,
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": containers or [container("1", "1Gi")]}
    if init:
        pod["initContainers"] = init
    if priority_class:
        pod["priorityClassName"] = priority_class
    spec: dict[str, Any] = {"suspend": True, "template": {"spec": pod}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "uid-1",
            "labels": {"quota.scheduling.koordinator.sh/name": "q", "x": "y"},
            "annotations": {"a": "b"},
        },
        "spec": spec,
        "status": {"succeeded": succeeded},
    }


def test_resource_is_parallelism_times_the_pod_request() -> None:
    assert job_resource(job(parallelism=3)) == Resources.of(cpu="3", memory="3Gi")


def test_parallelism_defaults_to_one() -> None:
    assert job_resource(job(parallelism=None)) == Resources.of(cpu="1", memory="1Gi")


def test_containers_are_summed() -> None:
    pod = {"containers": [container("500m", "1Gi"), container("250m", "512Mi")]}
    assert pod_requests(pod) == Resources.of(cpu="750m", memory="1536Mi")


def test_init_containers_follow_the_max_rule() -> None:
    pod = {
        "containers": [container("1", "1Gi")],
        "initContainers": [container("2", "512Mi"), container("500m", "4Gi")],
    }
    assert pod_requests(pod) == Resources.of(cpu="2", memory="4Gi")


def test_sidecar_init_containers_add_to_the_app_containers() -> None:
    pod = {
        "containers": [container("1")],
        "initContainers": [container("500m", restartPolicy="Always")],
    }
    assert pod_requests(pod) == Resources.of(cpu="1500m")


def test_limits_stand_in_for_missing_requests() -> None:
    pod = {"containers": [container(limits={"cpu": "2", "nvidia.com/gpu": "1"})]}
    assert pod_requests(pod) == Resources.of({"cpu": "2", "nvidia.com/gpu": "1"})


def test_pod_overhead_is_added() -> None:
    pod = {"containers": [container("1")], "overhead": {"cpu": "100m"}}
    assert pod_requests(pod) == Resources.of(cpu="1100m")


def test_pod_set_count_is_min_of_parallelism_and_remaining_completions() -> None:
    assert pod_set_count(job(parallelism=4, completions=10, succeeded=8)) == 2
    assert pod_set_count(job(parallelism=4, completions=10)) == 4
    assert pod_set_count(job(parallelism=4)) == 4


def test_completions_default_to_parallelism_so_succeeded_pods_are_not_asked_for_again() -> None:
    assert pod_set_count(job(parallelism=4, succeeded=1)) == 3


def test_pod_set_count_is_never_negative() -> None:
    assert pod_set_count(job(parallelism=2, completions=3, succeeded=5)) == 0


def test_pod_set_is_named_after_the_job() -> None:
    assert queue_unit_for_job(job(), lambda name: None)["spec"]["podSet"][0]["name"] == "j"


def test_bad_quantity_in_the_pod_template_names_the_field() -> None:
    bad = job(containers=[container("lots")])
    with pytest.raises(InvalidJobError, match=r"containers\[0\]\.resources\.requests\.cpu"):
        job_resource(bad)


def test_queue_unit_copies_metadata_and_points_at_its_job() -> None:
    unit = queue_unit_for_job(job(parallelism=2), lambda name: None)
    assert unit["metadata"]["name"] == "j" and unit["metadata"]["namespace"] == "ns"
    assert unit["metadata"]["labels"] == {"quota.scheduling.koordinator.sh/name": "q", "x": "y"}
    assert unit["metadata"]["annotations"] == {"a": "b"}
    owner = unit["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Job", "uid-1", True)
    assert unit["spec"]["consumerRef"]["uid"] == "uid-1"
    assert unit["spec"]["queue"] == ""
    assert unit["spec"]["resource"] == {"cpu": "2", "memory": "2Gi"}
    assert unit["spec"]["podSet"][0]["count"] == 2
    assert unit["spec"]["priority"] == 0


def test_priority_comes_from_the_pod_priority_class() -> None:
    unit = queue_unit_for_job(job(priority_class="high"), {"high": 100}.get)
    assert unit["spec"]["priority"] == 100 and unit["spec"]["priorityClassName"] == "high"


def test_an_existing_priority_class_wins_over_the_templates_priority() -> None:
    obj = job(priority_class="high")
    obj["spec"]["template"]["spec"]["priority"] = 7
    assert queue_unit_for_job(obj, {"high": 100}.get)["spec"]["priority"] == 100
    assert queue_unit_for_job(obj, lambda name: None)["spec"]["priority"] == 7


def test_unknown_priority_class_means_priority_zero() -> None:
    assert (
        queue_unit_for_job(job(priority_class="ghost"), lambda name: None)["spec"]["priority"] == 0
    )


def test_generated_unit_parses_back_into_the_domain_model() -> None:
    obj = queue_unit_for_job(job(parallelism=2), lambda name: None)
    obj["metadata"]["uid"] = "unit-uid"
    unit = queue_unit_from_object(obj)
    assert unit.resource == Resources.of(cpu="2", memory="2Gi")
    assert unit.phase is Phase.ENQUEUED


def annotated(annotations: dict[str, str], **status: Any) -> dict[str, Any]:
    obj = job()
    obj["metadata"]["annotations"] = annotations
    obj["status"] = status
    return obj


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"conditions": [{"type": "Complete", "status": "True"}]}, JobStatus.SUCCEEDED),
        ({"conditions": [{"type": "Failed", "status": "True"}]}, JobStatus.FAILED),
        ({"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}, JobStatus.CREATED),
        ({"conditions": [{"type": "FailureTarget", "status": "True"}]}, JobStatus.CREATED),
        ({"conditions": [{"type": "Failed", "status": "False"}], "active": 2}, JobStatus.PENDING),
        ({}, JobStatus.CREATED),
    ],
)
def test_job_status_counts_only_terminal_conditions(
    status: dict[str, Any], expected: JobStatus
) -> None:
    assert job_status({"status": status}) == expected


def test_active_job_is_running_only_with_a_running_pod() -> None:
    assert job_status({"status": {"active": 1}}, pod_running=True) is JobStatus.RUNNING
    assert job_status({"status": {"active": 1}}, pod_running=False) is JobStatus.PENDING


def test_resumed_job_without_pods_is_pending_and_enqueued_one_is_queuing() -> None:
    stamp = go_time_string()
    resumed = {JOB_HAS_ENQUEUED_ANNOTATION: "true", JOB_DEQUEUE_TIMESTAMP_ANNOTATION: stamp}
    assert job_status(annotated(resumed)) is JobStatus.PENDING
    suspended_again = {JOB_HAS_ENQUEUED_ANNOTATION: "true", JOB_DEQUEUE_TIMESTAMP_ANNOTATION: ""}
    assert job_status(annotated(suspended_again)) is JobStatus.QUEUING


def test_managed_when_enqueued_or_never_started_and_suspended() -> None:
    assert is_managed(job())  # suspended, no startTime
    started = job()
    started["status"]["startTime"] = "2026-01-01T00:00:00Z"
    assert not is_managed(started)
    started["metadata"]["annotations"][JOB_HAS_ENQUEUED_ANNOTATION] = "true"
    assert is_managed(started)
    running = job()
    running["spec"]["suspend"] = False
    assert not is_managed(running)


def test_enqueue_marks_the_job_once() -> None:
    patch = enqueue_patch(job(), "stamp")
    assert patch == {
        "metadata": {
            "annotations": {
                JOB_HAS_ENQUEUED_ANNOTATION: "true",
                JOB_ENQUEUE_TIMESTAMP_ANNOTATION: "stamp",
            }
        }
    }
    assert enqueue_patch(annotated({JOB_HAS_ENQUEUED_ANNOTATION: "true"}), "later") is None


def test_resume_and_suspend_patches_set_and_empty_the_dequeue_timestamp() -> None:
    assert resume_patch("stamp") == {
        "spec": {"suspend": False},
        "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: "stamp"}},
    }
    assert suspend_patch() == {
        "spec": {"suspend": True},
        "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: ""}},
    }


def test_timestamps_are_written_as_go_prints_time_now() -> None:
    # 2026-12-03 10:19:58.1234 UTC, 3.5 s after the process started
    epoch_ns = 1796293198_123400000
    assert (
        go_time_string(epoch_ns, 3_500_000_000)
        == "2026-12-03 10:19:58.1234 +0000 UTC m=+3.500000000"
    )
    assert go_time_string(1796293198_000000000, 1).endswith(":58 +0000 UTC m=+0.000000001")


@pytest.mark.parametrize(
    ("status", "phase", "action"),
    [
        (JobStatus.RUNNING, Phase.DEQUEUED, JobAction(Phase.RUNNING, "Running")),
        (JobStatus.RUNNING, Phase.RUNNING, JobAction()),
        (JobStatus.SUCCEEDED, Phase.RUNNING, JobAction(Phase.SUCCEED, "Succeeded")),
        (JobStatus.FAILED, Phase.RUNNING, JobAction(Phase.FAILED, "Failed")),
        (JobStatus.SUCCEEDED, Phase.SUCCEED, JobAction()),
        (JobStatus.QUEUING, Phase.DEQUEUED, JobAction(resume=True)),
        (JobStatus.QUEUING, Phase.SCHED_SUCCEED, JobAction(resume=True, resume_event=True)),
        (JobStatus.QUEUING, Phase.SCHED_READY, JobAction()),
        (JobStatus.QUEUING, Phase.SCHED_FAILED, JobAction()),
        (JobStatus.QUEUING, Phase.ENQUEUED, JobAction()),
        (
            JobStatus.QUEUING,
            Phase.PREEMPTED,
            JobAction(Phase.ENQUEUED, "Enqueued after preempted"),
        ),
        (
            JobStatus.PENDING,
            Phase.PREEMPTED,
            JobAction(Phase.ENQUEUED, "Enqueued after preempted", suspend=True),
        ),
        (JobStatus.PENDING, Phase.DEQUEUED, JobAction()),  # running timeout off
    ],
)
def test_reconcile_moves_the_unit_after_its_job(
    status: JobStatus, phase: Phase, action: JobAction
) -> None:
    assert reconcile_job(status, phase, since_update=5.0) == action


def test_running_timeout_backs_the_unit_off_and_suspends_the_job() -> None:
    assert reconcile_job(JobStatus.PENDING, Phase.DEQUEUED, 30.0, running_timeout=30.0) == (
        JobAction(Phase.BACKOFF, "Backoff due to running timeout", suspend=True, recheck_after=0.0)
    )
    assert Phase.BACKOFF.value == "TimeoutBackoff"


def test_running_timeout_not_yet_reached_asks_to_look_again_when_it_is() -> None:
    assert reconcile_job(JobStatus.PENDING, Phase.DEQUEUED, 10.0, running_timeout=30.0) == (
        JobAction(recheck_after=20.0)
    )
    assert reconcile_job(JobStatus.QUEUING, Phase.DEQUEUED, 0.0, running_timeout=30.0) == (
        JobAction(resume=True, recheck_after=30.0)
    )


def test_running_job_is_not_timed_out() -> None:
    assert reconcile_job(JobStatus.RUNNING, Phase.RUNNING, 999.0, running_timeout=1.0) == (
        JobAction()
    )


def test_backed_off_unit_is_enqueued_again_after_the_backoff_time() -> None:
    assert reconcile_job(JobStatus.QUEUING, Phase.BACKOFF, 5.0, 30.0, backoff_time=10.0) == (
        JobAction(recheck_after=5.0)
    )
    assert reconcile_job(JobStatus.QUEUING, Phase.BACKOFF, 11.0, 30.0, backoff_time=10.0) == (
        JobAction(Phase.ENQUEUED, "Enqueued because backoff timeout")
    )
    # still Pending (its pods are being removed): suspended again, then enqueued
    assert reconcile_job(JobStatus.PENDING, Phase.BACKOFF, 11.0, 30.0, backoff_time=10.0) == (
        JobAction(Phase.ENQUEUED, "Enqueued because backoff timeout", suspend=True)
    )


def test_legacy_backoff_phase_still_parses() -> None:
    assert Phase("Backoff") is Phase.BACKOFF


def test_backoff_doubles_from_ten_seconds_and_caps_at_fifteen_minutes() -> None:
    no_jitter = random.Random(0)
    no_jitter.uniform = lambda a, b: 0.0  # type: ignore[method-assign]
    assert [backoff_delay(n, no_jitter) for n in (1, 2, 3, 4)] == [10.0, 20.0, 40.0, 80.0]
    assert backoff_delay(50, no_jitter) == 900.0


@given(st.integers(1, 10_000), st.integers(0, 2**32))
def test_backoff_jitter_stays_within_ten_percent(attempt: int, seed: int) -> None:
    base = min(10.0 * 2 ** min(attempt - 1, 32), 900.0)
    delay = backoff_delay(attempt, random.Random(seed))
    assert base * 0.9 - 1e-9 <= delay <= base * 1.1 + 1e-9


def test_queue_unit_leaves_out_kubectls_last_applied_configuration() -> None:
    """`kubectl apply` of a Job stores the whole manifest in an annotation; the unit keeps
    every other annotation but not that one (issue 33; fails on the copy-everything rule)."""
    applied = job()
    applied["metadata"]["annotations"][LAST_APPLIED_ANNOTATION] = '{"kind":"Job"}'
    unit = queue_unit_for_job(applied, lambda name: None)
    assert unit["metadata"]["annotations"] == {"a": "b"}
    assert applied["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]  # the Job keeps its own
