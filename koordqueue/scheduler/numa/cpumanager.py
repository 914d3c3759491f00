"""The cpu-manager hint provider (Volcano's provider/cpumanager, after the kubelet's static
cpu manager): which NUMA masks can hold a container's whole cpus, and which cpus it gets.

Transcribed with Volcano's quirks, so that the same Numatopology gives the same cpus:
- `free_sockets` / `free_cores` intersect socket or core *ids* with cpu ids (as Volcano does);
- the sorts use Volcano's comparators (chains of `||`, not a strict order) in Go's insertion
  sort, which is what Go's sort.Slice runs for up to 12 elements; on larger inputs Go's
  pdqsort may order ties differently.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from itertools import combinations

from koordqueue.scheduler.api import numa_names as nn
from koordqueue.scheduler.api.numa import CpuInfo, CpuSet, NumaTopology, mask_bits, mask_count
from koordqueue.scheduler.api.numa import mask_of as _mask_of
from koordqueue.scheduler.numa.policy import TopologyHint

Details = Mapping[int, CpuInfo]
PROVIDER_NAME = "cpuMng"


def _go_insertion_sort(items: list[int], less: Callable[[int, int], bool]) -> None:
    """Go's insertionSort over `items` with `less(a, b)` on the elements."""
    for i in range(1, len(items)):
        j = i
        while j > 0 and less(items[j], items[j - 1]):
            items[j], items[j - 1] = items[j - 1], items[j]
            j -= 1


def guaranteed_cpus(cpu_millis: int | None) -> int:
    """Whole cpus of the request, 0 when it is fractional or absent (guaranteedCPUs)."""
    if cpu_millis is None or cpu_millis % 1000:
        return 0
    return cpu_millis // 1000


class _Topology:
    """The kubelet's CPUTopology over the Numatopology's cpuDetail."""

    def __init__(self, details: Details) -> None:
        self.details = details
        self.num_cpus = len(details)
        self.num_cores = len({(c.socket, c.core) for c in details.values()})
        self.num_sockets = len({c.socket for c in details.values()})

    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0


def _cpus_where(details: Details, pred: Callable[[CpuInfo], bool]) -> CpuSet:
    return frozenset(cpu for cpu, info in details.items() if pred(info))


def _cpus_in(details: Details, attr: str, values: Collection[int]) -> CpuSet:
    """The cpus of `details` whose `attr` (numa, socket or core) is one of `values`."""
    return frozenset(cpu for cpu, info in details.items() if getattr(info, attr) in values)


class _Accumulator:
    def __init__(self, topo: _Topology, available: CpuSet, num: int) -> None:
        self.topo = topo
        self.details: dict[int, CpuInfo] = {
            c: i for c, i in topo.details.items() if c in available
        }
        self.needed = num
        self.result: set[int] = set()

    def take(self, cpus: CpuSet) -> None:
        self.result |= cpus
        for cpu in cpus:
            self.details.pop(cpu, None)
        self.needed -= len(cpus)

    def free_sockets(self) -> list[int]:
        sockets = {i.socket for i in self.details.values()}
        return sorted(sockets & set(self.details))

    def free_cores(self) -> list[int]:
        sockets = sorted({i.socket for i in self.details.values()})  # Go: map order
        cpus = set(self.details)

        def cores_in(socket: int) -> set[int]:
            return {i.core for i in self.details.values() if i.socket == socket} & cpus

        _go_insertion_sort(
            sockets, lambda a, b: len(cores_in(a)) < len(cores_in(b)) or a < b
        )
        out: list[int] = []
        for s in sockets:
            out.extend(sorted(cores_in(s)))
        return out

    def free_cpus(self) -> list[int]:
        all_details = self.topo.details
        cores = sorted({i.core for i in self.details.values()})

        def socket_of(core: int) -> int:
            return all_details[min(_cpus_where(all_details, lambda i: i.core == core))].socket

        def less(a: int, b: int) -> bool:
            sa, sb = socket_of(a), socket_of(b)
            colo_a = len(_cpus_where(all_details, lambda i: i.socket == sa) & self.result)
            colo_b = len(_cpus_where(all_details, lambda i: i.socket == sb) & self.result)
            free_sa = len(_cpus_where(self.details, lambda i: i.socket == sa))
            free_sb = len(_cpus_where(self.details, lambda i: i.socket == sb))
            free_ca = len(_cpus_where(self.details, lambda i: i.core == a))
            free_cb = len(_cpus_where(self.details, lambda i: i.core == b))
            return colo_a > colo_b or free_sa < free_sb or free_ca < free_cb or sa < sb or a < b

        _go_insertion_sort(cores, less)
        out: list[int] = []
        for core in cores:
            out.extend(sorted(_cpus_in(self.details, "core", (core,))))
        return out

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.details)


