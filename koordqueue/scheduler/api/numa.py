"""NUMA data as numa-aware reads it: a node's Numatopology (Volcano's NumatopoInfo) and a
Guaranteed pod's per-container whole-cpu requests with its policy (Volcano's TopologyInfo).

CPU sets are frozensets of cpu ids; NUMA masks are ints (bit i = NUMA node i), as the
kubelet's bitmask, whose order (`IsLessThan`) is the integer order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

CpuSet = frozenset[int]
EMPTY: Final[CpuSet] = frozenset()


@dataclass(frozen=True, slots=True)
class CpuInfo:
    """Where one logical cpu sits (the CRD's cpuDetail entry)."""

    numa: int = 0
    socket: int = 0
    core: int = 0


@dataclass(frozen=True, slots=True)
class NumaResource:
    """One resource's allocatable cpu ids and capacity (the CRD's numares entry)."""

    allocatable: CpuSet = EMPTY
    capacity: int = 0


@dataclass(frozen=True, slots=True)
class NumaTopology:
    """One node's Numatopology: kubelet policies, per-resource allocatable sets, the cpu
    layout and the cpus reserved for the system (whole cpus, rounded up as the kubelet)."""

    name: str
    policies: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, NumaResource] = field(default_factory=dict)
    cpus: Mapping[int, CpuInfo] = field(default_factory=dict)
    reserved_cpu_millis: int | None = None

    def numa_nodes(self) -> list[int]:
        """The NUMA ids the layout names, ascending (Volcano's GenerateNumaNodes)."""
        return sorted({c.numa for c in self.cpus.values()})

    def with_allocated(self, taken: Mapping[str, CpuSet]) -> NumaTopology:
        """This topology with `taken` off its allocatable sets (UpdateSchedulerNumaInfo)."""
        resources = dict(self.resources)
        for name, cpus in taken.items():
            res = resources.get(name)
            if res is not None:
                resources[name] = NumaResource(res.allocatable - cpus, res.capacity)
        return NumaTopology(self.name, self.policies, resources, self.cpus,
                            self.reserved_cpu_millis)


@dataclass(frozen=True, slots=True)
class ContainerCpus:
    """A container's name and cpu request in millicpus (None: it asks for no cpu)."""

    name: str
    cpu_millis: int | None


@dataclass(frozen=True, slots=True)
class TaskNuma:
    """A Guaranteed pod's topology policy (its annotation, "" without) and containers.
    Pods of another QoS class carry None: numa-aware lets them through untouched."""

    policy: str
    containers: tuple[ContainerCpus, ...]


Assigned = Mapping[str, tuple[str, Mapping[str, CpuSet]]]
"""Task uid -> (node, resource -> cpus) numa-aware gave a pod bound (SessionResult)."""


def by_node(assigned: Assigned) -> dict[str, dict[str, CpuSet]]:
    """The cpus given per node and resource (what Volcano's cache takes at session close)."""
    out: dict[str, dict[str, CpuSet]] = {}
    for node, resources in assigned.values():
        per_node = out.setdefault(node, {})
        for res, cpus in resources.items():
            per_node[res] = per_node.get(res, EMPTY) | cpus
    return out


def parse_cpuset(text: str) -> CpuSet:
    """Linux cpuset notation ("0-3,8,10-11"; "" is empty) -> cpu ids; ValueError if bad."""
    out: set[int] = set()
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        low, sep, high = part.partition("-")
        first, last = int(low), int(high) if sep else int(low)
        if first < 0 or last < first:
            raise ValueError(f"bad cpu range {part!r}")
        out.update(range(first, last + 1))
    return frozenset(out)


def mask_of(ids: Iterable[int]) -> int:
    """The NUMA mask with the bits of `ids` set."""
    mask = 0
    for i in ids:
        mask |= 1 << i
    return mask


def mask_bits(mask: int) -> list[int]:
    """The NUMA ids set in `mask`, ascending."""
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def mask_count(mask: int) -> int:
    return bin(mask).count("1")


__all__ = [
    "EMPTY",
    "Assigned",
    "ContainerCpus",
    "CpuInfo",
    "CpuSet",
    "NumaResource",
    "NumaTopology",
    "TaskNuma",
    "by_node",
    "mask_bits",
    "mask_count",
    "mask_of",
    "parse_cpuset",
]
