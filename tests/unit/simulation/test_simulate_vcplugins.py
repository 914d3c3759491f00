"""`koordqueue simulate` runs Volcano's plugins (issue 34 part 5): a scenario's
`schedulerConf` is the volcano-scheduler.conf its placement sessions run. With nodegroup
(`strict: false`: the default queue has no affinity) the unit's pods avoid the labelled
node; with tdm a revocable node whose window is closed refuses them (3 cpu each: only one
fits the other node, so the gang waits) and the step's event names tdm. Without
`schedulerConf` the labelled node is used."""

from __future__ import annotations

from datetime import datetime

import pytest

from koordqueue.scheduler.plugins.tdm import TdmPlugin
from koordqueue.simulation.scenario import ScenarioError, parse_scenario
from koordqueue.simulation.simulator import simulate

BASE = """\
quotas:
  - name: team
    max: {cpu: "8"}
units:
  - {name: job, namespace: ns, quota: team, pods: 2, resource: {cpu: "2"}}
nodes:
  - {name: a, allocatable: {cpu: "4"}, labels: {LABEL}}
  - {name: b, allocatable: {cpu: "4"}}
"""


def _scenario(label: str, conf: str | None) -> str:
    text = BASE.replace("{LABEL}", "{" + label + "}")
    if conf is not None:
        text += "schedulerConf: |\n" + "".join(f"  {line}\n" for line in conf.splitlines())
    return text


NODEGROUP = """\
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: nodegroup
    arguments:
      strict: false
"""
TDM = """\
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: tdm
    arguments:
      tdm.revocable-zone.rz1: "0:00-0:01"
"""


def _placed(text: str) -> dict[str, str]:
    result = simulate(parse_scenario(text, "s.yaml"))
    return {pod: node for step in result.steps for pods in step.placements.values()
            for pod, node in pods.items()}


def test_nodegroup_keeps_pods_off_the_labelled_node() -> None:
    text = _scenario('"volcano.sh/nodegroup-name": gpu', NODEGROUP)
    assert _placed(text) == {"job-0": "b", "job-1": "b"}


def test_tdm_refuses_a_closed_revocable_node_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(TdmPlugin, "clock", staticmethod(
        lambda: datetime(2026, 1, 5, 12, 0).timestamp()))
    text = _scenario('"volcano.sh/revocable-zone": rz1', TDM).replace('cpu: "2"', 'cpu: "6"')
    result = simulate(parse_scenario(text, "s.yaml"))
    messages = [e.message for step in result.steps for e in step.events]
    assert any("tdm: current time beyond revocable zone rz1" in m for m in messages), messages
    assert not any(step.placements for step in result.steps)


def test_without_a_conf_the_labelled_node_is_used() -> None:
    assert "a" in _placed(_scenario('"volcano.sh/nodegroup-name": gpu', None)).values()


def test_a_bad_conf_names_the_field() -> None:
    with pytest.raises(ScenarioError, match="schedulerConf"):
        parse_scenario(_scenario("x: y", 'actions: "allocate"\ntiers:\n- plugins:\n'
                                         "  - name: nosuch\n"), "s.yaml")
