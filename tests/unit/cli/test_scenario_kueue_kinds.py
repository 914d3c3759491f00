"""`simulate` and `explain` take Kueue's further kinds (issue 26) as `workload:` manifests:
each unit is the one the controller makes (its kind's suffix, every pod set's count x
request, the quota from the label), and `explain KIND/NAME` finds it by the workload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.simulation.scenario import ScenarioError, parse_scenario
from koordqueue.simulation.simulator import simulate
from tests.unit.cli.helpers import run
from tests.unit.integrations.kueue_kinds import appwrapper, batch_job, component


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    """A manifest as a user writes it: no uid, no namespace, no status."""
    obj["metadata"].pop("uid", None)
    obj["metadata"].pop("namespace", None)
    obj.pop("status", None)
    return obj


def workloads() -> list[dict[str, Any]]:
    return [
        appwrapper(component(batch_job(parallelism=2)), name="wrapped", quota="team"),
    ]


EXPECTED = {  # unit -> (consumer kind, cpu)
    "wrapped-aw-qu": ("AppWrapper", "2"),
}
TARGETS = [  # how a user names each kind's workload, kubectl's spellings and Kueue's
    (["appwrapper/wrapped"], "wrapped-aw-qu"),
    (["--kind", "workload.codeflare.dev/appwrapper", "wrapped"], "wrapped-aw-qu"),
]


def scenario_text(cpu: str = "100") -> str:
    units = [{"arrive": i, "workload": _clean(w)} for i, w in enumerate(workloads())]
    return yaml.safe_dump({"quotas": [{"name": "team", "max": {"cpu": cpu}}], "units": units})


def test_every_kind_is_a_unit_named_and_sized_as_the_controller_makes_it() -> None:
    units = {u.name: u for u in parse_scenario(scenario_text()).units}
    got = {n: (u.consumer_kind, u.resource.to_quantities()["cpu"]) for n, u in units.items()}
    assert got == EXPECTED
    assert all(u.quota == "team" for u in units.values())


def test_simulate_admits_what_the_quota_has_room_for() -> None:
    result = simulate(parse_scenario(scenario_text()))
    admitted = {key for record in result.steps for key in record.admitted}
    assert admitted == {f"default/{name}" for name in EXPECTED}


@pytest.mark.parametrize(("target", "unit"), TARGETS)
def test_explain_finds_each_kinds_unit_by_the_workload(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: list[str], unit: str
) -> None:
    path = tmp_path / "kinds.yaml"
    path.write_text(scenario_text(), encoding="utf-8")
    by_unit = run(capsys, "explain", "--scenario", path, unit, "-o", "json")
    by_workload = run(capsys, "explain", "--scenario", path, *target, "-o", "json")
    assert by_unit.code == 0, by_unit.err
    assert (by_workload.code, by_workload.out) == (0, by_unit.out), by_workload.err


def test_a_bad_workload_is_a_located_error() -> None:
    bad = _clean(
        appwrapper(component(batch_job(), [{"path": "template.spec.nowhere"}]), quota="team")
    )
    text = yaml.safe_dump({"quotas": [{"name": "team"}], "units": [{"workload": bad}]})
    with pytest.raises(ScenarioError, match=r"spec\.components\[0\]\.podSets\[0\]\.path"):
        parse_scenario(text)
