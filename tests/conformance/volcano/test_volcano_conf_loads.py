"""Issue 34's bar: a user's `volcano-scheduler.conf` naming Volcano's plugins and actions loads.

Volcano's names are those of volcano-sh/volcano v1.15 pkg/scheduler/plugins/factory.go (24)
and actions/factory.go (8), as they register them (numaaware's is `numa-aware`). The conf
naming every one koordqueue has loads and schedules a
gang; a name Volcano does not have is refused when the conf is loaded (never ignored at a
session). Checked: with network-topology-aware
unregistered the first test fails (ConfigError naming it).
"""

from __future__ import annotations

import pytest

from koordqueue.scheduler import run_session
from koordqueue.scheduler.framework import registry
from koordqueue.scheduler.framework.config import ConfigError, parse_config
from tests.unit.scheduler.builders import bound_nodes, job, node, snapshot, task

VOLCANO_ACTIONS = (
    "enqueue", "allocate", "backfill", "preempt", "reclaim", "shuffle",
    "gangpreempt", "gangreclaim",
)
VOLCANO_PLUGINS = (
    "binpack", "capacity", "cdp", "conformance", "deviceshare", "drf", "extender", "gang",
    "network-topology-aware", "nodegroup", "nodeorder", "numa-aware", "overcommit", "pdb",
    "predicates", "priority", "proportion", "rescheduling", "resource-strategy-fit",
    "resourcequota", "sla", "task-topology", "tdm", "usage",
)
BUILT_ACTIONS = (
    "enqueue", "allocate", "backfill", "preempt", "reclaim", "gangpreempt", "gangreclaim",
    "shuffle",
)
BUILT_PLUGINS = VOLCANO_PLUGINS
"""All 24 (usage, extender and rescheduling last, issue 34 part 6)."""
ARGUMENTS = {"nodegroup": "strict: false"}
"""nodegroup (strict by default, as in Volcano) refuses nodes without a group label: the
gang's unlabelled nodes pass only with `strict: false` and a queue without affinity."""


def _conf(actions: tuple[str, ...], plugins: tuple[str, ...]) -> str:
    lines = [f'actions: "{", ".join(actions)}"', "tiers:", "- plugins:"]
    for name in plugins:
        lines.append(f"  - name: {name}")
        if name in ARGUMENTS:
            lines += ["    arguments:", f"      {ARGUMENTS[name]}"]
    return "\n".join(lines) + "\n"


def test_the_built_lists_are_what_the_registry_has() -> None:
    """The lists this file (and the report) give are the registered Volcano names."""
    assert len(VOLCANO_PLUGINS) == 24 and len(VOLCANO_ACTIONS) == 8
    assert set(BUILT_ACTIONS) == set(registry.action_names()) & set(VOLCANO_ACTIONS)
    assert {p for p in VOLCANO_PLUGINS if _registered(p)} == set(BUILT_PLUGINS)


def _registered(plugin: str) -> bool:
    try:
        registry.get_plugin_builder(plugin)
    except registry.UnknownPluginError:
        return False
    return True


def test_a_conf_naming_every_built_one_loads_and_schedules() -> None:
    """Every action and plugin we have, in one tier: loads, and a 2-pod gang is bound."""
    conf = parse_config(_conf(BUILT_ACTIONS, BUILT_PLUGINS), "volcano-scheduler.conf")
    assert list(conf.actions) == list(BUILT_ACTIONS)
    gang = job("g", [task("p0"), task("p1")], min_available=2)
    result = run_session(snapshot([node("n1"), node("n2")], [gang]), conf)
    assert sorted(bound_nodes(result)) == ["p0", "p1"]


def test_every_volcano_action_is_built() -> None:
    """All 8 (gangpreempt and gangreclaim last, issue 34 part 2); an action Volcano lacks is
    still refused by name."""
    assert sorted(BUILT_ACTIONS) == sorted(VOLCANO_ACTIONS)
    with pytest.raises(ConfigError, match="gangshuffle"):
        parse_config(_conf((*BUILT_ACTIONS, "gangshuffle"), BUILT_PLUGINS))


@pytest.mark.parametrize("name", ["numaaware", "gangshuffle", "usages"])
def test_a_plugin_volcano_lacks_is_refused_by_name(name: str) -> None:
    """Every Volcano plugin is built; a misspelt one (numa-aware's Go package name, a
    plural) is still refused when the conf is loaded, never ignored at a session."""
    with pytest.raises(ConfigError, match=name):
        parse_config(_conf(BUILT_ACTIONS, (*BUILT_PLUGINS, name)))
