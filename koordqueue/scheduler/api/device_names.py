"""Names of Volcano's shared devices (deviceshare plugin, v1.15.1): its arguments, the
extended resources pods ask for, the node capacity and annotations Volcano's device plugins
write, the pod annotations the scheduler writes at bind, and the refusals it gives.

Spelled as Volcano spells them (pkg/scheduler/plugins/deviceshare/deviceshare.go,
pkg/scheduler/api/devices/nvidia/{gpushare,vgpu}, devices/config/vgpu.go), so a user's
volcano-scheduler.conf, pods and device-plugin-written nodes work unchanged.
"""

from __future__ import annotations

from typing import Final

PLUGIN_NAME: Final = "deviceshare"

# --- plugin arguments ------------------------------------------------------------------------
GPU_SHARING_ENABLE: Final = "deviceshare.GPUSharingEnable"
GPU_NUMBER_ENABLE: Final = "deviceshare.GPUNumberEnable"
NODE_LOCK_ENABLE: Final = "deviceshare.NodeLockEnable"
VGPU_ENABLE: Final = "deviceshare.VGPUEnable"
ASCEND_MIND_CLUSTER_VNPU_ENABLE: Final = "deviceshare.AscendMindClusterVNPUEnable"
ASCEND_HAMI_VNPU_ENABLE: Final = "deviceshare.AscendHAMiVNPUEnable"
SCHEDULE_POLICY: Final = "deviceshare.SchedulePolicy"
SCHEDULE_WEIGHT: Final = "deviceshare.ScheduleWeight"
KNOWN_GEOMETRIES_CM_NAME: Final = "deviceshare.KnownGeometriesCMName"
KNOWN_GEOMETRIES_CM_NAMESPACE: Final = "deviceshare.KnownGeometriesCMNamespace"
GPU_EXCLUSIVE_RULES: Final = "deviceshare.GPUExclusiveRules"
"""A list of label maps (Volcano v1.15): pods matching one never share a vGPU card."""
POLICY_BINPACK: Final = "binpack"
POLICY_SPREAD: Final = "spread"

# --- gpushare (GPU sharing by memory, and whole GPUs by number) -------------------------------
GPU_SHARE_DEVICE: Final = "GpuShare"
GPU_MEMORY: Final = "volcano.sh/gpu-memory"
"""Node capacity: all GPUs' memory; pod limit: memory on one GPU."""
GPU_NUMBER: Final = "volcano.sh/gpu-number"
"""Node capacity: GPUs on the node; pod limit: whole (idle) GPUs."""
GPU_INDEX: Final = "volcano.sh/gpu-index"
"""Pod annotation written at bind: the GPU ids given ("0" or "0,1")."""
PREDICATE_TIME: Final = "volcano.sh/predicate-time"
"""Pod annotation written at bind (gpushare): when, in Unix nanoseconds."""
UNHEALTHY_GPU_IDS: Final = "volcano.sh/gpu-unhealthy-ids"
"""Node annotation: GPU ids ("1,3") left out of the node's GPUs."""

