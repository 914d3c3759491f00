"""A conf naming every plugin and action the real vc-scheduler has (issue 34's "done when").

The peer vc-scheduler (tests/controlplane/versions.py) is Volcano v1.14.1. Its
pkg/scheduler/plugins/factory.go registers the 24 plugins below and actions/factory.go six
actions, in the order given here (gangpreempt and gangreclaim came with v1.15). Two of
Volcano's own confs at that tag are loaded as written: the Helm chart's CI conf
(`enablePreemptable`, `predicate.DynamicResourceAllocationEnable`) and the
network-topology-aware user guide's (the hypernode binpack arguments).

The conf naming all 24 plugins loads and schedules (usage, extender and rescheduling, the
last three, came with issue 34 part 6); before that it was a strict xfail.
"""

from __future__ import annotations

from koordqueue.scheduler import run_session
from koordqueue.scheduler.framework import registry
from koordqueue.scheduler.framework.config import SchedulerConfig, parse_config
from tests.unit.scheduler.builders import bound_nodes, job, node, snapshot, task

V1141_PLUGINS = (
    "drf", "gang", "deviceshare", "predicates", "priority", "nodeorder", "conformance",
    "binpack", "resource-strategy-fit", "tdm", "overcommit", "sla", "task-topology",
    "numa-aware", "cdp", "rescheduling", "usage", "pdb", "nodegroup", "network-topology-aware",
    "proportion", "capacity", "extender", "resourcequota",
)
V1141_ACTIONS = ("reclaim", "allocate", "backfill", "preempt", "enqueue", "shuffle")
IN_ORDER = ("enqueue", "allocate", "preempt", "reclaim", "backfill", "shuffle")
"""The six in the order a production conf runs them."""
NOT_BUILT: tuple[str, ...] = ()
"""What a v1.14.1 conf may name that koordqueue refuses at load: nothing now."""

CI_CONF = """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: sla
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""
"""installer/helm/chart/volcano/config/volcano-scheduler-ci.conf at v1.14.1."""

TOPOLOGY_GUIDE_ARGUMENTS = """\
    arguments:
      weight: 10
      hypernode.binpack.cpu: 5
      hypernode.binpack.memory: 1
      hypernode.binpack.resources: nvidia.com/gpu, example.com/foo
      hypernode.binpack.resources.nvidia.com/gpu: 2
      hypernode.binpack.resources.example.com/foo: 3
      hypernode.binpack.normal-pod.enable: true
      hypernode.binpack.normal-pod.fading: 0.8
"""
"""docs/user-guide/how_to_use_network_topology_aware_scheduling.md at v1.14.1."""


def _conf(actions: tuple[str, ...], plugins: tuple[str, ...]) -> str:
    """A production-shaped conf: priority/gang/conformance first tier, the rest second."""
    first = [p for p in ("priority", "gang", "conformance") if p in plugins]
    lines = [f'actions: "{", ".join(actions)}"', "tiers:", "- plugins:"]
    lines += [f"  - name: {p}" for p in first]
    lines.append("- plugins:")
    for name in plugins:
        if name in first:
            continue
        lines.append(f"  - name: {name}")
        if name == "nodegroup":  # strict by default: unlabelled nodes refused
            lines += ["    arguments:", "      strict: false"]
    return "\n".join(lines) + "\n"


def _schedules_a_gang(conf: SchedulerConfig) -> list[str]:
    gang = job("g", [task("p0"), task("p1")], min_available=2)
    return sorted(bound_nodes(run_session(snapshot([node("n1"), node("n2")], [gang]), conf)))


def test_the_lists_are_volcanos_and_what_we_lack() -> None:
    assert len(set(V1141_PLUGINS)) == 24 and len(set(V1141_ACTIONS)) == 6
    assert set(V1141_ACTIONS) == set(IN_ORDER) <= set(registry.action_names())
    missing = []
    for name in V1141_PLUGINS:
        try:
            registry.get_plugin_builder(name)
        except registry.UnknownPluginError:
            missing.append(name)
    assert sorted(missing) == list(NOT_BUILT)


def test_volcanos_ci_conf_loads_and_schedules() -> None:
    conf = parse_config(CI_CONF, "volcano-scheduler-ci.conf")
    assert list(conf.actions) == ["enqueue", "allocate", "backfill", "reclaim", "preempt"]
    assert _schedules_a_gang(conf) == ["p0", "p1"]


def test_the_topology_guide_arguments_load_and_schedule() -> None:
    text = _conf(("enqueue", "allocate", "backfill"),
                 ("priority", "gang", "predicates", "proportion", "nodeorder", "binpack",
                  "network-topology-aware")) + TOPOLOGY_GUIDE_ARGUMENTS
    assert _schedules_a_gang(parse_config(text, "volcano-scheduler.conf")) == ["p0", "p1"]


def test_every_v1141_action_and_built_plugin_loads_and_schedules() -> None:
    plugins = tuple(p for p in V1141_PLUGINS if p not in NOT_BUILT)
    conf = parse_config(_conf(IN_ORDER, plugins), "volcano-scheduler.conf")
    assert list(conf.actions) == list(IN_ORDER)
    assert _schedules_a_gang(conf) == ["p0", "p1"]


def test_a_conf_naming_all_24_plugins_and_6_actions_loads_and_schedules() -> None:
    conf = parse_config(_conf(IN_ORDER, V1141_PLUGINS), "volcano-scheduler.conf")
    assert _schedules_a_gang(conf) == ["p0", "p1"]
