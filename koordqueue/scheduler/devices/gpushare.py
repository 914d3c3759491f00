"""gpushare: GPUs shared by memory (`volcano.sh/gpu-memory`) and whole GPUs by number
(`volcano.sh/gpu-number`), Volcano's nvidia/gpushare device (v1.15.1) for one node.

The node offers `gpu-number` GPUs of `gpu-memory / gpu-number` memory each, less those the
`volcano.sh/gpu-unhealthy-ids` annotation names. A pod sharing by memory fits on a GPU with
that much memory not taken by the other pods on it; the GPU with the lowest id wins. A pod
asking for whole GPUs takes idle ones (no pod on them). Pods already placed hold the GPUs of
their `volcano.sh/gpu-index` annotation. (v1.15.1 changed the device only by a deep copy
for preemption's dry runs; a fit here never changes the GPUs, so there is nothing to copy.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.api.devices import NodeDeviceSource, PodDevices


@dataclass(slots=True)
class GpuShareCard:
    """One GPU: its id, memory, and the memory each pod on it holds (by pod uid)."""

    id: int
    memory: int
    pods: dict[str, int] = field(default_factory=dict)

    @property
    def idle_memory(self) -> int:
        return self.memory - sum(self.pods.values())

    @property
    def idle(self) -> bool:
        return not self.pods


@dataclass(slots=True)
class GpuShareDevices:
    """A node's GPUs as gpushare sees them (Volcano's GPUDevices)."""

    name: str
    cards: dict[int, GpuShareCard]

    @classmethod
    def from_source(cls, name: str, source: NodeDeviceSource) -> GpuShareDevices | None:
        """The node's GPUs, or None when it reports no gpu-memory and gpu-number (or 0 GPUs)."""
        if source.gpu_memory is None or not source.gpu_number:
            return None
        per_card = source.gpu_memory // source.gpu_number
        cards = {i: GpuShareCard(i, per_card) for i in range(source.gpu_number)}
        for part in (source.unhealthy_ids or "").split(","):
            try:
                cards.pop(int(part), None)
            except ValueError:
                continue  # Volcano logs a bad id and keeps going
        return cls(name, cards)

    # --- state ----------------------------------------------------------------------------
    def add(self, uid: str, devices: PodDevices, ids: list[int]) -> None:
        """The pod holds GPUs `ids` (Volcano's AddResource: unknown ids are skipped)."""
        if devices.gpu_memory <= 0 and devices.gpu_number <= 0:
            return
        for i in ids:
            card = self.cards.get(i)
            if card is not None:
                card.pods[uid] = devices.gpu_memory

    def remove(self, uid: str) -> None:
        """The pod gives its GPUs back."""
        for card in self.cards.values():
            card.pods.pop(uid, None)

    # --- predicates ---------------------------------------------------------------------
    def by_memory(self, request: int) -> list[int]:
        """Ids of the GPUs with `request` memory idle, lowest first."""
        return sorted(i for i, c in self.cards.items() if c.idle_memory >= request)

    def by_number(self, request: int) -> list[int]:
        """`request` idle GPU ids (lowest first), or [] when fewer are idle.

        Volcano takes them in Go's map order (random); the lowest ids keep runs repeatable.
        """
        idle = sorted(i for i, c in self.cards.items() if c.idle)
        return idle[:request] if len(idle) >= request else []

    def filter(self, devices: PodDevices, sharing: bool, number: bool) -> str | None:
        """None when the pod fits, else the refusal (Volcano's FilterNode)."""
        if sharing:
            memory = devices.gpu_memory
            if memory > 0 and not self.by_memory(memory):
                return dn.GPU_MEMORY_SHORT.format(request=memory)
        if number:
            count = devices.gpu_number
            if count > 0 and not self.by_number(count):
                return dn.GPU_NUMBER_SHORT.format(request=count)
        return None

    def allocate(self, uid: str, devices: PodDevices) -> list[int]:
        """Give the pod its GPUs; the ids, [] when none fit (Volcano's Allocate)."""
        given: list[int] = []
        memory = devices.gpu_memory
        if memory > 0:
            fitting = self.by_memory(memory)
            if not fitting:
                return []
            given = fitting[:1]
        if devices.gpu_number > 0:
            whole = self.by_number(devices.gpu_number)
            if not whole:
                return []
            given = whole
        self.add(uid, devices, given)
        return given


def has_request(devices: PodDevices, sharing: bool, number: bool) -> bool:
    """Volcano's HasDeviceRequest for gpushare."""
    return (sharing and devices.gpu_memory > 0) or (number and devices.gpu_number > 0)


def bind_annotations(ids: list[int]) -> dict[str, str]:
    """The annotation Volcano writes when it gives a pod its GPUs (the time is stamped by
    the binder: the scheduler core keeps no clock)."""
    return {dn.GPU_INDEX: ",".join(str(i) for i in ids)}
