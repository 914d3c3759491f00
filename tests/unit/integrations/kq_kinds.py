"""Builders of Koord-Queue's further kinds (issue 26) as the API's JSON: TFJob, RayJob,
RayCluster, SparkApplication, Argo Workflow, MPIJob v1alpha1; and of Kueue's training-operator
kinds of the same shape (XGBoostJob, PaddleJob, JAXJob). Shared by the unit tests and the
e2e test (tests/e2e/test_koord_queue_kinds.py), so both queue the same manifests."""

from __future__ import annotations

from typing import Any

QUOTA_LABEL = "quota.scheduling.koordinator.sh/name"


def meta(
    name: str,
    namespace: str = "default",
    quota: str = "q",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "labels": {QUOTA_LABEL: quota, **(labels or {})},
        "annotations": dict(annotations or {}),
    }


def pod_template(
    cpu: str | None = "1",
    memory: str | None = None,
    priority_class: str | None = None,
    priority: int | None = None,
    limits_only: bool = False,
) -> dict[str, Any]:
    amounts = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    resources = {"limits" if limits_only else "requests": amounts}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if priority is not None:
        spec["priority"] = priority
    return {"spec": spec}


REPLICA_SPECS = {
    "TFJob": "tfReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs",
    "JAXJob": "jaxReplicaSpecs",
}
"""The replica-specs field of each training-operator kind (kubeflow.org/v1) built here."""


def kubeflow_job(
    kind: str,
    name: str = "train",
    namespace: str = "default",
    quota: str = "q",
    roles: dict[str, tuple[int | None, dict[str, Any]]] | None = None,
    suspend: bool = True,
    scheduling_priority_class: str | None = None,
) -> dict[str, Any]:
    """A training-operator job of `kind`. roles: {Role: (replicas or None, pod template)};
    default one Worker of 1 cpu."""
    specs = {}
    for role, (replicas, template) in (roles or {"Worker": (1, pod_template())}).items():
        spec: dict[str, Any] = {"restartPolicy": "Never", "template": template}
        if replicas is not None:
            spec["replicas"] = replicas
        specs[role] = spec
    run_policy: dict[str, Any] = {"suspend": suspend}
    if scheduling_priority_class:
        run_policy["schedulingPolicy"] = {"priorityClass": scheduling_priority_class}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": meta(name, namespace, quota),
        "spec": {REPLICA_SPECS[kind]: specs, "runPolicy": run_policy},
    }


def tfjob(
    name: str = "tf",
    namespace: str = "default",
    quota: str = "q",
    roles: dict[str, tuple[int | None, dict[str, Any]]] | None = None,
    suspend: bool = True,
    scheduling_priority_class: str | None = None,
) -> dict[str, Any]:
    return kubeflow_job("TFJob", name, namespace, quota, roles, suspend, scheduling_priority_class)


def ray_cluster_spec(
    head: dict[str, Any], workers: list[tuple[str, int | None, dict[str, Any]]]
) -> dict[str, Any]:
    """workers: (groupName, replicas or None, pod template)."""
    groups = []
    for group, replicas, template in workers:
        item: dict[str, Any] = {"groupName": group, "rayStartParams": {}, "template": template}
        if replicas is not None:
            item["replicas"] = replicas
        groups.append(item)
    return {"headGroupSpec": {"rayStartParams": {}, "template": head}, "workerGroupSpecs": groups}


def rayjob(
    name: str = "ray",
    namespace: str = "default",
    quota: str = "q",
    head: dict[str, Any] | None = None,
    workers: list[tuple[str, int | None, dict[str, Any]]] | None = None,
    suspend: bool = True,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    cluster = ray_cluster_spec(head or pod_template(), workers or [])
    obj: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": meta(name, namespace, quota, annotations),
        "spec": {"entrypoint": "python -c 1", "suspend": suspend, "rayClusterSpec": cluster},
    }
    if status is not None:
        obj["status"] = status
    return obj


def raycluster(
    name: str = "rc",
    namespace: str = "default",
    quota: str = "q",
    head: dict[str, Any] | None = None,
    workers: list[tuple[str, int | None, dict[str, Any]]] | None = None,
    suspend: bool | None = True,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec = ray_cluster_spec(head or pod_template(), workers or [])
    if suspend is not None:
        spec["suspend"] = suspend
    obj: dict[str, Any] = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": meta(name, namespace, quota, annotations),
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def spark_role(
    cores: int | None = 1,
    memory: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    role: dict[str, Any] = {**extra}
    if cores is not None:
        role["cores"] = cores
    if memory is not None:
        role["memory"] = memory
    return role


def sparkapp(
    name: str = "spark",
    namespace: str = "default",
    quota: str = "q",
    mode: str = "cluster",
    driver: dict[str, Any] | None = None,
    executor: dict[str, Any] | None = None,
    instances: int | None = 1,
    suspended: bool = True,
    priority_class: str | None = None,
    annotations: dict[str, str] | None = None,
    state: str | None = None,
) -> dict[str, Any]:
    notes = dict(annotations or {})
    if suspended:
        notes.setdefault("scheduling.x-k8s.io/suspend", "true")
    executor_spec = dict(executor if executor is not None else spark_role())
    if instances is not None:
        executor_spec["instances"] = instances
    spec: dict[str, Any] = {
        "type": "Python",
        "mode": mode,
        "image": "spark:3.5.0",
        "mainApplicationFile": "local:///opt/spark/examples/src/main/python/pi.py",
        "sparkVersion": "3.5.0",
        "driver": driver if driver is not None else spark_role(),
        "executor": executor_spec,
    }
    if suspended:
        spec["suspend"] = True
    if priority_class:
        spec["batchSchedulerOptions"] = {"priorityClassName": priority_class}
    obj: dict[str, Any] = {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": meta(name, namespace, quota, notes),
        "spec": spec,
    }
    if state is not None:
        obj["status"] = {"applicationState": {"state": state}}
    return obj


def workflow(
    name: str = "wf",
    namespace: str = "default",
    quota: str = "q",
    min_resources: str | None = "cpu: 1\nmemory: 512Mi",
    suspend: bool | None = True,
    priority: int | None = None,
    entry_priority_class: str | None = None,
    annotations: dict[str, str] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    notes = dict(annotations or {})
    if min_resources is not None:
        notes["koord-queue/min-resources"] = min_resources
    entry: dict[str, Any] = {
        "name": "main",
        "container": {"image": "busybox", "command": ["echo", "hello"]},
    }
    if entry_priority_class:
        entry["priorityClassName"] = entry_priority_class
    spec: dict[str, Any] = {"entrypoint": "main", "templates": [entry]}
    if suspend is not None:
        spec["suspend"] = suspend
    if priority is not None:
        spec["priority"] = priority
    obj: dict[str, Any] = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": meta(name, namespace, quota, notes),
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def mpijob_v1alpha1(
    name: str = "mpi",
    namespace: str = "default",
    quota: str = "q",
    replicas: int | None = 2,
    template: dict[str, Any] | None = None,
    suspended: bool = True,
    annotations: dict[str, str] | None = None,
    launcher_status: str | None = None,
) -> dict[str, Any]:
    notes = dict(annotations or {})
    if suspended:
        notes.setdefault("scheduling.x-k8s.io/suspend", "true")
    spec: dict[str, Any] = {"template": template or pod_template()}
    if replicas is not None:
        spec["replicas"] = replicas
    obj: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "MPIJob",
        "metadata": meta(name, namespace, quota, notes),
        "spec": spec,
    }
    if launcher_status is not None:
        obj["status"] = {"launcherStatus": launcher_status}
    return obj
