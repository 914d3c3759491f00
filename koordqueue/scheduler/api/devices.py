"""What a pod asks of Volcano's shared devices and what a node offers, as plain data.

Why per container (and not the pod's summed request): Volcano gives each container its own
GPUs (vGPU) and takes the larger of the containers' sum and the largest init container
(gpushare), so the split matters. Only pods and nodes that name a device carry these
(`TaskInfo.devices`, `NodeInfo.devices` are None otherwise): device-free pods cost one
attribute check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from koordqueue.scheduler.api import device_names as dn

_EMPTY: Final[Mapping[str, int]] = MappingProxyType({})
_NO_ANNOTATIONS: Final[Mapping[str, str]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ContainerDevices:
    """One container's device resources (whole units, as Kubernetes' Value() rounds)."""

    limits: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    requests: Mapping[str, int] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class PodDevices:
    """A pod's device resources per container and the device annotations it carries."""

    containers: tuple[ContainerDevices, ...] = ()
    init_containers: tuple[ContainerDevices, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=lambda: _NO_ANNOTATIONS)

    def _summed(self, name: str) -> int:
        """Volcano's gpushare rule: the containers' sum or the largest init container."""
        total = sum(c.limits.get(name, 0) for c in self.containers)
        init = max((c.limits.get(name, 0) for c in self.init_containers), default=0)
        return max(total, init)

    @property
    def gpu_memory(self) -> int:
        """`volcano.sh/gpu-memory` the pod needs on one GPU (limits)."""
        return self._summed(dn.GPU_MEMORY)

    @property
    def gpu_number(self) -> int:
        """Whole GPUs (`volcano.sh/gpu-number`, limits) the pod needs."""
        return self._summed(dn.GPU_NUMBER)

    def gpu_index(self) -> list[int]:
        """The GPU ids of the `volcano.sh/gpu-index` annotation; [] if absent or malformed
        (as Volcano, which logs it and accounts nothing)."""
        value = self.annotations.get(dn.GPU_INDEX)
        if not value:
            return []
        try:
            return [int(part) for part in value.split(",")]
        except ValueError:
            return []


@dataclass(frozen=True, slots=True)
class NodeDeviceSource:
    """What Volcano's device plugins wrote on a node: gpushare's capacity and unhealthy ids,
    the vgpu plugin's register annotation and allocatable vGPU resources (None where
    absent)."""

    gpu_memory: int | None = None
    gpu_number: int | None = None
    unhealthy_ids: str | None = None
    vgpu_register: str | None = None
    vgpu_number: int | None = None
    vgpu_cores: int | None = None
    vgpu_memory: int | None = None
