"""A scenario's nodes and running pods (simulation/scenario_nodes.py): taints, cordoned
nodes, pods of no unit (`occupied`), a unit's tolerations and `runningPods`, which the replay
starts bound where they run (issue 29 point 1: running pods' requests)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.simulation.scenario import ScenarioError, parse_scenario
from koordqueue.simulation.scenario_nodes import RunningPod, with_running
from koordqueue.simulation.simulator import simulate

SCENARIO = """
quotas: [{name: a, max: {cpu: 8}}]
nodes:
  - {name: n1, allocatable: {cpu: "2", pods: "2"}, occupied: {pods: 1, request: {cpu: "1"}}}
units:
  - {name: u, quota: a, resource: {cpu: 1}, %s}
"""


@pytest.mark.parametrize(("fields", "field", "says"), [
    ("runningPods: [{name: p, node: n1}]", "units[0].runningPods",
     "only a unit that arrives admitted and not Reserved has running pods, not Enqueued"),
    ("phase: Reserved, runningPods: [{name: p, node: n1}]", "units[0].runningPods",
     "not Reserved"),
    ("phase: Running, runningPods: [{name: p, node: n9}]", "units[0].runningPods[0].node",
     "no node 'n9' in the scenario (nodes: n1)"),
    ("phase: Running, runningPods: [{name: p, node: n1}, {name: p, node: n1}]",
     "units[0].runningPods[1].name", "duplicate pod 'p'"),
    ("phase: Running, runningPods: [{name: p, node: n1, request: {cpu: x}}]",
     "units[0].runningPods[0].request.cpu", "does not match the quantity syntax"),
    ("tolerations: [{key: k, operator: Exists, value: v}]", "units[0].tolerations[0].value",
     "must be empty with operator Exists"),
    ("tolerations: [{operator: Equal}]", "units[0].tolerations[0].key", "must not be empty"),
    ("tolerations: [{key: k, effect: Sometimes}]", "units[0].tolerations[0].effect",
     "must be empty or one of"),
    ("tolerations: [{key: k, operator: In}]", "units[0].tolerations[0].operator",
     "must be one of Equal, Exists"),
])
def test_bad_running_pods_and_tolerations_are_errors_naming_the_field(
    fields: str, field: str, says: str,
) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(SCENARIO % fields, "s.yaml")
    assert caught.value.field == field
    assert says in caught.value.reason


@pytest.mark.parametrize(("node_fields", "field", "says"), [
    ("taints: [{key: k, effect: Maybe}]", "nodes[0].taints[0].effect", "must be one of"),
    ("taints: [{value: v}]", "nodes[0].taints[0].key", "must not be empty"),
    ("unschedulable: 1", "nodes[0].unschedulable", "must be true or false"),
    ("occupied: {pods: 0}", "nodes[0].occupied.pods", "must be >= 1"),
    ("occupied: {request: {cpu: 1}, cpus: 2}", "nodes[0].occupied.cpus", "unknown field"),
    ("occupied: 3", "nodes[0].occupied", "must be a map"),
])
def test_bad_nodes_are_errors_naming_the_field(node_fields: str, field: str, says: str) -> None:
    text = f"""
nodes:
  - {{name: n1, allocatable: {{cpu: "2"}}, {node_fields}}}
units: []
"""
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "s.yaml")
    assert caught.value.field == field
    assert says in caught.value.reason


def test_two_nodes_of_one_name_are_an_error() -> None:
    with pytest.raises(ScenarioError, match="duplicate node 'n'"):
        parse_scenario("nodes: [{name: n}, {name: n}]\nunits: []\n")


def test_pods_of_no_unit_count_against_the_nodes_pod_limit() -> None:
    """n1 allows 2 pods and runs one of no unit: a 1-cpu unit fits; with 2 there, no room."""
    fits = simulate(parse_scenario(SCENARIO % "pods: 1"))
    assert fits.final_phases() == {"default/u": "Running"}
    full = simulate(parse_scenario((SCENARIO % "pods: 1").replace("pods: 1, request",
                                                                    "pods: 2, request")))
    assert full.final_phases() == {"default/u": "Dequeued"}


def test_a_reclaimed_units_running_pods_free_their_node() -> None:
    """low runs one of its two pods (no room for the other: not yet running, so it may be
    preempted); high marks it, the next round reclaims it, and low's running pod is gone:
    high's pod is placed where it ran."""
    text = """
quotas:
  - {name: a, max: {cpu: 2}, annotations: {koord-queue/enable-queueunit-preemption: "true",
                                           koord-queue/wait-for-pods-running: "true"}}
nodes: [{name: n1, allocatable: {cpu: "1"}}]
units:
  - {name: low, quota: a, resource: {cpu: 2}, pods: 2, phase: Dequeued, message: in,
     runningPods: [{name: low-x, node: n1, request: {cpu: "1"}}]}
  - {name: high, quota: a, resource: {cpu: 1}, priority: 9, arrive: 1}
steps: 3
"""
    result = simulate(parse_scenario(text))
    said = [e.message for e in result.steps[0].events if e.unit == "default/low"]
    assert said[0].startswith("1/2 tasks in gang unschedulable"), said  # (low-x runs)
    assert result.steps[1].preempted == ["default/low"]
    assert result.steps[2].placements == {"default/high": {"high-0": "n1"}}
    assert result.final_phases() == {"default/low": "Enqueued", "default/high": "Running"}


@given(
    slots=st.lists(st.sampled_from(["1", "2"]), max_size=5),
    running=st.lists(st.tuples(st.sampled_from(["u-0", "u-1", "x", "y", "z"]),
                               st.sampled_from(["1", "2", "3"])),
                     max_size=4, unique_by=lambda p: p[0]),
)
def test_running_pods_fill_slots_and_the_rest_stay_to_place(
    slots: list[str], running: list[tuple[str, str]],
) -> None:
    """Running pods come first with their own requests; each fills one slot (its own name's,
    else one of its request, else the first left); names stay unique."""
    given_slots = [(f"u-{i}", Resources.parse({"cpu": c})) for i, c in enumerate(slots)]
    pods = [RunningPod(n, "n", Resources.parse({"cpu": c})) for n, c in running]
    out = with_running(given_slots, pods)
    assert out[:len(pods)] == [(p.name, p.request) for p in pods]
    rest = out[len(pods):]
    assert len(rest) == max(0, len(given_slots) - len(pods))
    assert all(slot in given_slots for slot in rest)
    assert len({name for name, _ in out}) == len(out)
    if len(given_slots) >= len(pods):
        for p in pods:  # a slot of its own request is taken before one of another
            named = any(name == p.name for name, _ in given_slots)
            if not named and sum(r == p.request for _, r in given_slots) >= len(pods):
                assert sum(r == p.request for _, r in rest) <= sum(
                    r == p.request for _, r in given_slots) - 1
