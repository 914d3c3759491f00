"""vGPU: GPUs split by count, memory and cores (HAMi-core), Volcano's nvidia/vgpu device
(v1.14.1) for one node, with Volcano's default device config.

The vgpu device plugin registers the node's GPUs in `volcano.sh/node-vgpu-register`
("uuid,count,memory,type,health,mode:" per GPU); a container asks for `volcano.sh/vgpu-number`
GPUs (1 when it names only `vgpu-memory`), each with `vgpu-memory` memory (all of it when
none is asked) and `vgpu-cores` percent of its cores. GPUs are tried from the highest index
down; a GPU takes the container when it has a share left (`count`), the memory, the cores
(100 asks for it alone), and its type passes the pod's `nvidia.com/use-gputype` /
`nouse-gputype` annotations. The binpack policy scores a GPU by how full its memory would be,
spread by whether it was idle (x 100 each, summed over the GPUs given).

MIG needs a geometry ConfigMap; without one Volcano falls back to HAMi-core, and so do we.
"""

from __future__ import annotations

import math
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
    pods: dict[str, list[int]] = field(default_factory=dict)
    """pod uid -> [memory, cores, shares] it holds here."""

    def take(self, uid: str, memory: int, cores: int) -> None:
        self.used_num += 1
        self.used_mem += memory
        self.used_core += cores
        held = self.pods.setdefault(uid, [0, 0, 0])
        held[0] += memory
        held[1] += cores
        held[2] += 1

    def copy(self) -> VGpuCard:
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


def gpu_type_allowed(annotations: dict[str, str] | None, card_type: str) -> bool:
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
    """A GPU's score once the container is on it (Volcano's GPUScore)."""
    if policy == dn.POLICY_BINPACK:
        return dn.MULTIPLIER * (card.used_mem / card.memory) if card.memory else 0.0
    if policy == dn.POLICY_SPREAD:
        return float(dn.MULTIPLIER) if card.used_num == 1 else 0.0
    return 0.0


@dataclass(slots=True)
class VGpuDevices:
    """A node's vGPUs (Volcano's vgpu GPUDevices, HAMi-core sharing)."""

    name: str
    cards: list[VGpuCard]
    mode: str = dn.MODE_HAMI_CORE

    @classmethod
    def from_source(cls, name: str, source: NodeDeviceSource) -> VGpuDevices | None:
        """The node's vGPUs; None without both annotations, with a malformed or empty
        register, or once the handshake says the device plugin is gone ("Deleted_...")."""
        if source.vgpu_register is None or source.vgpu_handshake is None:
            return None
        if dn.HANDSHAKE_DELETED in source.vgpu_handshake:
            return None
        decoded = decode_register(source.vgpu_register)
        if decoded is None or not decoded[0]:
            return None
        return cls(name, decoded[0], decoded[1])

    def fit(
        self, devices: PodDevices, policy: str, *, commit: str | None = None,
    ) -> tuple[list[ContainerAssignment], float] | str:
        """The GPUs per container and the score, or why the pod does not fit (Volcano's
        checkNodeGPUSharingPredicateAndScore). `commit`: the pod uid to give them to;
        None tries on copies."""
        wanted = devices.annotations.get(dn.VGPU_MODE)
        if wanted is not None and wanted != self.mode:
            return dn.VGPU_MODE_MISMATCH.format(pod=wanted, node=self.mode)
        cards = self.cards if commit is not None else [c.copy() for c in self.cards]
        annotations = dict(devices.annotations)
        score = 0.0
        given: list[ContainerAssignment] = []
        for req in requests(devices):
            if req.nums > len(cards):
                return dn.VGPU_TOO_FEW_CARDS.format(request=req.nums)
            left = req.nums
            mine: ContainerAssignment = []
            for card in reversed(cards):
                memory = self._memory_for(card, req)
                if (
                    card.number <= card.used_num
                    or card.memory - card.used_mem < memory
                    or card.used_core + req.coresreq > dn.FULL_CORES
                    or (req.coresreq == dn.FULL_CORES and card.used_num > 0)
                    or (card.used_core == dn.FULL_CORES and req.coresreq == 0)
                    or req.type not in card.type
                    or not gpu_type_allowed(annotations, card.type)
                ):
                    continue
                if commit is not None:
                    card.take(commit, memory, req.coresreq)
                else:
                    card.used_num += 1
                    card.used_mem += memory
                    card.used_core += req.coresreq
                if left > 0:
                    left -= 1
                    mine.append((card.uuid, req.type, memory, req.coresreq))
                    score += gpu_score(policy, card)
                if left == 0:
                    break
            if left > 0:
                return dn.VGPU_NOT_FITTED.format(
                    number=req.nums, memory=req.memreq, cores=req.coresreq)
            given.append(mine)
        return given, score

    @staticmethod
    def _memory_for(card: VGpuCard, req: ContainerRequest) -> int:
        if req.mem_percentage != dn.DEFAULT_MEM_PERCENTAGE:
            return int(card.memory * req.mem_percentage / 100.0)
        return req.memreq

    def add(self, uid: str, assignment: list[ContainerAssignment]) -> None:
        """A placed pod holds its GPUs (Volcano's AddResource: a GPU whose uuid the entry
        contains; an entry matching none is skipped)."""
        for container in assignment:
            for uuid, _type, memory, cores in container:
                for card in self.cards:
                    if card.uuid in uuid:
                        card.take(uid, memory, cores)
                        break

    def remove(self, uid: str) -> None:
        """The pod gives its GPUs back."""
        for card in self.cards:
            held = card.pods.pop(uid, None)
            if held is not None:
                card.used_mem -= held[0]
                card.used_core -= held[1]
                card.used_num -= held[2]

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


def bind_annotations(node: str, assignment: list[ContainerAssignment]) -> dict[str, str]:
    """What Volcano writes on a pod given vGPUs (the times are stamped by the binder)."""
    ids = encode(assignment)
    return {
        dn.VGPU_NODE: node,
        dn.VGPU_IDS: ids,
        dn.VGPU_DEVICES_TO_ALLOCATE: ids,
        dn.BIND_PHASE: dn.BIND_PHASE_ALLOCATING,
    }
