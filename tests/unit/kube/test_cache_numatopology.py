"""The scheduler cache watches Volcano's Numatopologies and keeps the scheduler's view of
each node's free cpus across sessions (Volcano's NumaSchedulerInfo): cpus numa-aware gave to
pods bound stay taken until the exporter's report shows them, a report of as many free cpus
or more replaces the view, one of fewer replaces only what the view had more of. An
unreadable field is dropped with a warning naming the object.

Checked failing with the feature off: without the Numatopology watch (no object folded in)
the guaranteed pod is refused everywhere ("numa info is empty"); without the view kept
across sessions (`numa_allocated` not called) the third pod is placed on cpus already given.
"""

from __future__ import annotations

from typing import Any

from structlog.testing import capture_logs

from koordqueue.kube.scheduler import names
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.kube.scheduler.numa import NumaView
from koordqueue.scheduler import parse_config, run_session
from koordqueue.scheduler.api import numa_names as nn
from koordqueue.scheduler.api.numa import by_node, parse_cpuset
from tests.unit.kube.cache_replay import SCHED, make_node, make_queue
from tests.unit.scheduler.builders import bound_nodes

CONF = parse_config(
    """
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: numa-aware
"""
)


def numatopo(name: str, free: str, version: int = 1) -> dict[str, Any]:
    """2 NUMA nodes x 4 cpus, static cpu manager, single-numa-node."""
    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology",
        "metadata": {"name": name, "resourceVersion": str(version)},
        "spec": {
            "policies": {nn.CPU_MANAGER_POLICY: "static",
                         nn.TOPOLOGY_MANAGER_POLICY: "single-numa-node"},
            "numares": {"cpu": {"allocatable": free, "capacity": 8}},
            "cpuDetail": {str(c): {"numa": c // 4, "socket": c // 4, "core": c // 2}
                          for c in range(8)},
        },
    }


def pod(uid: str, version: int = 1) -> dict[str, Any]:
    """A Guaranteed 4-cpu pod asking for single-numa-node."""
    amounts = {"cpu": "4", "memory": "1Gi"}
    return {
        "metadata": {"name": uid, "namespace": "ns", "uid": uid,
                     "resourceVersion": str(version),
                     "annotations": {names.QUEUE_NAME_ANNOTATION: "q",
                                     nn.NUMA_POLICY_KEY: "single-numa-node"}},
        "spec": {"schedulerName": SCHED, "containers": [{"name": "c", "resources": {
            "requests": amounts, "limits": amounts}}]},
        "status": {"phase": "Pending"},
    }


def _cache(with_topology: bool = True) -> SchedulerCache:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("q", 1, 1))
    node = make_node("n1", 1, True, 16)
    node["status"]["allocatable"]["memory"] = "64Gi"
    cache.on_event(CachedKind.NODE, "ADDED", node)
    if with_topology:
        cache.on_event(CachedKind.NUMATOPOLOGY, "ADDED", numatopo("n1", "0-7"))
    return cache


def test_the_watched_numatopology_places_the_pod_and_rebuild_agrees() -> None:
    """The object folded in places the pod; the incremental build and a rebuild read the
    same topology. Off (no object): refused, "numa info is empty"."""
    cache = _cache()
    cache.on_event(CachedKind.POD, "ADDED", pod("a"))
    built = cache.build()
    assert built.snapshot.numatopologies == cache.rebuild().snapshot.numatopologies
    assert bound_nodes(run_session(built.snapshot, CONF)) == {"a": "n1"}
    off = _cache(with_topology=False)
    off.on_event(CachedKind.POD, "ADDED", pod("a"))
    result = run_session(off.build().snapshot, CONF)
    assert bound_nodes(result) == {}
    assert "numa info is empty" in (result.pod_cause("a", None) or "")


def _bind(cache: SchedulerCache, uid: str, keep: bool) -> None:
    """One session for pod `uid`; its bind comes back; the cpus are kept when `keep`."""
    cache.on_event(CachedKind.POD, "ADDED", pod(uid))
    result = run_session(cache.build().snapshot, CONF)
    assert bound_nodes(result) == {uid: "n1"}
    if keep:
        cache.numa_allocated(by_node(result.numa_assigned))
    bound = pod(uid, 2)
    bound["spec"]["nodeName"] = "n1"
    bound["status"]["phase"] = "Running"
    cache.on_event(CachedKind.POD, "MODIFIED", bound)


def test_cpus_given_stay_taken_in_later_sessions() -> None:
    """a and b, one session each, take NUMA 0 and NUMA 1; c, in a third, finds no NUMA node
    with 4 free cpus (the node's 16 cpus would hold it). Off (the view not kept): c is
    placed on cpus already given."""
    cache = _cache()
    _bind(cache, "a", keep=True)
    _bind(cache, "b", keep=True)
    cpus = cache.build().snapshot.numatopologies["n1"].resources["cpu"].allocatable
    assert cpus == frozenset()
    cache.on_event(CachedKind.POD, "ADDED", pod("c"))
    assert bound_nodes(run_session(cache.build().snapshot, CONF)) == {}
    off = _cache()
    _bind(off, "a", keep=False)
    _bind(off, "b", keep=False)
    off.on_event(CachedKind.POD, "ADDED", pod("c"))
    assert bound_nodes(run_session(off.build().snapshot, CONF)) == {"c": "n1"}


def test_exporter_reports_refresh_the_view_as_volcano_does() -> None:
    """More or as many free cpus reported: the report replaces the view (the exporter saw the
    pods); fewer: a resource takes the report only where the view had at least as many."""
    view = NumaView()
    view.on_object("n1", numatopo("n1", "0-7"))
    view.allocate({"n1": {"cpu": parse_cpuset("0-3")}})
    assert view.view["n1"].resources["cpu"].allocatable == parse_cpuset("4-7")
    view.on_object("n1", numatopo("n1", "2-7", 2))  # fewer than 0-7: 4-7 (4) < 6 kept
    assert view.view["n1"].resources["cpu"].allocatable == parse_cpuset("4-7")
    view.on_object("n1", numatopo("n1", "6-7", 3))  # fewer again: 4 >= 2, the report wins
    assert view.view["n1"].resources["cpu"].allocatable == parse_cpuset("6-7")
    view.on_object("n1", numatopo("n1", "0-7", 4))  # more: replaced
    assert view.view["n1"].resources["cpu"].allocatable == parse_cpuset("0-7")
    view.on_object("n1", None)
    assert view.snapshot() == {}


def test_a_bad_cpuset_is_dropped_with_a_warning_naming_the_object() -> None:
    raw = numatopo("n1", "0-3,x")
    with capture_logs() as logs:
        view = NumaView()
        view.on_object("n1", raw)
    assert view.view["n1"].resources["cpu"].allocatable == frozenset()
    assert any("Numatopology n1" in e["event"] and "allocatable" in e["event"] for e in logs)
