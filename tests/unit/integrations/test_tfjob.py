"""TFJob. Koord-Queue's tfjob.go has no test file of its own: its handle is PyTorchJob's with
the suffix tf-qu, so pytorchjob_test.go's cases are transcribed on a TFJob, and Kueue
v0.17.0's tfjob_controller_test.go (TestPriorityClass, TestOrderedReplicaTypes) for the roles."""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.domain.integrations import (
    TF_JOB,
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
from koordqueue.domain.resources import Resources
from tests.unit.integrations.helpers import condition
from tests.unit.integrations.kq_kinds import pod_template, tfjob

NOW = "2026-01-01 00:00:00 +0000 UTC"


def with_status(job: dict[str, Any], **status: Any) -> dict[str, Any]:
    job["status"] = status
    return job


def test_kind_and_suffix() -> None:
    w = TF_JOB.workload
    assert (w.group, w.version, w.kind, w.plural) == ("kubeflow.org", "v1", "TFJob", "tfjobs")
    assert TF_JOB.unit_name(tfjob("mnist")) == "mnist-tf-qu"


def test_pod_sets_and_resources() -> None:
    """pytorchjob_test.go's PodSet/Resources shape on a TFJob: master 1 of 2 cpu 4Gi and
    worker 2 of 1 cpu 2Gi = 4 cpu, 8Gi."""
    job = tfjob(
        roles={"Master": (1, pod_template("2", "4Gi")), "Worker": (2, pod_template("1", "2Gi"))}
    )
    assert [(p.name, p.count) for p in TF_JOB.pod_sets([job])] == [("master", 1), ("worker", 2)]
    assert TF_JOB.resource([job]) == Resources.parse({"cpu": "4", "memory": "8Gi"})


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        ({}, []),
        (
            {r: (1, pod_template()) for r in ("PS", "Evaluator", "Worker", "Chief", "Master")},
            ["chief", "master", "ps", "worker", "evaluator"],
        ),
        ({"Worker": (1, pod_template())}, ["worker"]),
    ],
    ids=["job has no replicas", "job has all replicas", "job has only worker replicas"],
)
def test_ordered_replica_types(roles: dict[str, Any], expected: list[str]) -> None:
    """kueue TestOrderedReplicaTypes, the case in the id."""
    job = tfjob(roles=roles) if roles else tfjob()
    if not roles:
        job["spec"]["tfReplicaSpecs"] = {}
    assert [p.name for p in TF_JOB.pod_sets([job])] == expected


def _classes(**by_role: str | None) -> dict[str, tuple[int, dict[str, Any]]]:
    return {role: (1, pod_template(priority_class=pc)) for role, pc in by_role.items()}


@pytest.mark.parametrize(
    ("roles", "scheduling", "expected"),
    [
        (_classes(Worker=None), None, ""),
        (
            _classes(Chief="chief-priority", Worker="worker-priority"),
            "scheduling-priority",
            "scheduling-priority",
        ),
        (_classes(Chief="chief-priority"), None, "chief-priority"),
        (
            _classes(
                Chief="chief-priority",
                PS="ps-priority",
                Worker="worker-priority",
                Evaluator="eval-priority",
            ),
            None,
            "chief-priority",
        ),
        (_classes(Chief=None, Evaluator="eval-priority"), None, "eval-priority"),
        (_classes(Chief=None, Worker="worker-priority"), None, "worker-priority"),
        (_classes(Chief=None, Evaluator=None), None, ""),
    ],
    ids=[
        "none priority class name specified",
        "priority specified at runPolicy and replicas; use priority in runPolicy",
        "runPolicy present, but without priority; fallback to chief",
        "specified on chief takes precedence over chief",
        "chief present, but without priority; fallback to evaluator",
        "specified on worker only",
        "evaluator present, but without priority; fallback to empty",
    ],
)
def test_priority_class(roles: dict[str, Any], scheduling: str | None, expected: str) -> None:
    """kueue TestPriorityClass, the case in the id."""
    job = tfjob(roles=roles, scheduling_priority_class=scheduling)
    assert TF_JOB.priority_class_name(job) == expected


def test_master_is_skipped_for_priority_as_koord_queue_does() -> None:
    """Koord-Queue's TfJob.Priority(): the first role that is not Master."""
    job = tfjob(roles=_classes(Master="master-priority", Worker="worker-priority"))
    assert TF_JOB.priority_class_name(job) == "worker-priority"


def test_held_released_and_marked_as_pytorchjob() -> None:
    """pytorchjob_test.go's Suspend/Resume/Enqueue on a TFJob."""
    held = tfjob(suspend=True)
    assert TF_JOB.is_suspended(held) and TF_JOB.is_managed(held)
    (condition_patch, release) = TF_JOB.resume(held, NOW, "2026-01-01T00:00:00Z")
    assert isinstance(condition_patch, WorkloadPatch) and condition_patch.subresource == "status"
    assert isinstance(release, WorkloadPatch)
    assert release.body["spec"] == {"runPolicy": {"suspend": False}}
    assert release.body["metadata"]["annotations"] == {HOLD: "false", DEQUEUE: NOW}
    (hold,) = TF_JOB.suspend(tfjob(suspend=False))
    assert isinstance(hold, WorkloadPatch)
    assert hold.body["spec"] == {"runPolicy": {"suspend": True}}
    (mark,) = TF_JOB.enqueue(held, NOW, "2026-01-01T00:00:00Z")
    assert mark.subresource == "status"
    assert mark.body["status"]["conditions"][0]["type"] == "Queuing"


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([condition("Succeeded")], JobStatus.SUCCEEDED),
        ([condition("Failed")], JobStatus.FAILED),
        ([condition("Running")], JobStatus.RUNNING),
        ([condition("Queuing")], JobStatus.QUEUING),
    ],
    ids=["succeeded", "failed", "running", "queuing"],
)
def test_status(conditions: list[dict[str, str]], expected: JobStatus) -> None:
    assert TF_JOB.status([with_status(tfjob(), conditions=conditions)]) is expected


@pytest.mark.parametrize(
    ("roles", "field", "why"),
    [
        ({"Launcher": (1, pod_template())}, "spec.tfReplicaSpecs.Launcher", "unknown role"),
        ({"Worker": (-1, pod_template())}, "spec.tfReplicaSpecs.Worker.replicas", "negative"),
    ],
    ids=["unknown role name", "negative replicas"],
)
def test_bad_input_is_refused_naming_the_field(roles: dict[str, Any], field: str, why: str) -> None:
    with pytest.raises(InvalidJobError, match=why) as caught:
        queue_unit_for(TF_JOB, [tfjob(roles=roles)])
    assert caught.value.field == field and caught.value.kind == "TFJob"


def test_replicas_default_to_one_and_limits_stand_in() -> None:
    job = tfjob(roles={"Worker": (None, pod_template("2", limits_only=True))})
    assert TF_JOB.resource([job]) == Resources.parse({"cpu": "2"})
