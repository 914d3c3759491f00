"""The run time the cluster's finished workloads show, for whatif (issue 29 part 2: "where
workloads finish at a given rate, from the snapshot's history")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.simulation.history import RunHistory, run_history, run_seconds
from koordqueue.simulation.scenario import parse_scenario
from koordqueue.simulation.scenario_fields import ScenarioError
from koordqueue.simulation.snapshot import snapshot_from_objects
from tests.unit.cli.helpers import run

NOW = 1_800_000_000.0


def finished(name: str, admitted: str | None, done: str | None, phase: str = "Succeed",
             allocated: str | None = None) -> dict[str, Any]:
    conditions = []
    if admitted:
        conditions.append({"type": "Admitted", "status": "True", "lastTransitionTime": admitted})
    if done:
        conditions.append({"type": "Finished", "status": "True", "lastTransitionTime": done})
    status: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if allocated:
        status["lastAllocateTime"] = allocated
    return {"metadata": {"name": name, "namespace": "ns", "labels": {},
                         "creationTimestamp": "2027-01-15T07:00:00Z"},
            "spec": {"resource": {"cpu": "1"}}, "status": status}


def test_a_finished_unit_ran_from_admission_to_finish() -> None:
    assert run_seconds(finished("a", "2027-01-15T08:00:00Z", "2027-01-15T08:00:30Z")) == 30
    failed = finished("f", None, "2027-01-15T08:01:00Z", phase="Failed",
                      allocated="2027-01-15T08:00:00Z")  # lastAllocateTime when no condition
    assert run_seconds(failed) == 60
    running = finished("r", "2027-01-15T08:00:00Z", None, phase="Running")
    assert run_seconds(running) is None
    assert run_seconds(finished("x", "2027-01-15T08:00:30Z", "2027-01-15T08:00:00Z")) is None
    assert run_seconds(finished("y", "garbage", "2027-01-15T08:00:00Z")) is None
    assert run_seconds({"status": "nonsense"}) is None


def test_the_median_over_the_admission_period_is_the_run_time_in_steps() -> None:
    units = [finished(f"u{i}", "2027-01-15T08:00:00Z", f"2027-01-15T08:00:{s:02d}Z")
             for i, s in enumerate((10, 20, 50))]
    history = run_history([*units, finished("r", "2027-01-15T08:00:00Z", None, "Running")],
                          step_seconds=3.0)
    assert history == RunHistory(3, 20.0, 3.0)
    assert history.runtime_steps == 7  # ceil(20 / 3)
    assert run_history([finished("r", None, None, "Running")], 1.0) is None


def test_a_snapshot_carries_the_history_and_the_scenario_reads_it_back() -> None:
    units = [finished("done", "2027-01-15T08:00:00Z", "2027-01-15T08:00:04Z")]
    snap = snapshot_from_objects([], [], units, now=NOW, step_seconds=2.0)
    assert snap.doc["history"] == {"finished": 1, "medianRunSeconds": 4.0, "stepSeconds": 2.0}
    assert parse_scenario(snap.to_yaml(), "snap").history == RunHistory(1, 4.0, 2.0)
    with pytest.raises(ScenarioError, match=r"history\.stepSeconds: must be a number > 0"):
        parse_scenario("name: x\nhistory: {finished: 1, medianRunSeconds: 3, stepSeconds: 0}\n")
    with pytest.raises(ScenarioError, match=r"history\.when: unknown field"):
        parse_scenario("name: x\nhistory: {finished: 1, medianRunSeconds: 3, when: now}\n")


def test_whatif_runtime_history_paces_the_replay_by_the_finished_units(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One 2-cpu quota, `held` admitted, `next` waiting: finished workloads ran 5 s at a 1 s
    admission period, so with --runtime history `held` finishes after 5 steps and `next`
    gets in then; without it nothing finishes and `next` waits for ever; a snapshot without
    finished units cannot give a run time, and says so."""
    scenario: dict[str, Any] = {
        "name": "snap", "steps": 2, "oversellRate": "1",
        "quotas": [{"name": "q", "max": {"cpu": "2"}}],
        "units": [{"name": "held", "namespace": "ns", "quota": "q", "resource": {"cpu": "2"},
                   "phase": "Running", "created": -10},
                  {"name": "next", "namespace": "ns", "quota": "q", "resource": {"cpu": "2"},
                   "created": -5}],
    }
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(scenario))
    result = run(capsys, "whatif", "--snapshot", plain, "--max", "q=cpu=2", "-o", "json")
    doc = json.loads(result.out)
    assert doc["runtime"] is None
    assert {u["unit"]: u["after"]["admittedAt"] for u in doc["units"]}["ns/next"] is None
    refused = run(capsys, "whatif", "--snapshot", plain, "--runtime", "history")
    assert refused.code == 2 and "--runtime history: the snapshot has no finished unit" \
        in refused.err

    scenario["history"] = {"finished": 4, "medianRunSeconds": 5, "stepSeconds": 1}
    paced = tmp_path / "paced.yaml"
    paced.write_text(yaml.safe_dump(scenario))
    result = run(capsys, "whatif", "--snapshot", paced, "--max", "q=cpu=2", "-o", "json")
    assert json.loads(result.out)["runtime"] is None  # only when asked
    result = run(capsys, "whatif", "--snapshot", paced, "--max", "q=cpu=2", "-o", "json",
                 "--runtime", "history")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["runtime"].startswith("5 step(s) from history: 4 finished unit(s) ran 5 s")
    assert {u["unit"]: u["after"]["admittedAt"] for u in doc["units"]}["ns/next"] == 5
    table = run(capsys, "whatif", "--snapshot", paced, "--max", "q=cpu=2", "--runtime", "history")
    assert "run time of every unit: 5 step(s) from history" in table.out
