"""AppWrapper integration: pod sets over the wrapped objects, hold and release, state.

Cases transcribed from kubernetes-sigs/kueue v0.17.0
pkg/controller/jobs/appwrapper/appwrapper_controller_test.go (TestPodSets, TestReconciler)
and the rules of appwrapper_controller.go (Finished, PodsReady, IsActive), with the path and
inference cases of project-codeflare/appwrapper v1.2.0 (the webhook tests "Non-existent
PodSpec paths are rejected", "PodSpec paths must refer to a PodSpecTemplate", "Validation of
Array and Map path elements", "PodSets are inferred for common kinds / for PyTorchJobs,
RayClusters, and RayJobs", which Kueue's pod sets are read with). Each test names its case.
"""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.domain.integrations import APPWRAPPER, InvalidJobError, JobStatus, WorkloadPatch
from koordqueue.domain.integrations.appwrapper import PathError, value_at
from koordqueue.domain.integrations.base import queue_unit_for
from koordqueue.domain.integrations.reconcile import creation_skip
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
)
from koordqueue.domain.resources import Resources
from tests.unit.integrations.helpers import condition, kubeflow_job, template
from tests.unit.integrations.kueue_kinds import appwrapper, batch_job, component


def counts(aw: dict[str, Any]) -> list[tuple[str, int]]:
    return [(ps.name, ps.count) for ps in APPWRAPPER.pod_sets([aw])]


# --- pod sets (Kueue TestPodSets, TestReconciler) --------------------------------------------
def test_pod_sets_are_numbered_over_every_component_of_the_wrapper() -> None:
    """Kueue TestPodSets "no annotations": a PyTorchJob (Master 1, Worker 4) then a batch Job
    of parallelism 2 give aw-0 of 1, aw-1 of 4, aw-2 of 2."""
    pytorch = kubeflow_job("PyTorchJob", {"Master": (1, template()), "Worker": (4, template())})
    aw = appwrapper(component(pytorch), component(batch_job(parallelism=2)))
    assert counts(aw) == [("aw-0", 1), ("aw-1", 4), ("aw-2", 2)]


def test_a_wrapped_job_gives_one_pod_set_of_its_parallelism() -> None:
    """Kueue TestReconciler "workload is created with podsets": Job parallelism 2 -> aw-0 of 2,
    and the unit asks for both pods."""
    aw = appwrapper(component(batch_job(parallelism=2, cpu="3")))
    assert counts(aw) == [("aw-0", 2)]
    unit = queue_unit_for(APPWRAPPER, [aw])
    assert unit["metadata"]["name"] == "aw-aw-qu"
    assert Resources.parse(unit["spec"]["resource"]) == Resources.parse({"cpu": "6"})
    assert unit["spec"]["podSet"][0]["template"] == template("3")


def test_a_finished_appwrapper_gets_no_unit() -> None:
    """Kueue TestReconciler "workload shouldn't be recreated for completed job"."""
    aw = appwrapper(component(batch_job(parallelism=2)), phase="Succeeded")
    assert creation_skip(APPWRAPPER, [aw]) == "already Succeeded"


@pytest.mark.parametrize(
    ("wrapped", "expected"),
    [
        (batch_job(parallelism=2, completions=4), 2),  # jobForInference(2, 4)
        (batch_job(parallelism=8, completions=4), 4),  # jobForInference(8, 4): completions cap
        (batch_job(), 1),
        ({"apiVersion": "v1", "kind": "Pod", "spec": template()["spec"]}, 1),
        (
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "spec": {"replicas": 3, "template": template()},
            },
            3,
        ),
        ({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"template": template()}}, 1),
    ],
    ids=["job-2-of-4", "job-8-of-4", "job-default", "pod", "deployment", "statefulset-default"],
)
def test_pod_sets_are_inferred_for_common_kinds(wrapped: dict[str, Any], expected: int) -> None:
    """appwrapper "PodSets are inferred for common kinds" (InferPodSets' count rules)."""
    assert counts(appwrapper(component(wrapped))) == [("aw-0", expected)]


