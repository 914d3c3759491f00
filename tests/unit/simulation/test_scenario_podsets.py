"""A unit's pod sets (issue 29 point 1: workloads' pod sets): a snapshot and a `workload:`
carry each pod set's own request, and placement places each pod with it."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain.reclaimable import PodSetShare
from koordqueue.domain.resources import Resources
from koordqueue.simulation.scenario import ScenarioError, UnitDef, parse_scenario
from koordqueue.simulation.simulator import simulate
from koordqueue.simulation.snapshot import snapshot_from_objects
from tests.unit.simulation.test_snapshot import NOW, quota, unit

NODES = """
quotas: [{name: a, max: {cpu: 8}}]
nodes:
  - {name: big, allocatable: {cpu: "3", pods: "10"}}
  - {name: small, allocatable: {cpu: "1", pods: "10"}}
units:
  - {name: train, quota: a, resource: {cpu: 4}, %s}
"""


def test_each_pod_is_placed_with_its_pod_sets_request() -> None:
    """A 3-cpu master and a 1-cpu worker fit the 3- and 1-cpu nodes; split evenly (2 + 2)
    the gang does not: the pod sets decide where it runs."""
    result = simulate(parse_scenario(NODES % "podSets: [{name: master, request: {cpu: 3}}, "
                                              "{name: worker, count: 1, request: {cpu: 1}}]"))
    assert result.final_phases() == {"default/train": "Running"}
    placed = {p: n for r in result.steps for p, n in r.placements.get("default/train", {}).items()}
    assert placed == {"train-master-0": "big", "train-worker-0": "small"}
    even = simulate(parse_scenario(NODES % "pods: 2"))
    assert even.final_phases() == {"default/train": "Dequeued"}


@pytest.mark.parametrize(("fields", "field", "says"), [
    ("pods: 2, podSets: [{name: m, request: {cpu: 4}}]", "units[0].podSets",
     "give pods or podSets, not both"),
    ("podSets: [{name: m, request: {cpu: 1}}, {name: m, request: {cpu: 3}}]",
     "units[0].podSets[1].name", "duplicate pod set 'm'"),
    ("podSets: [{name: m, count: 0, request: {cpu: 1}}]", "units[0].podSets[0].count",
     "must be >= 1"),
    ("podSets: [{name: m}]", "units[0].podSets[0].request", "must ask for some resource"),
    ("podSets: [{name: m, request: {cpu: 1}, image: x}]", "units[0].podSets[0].image",
     "unknown field"),
    ("podSets: [{name: m, request: {cpu: lots}}]", "units[0].podSets[0].request.cpu",
     "does not match the quantity syntax"),
])
def test_bad_pod_sets_are_errors_naming_the_field(fields: str, field: str, says: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(NODES % fields, "s.yaml")
    assert caught.value.field == field
    assert says in caught.value.reason
    assert caught.value.line == 7


PYTORCH = """
quotas: [{name: team, max: {cpu: "8"}}]
units:
  - workload:
      apiVersion: kubeflow.org/v1
      kind: PyTorchJob
      metadata: {name: train, labels: {quota.scheduling.koordinator.sh/name: team}}
      spec:
        runPolicy: {suspend: true}
        pytorchReplicaSpecs:
          Master:
            replicas: 1
            template: {spec: {containers: [{name: m, resources: {requests: {cpu: "2"}}}]}}
          Worker:
            replicas: 2
            template: {spec: {containers: [{name: w, resources: {requests: {cpu: "%s"}}}]}}
"""


def test_a_workloads_pod_sets_are_its_own_when_their_requests_differ() -> None:
    (train,) = parse_scenario(PYTORCH % "1").units
    assert sorted((s.count, s.request.to_quantities()["cpu"]) for s in train.pod_sets) == [
        (1, "2"), (2, "1")]
    assert sorted(r.to_quantities()["cpu"] for _, r in train.pod_requests()) == ["1", "1", "2"]
    (alike,) = parse_scenario(PYTORCH % "2").units
    assert alike.pod_sets == () and alike.pods == 3  # an even split is exact


def _with_pod_sets(obj: dict[str, Any], *sets: tuple[str, int, str]) -> dict[str, Any]:
    obj["spec"]["podSet"] = [
        {"name": n, "count": c, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}
        for n, c, cpu in sets
    ]
    return obj


def test_a_snapshot_carries_pod_sets_whose_requests_differ() -> None:
    mixed = _with_pod_sets(unit("mixed", "a", "4", phase="Running", message="admitted"),
                           ("master", 1, "3"), ("worker", 1, "1"))
    alike = _with_pod_sets(unit("alike", "a", "4"), ("w", 2, "2"))
    snap = snapshot_from_objects([quota("a", "8")], [], [mixed, alike], now=NOW)
    entries = {u["name"]: u for u in snap.doc["units"]}
    assert entries["mixed"]["podSets"] == [
        {"name": "master", "count": 1, "request": {"cpu": "3"}},
        {"name": "worker", "count": 1, "request": {"cpu": "1"}}]
    assert "pods" not in entries["mixed"]
    assert entries["alike"]["pods"] == 2 and "podSets" not in entries["alike"]
    doc = {**snap.doc, "nodes": [{"name": "big", "allocatable": {"cpu": "3", "pods": "9"}},
                                 {"name": "small", "allocatable": {"cpu": "1", "pods": "9"}}]}
    result = simulate(parse_scenario(yaml.safe_dump(doc), "snap"))
    placed = {p: n for r in result.steps for p, n in r.placements.get("ns/mixed", {}).items()}
    assert placed == {"mixed-master-0": "big", "mixed-worker-0": "small"}


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 4)), min_size=1, max_size=4))
def test_pod_requests_add_up_to_the_pod_sets(sets: list[tuple[int, int]]) -> None:
    shares = tuple(PodSetShare(f"s{i}", c, Resources.parse({"cpu": str(cpu)}))
                   for i, (c, cpu) in enumerate(sets))
    total = sum(c * cpu for c, cpu in sets)
    spec = UnitDef("u", "ns", "a", Resources.parse({"cpu": str(total)}), pod_sets=shares,
                   pods=sum(c for c, _ in sets))
    pods = spec.pod_requests()
    assert len({name for name, _ in pods}) == len(pods) == spec.pods
    assert sum(r.get("cpu", 0) for _, r in pods) == Resources.parse({"cpu": str(total)})["cpu"]
