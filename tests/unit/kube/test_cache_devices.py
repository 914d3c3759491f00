"""Volcano's device data through the scheduler cache (deviceshare): a node's gpushare
capacity and vGPU register annotation, a pod's per-container device limits and its GPU
annotations, and the bind annotations' timestamps.

The incremental build must convert a pod again when only its device annotations moved (the
bind's patch comes back before, or with, its nodeName): with the `device_annotations` check
taken out of `same_but_placement`, the GPU a placed pod holds is forgotten and the next pod
is given the same one (checked: test_a_gpu_given_at_bind_is_held_at_the_next_session fails).
"""

from __future__ import annotations

from typing import Any

from koordqueue.kube.scheduler import devices
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler import parse_config, run_session
from koordqueue.scheduler.api import device_names as dn
from tests.unit.kube.cache_replay import SCHED, make_node, make_pod, make_queue

CONF = parse_config(
    """
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: deviceshare
    arguments:
      deviceshare.GPUSharingEnable: true
"""
)


def gpu_node(name: str) -> dict[str, Any]:
    node = make_node(name, 1, True, 8)
    for table in ("allocatable", "capacity"):
        node["status"][table] = {"cpu": "8", "pods": "110", dn.GPU_MEMORY: "32000",
                                 dn.GPU_NUMBER: "2"}
    return node


def gpu_pod(uid: str, version: int, memory: str, node: str | None = None,
            annotations: dict[str, str] | None = None) -> dict[str, Any]:
    pod = make_pod(uid, version, True, None, node, "Running" if node else "Pending", 1, "q")
    pod["spec"]["containers"][0]["resources"]["limits"] = {dn.GPU_MEMORY: memory}
    pod["spec"]["containers"][0]["resources"]["requests"][dn.GPU_MEMORY] = memory
    pod["metadata"]["annotations"].update(annotations or {})
    return pod


def _cache() -> SchedulerCache:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.QUEUE, "ADDED", make_queue("q", 1, 1))
    cache.on_event(CachedKind.NODE, "ADDED", gpu_node("n1"))
    return cache


def test_node_and_pod_device_data_are_read() -> None:
    cache = _cache()
    cache.on_event(CachedKind.POD, "ADDED", gpu_pod("a", 1, "12000"))
    snap = cache.build().snapshot
    node = next(n for n in snap.nodes if n.name == "n1")
    assert node.devices is not None
    assert (node.devices.gpu_memory, node.devices.gpu_number) == (32000, 2)
    task = next(t for j in snap.jobs for t in j.tasks.values())
    assert task.devices is not None and task.devices.gpu_memory == 12000


def test_pods_and_nodes_without_devices_carry_none() -> None:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.NODE, "ADDED", make_node("n1", 1, True, 8))
    cache.on_event(CachedKind.POD, "ADDED", make_pod("p", 1, True, None, None, "Pending", 1, "q"))
    snap = cache.build().snapshot
    assert all(n.devices is None for n in snap.nodes)
    assert all(t.devices is None for j in snap.jobs for t in j.tasks.values())


def test_a_gpu_given_at_bind_is_held_at_the_next_session() -> None:
    """Session 1 gives pod a GPU 0; its patch (gpu-index "0") and bind come back; session 2
    gives pod b (12000 too) GPU 1, not GPU 0 again."""
    cache = _cache()
    cache.on_event(CachedKind.POD, "ADDED", gpu_pod("a", 1, "12000"))
    first = run_session(cache.build().snapshot, CONF)
    assert first.bind_annotations["a"] == {dn.GPU_INDEX: "0"}
    cache.on_event(CachedKind.POD, "MODIFIED",
                   gpu_pod("a", 2, "12000", "n1", {dn.GPU_INDEX: "0"}))
    cache.on_event(CachedKind.POD, "ADDED", gpu_pod("b", 3, "12000"))
    second = run_session(cache.build().snapshot, CONF)
    assert [b.name for b in second.binds] == ["b"]
    assert second.bind_annotations["b"] == {dn.GPU_INDEX: "1"}


def test_the_binder_stamps_volcanos_times() -> None:
    """predicate-time in nanoseconds beside a GPU index; vgpu-time and bind-time in seconds
    beside vGPU ids."""
    share = devices.stamped({dn.GPU_INDEX: "1"}, now=1700000000.5)
    assert share == {dn.GPU_INDEX: "1", dn.PREDICATE_TIME: "1700000000500000000"}
    virtual = devices.stamped({dn.VGPU_IDS: "GPU-a,NVIDIA,10,0:"}, now=1700000000.5)
    assert virtual[dn.VGPU_TIME] == virtual[dn.BIND_TIME] == "1700000000"


def test_a_malformed_device_quantity_is_left_out() -> None:
    """A limit that is no quantity is not a device request (the resource fit reports it)."""
    pod = gpu_pod("a", 1, "lots")
    assert devices.pod_devices(pod, {dn.GPU_MEMORY: 0}) is not None
    got = devices.pod_devices(pod, {dn.GPU_MEMORY: 0})
    assert got is not None and got.gpu_memory == 0