def test_pod_sets_are_inferred_for_jobsets_ray_and_pytorch() -> None:
    """appwrapper "PodSets are inferred for PyTorchJobs, RayClusters, and RayJobs", and the
    JobSet rule (each replicated Job: replicas x min(parallelism, completions))."""
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "spec": {
            "replicatedJobs": [
                {
                    "name": "a",
                    "replicas": 2,
                    "template": {"spec": {"parallelism": 3, "template": template()}},
                },
                {
                    "name": "b",
                    "template": {
                        "spec": {"parallelism": 4, "completions": 2, "template": template()}
                    },
                },
            ]
        },
    }
    cluster = {
        "headGroupSpec": {"template": template()},
        "workerGroupSpecs": [{"replicas": 7, "template": template()}, {"template": template()}],
    }
    ray_cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": cluster}
    ray_job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {"rayClusterSpec": cluster}}
    pytorch = kubeflow_job("PyTorchJob", {"Master": (None, template()), "Worker": (4, template())})
    aw = appwrapper(*(component(w) for w in (jobset, ray_cluster, ray_job, pytorch)))
    assert [c for _, c in counts(aw)] == [6, 2, 1, 7, 1, 1, 7, 1, 1, 4]


def test_a_kind_without_pods_adds_no_pod_set() -> None:
    """InferPodSets: a kind it does not know (a Service) has no pod sets."""
    service = {"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80}]}}
    aw = appwrapper(component(service), component(batch_job(parallelism=2)))
    assert counts(aw) == [("aw-0", 2)]


def test_declared_pod_sets_win_over_inference() -> None:
    """GetComponentPodSpecs / EnsureComponentStatusInitialized: declared podSets are used as
    given (replicas default 1)."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {"replicas": 9, "template": template("2")},
    }
    aw = appwrapper(component(deployment, [{"path": "template.spec.template", "replicas": 4}]))
    assert counts(aw) == [("aw-0", 4)]
    aw = appwrapper(component(deployment, [{"path": "template.spec.template"}]))
    assert counts(aw) == [("aw-0", 1)]


def test_the_controllers_cached_pod_sets_are_read_first() -> None:
    """GetComponentPodSpecs reads status.componentStatus[].podSets once it is initialised
    (one entry per component)."""
    aw = appwrapper(
        component(batch_job(parallelism=2)),
        component_status=[
            {"name": "job", "podSets": [{"path": "template.spec.template", "replicas": 5}]}
        ],
    )
    assert counts(aw) == [("aw-0", 5)]


def test_limits_stand_in_for_missing_requests() -> None:
    """Requests in limits only: the Kubernetes defaulting (requests = limits) the AppWrapper
    controller's pods get."""
    job = batch_job(parallelism=2)
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2"}}
    assert APPWRAPPER.resource([appwrapper(component(job))]) == Resources.parse({"cpu": "4"})


# --- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path",
    [
        "template.spec.missing",  # "Non-existent PodSpec paths are rejected"
        "",
        "template.spec.template.metadata",  # "PodSpec paths must refer to a PodSpecTemplate"
        "template.spec.replicatedJobs.template.spec.template",  # "Array and Map path elements"
        "template.spec.replicatedJobs",
        "template.spec.replicatedJobs[0].template[0].spec.template",
        "template.spec.replicatedJobs[10].template.spec.template",
        "template.spec.replicatedJobs[-1].template.spec.template",
        "template.spec.replicatedJobs[a10].template.spec.template",
        "template.spec.replicatedJobs[1",
        "template.spec.replicatedJobs[1]].template.spec.template",
    ],
)
def test_a_path_that_reaches_no_pod_template_is_refused_with_its_field(path: str) -> None:
    """appwrapper's webhook refuses these paths; Kueue would drop the pod set silently (a unit
    asking for too little): the AppWrapper is refused, naming the declared path."""
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "spec": {"replicatedJobs": [{"name": "a", "template": {"spec": {"template": template()}}}]},
    }
    aw = appwrapper(component(jobset, [{"path": path, "replicas": 2}]))
    with pytest.raises(InvalidJobError) as error:
        APPWRAPPER.pod_sets([aw])
    assert error.value.field == "spec.components[0].podSets[0].path"
    assert error.value.kind == "AppWrapper"


def test_value_at_walks_fields_and_indexes() -> None:
    wrapped = {"spec": {"replicatedJobs": [{"template": {"spec": {"template": {"x": 1}}}}]}}
    assert value_at(wrapped, "template.spec.replicatedJobs[0].template.spec.template") == {"x": 1}
    assert value_at(wrapped, "template") is wrapped
    with pytest.raises(PathError):
        value_at(wrapped, "spec.replicatedJobs")  # the first element must be "template"


