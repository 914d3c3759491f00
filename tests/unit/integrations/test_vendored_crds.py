"""The vendored CRDs (tests/crds/integrations) serve what each integration reads and writes."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.domain.integrations import JOBSET, MPI_JOB, PYTORCH_JOB, Integration

CRDS = Path(__file__).resolve().parents[2] / "crds" / "integrations"


@functools.cache
def load(name: str) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the files are large
    with (CRDS / name).open() as f:
        crd: dict[str, Any] = yaml.load(f, Loader=loader)
    return crd


def schema_at(crd: dict[str, Any], version: str, *path: str) -> dict[str, Any]:
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    node: dict[str, Any] = served["schema"]["openAPIV3Schema"]
    for step in path:
        node = node["items"] if step == "[]" else node["properties"][step]
    return node


CASES = [
    (PYTORCH_JOB, "kubeflow.org_pytorchjobs.yaml", ("spec", "runPolicy", "suspend")),
    (MPI_JOB, "kubeflow.org_mpijobs.yaml", ("spec", "runPolicy", "suspend")),
    (JOBSET, "jobset.x-k8s.io_jobsets.yaml", ("spec", "suspend")),
]


@pytest.mark.parametrize(
    ("integration", "file", "suspend"), CASES, ids=["pytorchjob", "mpijob", "jobset"]
)
def test_crd_serves_the_integrations_kind_and_version(
    integration: Integration, file: str, suspend: tuple[str, ...]
) -> None:
    crd = load(file)
    w = integration.workload
    assert crd["spec"]["group"] == w.group
    assert crd["spec"]["names"]["kind"] == w.kind
    assert crd["spec"]["names"]["plural"] == w.plural
    assert crd["metadata"]["name"] == f"{w.plural}.{w.group}"
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == w.version]
    assert version["served"] and "status" in version["subresources"]
    assert schema_at(crd, w.version, *suspend)["type"] == "boolean"


@pytest.mark.parametrize("integration", [PYTORCH_JOB, MPI_JOB], ids=lambda i: i.name)
def test_kubeflow_conditions_take_the_queuing_condition_we_write(integration: Any) -> None:
    file = {PYTORCH_JOB.name: "kubeflow.org_pytorchjobs.yaml"}.get(
        integration.name, "kubeflow.org_mpijobs.yaml"
    )
    crd = load(file)
    item = schema_at(crd, integration.workload.version, "status", "conditions", "[]")
    assert set(item["properties"]) >= {
        "type",
        "status",
        "message",
        "lastUpdateTime",
        "lastTransitionTime",
    }
    assert "enum" not in item["properties"]["type"]  # any type, "Queuing" included
    specs = schema_at(crd, integration.workload.version, "spec", integration.replica_specs_field)
    assert specs["type"] == "object"


def test_jobset_replicated_jobs_have_replicas_and_a_job_template() -> None:
    crd = load("jobset.x-k8s.io_jobsets.yaml")
    item = schema_at(crd, "v1alpha2", "spec", "replicatedJobs", "[]")
    assert {"name", "replicas", "template"} <= set(item["properties"])
    job_spec = item["properties"]["template"]["properties"]["spec"]["properties"]
    assert {"parallelism", "completions", "template"} <= set(job_spec)
    statuses = schema_at(crd, "v1alpha2", "status", "replicatedJobsStatus", "[]")
    assert {"ready", "active", "succeeded", "failed"} <= set(statuses["properties"])
