"""SPEC 2.6: the batch/v1 Job extension's rules, without a cluster."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain.job_extension import (
    InvalidJobError,
    backoff_delay,
    job_resource,
    phase_from_job,
    pod_requests,
    pod_set_count,
    queue_unit_for_job,
)
from koordqueue.domain.queue_unit import Phase, queue_unit_from_object
from koordqueue.domain.resources import Resources


def container(
    cpu: str | None = None,
    memory: str | None = None,
    limits: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


def job(
    parallelism: int | None = 1,
    completions: int | None = None,
    succeeded: int = 0,
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": containers or [container("1", "1Gi")]}
    if init:
        pod["initContainers"] = init
    if priority_class:
        pod["priorityClassName"] = priority_class
    spec: dict[str, Any] = {"suspend": True, "template": {"spec": pod}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "uid-1",
            "labels": {"quota.scheduling.koordinator.sh/name": "q", "x": "y"},
            "annotations": {"a": "b"},
        },
        "spec": spec,
        "status": {"succeeded": succeeded},
    }


def test_resource_is_parallelism_times_the_pod_request() -> None:
    assert job_resource(job(parallelism=3)) == Resources.of(cpu="3", memory="3Gi")


def test_parallelism_defaults_to_one() -> None:
    assert job_resource(job(parallelism=None)) == Resources.of(cpu="1", memory="1Gi")


def test_containers_are_summed() -> None:
    pod = {"containers": [container("500m", "1Gi"), container("250m", "512Mi")]}
    assert pod_requests(pod) == Resources.of(cpu="750m", memory="1536Mi")


def test_init_containers_follow_the_max_rule() -> None:
    pod = {
        "containers": [container("1", "1Gi")],
        "initContainers": [container("2", "512Mi"), container("500m", "4Gi")],
    }
    assert pod_requests(pod) == Resources.of(cpu="2", memory="4Gi")


def test_sidecar_init_containers_add_to_the_app_containers() -> None:
    pod = {
        "containers": [container("1")],
        "initContainers": [container("500m", restartPolicy="Always")],
    }
    assert pod_requests(pod) == Resources.of(cpu="1500m")


def test_limits_stand_in_for_missing_requests() -> None:
    pod = {"containers": [container(limits={"cpu": "2", "nvidia.com/gpu": "1"})]}
    assert pod_requests(pod) == Resources.of({"cpu": "2", "nvidia.com/gpu": "1"})


def test_pod_overhead_is_added() -> None:
    pod = {"containers": [container("1")], "overhead": {"cpu": "100m"}}
    assert pod_requests(pod) == Resources.of(cpu="1100m")


def test_pod_set_count_is_min_of_parallelism_and_remaining_completions() -> None:
    assert pod_set_count(job(parallelism=4, completions=10, succeeded=8)) == 2
    assert pod_set_count(job(parallelism=4, completions=10)) == 4
    assert pod_set_count(job(parallelism=4)) == 4


def test_bad_quantity_in_the_pod_template_names_the_field() -> None:
    bad = job(containers=[container("lots")])
    with pytest.raises(InvalidJobError, match=r"containers\[0\]\.resources\.requests\.cpu"):
        job_resource(bad)


def test_queue_unit_copies_metadata_and_points_at_its_job() -> None:
    unit = queue_unit_for_job(job(parallelism=2), lambda name: None)
    assert unit["metadata"]["name"] == "j" and unit["metadata"]["namespace"] == "ns"
    assert unit["metadata"]["labels"] == {"quota.scheduling.koordinator.sh/name": "q", "x": "y"}
    assert unit["metadata"]["annotations"] == {"a": "b"}
    owner = unit["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Job", "uid-1", True)
    assert unit["spec"]["consumerRef"]["uid"] == "uid-1"
    assert unit["spec"]["queue"] == ""
    assert unit["spec"]["resource"] == {"cpu": "2", "memory": "2Gi"}
    assert unit["spec"]["podSet"][0]["count"] == 2
    assert unit["spec"]["priority"] == 0


def test_priority_comes_from_the_pod_priority_class() -> None:
    unit = queue_unit_for_job(job(priority_class="high"), {"high": 100}.get)
    assert unit["spec"]["priority"] == 100 and unit["spec"]["priorityClassName"] == "high"


def test_unknown_priority_class_means_priority_zero() -> None:
    assert (
        queue_unit_for_job(job(priority_class="ghost"), lambda name: None)["spec"]["priority"] == 0
    )


def test_generated_unit_parses_back_into_the_domain_model() -> None:
    obj = queue_unit_for_job(job(parallelism=2), lambda name: None)
    obj["metadata"]["uid"] = "unit-uid"
    unit = queue_unit_from_object(obj)
    assert unit.resource == Resources.of(cpu="2", memory="2Gi")
    assert unit.phase is Phase.ENQUEUED


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        ({"conditions": [{"type": "Complete", "status": "True"}]}, Phase.SUCCEED),
        ({"conditions": [{"type": "Failed", "status": "True"}]}, Phase.FAILED),
        ({"conditions": [{"type": "Failed", "status": "False"}], "active": 2}, Phase.RUNNING),
        ({"ready": 1}, Phase.RUNNING),
        ({}, None),
    ],
)
def test_job_status_moves_the_unit_phase(status: dict[str, Any], phase: Phase | None) -> None:
    assert phase_from_job({"status": status}) == phase


def test_backoff_doubles_from_ten_seconds_and_caps_at_fifteen_minutes() -> None:
    no_jitter = random.Random(0)
    no_jitter.uniform = lambda a, b: 0.0  # type: ignore[method-assign]
    assert [backoff_delay(n, no_jitter) for n in (1, 2, 3, 4)] == [10.0, 20.0, 40.0, 80.0]
    assert backoff_delay(50, no_jitter) == 900.0


@given(st.integers(1, 10_000), st.integers(0, 2**32))
def test_backoff_jitter_stays_within_ten_percent(attempt: int, seed: int) -> None:
    base = min(10.0 * 2 ** min(attempt - 1, 32), 900.0)
    delay = backoff_delay(attempt, random.Random(seed))
    assert base * 0.9 - 1e-9 <= delay <= base * 1.1 + 1e-9
