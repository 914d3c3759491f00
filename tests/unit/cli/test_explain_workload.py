"""`koordqueue explain KIND/NAME` and `--kind KIND NAME`: a workload's unit by the workload.

The unit name comes from the integration's own `unit_name` (the controller's naming), so
`pytorchjob/train` is the unit `train-py-qu` in a scenario as on a cluster.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import koordqueue.kube.api as kube_api
from koordqueue.cli.explain import KIND_ALIASES, read_cluster, unit_key_of
from koordqueue.domain.integrations import BATCH_JOB, INTEGRATIONS, JOBSET, POD, PYTORCH_JOB
from koordqueue.domain.names import POD_GROUP_NAME_LABEL
from tests.unit.cli.helpers import EXAMPLES, run
from tests.unit.cli.test_scenario_workloads import SCENARIO

HIERARCHY = EXAMPLES / "hierarchy.yaml"


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "workloads.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    return path


def _same_as_unit(
    capsys: pytest.CaptureFixture[str], scenario: Path, unit: str, *target: str
) -> None:
    by_unit = run(capsys, "explain", "--scenario", scenario, unit, "-o", "json")
    by_workload = run(capsys, "explain", "--scenario", scenario, *target, "-o", "json")
    assert by_unit.code == 0, by_unit.err
    assert (by_workload.code, by_workload.out) == (0, by_unit.out), by_workload.err


def test_kind_slash_name_explains_the_workloads_unit(
    capsys: pytest.CaptureFixture[str], scenario: Path
) -> None:
    _same_as_unit(capsys, scenario, "train-py-qu", "pytorchjob/train")


def test_kubectl_spellings_of_the_kind_are_accepted(
    capsys: pytest.CaptureFixture[str], scenario: Path
) -> None:
    _same_as_unit(capsys, scenario, "sweep-js-qu", "jobsets.jobset.x-k8s.io/sweep")
    _same_as_unit(capsys, scenario, "sweep-js-qu", "JobSet/sweep")
    _same_as_unit(capsys, scenario, "train-py-qu", "-n", "default", "pytorchjobs/train")


def test_the_kind_flag_takes_the_integrations_name(
    capsys: pytest.CaptureFixture[str], scenario: Path
) -> None:
    _same_as_unit(capsys, scenario, "train-py-qu", "--kind", "kubeflow.org/pytorchjob", "train")
    _same_as_unit(capsys, scenario, "default/train-py-qu", "--kind", "pytorchjob", "default/train")


def test_a_pod_groups_unit_by_the_kind_flag_and_the_group_name(
    capsys: pytest.CaptureFixture[str], scenario: Path
) -> None:
    _same_as_unit(capsys, scenario, "g-pod-qu", "--kind", "pod", "g")


def test_a_jobs_unit_is_named_after_the_job(capsys: pytest.CaptureFixture[str]) -> None:
    by_unit = run(capsys, "explain", "--scenario", HIERARCHY, "ml/a-eval", "--step", "1")
    by_job = run(
        capsys, "explain", "--scenario", HIERARCHY, "-n", "ml", "job/a-eval", "--step", "1"
    )
    assert by_unit.code == 0 and (by_job.code, by_job.out) == (0, by_unit.out)


def test_pod_slash_name_still_explains_the_pod(
    capsys: pytest.CaptureFixture[str], scenario: Path
) -> None:
    result = run(capsys, "explain", "--scenario", scenario, "pod/g-0")
    assert result.code == 2 and "explaining a pod needs a live cluster" in result.err


def test_a_missing_workloads_unit_is_named_with_the_workload(
    capsys: pytest.CaptureFixture[str], scenario: Path
) -> None:
    result = run(capsys, "explain", "--scenario", scenario, "mpijob/nope")
    assert result.code == 1
    assert "QueueUnit default/nope-mpi-qu (of MPIJob default/nope) not found" in result.err


def test_an_unknown_kind_is_bad_input(capsys: pytest.CaptureFixture[str], scenario: Path) -> None:
    result = run(capsys, "explain", "--scenario", scenario, "--kind", "rayservice", "x")
    assert result.code == 2 and "rayservice" in result.err and "pytorchjob" in result.err


def test_kind_and_pod_flags_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "explain", "--kind", "pod", "--pod", "x")
    assert result.code == 2 and "not both" in result.err


def test_kind_slash_takes_a_name_only(capsys: pytest.CaptureFixture[str], scenario: Path) -> None:
    result = run(capsys, "explain", "--scenario", scenario, "pytorchjob/ns/train")
    assert result.code == 2 and "NAME" in result.err


def test_every_kind_maps_through_its_integrations_unit_name() -> None:
    """One truth: the CLI's unit is the integration's unit_name, for every kind."""
    for integration in INTEGRATIONS.values():
        assert KIND_ALIASES[integration.name] is integration
        by_kind = KIND_ALIASES[integration.workload.kind.lower()]
        # a kind at two versions (MPIJob) answers to its first listed integration
        assert by_kind.workload.kind == integration.workload.kind
        obj = {"metadata": {"name": "w", "namespace": "ns"}}
        assert unit_key_of(integration, "ns", "w") == f"ns/{integration.unit_name(obj)}"
    assert unit_key_of(PYTORCH_JOB, "ns", "w") == "ns/w-py-qu"
    assert unit_key_of(BATCH_JOB, "ns", "w") == "ns/w"
    assert unit_key_of(JOBSET, "ns", "w") == "ns/w-js-qu"


# --- the cluster: the pod is read, its group names the unit ---------------------------------


class FakeApi:
    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.objects = objects
        self.gets: list[tuple[str, str, str | None]] = []

    def __call__(self, _client: Any, timeout: float = 0.0) -> FakeApi:
        return self

    def get(self, kind: Any, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        self.gets.append((kind.kind, name, namespace))
        return self.objects.get((kind.kind, name, namespace or ""))

    def list_objects(self, kind: Any, namespace: str | None = None) -> list[dict[str, Any]]:
        return []


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    api = FakeApi({})
    client = SimpleNamespace(configuration=SimpleNamespace(host="https://fake"), close=lambda: None)
    monkeypatch.setattr(kube_api, "load_api_client", lambda *_a, **_k: client)
    monkeypatch.setattr(kube_api, "KubeApi", api)
    return api


def test_on_a_cluster_a_group_members_pod_names_the_groups_unit(fake_api: FakeApi) -> None:
    fake_api.objects[("Pod", "g-0", "ns")] = {
        "metadata": {"name": "g-0", "namespace": "ns", "labels": {POD_GROUP_NAME_LABEL: "g"}}
    }
    _view, job, key = read_cluster("ns/g-0", None, None, "koord-queue", "1", integration=POD)
    assert (key, job) == ("ns/g-pod-qu", None)
    _view, _job, key = read_cluster("ns/solo", None, None, "koord-queue", "1", integration=POD)
    assert key == "ns/solo-pod-qu"  # no such pod: named after the name given


def test_on_a_cluster_other_kinds_are_not_read_and_only_a_job_gets_its_notes(
    fake_api: FakeApi,
) -> None:
    _view, _job, key = read_cluster("ns/t", None, None, "q", "1", integration=PYTORCH_JOB)
    assert key == "ns/t-py-qu" and fake_api.gets == []
    _view, _job, key = read_cluster("ns/t", None, None, "q", "1", integration=BATCH_JOB)
    assert key == "ns/t" and fake_api.gets == [("Job", "t", "ns")]
