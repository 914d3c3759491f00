"""The batch/v1 Job handle: cases of koordinator-sh/koord-queue pkg/jobext/handles/job_test.go,
Describe("Job Controller") (Ginkgo), run against koordqueue.domain.job_extension.

Not transcribed: "Object"/"GVK" type assertions (Go types; the unit's consumerRef stands in for
GVK below), and ManagedByQueue "should return true when managing all jobs": koordqueue has no
manage-all-Jobs switch (only Jobs created suspended, or already enqueued, are managed).
"""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.domain.job_extension import (
    JobStatus,
    count_failed_indexes,
    is_managed,
    job_resource,
    job_status,
    pod_set_count,
    queue_unit_for_job,
    resume_patch,
    suspend_patch,
)
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
)
from koordqueue.domain.resources import Resources


def job(
    name: str = "test-job",
    *,
    parallelism: int | None = None,
    completions: int | None = None,
    mode: str | None = None,
    suspend: bool | None = None,
    containers: list[dict[str, Any]] | None = None,
    priority_class: str | None = None,
    priority: int | None = None,
    annotations: dict[str, str] | None = None,
    **status: Any,
) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": containers or [{"name": "test-container"}]}
    if priority_class is not None:
        pod["priorityClassName"] = priority_class
    if priority is not None:
        pod["priority"] = priority
    spec: dict[str, Any] = {"template": {"spec": pod}}
    for key, value in (
        ("parallelism", parallelism),
        ("completions", completions),
        ("completionMode", mode),
        ("suspend", suspend),
    ):
        if value is not None:
            spec[key] = value
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": spec,
        "status": status,
    }


def test_resources_are_parallelism_times_the_pod_request() -> None:
    """job_test.go, Context "Resources", "should calculate resources correctly" (parallelism 2,
    one container requesting cpu 1 and memory 1Gi; the reference adds the request per pod)."""
    containers = [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]
    assert job_resource(job(parallelism=2, containers=containers)) == Resources.of(
        cpu="2", memory="2Gi"
    )


def test_pod_set_name_is_the_owner_name() -> None:
    """job_test.go, Context "GetPodSetName", "should return correct pod set name" (owner
    "owner" -> "owner"): the Job's one pod set carries the Job's name."""
    unit = queue_unit_for_job(job("owner", parallelism=1))
    assert [ps["name"] for ps in unit["spec"]["podSet"]] == ["owner"]


def test_pod_set_is_named_after_the_job_and_counts_remaining_completions() -> None:
    """job_test.go, Context "PodSet", "should generate correct pod set" (parallelism 2,
    completions 4, succeeded 1 -> one pod set "test-job" of count 2)."""
    unit = queue_unit_for_job(job(parallelism=2, completions=4, succeeded=1))
    assert [(ps["name"], ps["count"]) for ps in unit["spec"]["podSet"]] == [("test-job", 2)]


@pytest.mark.parametrize(
    ("mode", "completions", "parallelism", "succeeded", "failed_indexes", "expected"),
    [
        pytest.param("Indexed", 8, 8, 1, "1,3-5", 3, id="subtracts single indexes and ranges"),
        pytest.param(
            "Indexed", 100, 5, 0, "1-3", 5, id="keeps parallelism when enough indexes remain"
        ),
        pytest.param("Indexed", 4, 4, 1, "0,2-3", 0, id="does not return a negative count"),
        pytest.param(
            "NonIndexed", 4, 4, 0, "0-3", 4, id="does not subtract failures from a non-indexed Job"
        ),
        pytest.param(
            "Indexed", 4, 4, 0, "3-1", 4, id="keeps the original demand for invalid status"
        ),
    ],
)
def test_pod_set_count_accounts_for_permanently_failed_indexes(
    mode: str,
    completions: int,
    parallelism: int,
    succeeded: int,
    failed_indexes: str,
    expected: int,
) -> None:
    """job_test.go, Context "PodSet", DescribeTable "should account for permanently completed
    indexes" (each Entry is one parameter set, named by its description)."""
    obj = job(
        parallelism=parallelism,
        completions=completions,
        mode=mode,
        succeeded=succeeded,
        failedIndexes=failed_indexes,
    )
    assert pod_set_count(obj) == expected


