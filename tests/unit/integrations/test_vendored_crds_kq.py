"""The vendored CRDs of Koord-Queue's further kinds and Kueue's training-operator kinds (issue
26) serve what each integration reads
and writes: kind, plural and version, the field that holds it, the fields its pod sets and
state are read from."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.domain.integrations import (
    ARGO_WORKFLOW,
    JAX_JOB,
    MPI_JOB_V1ALPHA1,
    PADDLE_JOB,
    RAY_CLUSTER,
    RAY_JOB,
    SPARK_APPLICATION,
    TF_JOB,
    XGBOOST_JOB,
    Integration,
)
from koordqueue.domain.integrations.kubeflow import KubeflowJob

CRDS = Path(__file__).resolve().parents[2] / "crds" / "integrations"
FILES = {
    TF_JOB.name: "kubeflow.org_tfjobs.yaml",
    RAY_JOB.name: "ray.io_rayjobs.yaml",
    RAY_CLUSTER.name: "ray.io_rayclusters.yaml",
    SPARK_APPLICATION.name: "sparkoperator.k8s.io_sparkapplications.yaml",
    ARGO_WORKFLOW.name: "argoproj.io_workflows.yaml",
    MPI_JOB_V1ALPHA1.name: "mpijob-v1alpha1/kubeflow.org_mpijobs.yaml",
    XGBOOST_JOB.name: "kubeflow.org_xgboostjobs.yaml",
    PADDLE_JOB.name: "kubeflow.org_paddlejobs.yaml",
    JAX_JOB.name: "kubeflow.org_jaxjobs.yaml",
}
TRAINING: list[KubeflowJob] = [TF_JOB, XGBOOST_JOB, PADDLE_JOB, JAX_JOB]
"""training-operator kinds: one shape (replica specs, runPolicy, JobStatus conditions)."""
KINDS = [*TRAINING, RAY_JOB, RAY_CLUSTER, SPARK_APPLICATION, ARGO_WORKFLOW, MPI_JOB_V1ALPHA1]


@functools.cache
def load(name: str) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the files are large
    with (CRDS / name).open() as f:
        crd: dict[str, Any] = yaml.load(f, Loader=loader)
    return crd


def version_of(integration: Integration) -> dict[str, Any]:
    crd = load(FILES[integration.name])
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == integration.workload.version]
    return version


def schema_at(integration: Integration, *path: str) -> dict[str, Any]:
    node: dict[str, Any] = version_of(integration)["schema"]["openAPIV3Schema"]
    for step in path:
        node = node["items"] if step == "[]" else node["properties"][step]
    return node


@pytest.mark.parametrize("integration", KINDS, ids=lambda i: i.name)
def test_crd_serves_the_integrations_kind_and_version(integration: Integration) -> None:
    crd = load(FILES[integration.name])
    w = integration.workload
    assert crd["spec"]["group"] == w.group
    assert crd["spec"]["names"]["kind"] == w.kind
    assert crd["spec"]["names"]["plural"] == w.plural
    assert crd["metadata"]["name"] == f"{w.plural}.{w.group}"
    assert version_of(integration)["served"]


@pytest.mark.parametrize(
    ("integration", "path"),
    [
        (RAY_JOB, ("spec", "suspend")),
        (RAY_CLUSTER, ("spec", "suspend")),
        (SPARK_APPLICATION, ("spec", "suspend")),
        *((i, ("spec", "runPolicy", "suspend")) for i in TRAINING),
    ],
    ids=lambda v: v.name if isinstance(v, Integration) else None,
)
def test_the_hold_field_is_a_boolean(integration: Integration, path: tuple[str, ...]) -> None:
    assert schema_at(integration, *path)["type"] == "boolean"


def test_status_is_a_subresource_except_argos() -> None:
    """The reconciler writes Kubeflow's Queuing condition to /status; Argo's Enqueued
    condition rides on a patch of the Workflow itself (no status subresource)."""
    for integration in (*TRAINING, RAY_JOB, RAY_CLUSTER, SPARK_APPLICATION, MPI_JOB_V1ALPHA1):
        assert "status" in version_of(integration)["subresources"], integration.name
    assert "status" not in version_of(ARGO_WORKFLOW).get("subresources", {})
    assert schema_at(ARGO_WORKFLOW, "status")["x-kubernetes-preserve-unknown-fields"]
    assert schema_at(ARGO_WORKFLOW, "spec")["x-kubernetes-preserve-unknown-fields"]


def test_ray_groups_and_states_are_where_the_integration_reads_them() -> None:
    for integration, base in ((RAY_JOB, ("spec", "rayClusterSpec")), (RAY_CLUSTER, ("spec",))):
        group = schema_at(integration, *base, "workerGroupSpecs", "[]")["properties"]
        assert {"groupName", "replicas", "numOfHosts", "template"} <= set(group)
        assert group["replicas"].get("default") == 0  # the integration's default too
        assert "template" in schema_at(integration, *base, "headGroupSpec")["properties"]
    job_status = schema_at(RAY_JOB, "status")["properties"]
    assert {"jobDeploymentStatus", "startTime"} <= set(job_status)
    cluster_status = schema_at(RAY_CLUSTER, "status")["properties"]
    assert {"readyWorkerReplicas", "state"} <= set(cluster_status)


def test_spark_fields_the_integration_reads() -> None:
    spec = schema_at(SPARK_APPLICATION, "spec")["properties"]
    assert {"mode", "driver", "executor", "dynamicAllocation", "batchSchedulerOptions"} <= set(spec)
    assert {"cores", "coreRequest", "coreLimit", "memory", "memoryOverhead", "gpu"} <= set(
        spec["driver"]["properties"]
    )
    assert "instances" in spec["executor"]["properties"]
    assert "priorityClassName" in spec["batchSchedulerOptions"]["properties"]
    state = schema_at(SPARK_APPLICATION, "status", "applicationState")["properties"]
    assert "state" in state


@pytest.mark.parametrize("integration", TRAINING, ids=lambda i: i.name)
def test_training_replica_specs_and_conditions(integration: KubeflowJob) -> None:
    """The replica-specs field the integration reads, a replica's replicas and template, the
    scheduling policy's priority class, and conditions that accept "Queuing"."""
    field = integration.replica_specs_field
    specs = schema_at(integration, "spec", field)
    assert specs["type"] == "object"
    assert {"replicas", "template"} <= set(specs["additionalProperties"]["properties"])
    policy = schema_at(integration, "spec", "runPolicy", "schedulingPolicy")["properties"]
    assert "priorityClass" in policy
    item = schema_at(integration, "status", "conditions", "[]")["properties"]
    assert {"type", "status", "message", "lastUpdateTime", "lastTransitionTime"} <= set(item)
    assert "enum" not in item["type"]  # "Queuing" is accepted


def test_mpijob_v1alpha1_is_the_forks_single_template_shape() -> None:
    spec = schema_at(MPI_JOB_V1ALPHA1, "spec")["properties"]
    assert {"replicas", "gpus", "template"} <= set(spec)
    assert "launcherStatus" in schema_at(MPI_JOB_V1ALPHA1, "status")["properties"]