@pytest.mark.parametrize(
    ("replicas", "reason"),
    [
        (-1, "must not be negative"),
        ("2", "must be a whole number"),
        (1.5, "must be a whole number"),
    ],
)
def test_a_bad_replica_count_is_refused_naming_its_field(replicas: Any, reason: str) -> None:
    aw = appwrapper(
        component(batch_job(), [{"path": "template.spec.template", "replicas": replicas}])
    )
    with pytest.raises(InvalidJobError) as error:
        APPWRAPPER.pod_sets([aw])
    assert error.value.field == "spec.components[0].podSets[0].replicas"
    assert reason in error.value.reason


def test_a_negative_count_in_a_wrapped_object_is_refused_naming_its_field() -> None:
    aw = appwrapper(component(batch_job(parallelism=-2)))
    with pytest.raises(InvalidJobError) as error:
        APPWRAPPER.pod_sets([aw])
    assert error.value.field == "spec.components[0].template.spec.parallelism"


def test_a_bad_quantity_is_refused_naming_the_container() -> None:
    job = batch_job(parallelism=1)
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    with pytest.raises(InvalidJobError) as error:
        APPWRAPPER.pod_sets([appwrapper(component(job))])
    assert error.value.field.startswith(
        "spec.components[0].template.spec.template.spec.containers[0].resources.requests"
    )


# --- hold, release, state ---------------------------------------------------------------------
def test_resume_releases_spec_suspend_and_stamps_the_dequeue() -> None:
    (patch,) = APPWRAPPER.resume(appwrapper(component(batch_job())), "now")
    assert isinstance(patch, WorkloadPatch)
    assert patch.body["spec"] == {"suspend": False}
    assert patch.body["metadata"]["annotations"] == {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: "now"}
    assert APPWRAPPER.resume(appwrapper(component(batch_job()), suspend=False), "now") == ()


def test_suspend_holds_it_again() -> None:
    (patch,) = APPWRAPPER.suspend(appwrapper(component(batch_job()), suspend=False))
    assert isinstance(patch, WorkloadPatch) and patch.body["spec"] == {"suspend": True}
    assert APPWRAPPER.suspend(appwrapper(component(batch_job()))) == ()


def test_created_held_is_managed_but_not_once_its_controller_reserved_quota() -> None:
    """IsActive / the AppWrapper controller: QuotaReserved is set when it was first released;
    an AppWrapper that ran before it was held is not the queue's (Koord-Queue's rule)."""
    assert APPWRAPPER.is_managed(appwrapper(component(batch_job())))
    ran = appwrapper(component(batch_job()), conditions=[condition("QuotaReserved", "False")])
    assert not APPWRAPPER.is_managed(ran)
    enqueued = appwrapper(
        component(batch_job()),
        conditions=[condition("QuotaReserved", "False")],
        annotations={JOB_HAS_ENQUEUED_ANNOTATION: "true"},
    )
    assert APPWRAPPER.is_managed(enqueued)


@pytest.mark.parametrize(
    ("phase", "conditions", "suspend", "expected"),
    [
        ("Succeeded", [], False, JobStatus.SUCCEEDED),
        ("Failed", [condition("ResourcesDeployed", "False")], False, JobStatus.FAILED),
        # Finished(): "Still deleting resources for failed AppWrapper": not finished yet
        ("Failed", [condition("ResourcesDeployed")], False, JobStatus.PENDING),
        ("Running", [condition("PodsReady")], False, JobStatus.RUNNING),
        ("Running", [condition("PodsReady", "False")], False, JobStatus.PENDING),
        ("Suspended", [], True, JobStatus.CREATED),
    ],
    ids=["succeeded", "failed", "failed-still-deleting", "pods-ready", "deployed", "held"],
)
def test_state_follows_phase_and_conditions(
    phase: str, conditions: list[dict[str, Any]], suspend: bool, expected: JobStatus
) -> None:
    aw = appwrapper(component(batch_job()), phase=phase, conditions=conditions, suspend=suspend)
    assert APPWRAPPER.status([aw]) is expected


def test_priority_class_is_the_first_pod_set_that_names_one() -> None:
    """Kueue's default rule (extractPriorityFromPodSets) for kinds without their own."""
    first = batch_job()
    second = batch_job()
    second["spec"]["template"]["spec"]["priorityClassName"] = "high"
    aw = appwrapper(component(first), component(second))
    assert APPWRAPPER.priority_class_name(aw) == "high"
    assert APPWRAPPER.priority(aw, {"high": 1000}.get) == 1000
