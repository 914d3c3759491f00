"""Argo Workflow: koord-queue pkg/jobext/handles/argoworkflow_test.go transcribed (inputs and
expected outcomes), plus the bad input the issue names."""

from __future__ import annotations

import pytest

from koordqueue.domain.integrations import (
    ARGO_WORKFLOW as ARGO,
)
from koordqueue.domain.integrations import (
    InvalidJobError,
    JobStatus,
    WorkloadPatch,
    queue_unit_for,
)
from koordqueue.domain.integrations.argo import enqueued
from koordqueue.domain.names import (
    JOB_ENQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
)
from koordqueue.domain.resources import Resources
from tests.unit.integrations.kq_kinds import workflow

NOW = "2026-01-01 00:00:00 +0000 UTC"
TRUE = {"type": "Enqueued", "status": "True"}


def test_kind_and_suffix() -> None:
    """GVK: argoproj.io/v1alpha1 Workflow. QueueUnitSuffix: Koord-Queue's is "" (the unit
    named as the Workflow); ours wf-qu, so a Job of the same name keeps its own unit."""
    w = ARGO.workload
    assert (w.group, w.version, w.kind) == ("argoproj.io", "v1alpha1", "Workflow")
    assert ARGO.unit_name(workflow("test-workflow")) == "test-workflow-wf-qu"


def test_pod_set_is_one_default_pod_of_the_min_resources() -> None:
    """PodSet: one "default" pod set of count 1 (annotation cpu 100m, memory 100Mi)."""
    wf = workflow(min_resources="cpu: 100m\nmemory: 100Mi")
    (pod_set,) = ARGO.pod_sets([wf])
    assert (pod_set.name, pod_set.count) == ("default", 1)
    assert pod_set.request == Resources.parse({"cpu": "100m", "memory": "100Mi"})


def test_not_managed_without_the_suspend_template() -> None:
    """ManagedByQueue: "false for workflow without koord-queue-suspend template"."""
    assert not ARGO.is_managed(workflow(suspend=None, min_resources=None))


def test_managed_with_the_suspend_template_in_spec_or_stored() -> None:
    wf = workflow(suspend=None)
    wf["spec"]["templates"].append({"name": "koord-queue-suspend", "suspend": {}})
    assert ARGO.is_managed(wf)
    stored = workflow(
        suspend=None,
        status={
            "phase": "Running",
            "storedTemplates": {
                "namespaced/x/koord-queue-suspend": {"name": "koord-queue-suspend", "suspend": {}},
            },
        },
    )
    assert ARGO.is_managed(stored)


def test_managed_when_created_held_and_not_started() -> None:
    """Ours besides Koord-Queue's: a Workflow created with spec.suspend and no phase."""
    assert ARGO.is_managed(workflow(suspend=True))
    assert not ARGO.is_managed(workflow(suspend=True, status={"phase": "Running"}))


@pytest.mark.parametrize(
    ("suspend", "nodes", "held"),
    [
        (None, None, False),
        (True, None, True),
        (None, {"node1": {"type": "Suspend", "phase": "Running"}}, True),
    ],
    ids=["not suspended", "spec suspended", "running suspend node"],
)
def test_is_workflow_suspend(
    suspend: bool | None, nodes: dict[str, object] | None, held: bool
) -> None:
    """isWorkflowSuspend: each case (a nil workflow has no counterpart here)."""
    status = {"nodes": nodes} if nodes else None
    assert ARGO.is_suspended(workflow(suspend=suspend, status=status)) is held


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([], False),
        ([{"type": "SomeOtherCondition", "status": "True"}], False),
        ([{"type": "Enqueued", "status": "False"}], False),
        ([TRUE], True),
    ],
    ids=["no conditions", "other type", "not true", "enqueued true"],
)
def test_check_wf_conditions(conditions: list[dict[str, str]], expected: bool) -> None:
    """checkWfConditions: each case."""
    assert enqueued(workflow(status={"conditions": conditions})) is expected


def test_resources_from_the_annotation() -> None:
    """Resources: no annotation -> empty; YAML and JSON -> cpu and memory."""
    assert ARGO.resource([workflow(min_resources=None)]) == Resources()
    expected = Resources.parse({"cpu": "100m", "memory": "100Mi"})
    assert ARGO.resource([workflow(min_resources="cpu: 100m\nmemory: 100Mi")]) == expected
    as_json = '{"cpu": "100m", "memory": "100Mi"}'
    assert ARGO.resource([workflow(min_resources=as_json)]) == expected


