"""`koordqueue explain pod/NAME` for pods network-topology-aware refuses: the verdict is
PluginRefused and the message names the plugin and its rule, read from the session's skip
record (each fails with the record's PluginRefused entry not written: the verdict is then
GangMinAvailable or Unschedulable and the plugin is not named)."""

from __future__ import annotations

from typing import Any

from koordqueue.kube.scheduler.cache import CachedKind
from koordqueue.kube.scheduler.explain_pod import PodVerdict, explain_pod
from koordqueue.scheduler import parse_config
from tests.unit.cli.test_explain_pod import cache_of, node, pod, pod_group

CONFIG = parse_config(
    """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: network-topology-aware
"""
)


def _hypernode(name: str, tier: int, members: list[str], kind: str = "Node") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"tier": tier, "members": [
            {"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]},
    }  # fmt: skip


RACKS = [
    _hypernode("rack-a", 1, ["n1", "n2"]),
    _hypernode("rack-b", 1, ["n3", "n4"]),
    _hypernode("spine", 2, ["rack-a", "rack-b"], "HyperNode"),
]


def _explain(topology: dict[str, Any], members: int, hypernodes: list[dict[str, Any]]) -> Any:
    group = pod_group("g", members)
    group["status"] = {"phase": "Inqueue"}
    group["spec"]["networkTopology"] = topology
    pods = [pod(f"m{i}", cpu="3", group="g") for i in range(members)]
    cache = cache_of([node(f"n{i}", "4") for i in (1, 2, 3, 4)], pods, groups=[group])
    cache.replace(CachedKind.HYPER_NODE, hypernodes)
    return explain_pod(pods[-1], cache, CONFIG)


def test_a_gang_no_hypernode_of_its_tier_holds_names_the_plugin() -> None:
    ex = _explain({"mode": "hard", "highestTierAllowed": 1}, 3, RACKS)
    assert ex.verdict is PodVerdict.PLUGIN_REFUSED
    assert ex.message is not None
    assert ex.message.startswith(
        "network-topology-aware: the job fits in no hyperNode of tier <= 1 "
        "(tried rack-a, rack-b): In hyperNode rack-b: 0/2 nodes are available"
    ), ex.message


def test_a_hypernode_tree_with_a_cycle_names_the_plugin() -> None:
    cyclic = [*RACKS, _hypernode("loop", 3, ["spine"], "HyperNode"),
              _hypernode("spine2", 4, ["loop"], "HyperNode")]  # fmt: skip
    cyclic[2] = _hypernode("spine", 2, ["rack-a", "rack-b", "spine2"], "HyperNode")
    ex = _explain({"mode": "hard", "highestTierAllowed": 1}, 1, cyclic)
    assert ex.verdict is PodVerdict.PLUGIN_REFUSED
    assert "network-topology-aware: hyperNodes are not ready for scheduling" in (ex.message or "")
    assert "cyclic dependency" in (ex.message or "")


def test_the_same_gang_with_room_in_a_rack_would_bind() -> None:
    """The control: two 3-cpu pods fit rack-a."""
    ex = _explain({"mode": "hard", "highestTierAllowed": 1}, 2, RACKS)
    assert ex.verdict is PodVerdict.WOULD_BIND
