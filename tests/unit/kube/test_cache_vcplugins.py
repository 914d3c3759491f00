"""The scheduler cache feeds nodegroup, sla and resourcequota from the objects as the API
server returns them: a Queue's affinity keeps a gang in its node group, ResourceQuotas reach
the snapshot (incremental build and rebuild alike) and hold a PodGroup Pending. Fails with
the ResourceQuota watch taken out (the PodGroup is enqueued) or the queue's affinity not
read (the gang lands on the first nodes by name)."""

from __future__ import annotations

from typing import Any

from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler import parse_config, run_session
from koordqueue.scheduler.api import vc_names as vn
from tests.unit.kube.cache_replay import SCHED, make_group, make_node, make_pod, make_queue
from tests.unit.scheduler.builders import bound_nodes

CONF = parse_config("""
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: nodegroup
  - name: resourcequota
""")


def quota(name: str, version: int, hard: str, used: str = "0") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(version)},
            "spec": {"hard": {"cpu": hard}},
            "status": {"hard": {"cpu": hard}, "used": {"cpu": used}}}


def _cache(min_cpu: str | None = None) -> SchedulerCache:
    cache = SchedulerCache(SCHED)
    queue = make_queue("q", 1, 1)
    queue["spec"]["affinity"] = {"nodeGroupAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": ["gpu"]}}
    cache.on_event(CachedKind.QUEUE, "ADDED", queue)
    for i, (name, group) in enumerate([("n1", "cpu"), ("n2", "cpu"), ("n3", "gpu"),
                                       ("n4", "gpu")]):
        node = make_node(name, i + 2, True, 1)
        node["metadata"]["labels"] = {vn.NODE_GROUP_NAME_LABEL: group}
        cache.on_event(CachedKind.NODE, "ADDED", node)
    group = make_group("gang", 10, 2, "q")
    if min_cpu is not None:
        group["spec"]["minResources"] = {"cpu": min_cpu}
        group["status"] = {"phase": "Pending"}
    cache.on_event(CachedKind.POD_GROUP, "ADDED", group)
    for i in range(2):
        member = make_pod(f"p{i}", 20 + i, True, "gang", None, "Pending", 1, "q")
        cache.on_event(CachedKind.POD, "ADDED", member)
    return cache


def test_the_queue_affinity_keeps_the_gang_in_its_group() -> None:
    result = run_session(_cache().build().snapshot, CONF)
    assert sorted(bound_nodes(result).values()) == ["n3", "n4"]


def test_a_resource_quota_holds_the_podgroup_pending_until_it_has_room() -> None:
    cache = _cache(min_cpu="2")
    cache.on_event(CachedKind.RESOURCE_QUOTA, "ADDED", quota("rq", 1, "3", used="2"))
    built, rebuilt = cache.build().snapshot, cache.rebuild().snapshot
    assert built.resource_quotas == rebuilt.resource_quotas
    assert [q.name for q in built.resource_quotas] == ["rq"]
    result = run_session(built, CONF)
    assert bound_nodes(result) == {}
    assert [u.new.value for u in result.phase_updates] == []
    cache.on_event(CachedKind.RESOURCE_QUOTA, "MODIFIED", quota("rq", 2, "3", used="0"))
    result = run_session(cache.build().snapshot, CONF)
    assert sorted(bound_nodes(result).values()) == ["n3", "n4"]
    cache.on_event(CachedKind.RESOURCE_QUOTA, "DELETED", quota("rq", 3, "3"))
    assert cache.build().snapshot.resource_quotas == cache.rebuild().snapshot.resource_quotas == ()