def test_priority() -> None:
    """Priority: spec.priority 10 -> no class, value 10; without it -> the entry template's
    priorityClassName (high-priority), no value of its own."""
    wf = workflow(priority=10)
    assert ARGO.priority_class_name(wf) == "" and ARGO.priority(wf) == 10
    classed = workflow(entry_priority_class="high-priority")
    assert ARGO.priority_class_name(classed) == "high-priority"
    assert ARGO.priority(classed, {"high-priority": 7}.get) == 7
    assert ARGO.template_priority(classed) is None


@pytest.mark.parametrize(
    ("conditions", "suspend", "phase", "expected"),
    [
        (None, None, None, JobStatus.CREATED),
        ([TRUE], True, None, JobStatus.QUEUING),
        ([TRUE], None, "Succeeded", JobStatus.SUCCEEDED),
        ([TRUE], None, "Failed", JobStatus.FAILED),
        ([TRUE], None, "Running", JobStatus.RUNNING),
    ],
    ids=["not enqueued", "enqueued but suspended", "succeeded", "failed", "other cases"],
)
def test_get_job_status(
    conditions: list[dict[str, str]] | None,
    suspend: bool | None,
    phase: str | None,
    expected: JobStatus,
) -> None:
    """GetJobStatus: each "should return ..." case (an Error phase fails too)."""
    status: dict[str, object] = {}
    if conditions is not None:
        status["conditions"] = conditions
    if phase is not None:
        status["phase"] = phase
    assert ARGO.status([workflow(suspend=suspend, status=status)]) is expected
    if phase == "Running":  # released, before Argo's controller started it: Pending here
        waiting = workflow(suspend=suspend, status={"conditions": conditions})
        assert ARGO.status([waiting]) is JobStatus.PENDING
    if phase == "Failed":
        errored = workflow(suspend=suspend, status={**status, "phase": "Error"})
        assert ARGO.status([errored]) is JobStatus.FAILED


def test_enqueue_adds_the_condition_and_annotations() -> None:
    """Enqueue: "should add enqueued condition and annotations to workflow" (one patch of the
    object: a Workflow has no status subresource)."""
    (mark,) = ARGO.enqueue(workflow(), NOW)
    assert mark.subresource is None
    notes = mark.body["metadata"]["annotations"]
    assert notes[JOB_HAS_ENQUEUED_ANNOTATION] == "true" and notes[JOB_ENQUEUE_TIMESTAMP_ANNOTATION]
    assert {"type": "Enqueued", "status": "True"}.items() <= mark.body["status"]["conditions"][
        0
    ].items()
    marked = workflow(
        annotations={JOB_HAS_ENQUEUED_ANNOTATION: "true"}, status={"conditions": [TRUE]}
    )
    assert ARGO.enqueue(marked, NOW) == ()


def test_suspend_and_resume() -> None:
    """Suspend: already suspended -> nothing; not suspended -> suspend true. Resume: not
    suspended -> nothing; suspended -> suspend false."""
    assert ARGO.suspend(workflow(suspend=True)) == ()
    (hold,) = ARGO.suspend(workflow(suspend=None))
    assert isinstance(hold, WorkloadPatch) and hold.body == {"spec": {"suspend": True}}
    assert ARGO.resume(workflow(suspend=False), NOW) == ()
    (release,) = ARGO.resume(workflow(suspend=True), NOW)
    assert isinstance(release, WorkloadPatch) and release.body == {"spec": {"suspend": False}}


@pytest.mark.parametrize(
    ("raw", "why"),
    [("cpu: [1, 2", "not a JSON or YAML"), ("just text", "not a map"), ("cpu: lots", "lots")],
    ids=["broken yaml", "not a map", "bad quantity"],
)
def test_a_bad_min_resources_annotation_is_refused(raw: str, why: str) -> None:
    """Koord-Queue logs the error and asks for nothing; a unit of nothing would run the
    Workflow outside its quota, so it is refused with the field named."""
    with pytest.raises(InvalidJobError, match=why) as caught:
        queue_unit_for(ARGO, [workflow(min_resources=raw)])
    assert caught.value.kind == "Workflow"
    assert "koord-queue/min-resources" in caught.value.field


def test_a_malformed_workflow_is_read_without_a_crash() -> None:
    """Argo's CRD keeps spec and status unchecked: odd shapes are passed over."""
    wf = workflow(suspend=True, status={"conditions": "x", "nodes": [1], "storedTemplates": 5})
    wf["spec"]["templates"] = ["not a template", None]
    assert ARGO.is_managed(wf)  # created held, not started
    assert ARGO.status([wf]) is JobStatus.CREATED
    assert ARGO.priority_class_name(wf) == ""
    assert len(ARGO.enqueue(wf, NOW)) == 1
    with pytest.raises(InvalidJobError, match="whole number"):
        queue_unit_for(ARGO, [workflow(priority="high")])  # type: ignore[arg-type]
