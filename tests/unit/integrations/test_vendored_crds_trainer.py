"""The vendored Kubeflow Trainer CRDs (trainer v2.2.0, the version Kueue v0.17.0 pins) serve
what the TrainJob integration reads and writes: TrainJob's kind, plural, version and status
subresource, its boolean spec.suspend, the runtimeRef defaults the integration assumes when a
field is left out, the runtimes' scopes (which decide where a runtime is read), and every
field the pod sets and the state are read from."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.domain.integrations import TRAIN_JOB
from koordqueue.domain.integrations.trainjob import (
    CLUSTER_TRAINING_RUNTIME,
    DEFAULT_RUNTIME_KIND,
    TRAINER_GROUP,
    TRAINING_RUNTIME,
)

CRDS = Path(__file__).resolve().parents[2] / "crds" / "integrations"
TRAINJOBS = "trainer.kubeflow.org_trainjobs.yaml"
RUNTIMES = {
    CLUSTER_TRAINING_RUNTIME.kind: ("trainer.kubeflow.org_clustertrainingruntimes.yaml", "Cluster"),
    TRAINING_RUNTIME.kind: ("trainer.kubeflow.org_trainingruntimes.yaml", "Namespaced"),
}
JOB_TEMPLATE = ("spec", "template", "spec", "replicatedJobs", "[]", "template")
RUNTIME_READ = [
    ("spec", "template", "spec", "replicatedJobs", "[]", "name"),
    ("spec", "template", "spec", "replicatedJobs", "[]", "replicas"),
    (*JOB_TEMPLATE, "metadata", "labels"),
    (*JOB_TEMPLATE, "spec", "parallelism"),
    (*JOB_TEMPLATE, "spec", "template", "spec", "containers", "[]", "resources"),
    ("spec", "mlPolicy", "numNodes"),
    ("spec", "mlPolicy", "mpi", "runLauncherAsNode"),
]
TRAINJOB_READ = [
    ("spec", "runtimeRef", "name"),
    ("spec", "trainer", "numNodes"),
    ("spec", "trainer", "resourcesPerNode", "limits"),
    ("spec", "trainer", "resourcesPerNode", "requests"),
    ("spec", "runtimePatches", "[]", "trainingRuntimeSpec", "template", "spec", "replicatedJobs",
     "[]", "template", "metadata", "labels"),
    ("status", "conditions", "[]", "type"),
    ("status", "jobsStatus", "[]", "ready"),
    ("status", "jobsStatus", "[]", "active"),
]


@functools.cache
def load(name: str) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the files are large
    with (CRDS / name).open() as f:
        crd: dict[str, Any] = yaml.load(f, Loader=loader)
    return crd


def version(name: str, served: str = "v1alpha1") -> dict[str, Any]:
    (v,) = [v for v in load(name)["spec"]["versions"] if v["name"] == served]
    return v


def schema_at(name: str, *path: str) -> dict[str, Any]:
    node: dict[str, Any] = version(name)["schema"]["openAPIV3Schema"]
    for step in path:
        node = node["items"] if step == "[]" else node["properties"][step]
    return node


def test_the_trainjob_crd_serves_the_integrations_kind() -> None:
    crd, w = load(TRAINJOBS), TRAIN_JOB.workload
    assert (crd["spec"]["group"], crd["spec"]["names"]["kind"]) == (w.group, w.kind)
    assert crd["metadata"]["name"] == f"{w.plural}.{w.group}"
    assert version(TRAINJOBS, w.version)["served"]
    assert "status" in version(TRAINJOBS)["subresources"]
    assert schema_at(TRAINJOBS, "spec", "suspend")["type"] == "boolean"


def test_runtime_ref_defaults_are_the_ones_assumed() -> None:
    ref = ("spec", "runtimeRef")
    assert schema_at(TRAINJOBS, *ref, "kind")["default"] == DEFAULT_RUNTIME_KIND
    assert schema_at(TRAINJOBS, *ref, "apiGroup")["default"] == TRAINER_GROUP


@pytest.mark.parametrize("kind", sorted(RUNTIMES))
def test_each_runtime_crd_has_the_kind_plural_and_scope_read(kind: str) -> None:
    file, scope = RUNTIMES[kind]
    w = CLUSTER_TRAINING_RUNTIME if kind == CLUSTER_TRAINING_RUNTIME.kind else TRAINING_RUNTIME
    crd = load(file)
    assert (crd["spec"]["names"]["kind"], crd["spec"]["names"]["plural"]) == (w.kind, w.plural)
    assert (crd["spec"]["group"], crd["spec"]["scope"]) == (w.group, scope)
    assert version(file, w.version)["served"]


@pytest.mark.parametrize("path", TRAINJOB_READ, ids=".".join)
def test_the_trainjob_fields_read_are_in_the_schema(path: tuple[str, ...]) -> None:
    assert schema_at(TRAINJOBS, *path) is not None


@pytest.mark.parametrize("kind", sorted(RUNTIMES))
@pytest.mark.parametrize("path", RUNTIME_READ, ids=".".join)
def test_the_runtime_fields_read_are_in_the_schema(kind: str, path: tuple[str, ...]) -> None:
    assert schema_at(RUNTIMES[kind][0], *path) is not None
