"""`koordqueue simulate` runs numa-aware (docs/examples/numa.yaml): the scenario's
`schedulerConf`, nodes' `numatopology` and units' `volcano.sh/numa-topology-policy`. a and b
take one NUMA node of node-b each, c is Unschedulable naming numa-aware until a finishes and
its cpus come back. Feature off (the same scenario with numa-aware left out of the conf): a
lands on node-a by name order and c is placed at once."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from koordqueue.scheduler import parse_config
from koordqueue.simulation.scenario import ScenarioError, load_scenario, parse_scenario
from koordqueue.simulation.simulator import SimulationResult, simulate

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "numa.yaml"


def _placements(result: SimulationResult) -> dict[int, dict[str, str]]:
    return {
        r.step: {pod: node for pods in r.placements.values() for pod, node in pods.items()}
        for r in result.steps if r.placements
    }


def test_numa_aware_places_by_numa_node_and_gives_cpus_back() -> None:
    result = simulate(load_scenario(EXAMPLE))
    assert _placements(result) == {0: {"a-0": "node-b"}, 1: {"b-0": "node-b"},
                                   3: {"c-0": "node-b"}}
    refused = [e.message for r in result.steps for e in r.events if e.reason == "Unschedulable"]
    assert len(refused) == 1
    assert "numa-aware: container main cannot be assigned by numa" in refused[0]


def test_without_numa_aware_the_pods_go_by_name_order() -> None:
    off = replace(load_scenario(EXAMPLE), scheduler_config=parse_config(
        'actions: "allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n'
        "  - name: predicates\n"))
    assert _placements(simulate(off)) == {0: {"a-0": "node-a"}, 1: {"b-0": "node-a"},
                                          2: {"c-0": "node-a"}}


def test_a_bad_scheduler_conf_or_numatopology_names_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"schedulerConf.*no-such-plugin"):
        parse_scenario(
            "schedulerConf: |\n  actions: allocate\n  tiers:\n  - plugins:\n"
            "    - name: no-such-plugin\n", "s.yaml")
    with pytest.raises(ScenarioError, match=r"nodes\[0\].numatopology"):
        parse_scenario("nodes:\n- {name: n, allocatable: {cpu: '1'}, numatopology: 3}\n",
                       "s.yaml")
