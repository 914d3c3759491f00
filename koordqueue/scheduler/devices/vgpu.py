"""vGPU: GPUs split by count, memory and cores (HAMi-core), Volcano's nvidia/vgpu device
(v1.15.1) for one node, with Volcano's default device config.

The vgpu device plugin registers the node's GPUs in `volcano.sh/node-vgpu-register`
("uuid,count,memory,type,health,mode:" per GPU) and offers `volcano.sh/vgpu-number`,
`vgpu-cores` and `vgpu-memory` as allocatable; a node lacking any of the three (or with 0)
has no vGPUs. A container asks for `vgpu-number` GPUs (1 when it names only `vgpu-memory`),
each with `vgpu-memory` memory (all of it when none is asked) and `vgpu-cores` percent of its
cores. A GPU takes the container when it has a share left (`count`), the memory, the cores
(100 asks for it alone), its type passes the pod's `nvidia.com/use-gputype` /
`nouse-gputype` annotations and, for a pod annotated `volcano.sh/vgpu-podgroup-policy:
spread`, no pod of the same PodGroup uses it. The GPUs are tried, per container, in the
order of `deviceshare.SchedulePolicy`: binpack the most memory used first, spread the fewest
shares used first, otherwise the highest index first. A GPU's score is taken once the
container is tentatively on it: binpack how full its memory is, spread 100 if it was idle;
as the container is already counted, spread always scores 0 (Volcano's v1.15.1 arithmetic).

Accounting, as Volcano v1.15.1's HAMi-core sharing: a placed pod is put on each GPU its
`volcano.sh/vgpu-ids-new` names once (a second entry on the same GPU, another container's, is
not counted again), and taken off per entry (its first entry there, then the entry is gone).
A pod given GPUs in the session counts every entry, so a pod whose two containers share a GPU
holds more in its session than when read back from its annotation in the next, as in Volcano.
A fit that fails leaves nothing behind.

MIG needs a geometry ConfigMap; without one Volcano falls back to HAMi-core, and so do we.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.api.devices import NodeDeviceSource, PodDevices

ContainerAssignment = list[tuple[str, str, int, int]]
"""(uuid, type, memory, cores) per GPU given to one container."""


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    """One container's vGPU request (Volcano's ContainerDeviceRequest)."""

    nums: int
    type: str
    memreq: int
    mem_percentage: int
    coresreq: int


@dataclass(slots=True)
class PodUsage:
    """What one pod uses of one GPU and its PodGroup (Volcano's GPUUsage)."""

    memory: int = 0
    cores: int = 0
    group: str = ""
    """namespace/name of the pod's PodGroup, "" for a pod of none."""


@dataclass(slots=True)
class VGpuCard:
    """One GPU and what the pods on it use (Volcano's GPUDevice)."""

    index: int
    uuid: str
    number: int
    memory: int
    type: str
    health: bool = True
    used_num: int = 0
    used_mem: int = 0
    used_core: int = 0
    pods: dict[str, PodUsage] = field(default_factory=dict)
    """pod uid -> its usage here (Volcano's PodMap)."""

    def try_add(self, memory: int, cores: int) -> None:
        """Count a container on the GPU (HAMi-core's TryAddPod: no pod entry)."""
        self.used_num += 1
        self.used_mem += memory
        self.used_core += cores

    def add_pod(self, uid: str, memory: int, cores: int, group: str) -> None:
        """HAMi-core's AddPod: a pod already on the GPU is not counted again."""
        held = self.pods.get(uid)
        if held is None:
            self.pods[uid] = PodUsage(memory, cores, group)
            self.try_add(memory, cores)
        else:
            held.group = group

    def sub_pod(self, uid: str, memory: int, cores: int) -> None:
        """HAMi-core's SubPod: one entry's amounts off, and the pod off the GPU; a pod not
        on it changes nothing."""
        if self.pods.pop(uid, None) is not None:
            self.used_num -= 1
            self.used_mem -= memory
            self.used_core -= cores

    def has_group(self, group: str) -> bool:
        """A pod of PodGroup `group` uses the GPU (Volcano's deviceHasPodFromSameGroup: an
        entry left with no memory and no cores does not count)."""
        return bool(group) and any(
            u.group == group and (u.memory > 0 or u.cores > 0) for u in self.pods.values()
        )

    def copy(self) -> VGpuCard:
        """The counters copied; the pod entries shared (a fit reads them only)."""
        return VGpuCard(self.index, self.uuid, self.number, self.memory, self.type, self.health,
                        self.used_num, self.used_mem, self.used_core, self.pods)


def decode_register(value: str) -> tuple[list[VGpuCard], str] | None:
    """The GPUs of a register annotation and the node's sharing mode; None when malformed
    (a GPU entry with fewer than 6 fields, as Volcano refuses it)."""
    if ":" not in value:
        return None
    cards: list[VGpuCard] = []
    mode = dn.MODE_HAMI_CORE
    for index, entry in enumerate(value.split(":")):
        if "," not in entry:
            continue
        items = entry.split(",")
        if len(items) < 6:
            return None
        cards.append(VGpuCard(index, items[0], _int(items[1]), _int(items[2]), items[3],
                              items[4].strip().lower() == "true"))
        # no geometry config: a "mig" node is shared by HAMi-core (Volcano's fallback)
        mode = dn.MODE_HAMI_CORE
    return cards, mode


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0  # Volcano's strconv.Atoi error is dropped: 0


def requests(devices: PodDevices) -> list[ContainerRequest]:
    """Each device container's request (Volcano's ExtractResourceRequest, default config)."""
    out: list[ContainerRequest] = []
    for c in devices.containers:
        if dn.VGPU_NUMBER in c.limits:
            nums = c.limits[dn.VGPU_NUMBER]
        elif dn.VGPU_MEMORY in c.limits:
            nums = 1
        else:
            continue
        memreq = c.limits.get(dn.VGPU_MEMORY, c.requests.get(dn.VGPU_MEMORY, 0))
        percentage = 100 if memreq == 0 else dn.DEFAULT_MEM_PERCENTAGE
        cores = c.limits.get(dn.VGPU_CORES, c.requests.get(dn.VGPU_CORES, 0))
        out.append(ContainerRequest(nums, dn.NVIDIA, memreq, percentage, cores))
    return out


def has_request(devices: PodDevices) -> bool:
    """Volcano's checkVGPUResourcesInPod: a container limits vgpu-memory or vgpu-number."""
    return any(
        dn.VGPU_MEMORY in c.limits or dn.VGPU_NUMBER in c.limits for c in devices.containers
    )


def pod_group_key(namespace: str, annotations: Mapping[str, str] | None) -> str:
    """Volcano's getPodGroupKey: "namespace/group" from `scheduling.k8s.io/group-name`, else
    `scheduling.volcano.sh/group-name`; "" for a pod of no PodGroup."""
    annotations = annotations or {}
    group = annotations.get(dn.KUBE_GROUP_NAME) or annotations.get(dn.VOLCANO_GROUP_NAME)
    return f"{namespace}/{group}" if group else ""


def gpu_type_allowed(annotations: Mapping[str, str] | None, card_type: str) -> bool:
    """The pod's use-gputype (any listed type in the card's) or nouse-gputype (none)."""
    annotations = annotations or {}
    upper = card_type.upper()
    inuse = annotations.get(dn.USE_GPU_TYPE)
    if inuse is not None:
        return any(t.upper() in upper for t in inuse.split(","))
    nouse = annotations.get(dn.NOUSE_GPU_TYPE)
    if nouse is not None:
        return not any(t.upper() in upper for t in nouse.split(","))
    return True


def gpu_score(policy: str, card: VGpuCard) -> float:
    """A GPU's score (Volcano's GPUScore): binpack how full its memory is, spread 100 for an
    idle GPU. The fit asks once the container is counted on it."""
    if policy == dn.POLICY_BINPACK:
        return dn.MULTIPLIER * (card.used_mem / card.memory) if card.memory else 0.0
    if policy == dn.POLICY_SPREAD:
        return float(dn.MULTIPLIER) if card.used_num == 0 else 0.0
    return 0.0


def card_order(cards: list[VGpuCard], policy: str) -> list[int]:
    """Positions of the GPUs in the order a container tries them (Volcano's
    sortedDeviceIndicesByPolicy); ties go to the lower index."""
    if policy == dn.POLICY_BINPACK:
        return sorted(range(len(cards)), key=lambda i: (-cards[i].used_mem, cards[i].index))
    if policy == dn.POLICY_SPREAD:
        return sorted(range(len(cards)), key=lambda i: (cards[i].used_num, cards[i].index))
    return list(range(len(cards) - 1, -1, -1))


@dataclass(slots=True)
class VGpuDevices:
    """A node's vGPUs (Volcano's vgpu GPUDevices, HAMi-core sharing)."""

    name: str
    cards: list[VGpuCard]
    mode: str = dn.MODE_HAMI_CORE
    assigned: dict[str, list[ContainerAssignment]] = field(default_factory=dict)
    """pod uid -> the GPUs its annotation names (what SubResource reads back)."""

    @classmethod
    def from_source(cls, name: str, source: NodeDeviceSource) -> VGpuDevices | None:
        """The node's vGPUs; None without the register annotation, without allocatable
        vgpu-number, vgpu-cores and vgpu-memory all above 0, or with a malformed or empty
        register (Volcano's NewGPUDevices)."""
        if source.vgpu_register is None:
            return None
        if not (source.vgpu_number and source.vgpu_cores and source.vgpu_memory):
            return None
        decoded = decode_register(source.vgpu_register)
        if decoded is None or not decoded[0]:
            return None
        return cls(name, decoded[0], decoded[1])

    def fit(
        self, devices: PodDevices, policy: str, *, group: str = "", commit: str | None = None,
    ) -> tuple[list[ContainerAssignment], float] | str:
        """The GPUs per container and the score, or why the pod does not fit (Volcano's
        checkNodeGPUSharingPredicateAndScore). `group`: the pod's PodGroup key; `commit`:
        the pod uid to give the GPUs to (None only tries)."""
        wanted = devices.annotations.get(dn.VGPU_MODE)
        if wanted is not None and wanted != self.mode:
            return dn.VGPU_MODE_MISMATCH.format(pod=wanted, node=self.mode)
        annotations = devices.annotations
        spread_group = (
            group if annotations.get(dn.VGPU_PODGROUP_POLICY) == dn.POLICY_SPREAD else "")
        cards = [c.copy() for c in self.cards]  # tentative: the real GPUs change on success
        score = 0.0
        given: list[ContainerAssignment] = []
        taken: list[tuple[int, int, int, bool]] = []
        """Each tentative add: position, memory, cores, and whether it gave the pod a GPU
        (a container asking 0 GPUs still counts on the first that fits, as in Volcano)."""
        for req in requests(devices):
            if req.nums > len(cards):
                return dn.VGPU_TOO_FEW_CARDS.format(request=req.nums)
            left = req.nums
            mine: ContainerAssignment = []
            for position in card_order(cards, policy):
                card = cards[position]
                memory = self._memory_for(card, req)
                if (
                    card.number <= card.used_num
                    or (spread_group and card.has_group(spread_group))
                    or card.memory - card.used_mem < memory
                    or card.used_core + req.coresreq > dn.FULL_CORES
                    or (req.coresreq == dn.FULL_CORES and card.used_num > 0)
                    or (card.used_core == dn.FULL_CORES and req.coresreq == 0)
                    or req.type not in card.type
                    or not gpu_type_allowed(annotations, card.type)
                ):
                    continue
                card.try_add(memory, req.coresreq)
                taken.append((position, memory, req.coresreq, left > 0))
                if left > 0:
                    left -= 1
                    mine.append((card.uuid, req.type, memory, req.coresreq))
                    score += gpu_score(policy, card)
                if left == 0:
                    break
            if left > 0:
                if spread_group and not isinstance(self.fit(devices, policy), str):
                    return dn.VGPU_PODGROUP_SPREAD.format(group=spread_group)
                return dn.VGPU_NOT_FITTED.format(
                    number=req.nums, memory=req.memreq, cores=req.coresreq)
            given.append(mine)
        if commit is not None:
            self._commit(commit, given, taken, group)
        return given, score

    def _commit(
        self, uid: str, given: list[ContainerAssignment],
        taken: list[tuple[int, int, int, bool]], group: str,
    ) -> None:
        """Volcano's Allocate after the fit: the tentative adds made on the real GPUs, and
        the pod's usage summed on each GPU it was given (addToPodMap)."""
        for position, memory, cores, entry in taken:
            card = self.cards[position]
            card.try_add(memory, cores)
            if entry:
                held = card.pods.setdefault(uid, PodUsage())
                held.memory += memory
                held.cores += cores
                held.group = group
        self.assigned[uid] = given

    @staticmethod
    def _memory_for(card: VGpuCard, req: ContainerRequest) -> int:
        if req.mem_percentage != dn.DEFAULT_MEM_PERCENTAGE:
            return int(card.memory * req.mem_percentage / 100.0)
        return req.memreq

    def _card_of(self, uuid: str) -> VGpuCard | None:
        """The GPU an annotation entry names: the first whose uuid the entry contains."""
        for card in self.cards:
            if card.uuid in uuid:
                return card
        return None

    def add(self, uid: str, assignment: list[ContainerAssignment], group: str = "") -> None:
        """A placed pod holds its GPUs (Volcano's AddResource: once per GPU; an entry naming
        no GPU of the node is skipped)."""
        for container in assignment:
            for uuid, _type, memory, cores in container:
                card = self._card_of(uuid)
                if card is not None:
                    card.add_pod(uid, memory, cores, group)
        self.assigned[uid] = assignment

    def remove(self, uid: str) -> None:
        """The pod gives its GPUs back (Volcano's SubResource over its annotation)."""
        for container in self.assigned.pop(uid, ()):
            for uuid, _type, memory, cores in container:
                card = self._card_of(uuid)
                if card is not None:
                    card.sub_pod(uid, memory, cores)

    def holds(self, uid: str) -> bool:
        return any(uid in card.pods for card in self.cards)


def node_score(score: float, weight: int) -> float:
    """The node order score: the device score rounded half up, times the weight."""
    return float(math.floor(score + 0.5) * weight)


def encode(assignment: list[ContainerAssignment]) -> str:
    """`volcano.sh/vgpu-ids-new`: "uuid,type,memory,cores:" per GPU, containers joined by ";"."""
    return ";".join(
        "".join(f"{uuid},{kind},{memory},{cores}:" for uuid, kind, memory, cores in container)
        for container in assignment
    )


def decode(value: str) -> list[ContainerAssignment]:
    """The assignment of a `volcano.sh/vgpu-ids-new` annotation (bad numbers read 0)."""
    out: list[ContainerAssignment] = []
    for part in value.split(";") if value else []:
        container: ContainerAssignment = []
        for entry in part.split(":"):
            if "," not in entry:
                continue
            items = entry.split(",")
            if len(items) < 4:
                continue
            container.append((items[0], items[1], _int(items[2]), _int(items[3])))
        out.append(container)
    return out


def assigned_on(annotations: Mapping[str, str], node: str) -> bool:
    """The pod already carries GPUs of `node` (Volcano's alreadyAssignedOnNode: Allocate then
    gives it none anew)."""
    return bool(node) and annotations.get(dn.VGPU_NODE) == node and bool(
        annotations.get(dn.VGPU_IDS))


def bind_annotations(node: str, assignment: list[ContainerAssignment]) -> dict[str, str]:
    """What Volcano writes on a pod given vGPUs (the times are stamped by the binder)."""
    ids = encode(assignment)
    return {
        dn.VGPU_NODE: node,
        dn.VGPU_IDS: ids,
        dn.VGPU_DEVICES_TO_ALLOCATE: ids,
        dn.BIND_PHASE: dn.BIND_PHASE_ALLOCATING,
    }
