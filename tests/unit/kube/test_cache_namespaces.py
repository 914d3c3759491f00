"""The scheduler cache keeps namespaces' labels, so a pod affinity term's namespaceSelector
selects the pods kube-scheduler's would (tests/equivalence found the gap: the live cache
passed no labels, and an anti-affinity term selecting namespaces by label repelled nothing)."""

from __future__ import annotations

from typing import Any

from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler import default_config, run_session
from tests.unit.kube.cache_replay import SCHED, make_namespace, make_node, make_pod, make_queue

ANTI_TEAM_A = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"app": "web"}},
                "namespaceSelector": {"matchLabels": {"team": "a"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


def _hosted(name: str) -> dict[str, Any]:
    node = make_node(name, 1, True, 4)
    node["metadata"]["labels"] = {"kubernetes.io/hostname": name}
    return node


def _cache(team: str | None) -> SchedulerCache:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("default", 1, 1))
    cache.on_event(CachedKind.NAMESPACE, "ADDED", make_namespace("ns", 2, team))
    cache.on_event(CachedKind.NODE, "ADDED", _hosted("n0"))
    guard = make_pod("guard", 3, True, None, "n0", "Running", 1, "default")
    guard["spec"]["affinity"] = ANTI_TEAM_A
    cache.on_event(CachedKind.POD, "ADDED", guard)
    web = make_pod("web", 4, True, None, None, "Pending", 1, "default")
    web["metadata"]["labels"] = {"app": "web"}
    cache.on_event(CachedKind.POD, "ADDED", web)
    return cache


def _placed_on(cache: SchedulerCache) -> set[str]:
    result = run_session(cache.build().snapshot, default_config())
    return {b.node for b in result.binds if b.task == "web"}


def test_a_namespace_selected_by_label_is_repelled_by_existing_anti_affinity() -> None:
    cache = _cache(team="a")
    assert cache.build().snapshot.namespace_labels["ns"]["team"] == "a"
    assert _placed_on(cache) == set()  # the only node hosts the guard


def test_a_namespace_relabelled_out_of_the_selector_is_no_longer_repelled() -> None:
    cache = _cache(team="a")
    assert _placed_on(cache) == set()
    cache.on_event(CachedKind.NAMESPACE, "MODIFIED", make_namespace("ns", 9, "b"))
    assert cache.build().snapshot.namespace_labels["ns"]["team"] == "b"
    assert _placed_on(cache) == {"n0"}
