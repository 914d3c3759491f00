"""Builders of framework objects (the API's JSON as dicts) for the integration tests."""

from __future__ import annotations

from typing import Any


def container(cpu: str | None = None, memory: str | None = None) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return {"name": "c", "image": "busybox", "resources": {"requests": requests}}


def template(
    cpu: str | None = None,
    memory: str | None = None,
    priority_class: str | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container(cpu, memory)]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if priority is not None:
        spec["priority"] = priority
    return {"spec": spec}


def kubeflow_job(
    kind: str,
    roles: dict[str, tuple[int | None, dict[str, Any]]],
    *,
    name: str = "test-job",
    suspend: bool | None = True,
    annotations: dict[str, str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    start_time: str | None = None,
    scheduling_priority_class: str | None = None,
) -> dict[str, Any]:
    """A PyTorchJob or MPIJob with `roles`: {Role: (replicas or None, pod template)}."""
    field = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "mpiReplicaSpecs"
    version = "kubeflow.org/v1" if kind == "PyTorchJob" else "kubeflow.org/v2beta1"
    specs: dict[str, Any] = {}
    for role, (replicas, tmpl) in roles.items():
        spec: dict[str, Any] = {"template": tmpl}
        if replicas is not None:
            spec["replicas"] = replicas
        specs[role] = spec
    run_policy: dict[str, Any] = {}
    if suspend is not None:
        run_policy["suspend"] = suspend
    if scheduling_priority_class:
        run_policy["schedulingPolicy"] = {"priorityClass": scheduling_priority_class}
    status: dict[str, Any] = {}
    if conditions is not None:
        status["conditions"] = conditions
    if start_time:
        status["startTime"] = start_time
    return {
        "apiVersion": version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": {"quota.scheduling.koordinator.sh/name": "q"},
            "annotations": dict(annotations or {}),
        },
        "spec": {field: specs, "runPolicy": run_policy},
        "status": status,
    }


def condition(kind: str, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z"}


def jobset(
    replicated: list[tuple[str, int, int | None, int | None, dict[str, Any]]],
    *,
    name: str = "jobset",
    suspend: bool = True,
    conditions: list[dict[str, Any]] | None = None,
    jobs_status: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A JobSet; `replicated`: (name, replicas, parallelism, completions, pod template)."""
    jobs = []
    for rj_name, replicas, parallelism, completions, tmpl in replicated:
        job_spec: dict[str, Any] = {"template": tmpl}
        if parallelism is not None:
            job_spec["parallelism"] = parallelism
        if completions is not None:
            job_spec["completions"] = completions
        jobs.append({"name": rj_name, "replicas": replicas, "template": {"spec": job_spec}})
    status: dict[str, Any] = {}
    if conditions is not None:
        status["conditions"] = conditions
    if jobs_status is not None:
        status["replicatedJobsStatus"] = jobs_status
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"quota.scheduling.koordinator.sh/name": "q"},
            "annotations": dict(annotations or {}),
        },
        "spec": {"suspend": suspend, "replicatedJobs": jobs},
        "status": status,
    }


def pod(
    name: str,
    *,
    group: str | None = None,
    total: str | None = None,
    gated: bool = True,
    phase: str | None = None,
    cpu: str = "1",
    ready: bool | None = None,
    extra_gates: list[str] | None = None,
    annotations: dict[str, str] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    labels = {"quota.scheduling.koordinator.sh/name": "q"}
    notes = dict(annotations or {})
    if group is not None:
        labels["koord-queue/pod-group-name"] = group
    if total is not None:
        notes["koord-queue/pod-group-total-count"] = total
    gates = [{"name": g} for g in extra_gates or []]
    if gated:
        gates.append({"name": "koord-queue/admission"})
    spec: dict[str, Any] = {"containers": [container(cpu)]}
    if gates:
        spec["schedulingGates"] = gates
    if priority_class:
        spec["priorityClassName"] = priority_class
    status: dict[str, Any] = {"phase": phase or "Pending"}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": labels,
            "annotations": notes,
        },
        "spec": spec,
        "status": status,
    }
