"""The integration registry and batch/v1 Job as its first implementation (issue 13)."""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.domain import job_extension
from koordqueue.domain.integrations import (
    BATCH_JOB,
    DEFAULT_INTEGRATIONS,
    INTEGRATIONS,
    MPI_JOB,
    POD,
    by_kind,
    parse_integrations,
    queue_unit_for,
)


def test_the_flag_names_are_kueues() -> None:
    assert list(INTEGRATIONS) == [
        "batch/job",
        "kubeflow.org/pytorchjob",
        "kubeflow.org/mpijob",
        "jobset.x-k8s.io/jobset",
        "pod",
        "workload.codeflare.dev/appwrapper",
        "kubeflow.org/tfjob",
        "ray.io/rayjob",
        "ray.io/raycluster",
        "sparkoperator.k8s.io/sparkapplication",
        "argoproj.io/workflow",
        "kubeflow.org/mpijob-v1alpha1",
        "kubeflow.org/xgboostjob",
        "kubeflow.org/paddlejob",
        "kubeflow.org/jaxjob",
        "trainer.kubeflow.org/trainjob",
    ]
    assert DEFAULT_INTEGRATIONS == ("batch/job",)


def test_all_names_every_integration_once() -> None:
    assert parse_integrations("all") == tuple(INTEGRATIONS.values())
    assert parse_integrations("pod,all") == (POD, *(i for i in INTEGRATIONS.values() if i != POD))


def test_parse_keeps_order_drops_repeats_and_blanks() -> None:
    assert parse_integrations(" pod, batch/job,,pod ") == (POD, BATCH_JOB)
    assert parse_integrations(["kubeflow.org/mpijob"]) == (MPI_JOB,)


def test_parse_rejects_an_unknown_name_naming_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match=r"unknown integrations ray.io/rayservice \(known: batch/job"
    ):
        parse_integrations("batch/job,ray.io/rayservice")


def test_by_kind_finds_the_integration_and_checks_the_version() -> None:
    assert by_kind("MPIJob") is MPI_JOB
    assert by_kind("MPIJob", "kubeflow.org/v2beta1") is MPI_JOB
    assert by_kind("MPIJob", "kubeflow.org/v1") is None
    assert by_kind("Job", "batch/v1") is BATCH_JOB
    assert by_kind("RayService") is None


def test_every_integration_declares_its_kind_and_plural() -> None:
    for name, integration in INTEGRATIONS.items():
        assert integration.name == name
        assert integration.workload.plural == integration.workload.kind.lower() + "s"


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u", "labels": {"a": "b"}},
        "spec": {
            "suspend": True,
            "parallelism": 3,
            "completions": 2,
            "template": {
                "spec": {
                    "priorityClassName": "pc",
                    "priority": 5,
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                }
            },
            **spec,
        },
        "status": {},
    }


def test_the_job_integration_builds_the_same_unit_as_the_job_extension() -> None:
    """The wrapper and the generic builder agree, resource from parallelism (3 cpu) and the
    pod set's count from min(parallelism, completions) (2)."""
    unit = queue_unit_for(BATCH_JOB, [job()], {"pc": 9}.get)
    assert unit == job_extension.queue_unit_for_job(job(), {"pc": 9}.get)
    assert unit["spec"]["resource"] == {"cpu": "3"}
    assert unit["spec"]["podSet"][0]["count"] == 2
    assert unit["spec"]["priority"] == 9
    assert queue_unit_for(BATCH_JOB, [job()])["spec"]["priority"] == 5


def test_job_extension_keeps_its_names_for_importers() -> None:
    assert job_extension.JobStatus is BATCH_JOB.status([job()]).__class__
    assert job_extension.InvalidJobError.__module__ == "koordqueue.domain.integrations.base"
    assert job_extension.resume_patch("t", job(suspend=False)) is None
    assert job_extension.suspend_patch() == {
        "spec": {"suspend": True},
        "metadata": {"annotations": {"koord-queue/job-dequeue-timestamp": ""}},
    }


def test_unit_names_carry_koord_queues_per_kind_suffix() -> None:
    """koord-queue framework GetRelatedQueueUnit(): <name>-<QueueUnitSuffix()>, "py-qu" for
    PyTorchJob (pytorchjob.go), none for batch/v1 Job; so two kinds' objects of one name in
    one namespace get different units."""
    names = {i.name: i.unit_name({"metadata": {"name": "train"}}) for i in INTEGRATIONS.values()}
    assert names == {
        "batch/job": "train",
        "kubeflow.org/pytorchjob": "train-py-qu",
        "kubeflow.org/mpijob": "train-mpi-qu",
        "jobset.x-k8s.io/jobset": "train-js-qu",
        "pod": "train-pod-qu",
        "workload.codeflare.dev/appwrapper": "train-aw-qu",
        "kubeflow.org/tfjob": "train-tf-qu",
        "ray.io/rayjob": "train-ray-qu",
        "ray.io/raycluster": "train-raycluster-qu",
        "sparkoperator.k8s.io/sparkapplication": "train-spark-qu",
        "argoproj.io/workflow": "train-wf-qu",
        "kubeflow.org/mpijob-v1alpha1": "train-mpi-qu",
        "kubeflow.org/xgboostjob": "train-xgb-qu",
        "kubeflow.org/paddlejob": "train-paddle-qu",
        "kubeflow.org/jaxjob": "train-jax-qu",
        "trainer.kubeflow.org/trainjob": "train-tj-qu",
    }
    # the two MPIJob versions share a name: a cluster serves one of them
    served = {n: u for n, u in names.items() if n != "kubeflow.org/mpijob-v1alpha1"}
    assert len(set(served.values())) == len(served)
