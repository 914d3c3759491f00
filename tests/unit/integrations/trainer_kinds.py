"""Builders of Kubeflow Trainer objects (TrainJob and its runtimes) as the API's JSON, for the
TrainJob tests: the shapes of Kueue's testingjobs/trainjob and testingjobs/jobset wrappers."""

from __future__ import annotations

from typing import Any

from tests.unit.integrations.helpers import template

Obj = dict[str, Any]
API_VERSION = "trainer.kubeflow.org/v1alpha1"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def replicated_job(
    name: str,
    *,
    replicas: int | None = None,
    parallelism: int | None = None,
    completions: int | None = None,
    ancestor: str | None = None,
    pod_template: Obj | None = None,
) -> Obj:
    spec: Obj = {"template": pod_template if pod_template is not None else template("1")}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    job_template: Obj = {"spec": spec}
    if ancestor is not None:
        job_template["metadata"] = {"labels": {ANCESTOR: ancestor}}
    job: Obj = {"name": name, "template": job_template}
    if replicas is not None:
        job["replicas"] = replicas
    return job


def node_template(cpu: str = "1", memory: str | None = None, **extra: Any) -> Obj:
    """A pod template whose one container is the trainer's (named `node`)."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    node = {"name": "node", "image": "t", "resources": {"requests": requests}}
    spec: Obj = {"containers": [node]}
    spec.update(extra)
    return {"spec": spec}


def runtime(
    *jobs: Obj,
    name: str = "test",
    namespace: str | None = None,
    ml_policy: Obj | None = None,
) -> Obj:
    """A ClusterTrainingRuntime (a TrainingRuntime when `namespace` is given)."""
    kind = "TrainingRuntime" if namespace is not None else "ClusterTrainingRuntime"
    metadata: Obj = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    spec: Obj = {"template": {"spec": {"replicatedJobs": list(jobs)}}}
    if ml_policy is not None:
        spec["mlPolicy"] = ml_policy
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def trainjob(
    *,
    name: str = "trainjob",
    namespace: str = "ns",
    runtime_name: str = "test",
    runtime_kind: str | None = "ClusterTrainingRuntime",
    num_nodes: Any = None,
    resources_per_node: Obj | None = None,
    suspend: bool = True,
    quota: str = "q",
    annotations: dict[str, str] | None = None,
    conditions: list[Obj] | None = None,
    jobs_status: list[Obj] | None = None,
    runtime_patches: list[Obj] | None = None,
) -> Obj:
    ref: Obj = {"name": runtime_name, "apiGroup": "trainer.kubeflow.org"}
    if runtime_kind is not None:
        ref["kind"] = runtime_kind
    spec: Obj = {"runtimeRef": ref, "suspend": suspend}
    trainer: Obj = {}
    if num_nodes is not None:
        trainer["numNodes"] = num_nodes
    if resources_per_node is not None:
        trainer["resourcesPerNode"] = resources_per_node
    if trainer:
        spec["trainer"] = trainer
    if runtime_patches is not None:
        spec["runtimePatches"] = runtime_patches
    status: Obj = {}
    if conditions is not None:
        status["conditions"] = conditions
    if jobs_status is not None:
        status["jobsStatus"] = jobs_status
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": {"quota.scheduling.koordinator.sh/name": quota},
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
        "status": status,
    }


def kueue_runtime() -> Obj:
    """Kueue's TestReconciler runtime: `node` (the trainer) and `foo`, each 1 x 1."""
    return runtime(
        replicated_job("node", replicas=1, parallelism=1, completions=1, ancestor="trainer",
                       pod_template=node_template("1")),
        replicated_job("foo", replicas=1, parallelism=1, completions=1),
    )
