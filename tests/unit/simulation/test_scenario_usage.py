"""`koordqueue simulate` runs usage (docs/examples/usage.yaml): nodes' `usage:` readings.
a and b go to node-b although node-a comes first by name; the unit pinned to node-a is
Unschedulable naming the CPU load. Feature off (usage left out of the conf): a and b land on
node-a and the pinned unit is placed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from koordqueue.scheduler import parse_config
from koordqueue.simulation.scenario import ScenarioError, load_scenario, parse_scenario
from koordqueue.simulation.simulator import SimulationResult, simulate

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "usage.yaml"


def _placements(result: SimulationResult) -> dict[str, str]:
    return {pod: node for r in result.steps for pods in r.placements.values()
            for pod, node in pods.items()}


def test_usage_keeps_pods_off_the_hot_node() -> None:
    result = simulate(load_scenario(EXAMPLE))
    assert _placements(result) == {"a-0": "node-b", "b-0": "node-b"}
    refused = {e.message for r in result.steps for e in r.events if e.reason == "Unschedulable"}
    assert refused and all("the CPU load of the node exceeds the upper limit." in m
                           for m in refused), refused


def test_without_usage_the_pods_go_by_name_order() -> None:
    off = replace(load_scenario(EXAMPLE), scheduler_config=parse_config(
        'actions: "allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n'
        "  - name: predicates\n"))
    assert _placements(simulate(off)) == {"a-0": "node-a", "b-0": "node-a",
                                          "pinned-0": "node-a"}


@pytest.mark.parametrize(("usage", "message"), [
    ("3", r"nodes\[0\].usage: must be a map"),
    ("{cpu: 120}", r"nodes\[0\].usage.cpu: must be a percent from 0 to 100, got 120"),
    ("{cpu: '90'}", r"nodes\[0\].usage.cpu: must be a percent"),
    ("{load: 9}", r"nodes\[0\].usage"),
])
def test_a_bad_usage_names_the_field(usage: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(f"nodes:\n- {{name: n, allocatable: {{cpu: '1'}}, usage: {usage}}}\n",
                       "s.yaml")