def take_by_topology(details: Details, available: CpuSet, num: int) -> CpuSet | None:
    """`num` cpus of `available`, whole sockets, then whole cores, then single cpus
    (takeByTopology); None when they cannot be found."""
    topo = _Topology(details)
    acc = _Accumulator(topo, available, num)
    if acc.satisfied():
        return frozenset(acc.result)
    if acc.failed():
        return None
    per_socket, per_core = topo.cpus_per_socket(), topo.cpus_per_core()
    if acc.needed >= per_socket:
        for s in acc.free_sockets():
            acc.take(_cpus_in(acc.details, "socket", (s,)))
            if acc.satisfied():
                return frozenset(acc.result)
            if acc.needed < per_socket:
                break
    if acc.needed >= per_core:
        for c in acc.free_cores():
            acc.take(_cpus_in(acc.details, "core", (c,)))
            if acc.satisfied():
                return frozenset(acc.result)
            if acc.needed < per_core:
                break
    for cpu in acc.free_cpus():
        if acc.needed >= 1:
            acc.take(frozenset({cpu}))
        if acc.satisfied():
            return frozenset(acc.result)
    return None


def _reserved(topo: NumaTopology) -> CpuSet:
    """The cpus the kubelet keeps for the system: the reservation rounded up, by topology."""
    if topo.reserved_cpu_millis is None:
        return frozenset()
    count = -(-topo.reserved_cpu_millis // 1000)
    return take_by_topology(topo.cpus, frozenset(topo.cpus), count) or frozenset()


def cpu_hints(available: CpuSet, details: Details, request: int) -> list[TopologyHint]:
    """Every NUMA mask with `request` available cpus, smallest masks first; preferred are
    those as narrow as the narrowest mask that could ever hold the request
    (generateCPUTopologyHints)."""
    numa_ids = sorted({i.numa for i in details.values()})
    min_size = len(numa_ids)
    found: list[int] = []
    for size in range(1, len(numa_ids) + 1):
        for ids in combinations(numa_ids, size):
            in_mask = _cpus_in(details, "numa", ids)
            if len(in_mask) >= request and size < min_size:
                min_size = size
            if sum(1 for c in available if c in in_mask) >= request:
                found.append(_mask_of(ids))
    return [TopologyHint(m, mask_count(m) == min_size) for m in found]


def topology_hints(
    cpu_millis: int | None, topo: NumaTopology, free: Mapping[str, CpuSet]
) -> dict[str, list[TopologyHint]] | None:
    """The provider's hints for one container (GetTopologyHints): None when it asks for no
    cpu, a fractional cpu, or the node reports no cpu set."""
    request = guaranteed_cpus(cpu_millis)
    if request == 0 or nn.CPU not in free:
        return None
    available = free[nn.CPU] - _reserved(topo)
    return {nn.CPU: cpu_hints(available, topo.cpus, request)}


def allocate(
    cpu_millis: int | None, best: TopologyHint, topo: NumaTopology, free: Mapping[str, CpuSet]
) -> dict[str, CpuSet]:
    """The container's cpus: aligned ones from the best hint's NUMA nodes first, the rest
    from anywhere (Allocate); empty when they cannot be found."""
    request = guaranteed_cpus(cpu_millis)
    available = free.get(nn.CPU, frozenset()) - _reserved(topo)
    result: CpuSet = frozenset()
    if best.mask is not None:
        ids = set(mask_bits(best.mask))
        aligned = available & _cpus_in(topo.cpus, "numa", ids)
        taken = take_by_topology(topo.cpus, aligned, min(request, len(aligned)))
        if taken is None:
            return {nn.CPU: frozenset()}
        result = taken
    rest = take_by_topology(topo.cpus, available - result, request - len(result))
    if rest is None:
        return {nn.CPU: frozenset()}
    return {nn.CPU: result | rest}


__all__ = ["PROVIDER_NAME", "allocate", "cpu_hints", "guaranteed_cpus", "take_by_topology",
           "topology_hints"]