@pytest.mark.parametrize(
    ("indexes", "completions", "expected"),
    [
        pytest.param("", 78, 0, id="empty"),
        pytest.param("31,34,61,62", 78, 4, id="customer failed indexes"),
        pytest.param("1,3-5,7", 10, 5, id="compressed ranges"),
    ],
)
def test_count_failed_indexes(indexes: str, completions: int, expected: int) -> None:
    """job_test.go, DescribeTable "countFailedIndexes", the Entries without an error."""
    assert count_failed_indexes(indexes, completions) == expected


@pytest.mark.parametrize(
    ("indexes", "completions"),
    [
        pytest.param("x", 10, id="non-numeric index"),
        pytest.param("5-3", 10, id="reversed range"),
        pytest.param("1-3,3-5", 10, id="overlapping ranges"),
        pytest.param("4,2", 10, id="out-of-order indexes"),
        pytest.param("10", 10, id="index outside completions"),
    ],
)
def test_count_failed_indexes_rejects_what_the_job_controller_never_writes(
    indexes: str, completions: int
) -> None:
    """job_test.go, DescribeTable "countFailedIndexes", the Entries that expect an error."""
    with pytest.raises(ValueError):
        count_failed_indexes(indexes, completions)


def test_priority_of_a_missing_class_is_the_templates_own() -> None:
    """job_test.go, Context "Priority", "should return correct priority" (class
    "test-priority-class" not found, template priority 100 -> the class name and 100)."""
    unit = queue_unit_for_job(
        job(priority_class="test-priority-class", priority=100), lambda name: None
    )
    assert (unit["spec"]["priorityClassName"], unit["spec"]["priority"]) == (
        "test-priority-class",
        100,
    )


def test_suspend_sets_suspend_on_a_running_job() -> None:
    """job_test.go, Context "Suspend", "should suspend job correctly" (suspend false -> true)."""
    patch = suspend_patch(job(suspend=False))
    assert patch is not None and patch["spec"] == {"suspend": True}


def test_suspend_leaves_a_suspended_job_alone() -> None:
    """job_test.go, Context "Suspend", "should not suspend already suspended job"."""
    assert suspend_patch(job(suspend=True)) is None


def test_resume_unsuspends_and_stamps_the_dequeue_time() -> None:
    """job_test.go, Context "Resume", "should resume suspended job" (suspend true -> false,
    annotation koord-queue/job-dequeue-timestamp not empty)."""
    patch = resume_patch("2026-12-03 10:19:58 +0000 UTC m=+1.000000000", job(suspend=True))
    assert patch is not None and patch["spec"] == {"suspend": False}
    assert patch["metadata"]["annotations"][JOB_DEQUEUE_TIMESTAMP_ANNOTATION]


def test_resume_leaves_a_running_job_alone() -> None:
    """job_test.go, Context "Resume", "should not resume already running job"."""
    assert resume_patch("now", job(suspend=False)) is None


def test_complete_condition_means_succeeded() -> None:
    """job_test.go, Context "GetJobStatus", "should return correct status for completed job"."""
    obj = job(conditions=[{"type": "Complete", "status": "True"}])
    assert job_status(obj) is JobStatus.SUCCEEDED


def test_failed_condition_means_failed() -> None:
    """job_test.go, Context "GetJobStatus", "should return correct status for failed job"."""
    obj = job(conditions=[{"type": "Failed", "status": "True"}])
    assert job_status(obj) is JobStatus.FAILED


def test_enqueued_job_is_queuing() -> None:
    """job_test.go, Context "GetJobStatus", "should return queuing status for enqueued job"
    (annotation koord-queue/job-has-enqueued "true")."""
    assert job_status(job(annotations={JOB_HAS_ENQUEUED_ANNOTATION: "true"})) is JobStatus.QUEUING


def test_enqueued_job_is_managed() -> None:
    """job_test.go, Context "ManagedByQueue", "should return true when job is enqueued"."""
    assert is_managed(job(annotations={JOB_HAS_ENQUEUED_ANNOTATION: "true"}))


def test_started_job_is_not_managed() -> None:
    """job_test.go, Context "ManagedByQueue", "should return false when job has started"
    (suspend true, startTime set, not enqueued)."""
    assert not is_managed(job(suspend=True, startTime="2026-12-03T10:00:00Z"))


def test_queue_unit_has_the_jobs_name_without_suffix() -> None:
    """job_test.go, Context "QueueUnitSuffix", "should return empty string": the unit is named
    exactly like its Job, and (GVK) points at a batch/v1 Job."""
    unit = queue_unit_for_job(job("train", parallelism=1))
    assert unit["metadata"]["name"] == "train"
    ref = unit["spec"]["consumerRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("batch/v1", "Job", "train")
