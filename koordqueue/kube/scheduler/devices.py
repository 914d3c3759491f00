"""Volcano's shared devices read off pods and nodes (deviceshare), and the bind annotations'
timestamps.

Only a pod whose resources name a Volcano device resource, and only a node whose device
plugin wrote capacity or annotations, get device data; everything else converts as before.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from koordqueue.domain.quantity import NANO, InvalidQuantityError, ceil_div, parse_nanos
from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.api.devices import ContainerDevices, NodeDeviceSource, PodDevices


def _whole(value: object) -> int | None:
    """A quantity in whole units, rounded up (Kubernetes' Value()); None if unparsable."""
    try:
        return ceil_div(parse_nanos(value), NANO)
    except (InvalidQuantityError, TypeError, ValueError):
        return None


def _device_amounts(raw: object) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, int] = {}
    for name, value in raw.items():
        if name in dn.DEVICE_RESOURCES:
            amount = _whole(value)
            if amount is not None:
                out[name] = amount
    return out


def _container(container: object) -> ContainerDevices:
    resources = container.get("resources") if isinstance(container, Mapping) else None
    if not isinstance(resources, Mapping):
        return ContainerDevices()
    return ContainerDevices(
        _device_amounts(resources.get("limits")), _device_amounts(resources.get("requests"))
    )


def pod_devices(pod: Mapping[str, Any], resource_names: object) -> PodDevices | None:
    """The pod's device request, or None when its request (`resource_names`: the names of
    its effective requests) names no Volcano device resource."""
    if not isinstance(resource_names, Mapping) or dn.DEVICE_RESOURCES.isdisjoint(resource_names):
        return None
    spec = pod.get("spec") or {}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return PodDevices(
        tuple(_container(c) for c in spec.get("containers") or ()),
        tuple(_container(c) for c in spec.get("initContainers") or ()),
        {k: str(annotations[k]) for k in dn.POD_ANNOTATIONS if k in annotations},
    )


def device_annotations(meta: Mapping[str, Any]) -> tuple[object, ...]:
    """The device annotations of a pod's metadata (what `pod_devices` reads of them), as a
    key: a pod whose bind wrote them converts again."""
    annotations = meta.get("annotations")
    if not annotations:
        return ()
    return tuple(annotations.get(k) for k in dn.POD_ANNOTATIONS)


def node_devices(node: Mapping[str, Any]) -> NodeDeviceSource | None:
    """What Volcano's device plugins wrote on the node, None if nothing."""
    status = node.get("status") or {}
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    memory = capacity.get(dn.GPU_MEMORY)
    number = capacity.get(dn.GPU_NUMBER)
    register = annotations.get(dn.VGPU_REGISTER)
    if memory is None and number is None and register is None:
        return None

    def amount(raw: object) -> int | None:
        return _whole(raw) if raw is not None else None

    return NodeDeviceSource(
        gpu_memory=amount(memory),
        gpu_number=amount(number),
        unhealthy_ids=annotations.get(dn.UNHEALTHY_GPU_IDS),
        vgpu_register=register,
        vgpu_number=amount(allocatable.get(dn.VGPU_NUMBER)),
        vgpu_cores=amount(allocatable.get(dn.VGPU_CORES)),
        vgpu_memory=amount(allocatable.get(dn.VGPU_MEMORY)),
    )


def stamped(annotations: Mapping[str, str], now: float | None = None) -> dict[str, str]:
    """The bind annotations with the times Volcano writes beside them: predicate-time (Unix
    nanoseconds) with a GPU index, vgpu-time and bind-time (Unix seconds) with vGPU ids."""
    clock = time.time() if now is None else now
    out = dict(annotations)
    if dn.GPU_INDEX in out:
        out[dn.PREDICATE_TIME] = str(int(clock * 1e9))
    if dn.VGPU_IDS in out:
        out[dn.VGPU_TIME] = out[dn.BIND_TIME] = str(int(clock))
    return out
