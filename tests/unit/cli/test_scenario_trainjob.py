"""`simulate` and `explain` take a TrainJob as a `workload:` manifest with its runtime under
the unit's `references:` (what the controller reads from the API): the unit is the one the
controller makes (suffix -tj-qu, every pod set's count x request from the runtime), `explain
trainjob/NAME` finds it, and a TrainJob whose runtime is not listed is a located error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.simulation.scenario import ScenarioError, parse_scenario
from koordqueue.simulation.simulator import simulate
from tests.unit.cli.helpers import run
from tests.unit.integrations.trainer_kinds import kueue_runtime, trainjob


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    """A manifest as a user writes it: no uid, no namespace, no status."""
    obj["metadata"].pop("uid", None)
    obj["metadata"].pop("namespace", None)
    obj.pop("status", None)
    return obj


def scenario_text(references: bool = True, cpu: str = "100") -> str:
    unit: dict[str, Any] = {"workload": _clean(trainjob(name="llm", num_nodes=3, quota="team"))}
    if references:
        unit["references"] = [kueue_runtime()]
    doc = {"quotas": [{"name": "team", "max": {"cpu": cpu}}], "units": [unit]}
    return yaml.safe_dump(doc)


def test_the_unit_is_named_and_sized_as_the_controller_makes_it() -> None:
    (unit,) = parse_scenario(scenario_text()).units
    assert (unit.name, unit.namespace, unit.quota) == ("llm-tj-qu", "default", "team")
    assert unit.consumer_kind == "TrainJob"
    assert unit.resource.to_quantities() == {"cpu": "4"}  # node 3 x 1 + foo 1 x 1


def test_simulate_admits_it_when_the_quota_has_room_and_not_otherwise() -> None:
    admitted = {k for r in simulate(parse_scenario(scenario_text())).steps for k in r.admitted}
    assert admitted == {"default/llm-tj-qu"}
    small = simulate(parse_scenario(scenario_text(cpu="3")))
    assert not {k for r in small.steps for k in r.admitted}


@pytest.mark.parametrize(
    "target", [["trainjob/llm"], ["--kind", "trainer.kubeflow.org/trainjob", "llm"]]
)
def test_explain_finds_the_unit_by_the_trainjob(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: list[str]
) -> None:
    path = tmp_path / "trainjob.yaml"
    path.write_text(scenario_text(), encoding="utf-8")
    by_unit = run(capsys, "explain", "--scenario", path, "llm-tj-qu", "-o", "json")
    by_workload = run(capsys, "explain", "--scenario", path, *target, "-o", "json")
    assert by_unit.code == 0, by_unit.err
    assert (by_workload.code, by_workload.out) == (0, by_unit.out), by_workload.err


def test_a_trainjob_without_its_runtime_is_a_located_error() -> None:
    with pytest.raises(ScenarioError, match=r"ClusterTrainingRuntime 'test' not found"):
        parse_scenario(scenario_text(references=False))


def test_references_must_be_a_list_of_objects() -> None:
    doc = yaml.safe_load(scenario_text())
    doc["units"][0]["references"] = "test"
    with pytest.raises(ScenarioError, match=r"units\[0\]\.references"):
        parse_scenario(yaml.safe_dump(doc))
