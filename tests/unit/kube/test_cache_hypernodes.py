"""The scheduler cache watches Volcano's HyperNodes and reads PodGroups' networkTopology: a
hard-mode gang created through the API (the objects as the server returns them) stays in
one HyperNode, an incremental build and a rebuild see the same HyperNodes, and a bad member
is dropped with a warning naming the HyperNode and the member. Fails with the watch or the
conversion taken out (the gang then spreads over both HyperNodes' nodes)."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from koordqueue.kube.scheduler import hypernodes
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler import parse_config, run_session
from koordqueue.scheduler.api.hypernode import NetworkTopology
from tests.unit.kube.cache_replay import SCHED, make_group, make_node, make_pod, make_queue
from tests.unit.scheduler.builders import bound_nodes

CONF = parse_config(
    """
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: network-topology-aware
"""
)


def hyper_node(name: str, tier: int, members: list[dict[str, Any]], version: int = 1
               ) -> dict[str, Any]:  # fmt: skip
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": name, "resourceVersion": str(version)},
        "spec": {"tier": tier, "members": members},
    }  # fmt: skip


def exact(name: str, kind: str = "Node") -> dict[str, Any]:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def _cache(with_hypernodes: bool = True) -> SchedulerCache:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("q", 1, 1))
    for i, name in enumerate(["n1", "n2", "n3", "n4"]):
        cache.on_event(CachedKind.NODE, "ADDED", make_node(name, i + 2, True, 1))
    if with_hypernodes:
        cache.on_event(CachedKind.HYPER_NODE, "ADDED", hyper_node("rack-a", 1, [
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^n[13]$"}}}]))
        cache.on_event(CachedKind.HYPER_NODE, "ADDED", hyper_node("rack-b", 1, [
            exact("n2"), exact("n4")]))
        cache.on_event(CachedKind.HYPER_NODE, "ADDED", hyper_node("spine", 2, [
            exact("rack-a", "HyperNode"), exact("rack-b", "HyperNode")]))
    group = make_group("gang", 10, 2, "q")
    group["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    cache.on_event(CachedKind.POD_GROUP, "ADDED", group)
    for i in range(2):
        member = make_pod(f"p{i}", 20 + i, True, "gang", None, "Pending", 1, "q")
        cache.on_event(CachedKind.POD, "ADDED", member)
    return cache


def test_a_hard_gang_stays_in_one_hypernode() -> None:
    """rack-a holds n1 and n3 (a pattern), rack-b n2 and n4: the two 1-cpu pods share a
    rack (rack-a, the first of two equal ones)."""
    result = run_session(_cache().build().snapshot, CONF)
    assert sorted(bound_nodes(result).values()) == ["n1", "n3"]


def test_without_the_hypernodes_the_gang_is_not_held_together() -> None:
    """The control: with no HyperNode the same gang takes the first two nodes by name, one
    in each rack."""
    result = run_session(_cache(with_hypernodes=False).build().snapshot, CONF)
    assert sorted(bound_nodes(result).values()) == ["n1", "n2"]


def test_incremental_build_and_rebuild_agree() -> None:
    cache = _cache()
    built, rebuilt = cache.build().snapshot, cache.rebuild().snapshot
    assert built.hypernodes == rebuilt.hypernodes
    assert [h.name for h in built.hypernodes] == ["rack-a", "rack-b", "spine"]
    cache.on_event(CachedKind.HYPER_NODE, "DELETED", hyper_node("rack-b", 1, []))
    assert [h.name for h in cache.build().snapshot.hypernodes] == ["rack-a", "spine"]
    assert cache.build().snapshot.hypernodes == cache.rebuild().snapshot.hypernodes


def test_the_podgroup_topology_is_read() -> None:
    job = next(j for j in _cache().build().snapshot.jobs if j.name == "gang")
    assert job.network_topology == NetworkTopology("hard", 1, "")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({}, NetworkTopology("hard", None, "")),
        ({"mode": "soft"}, NetworkTopology("soft", None, "")),
        ({"mode": "hard", "highestTierName": "rack"}, NetworkTopology("hard", None, "rack")),
    ],
)
def test_network_topology_fields(raw: dict[str, Any], expected: NetworkTopology) -> None:
    """The CRD defaults the mode to hard; a tier may be named instead of numbered."""
    assert hypernodes.network_topology({"spec": {"networkTopology": raw}}) == expected
    assert hypernodes.network_topology({"spec": {}}) is None


def test_a_bad_member_is_dropped_and_named() -> None:
    # read from structlog's own capture, not stderr: where stderr goes depends on which
    # test configured logging first (e2e tests configure it in-process)
    with capture_logs() as logs:
        converted = hypernodes.hyper_node(
            hyper_node("rack", 1, [{"type": "Switch", "selector": {}}, exact("n1")])
        )
    assert [m.selector.exact_match for m in converted.members] == ["n1"]
    assert "HyperNode rack: spec.members[0] ignored: type 'Switch'" in [
        e["event"] for e in logs if e["log_level"] == "warning"]