# --- vGPU (HAMi-core) --------------------------------------------------------------------------
VGPU_DEVICE: Final = "hamivgpu"
VGPU_NUMBER: Final = "volcano.sh/vgpu-number"
VGPU_MEMORY: Final = "volcano.sh/vgpu-memory"
VGPU_CORES: Final = "volcano.sh/vgpu-cores"
VGPU_MEMORY_PERCENTAGE: Final = "volcano.sh/vgpu-memory-percentage"
"""Read only when a device config names it (Volcano's default config does not)."""
VGPU_REGISTER: Final = "volcano.sh/node-vgpu-register"
"""Node annotation the vgpu device plugin writes: "uuid,count,memory,type,health,mode:" per GPU.
The node has vGPUs only with allocatable VGPU_NUMBER, VGPU_CORES and VGPU_MEMORY above 0
(v1.15; v1.14 read a `volcano.sh/node-vgpu-handshake` annotation instead)."""
VGPU_IDS: Final = "volcano.sh/vgpu-ids-new"
"""Pod annotation written at bind: per container "uuid,type,memory,cores:" joined by ";"."""
VGPU_DEVICES_TO_ALLOCATE: Final = "volcano.sh/devices-to-allocate"
VGPU_NODE: Final = "volcano.sh/vgpu-node"
VGPU_TIME: Final = "volcano.sh/vgpu-time"
BIND_TIME: Final = "volcano.sh/bind-time"
BIND_PHASE: Final = "volcano.sh/bind-phase"
BIND_PHASE_ALLOCATING: Final = "allocating"
VGPU_MODE: Final = "volcano.sh/vgpu-mode"
"""Pod annotation: the sharing mode the pod needs (hami-core or mig)."""
VGPU_PODGROUP_POLICY: Final = "volcano.sh/vgpu-podgroup-policy"
"""Pod annotation (v1.15): "spread" keeps the pod off GPUs a pod of its PodGroup uses."""
KUBE_GROUP_NAME: Final = "scheduling.k8s.io/group-name"
VOLCANO_GROUP_NAME: Final = "scheduling.volcano.sh/group-name"
"""Pod annotations naming its PodGroup (the first wins), read for VGPU_PODGROUP_POLICY."""
USE_GPU_TYPE: Final = "nvidia.com/use-gputype"
NOUSE_GPU_TYPE: Final = "nvidia.com/nouse-gputype"
NVIDIA: Final = "NVIDIA"
MODE_HAMI_CORE: Final = "hami-core"
MODE_MIG: Final = "mig"
DEFAULT_MEM_PERCENTAGE: Final = 101
"""Volcano's "no percentage asked" marker."""
MULTIPLIER: Final = 100
FULL_CORES: Final = 100

DEVICE_RESOURCES: Final = frozenset(
    {GPU_MEMORY, GPU_NUMBER, VGPU_NUMBER, VGPU_MEMORY, VGPU_CORES, VGPU_MEMORY_PERCENTAGE}
)
"""Extended resources whose per-container amounts a pod's device request keeps."""
POD_ANNOTATIONS: Final = (
    GPU_INDEX, VGPU_IDS, VGPU_NODE, VGPU_MODE, USE_GPU_TYPE, NOUSE_GPU_TYPE, VGPU_PODGROUP_POLICY,
    KUBE_GROUP_NAME, VOLCANO_GROUP_NAME,
)
"""Pod annotations device accounting and filtering read."""

# --- refusals (one per failing node; "deviceshare:" names the plugin for explain) -------------
GPU_MEMORY_SHORT: Final = (
    "deviceshare: GpuShare no enough gpu memory (no GPU has {request} " + GPU_MEMORY + " free)"
)
GPU_NUMBER_SHORT: Final = (
    "deviceshare: GpuNumber no enough gpu number ({request} idle GPUs for " + GPU_NUMBER + ")"
)
VGPU_REFUSED: Final = "deviceshare: hami-vgpu {detail}"
VGPU_MODE_MISMATCH: Final = (
    "pod required sharing mode {pod} is not the same as the node mode {node}"
)
VGPU_TOO_FEW_CARDS: Final = "no enough gpu cards ({request} " + VGPU_NUMBER + ")"
VGPU_NOT_FITTED: Final = (
    "not enough gpu fitted ({number} " + VGPU_NUMBER + " with {memory} " + VGPU_MEMORY
    + " and {cores} " + VGPU_CORES + " each)"
)
VGPU_PODGROUP_SPREAD: Final = (
    "pod group {group} already uses every GPU that could take the pod ("
    + VGPU_PODGROUP_POLICY + ": spread)"
)
VGPU_EXCLUSIVE_HELD: Final = (
    "GPU-exclusive rule {rules}: GPU {cards} already run pods of the same rule"
)
EXCLUSIVE_RULES_BAD: Final = (
    "deviceshare: " + GPU_EXCLUSIVE_RULES + " {problem}; Volcano ignores it too"
)
CONFLICTING_MODES: Final = (
    "deviceshare: {first} and {second} cannot both be true; {second} is ignored"
)
