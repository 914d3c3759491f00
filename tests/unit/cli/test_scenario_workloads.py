"""Scenario units given as job-integration manifests (issue 13, part 4): `workload:`.

The unit is the one the controller makes for the object (name with the kind's suffix,
resource over every pod set, quota from the label), so `simulate` and `explain` speak of
the same units a cluster would have.
"""

# ruff: noqa: E501 - the scenario YAML keeps each manifest line whole
from __future__ import annotations

import pytest

from koordqueue.simulation.explain import Reason, explain, view_from_scenario
from koordqueue.simulation.scenario import ScenarioError, parse_scenario
from koordqueue.simulation.simulator import simulate

SCENARIO = """
quotas:
  - {name: team, max: {cpu: "6"}}
units:
  - arrive: 0
    workload:
      apiVersion: kubeflow.org/v1
      kind: PyTorchJob
      metadata: {name: train, labels: {quota.scheduling.koordinator.sh/name: team}}
      spec:
        runPolicy: {suspend: true}
        pytorchReplicaSpecs:
          Master: {replicas: 1, template: {spec: {containers: [{name: m, resources: {requests: {cpu: "2"}}}]}}}
          Worker: {replicas: 2, template: {spec: {containers: [{name: w, resources: {requests: {cpu: "1"}}}]}}}
  - arrive: 1
    workload:
      apiVersion: jobset.x-k8s.io/v1alpha2
      kind: JobSet
      metadata: {name: sweep, labels: {quota.scheduling.koordinator.sh/name: team}}
      spec:
        suspend: true
        replicatedJobs:
          - name: w
            replicas: 2
            template: {spec: {parallelism: 2, completions: 2, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}}
  - arrive: 1
    quota: team
    workload:
      - apiVersion: v1
        kind: Pod
        metadata:
          name: g-0
          labels: {koord-queue/pod-group-name: g}
          annotations: {koord-queue/pod-group-total-count: "2"}
        spec: {schedulingGates: [{name: koord-queue/admission}], containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
      - apiVersion: v1
        kind: Pod
        metadata:
          name: g-1
          labels: {koord-queue/pod-group-name: g}
          annotations: {koord-queue/pod-group-total-count: "2"}
        spec: {schedulingGates: [{name: koord-queue/admission}], containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
"""


def test_workload_units_are_named_and_sized_as_the_controller_makes_them() -> None:
    units = {u.name: u for u in parse_scenario(SCENARIO).units}
    assert set(units) == {"train-py-qu", "sweep-js-qu", "g-pod-qu"}
    train = units["train-py-qu"]
    assert (train.quota, train.pods, train.consumer_kind) == ("team", 3, "PyTorchJob")
    assert train.resource.to_quantities() == {"cpu": "4"}
    assert units["sweep-js-qu"].resource.to_quantities() == {"cpu": "4"}
    assert (units["g-pod-qu"].quota, units["g-pod-qu"].pods) == ("team", 2)


def test_simulate_admits_the_pytorchjob_and_the_group_and_explain_says_why_the_jobset_waits() -> (
    None
):
    scenario = parse_scenario(SCENARIO)
    result = simulate(scenario)
    admitted = [key for record in result.steps for key in record.admitted]
    assert admitted == ["default/train-py-qu", "default/g-pod-qu"]  # 4 + 2 of 6 cpu
    ex = explain(view_from_scenario(scenario), "default/sweep-js-qu")
    assert ex is not None
    assert ex.reason is Reason.QUOTA_EXCEEDED
    assert ex.quota == "team"


@pytest.mark.parametrize(
    ("unit", "field", "reason"),
    [
        (
            "{workload: {apiVersion: ray.io/v1, kind: RayService, metadata: {name: r}}}",
            "kind",
            "is not queued",
        ),
        (
            "{name: x, workload: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: []}}}",
            "name",
            "decided by workload",
        ),
    ],
)
def test_a_workload_unit_that_cannot_be_built_is_a_located_error(
    unit: str, field: str, reason: str
) -> None:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(f"quotas: []\nunits:\n  - {unit}\n")
    assert field in raised.value.field and reason in str(raised.value)
