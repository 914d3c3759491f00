"""`simulate` and `explain` take Koord-Queue's further kinds and Kueue's training-operator
kinds (issue 26) as `workload:`
manifests: each unit is the one the controller makes (its kind's suffix, its pod sets'
resource, the quota from the label), and `explain KIND/NAME` finds it by the workload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.simulation.scenario import ScenarioError, parse_scenario
from koordqueue.simulation.simulator import simulate
from tests.unit.cli.helpers import run
from tests.unit.integrations.kq_kinds import (
    kubeflow_job,
    mpijob_v1alpha1,
    pod_template,
    raycluster,
    rayjob,
    sparkapp,
    tfjob,
    workflow,
)


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    """A manifest as a user writes it: no uid, no namespace (the scenario's default)."""
    meta = obj["metadata"]
    meta.pop("uid", None)
    meta.pop("namespace", None)
    return obj


WORKLOADS = [
    tfjob("mnist", quota="team", roles={"Worker": (2, pod_template("1"))}),
    rayjob("tune", quota="team", head=pod_template("1"), workers=[("cpu", 1, pod_template("1"))]),
    raycluster("serve", quota="team", head=pod_template("1")),
    sparkapp("pi", quota="team", instances=1),
    workflow("steps", quota="team", min_resources="cpu: 1"),
    mpijob_v1alpha1("allreduce", quota="team", replicas=2, template=pod_template("1")),
    kubeflow_job("XGBoostJob", "boost", quota="team",
                 roles={"Master": (1, pod_template("1")), "Worker": (2, pod_template("1"))}),
    kubeflow_job("PaddleJob", "paddle", quota="team", roles={"Worker": (2, pod_template("2"))}),
    kubeflow_job("JAXJob", "jax", quota="team", roles={"Worker": (4, pod_template("1"))}),
]
EXPECTED = {  # unit -> (consumer kind, cpu)
    "mnist-tf-qu": ("TFJob", "2"),
    "tune-ray-qu": ("RayJob", "2"),
    "serve-raycluster-qu": ("RayCluster", "1"),
    "pi-spark-qu": ("SparkApplication", "2"),
    "steps-wf-qu": ("Workflow", "1"),
    "allreduce-mpi-qu": ("MPIJob", "2"),
    "boost-xgb-qu": ("XGBoostJob", "3"),
    "paddle-paddle-qu": ("PaddleJob", "4"),
    "jax-jax-qu": ("JAXJob", "4"),
}


def scenario_text(cpu: str = "10") -> str:
    units = [{"arrive": i, "workload": _clean(w)} for i, w in enumerate(WORKLOADS)]
    return yaml.safe_dump({"quotas": [{"name": "team", "max": {"cpu": cpu}}], "units": units})


def test_every_kind_is_a_unit_named_and_sized_as_the_controller_makes_it() -> None:
    units = {u.name: u for u in parse_scenario(scenario_text()).units}
    assert {n: (u.consumer_kind, u.resource.to_quantities()["cpu"]) for n, u in units.items()} == (
        EXPECTED
    )
    assert all(u.quota == "team" for u in units.values())


def test_simulate_admits_each_while_the_quota_has_room() -> None:
    result = simulate(parse_scenario(scenario_text(cpu="5")))
    admitted = [key for record in result.steps for key in record.admitted]
    assert admitted == ["default/mnist-tf-qu", "default/tune-ray-qu", "default/serve-raycluster-qu"]


@pytest.mark.parametrize(
    ("target", "unit"),
    [
        (["tfjob/mnist"], "mnist-tf-qu"),
        (["rayjobs.ray.io/tune"], "tune-ray-qu"),
        (["--kind", "ray.io/raycluster", "serve"], "serve-raycluster-qu"),
        (["sparkapplication/pi"], "pi-spark-qu"),
        (["workflows/steps"], "steps-wf-qu"),
        (["--kind", "kubeflow.org/mpijob-v1alpha1", "allreduce"], "allreduce-mpi-qu"),
        (["xgboostjob/boost"], "boost-xgb-qu"),
        (["paddlejobs.kubeflow.org/paddle"], "paddle-paddle-qu"),
        (["--kind", "kubeflow.org/jaxjob", "jax"], "jax-jax-qu"),
    ],
)
def test_explain_finds_each_kinds_unit_by_the_workload(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: list[str], unit: str
) -> None:
    path = tmp_path / "kinds.yaml"
    path.write_text(scenario_text(cpu="5"), encoding="utf-8")
    by_unit = run(capsys, "explain", "--scenario", path, unit, "-o", "json")
    by_workload = run(capsys, "explain", "--scenario", path, *target, "-o", "json")
    assert by_unit.code == 0, by_unit.err
    assert (by_workload.code, by_workload.out) == (0, by_unit.out), by_workload.err


def test_a_bad_workload_is_a_located_error() -> None:
    bad = _clean(mpijob_v1alpha1("sized-by-gpus", quota="team", replicas=None))
    text = yaml.safe_dump({"quotas": [{"name": "team"}], "units": [{"workload": bad}]})
    with pytest.raises(ScenarioError, match=r"spec\.replicas: must be set"):
        parse_scenario(text)
