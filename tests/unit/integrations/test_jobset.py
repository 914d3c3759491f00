"""JobSet integration: pod sets, readiness, state and the suspend writes.

Cases transcribed from kubernetes-sigs/kueue pkg/controller/jobs/jobset/jobset_controller_test.go
(TestPodSets, TestPodsReady) and its Finished(); each test names its case.
"""

from __future__ import annotations

from koordqueue.domain.integrations import JOBSET, JobStatus, WorkloadPatch
from koordqueue.domain.integrations.base import queue_unit_for
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
)
from koordqueue.domain.resources import Resources
from tests.unit.integrations.helpers import condition, jobset, template


def two_replicated(**kwargs: object) -> dict[str, object]:
    return jobset(
        [
            ("replicated-job-1", 2, 1, 1, template("1")),
            ("replicated-job-2", 3, 1, 1, template("1")),
        ],
        **kwargs,  # type: ignore[arg-type]
    )


def test_pod_sets_count_replicas_times_min_of_parallelism_and_completions() -> None:
    """kueue TestPodSets "no annotations": job1 (2 replicas, parallelism 1, completions 1) -> 2
    pods, job2 (3 replicas, parallelism 2, completions 3) -> 6 pods."""
    obj = jobset([("job1", 2, 1, 1, template("1")), ("job2", 3, 2, 3, template("2"))])
    pod_sets = JOBSET.pod_sets([obj])
    assert [(ps.name, ps.count) for ps in pod_sets] == [("job1", 2), ("job2", 6)]
    assert pod_sets[1].template == template("2")
    assert JOBSET.resource([obj]) == Resources.parse({"cpu": "14"})


def test_completions_below_parallelism_bound_the_pods_per_replica() -> None:
    """kueue PodsCountPerReplica: min(parallelism, completions); parallelism defaults to 1."""
    obj = jobset([("a", 2, 4, 3, template("1")), ("b", 1, None, None, template("1"))])
    assert [ps.count for ps in JOBSET.pod_sets([obj])] == [6, 1]


def test_completed_condition_is_success_and_failed_is_failure() -> None:
    """kueue JobSet.Finished(): Completed True -> success; Failed True -> failure."""
    assert JOBSET.status([two_replicated(conditions=[condition("Completed")])]) is (
        JobStatus.SUCCEEDED
    )
    assert JOBSET.status([two_replicated(conditions=[condition("Failed")])]) is JobStatus.FAILED
    assert JOBSET.status([two_replicated(conditions=[condition("Completed", "False")])]) is (
        JobStatus.CREATED
    )


def test_state_follows_the_job_extensions_order() -> None:
    """Ready child Jobs -> Running; active ones -> Pending; enqueued and held -> Queuing."""
    running = two_replicated(suspend=False, jobs_status=[{"name": "a", "ready": 1}])
    pending = two_replicated(suspend=False, jobs_status=[{"name": "a", "active": 2}])
    resumed = two_replicated(suspend=False, annotations={JOB_DEQUEUE_TIMESTAMP_ANNOTATION: "t"})
    queuing = two_replicated(annotations={JOB_HAS_ENQUEUED_ANNOTATION: "true"})
    assert JOBSET.status([running]) is JobStatus.RUNNING
    assert JOBSET.status([pending]) is JobStatus.PENDING
    assert JOBSET.status([resumed]) is JobStatus.PENDING
    assert JOBSET.status([queuing]) is JobStatus.QUEUING
    assert JOBSET.status([two_replicated()]) is JobStatus.CREATED


def test_managed_when_held_and_never_started_or_once_enqueued() -> None:
    assert JOBSET.is_managed(two_replicated())
    assert not JOBSET.is_managed(two_replicated(suspend=False))
    started = two_replicated(jobs_status=[{"name": "a", "succeeded": 1}])
    assert not JOBSET.is_managed(started)
    enqueued = two_replicated(suspend=False, annotations={JOB_HAS_ENQUEUED_ANNOTATION: "true"})
    assert JOBSET.is_managed(enqueued)


def test_resume_and_suspend_write_spec_suspend_and_the_dequeue_stamp() -> None:
    held = two_replicated()
    assert JOBSET.resume(held, "now") == (
        WorkloadPatch(
            {
                "spec": {"suspend": False},
                "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: "now"}},
            }
        ),
    )
    assert JOBSET.suspend(held) == ()
    running = two_replicated(suspend=False)
    assert JOBSET.resume(running, "now") == ()
    assert JOBSET.suspend(running) == (
        WorkloadPatch(
            {
                "spec": {"suspend": True},
                "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: ""}},
            }
        ),
    )


def test_priority_class_from_the_first_template_that_names_one() -> None:
    obj = jobset(
        [("a", 1, 1, 1, template()), ("b", 1, 1, 1, template(priority_class="high", priority=7))]
    )
    assert JOBSET.priority_class_name(obj) == "high"
    assert JOBSET.priority(obj, lambda name: None) == 7
    assert JOBSET.priority(obj, {"high": 1000}.get) == 1000


def test_queue_unit_has_one_pod_set_per_replicated_job() -> None:
    unit = queue_unit_for(JOBSET, [two_replicated()])
    assert unit["spec"]["consumerRef"]["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert [(ps["name"], ps["count"]) for ps in unit["spec"]["podSet"]] == [
        ("replicated-job-1", 2),
        ("replicated-job-2", 3),
    ]
    assert unit["spec"]["resource"] == {"cpu": "5"}
