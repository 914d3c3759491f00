"""Builders of Kueue's further kinds (issue 26) as the API's JSON, for their unit tests."""

from __future__ import annotations

from typing import Any

from tests.unit.integrations.helpers import template

Obj = dict[str, Any]


def batch_job(
    parallelism: int | None = None, completions: int | None = None, cpu: str = "1"
) -> Obj:
    spec: Obj = {"template": template(cpu)}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job"}, "spec": spec}


def component(wrapped: Obj, pod_sets: list[Obj] | None = None) -> Obj:
    return {"template": wrapped, **({"podSets": pod_sets} if pod_sets is not None else {})}


def appwrapper(
    *components: Obj,
    name: str = "aw",
    quota: str = "q",
    suspend: bool = True,
    phase: str | None = None,
    conditions: list[Obj] | None = None,
    annotations: dict[str, str] | None = None,
    component_status: list[Obj] | None = None,
) -> Obj:
    status: Obj = {}
    if phase is not None:
        status["phase"] = phase
    if conditions is not None:
        status["conditions"] = conditions
    if component_status is not None:
        status["componentStatus"] = component_status
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"quota.scheduling.koordinator.sh/name": quota},
            "annotations": dict(annotations or {}),
        },
        "spec": {"suspend": suspend, "components": list(components)},
        "status": status,
    }
