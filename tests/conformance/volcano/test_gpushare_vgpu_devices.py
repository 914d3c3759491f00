"""The device library under deviceshare: cases of volcano-sh/volcano v1.14.1
pkg/scheduler/api/devices/nvidia/gpushare/device_info_test.go (TestGetGPUMemoryOfPod,
TestGetGPUNumberOfPod), nvidia/vgpu/device_info_test.go (TestGetGPUMemoryOfPod, which reads
resourcereqs, and TestAddResource) and nvidia/vgpu/utils_test.go (TestCheckGPUtype).

Pods are API objects read by the kube adapter (`PodDevices`), as the live scheduler reads
them. Checked failing with each rule switched off: the init-container max taken out of
`PodDevices._summed` (both "initContainers and Containers" cases give 5, not 3); the
single-device default of `vgpu.requests` (a container naming only memory) removed and the
count read as 0 (the resourcereqs case); the uuid match of `VGpuDevices.add` made always
true (the unknown-uuid case adds the pod); the nouse branch of `gpu_type_allowed` dropped
(four nouse cases answer True).
"""

from __future__ import annotations

import pytest

from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.api.devices import PodDevices
from koordqueue.scheduler.devices import vgpu
from koordqueue.scheduler.devices.vgpu import VGpuCard, VGpuDevices

from .devices import pod_devices


@pytest.mark.parametrize(
    ("containers", "init", "want"),
    [
        pytest.param([{dn.GPU_MEMORY: "1"}, {dn.GPU_MEMORY: "3"}], [], 4,
                     id="GPUs required only in Containers"),
        pytest.param([{dn.GPU_MEMORY: "2"}], [{dn.GPU_MEMORY: "1"}, {dn.GPU_MEMORY: "3"}], 3,
                     id="GPUs required both in initContainers and Containers"),
    ],
)
def test_gpushare_gpu_memory_of_pod(
    containers: list[dict[str, str]], init: list[dict[str, str]], want: int
) -> None:
    """gpushare TestGetGPUMemoryOfPod: containers summed, the largest init container wins
    when larger."""
    assert pod_devices("p", containers, init=init).gpu_memory == want


@pytest.mark.parametrize(
    ("containers", "init", "want"),
    [
        pytest.param([{dn.GPU_NUMBER: "1"}, {dn.GPU_NUMBER: "3"}], [], 4,
                     id="GPUs required only in Containers"),
        pytest.param([{dn.GPU_NUMBER: "2"}], [{dn.GPU_NUMBER: "1"}, {dn.GPU_NUMBER: "3"}], 3,
                     id="GPUs required both in initContainers and Containers"),
    ],
)
def test_gpushare_gpu_number_of_pod(
    containers: list[dict[str, str]], init: list[dict[str, str]], want: int
) -> None:
    """gpushare TestGetGPUNumberOfPod: the same rule for whole GPUs."""
    assert pod_devices("p", containers, init=init).gpu_number == want


def test_vgpu_resource_requests_per_container() -> None:
    """vgpu TestGetGPUMemoryOfPod: two containers (1 GPU of 3000, 3 GPUs of 5000) give two
    requests in container order."""
    devices = pod_devices("p", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "3000"},
                                {dn.VGPU_NUMBER: "3", dn.VGPU_MEMORY: "5000"}])
    got = vgpu.requests(devices)
    assert [(r.nums, r.memreq) for r in got] == [(1, 3000), (3, 5000)]


def test_vgpu_memory_only_container_asks_for_one_gpu_and_no_memory_means_all() -> None:
    """ExtractResourceRequest's defaults (read by every vgpu case): a container naming only
    vgpu-memory asks for 1 GPU; one naming only vgpu-number asks for 100% of each GPU's
    memory; the memory may come from requests when limits lack it."""
    only_memory = vgpu.requests(pod_devices("p", [{dn.VGPU_MEMORY: "2000"}]))
    assert [(r.nums, r.memreq, r.mem_percentage) for r in only_memory] == [(1, 2000, 101)]
    only_number = vgpu.requests(pod_devices("p", [{dn.VGPU_NUMBER: "2"}]))
    assert [(r.nums, r.memreq, r.mem_percentage) for r in only_number] == [(2, 0, 100)]
    from_requests = vgpu.requests(pod_devices(
        "p", [{dn.VGPU_NUMBER: "1"}], requests=[{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "700"}]))
    assert [(r.nums, r.memreq) for r in from_requests] == [(1, 700)]


@pytest.mark.parametrize(
    ("annotation", "wanted"),
    [
        pytest.param("GPU-1234,NVIDIA,16384,0", True, id="Pod assigned to known GPU UUID"),
        pytest.param("GPU-5678,NVIDIA,16384,0", False, id="Pod assigned to unknown GPU UUID"),
        pytest.param(None, False, id="Pod without AssignedIDsAnnotations"),
    ],
)
def test_vgpu_add_resource(annotation: str | None, wanted: bool) -> None:
    """vgpu TestAddResource: a placed pod's `volcano.sh/vgpu-ids-new` puts it on the GPU
    whose uuid it names, and on none when the uuid is unknown or the annotation absent."""
    devices = VGpuDevices("n", [VGpuCard(0, "GPU-1234", 10, 0, "NVIDIA")])
    annotations = {} if annotation is None else {dn.VGPU_IDS: annotation}
    pod = PodDevices(annotations=annotations)
    devices.add("pod-abc", vgpu.decode(pod.annotations.get(dn.VGPU_IDS, "")))
    assert devices.holds("pod-abc") is wanted
    if wanted:
        card = devices.cards[0]
        assert (card.used_num, card.used_mem, card.used_core) == (1, 16384, 0)


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({dn.USE_GPU_TYPE: "NVIDIA"}, True, id="Single GPUInUse value matches"),
        pytest.param({dn.USE_GPU_TYPE: "nvidia"}, True, id="GPUInUse mixed case matches"),
        pytest.param({dn.USE_GPU_TYPE: "AMD,NVIDIA,INTEL"}, True,
                     id="Multiple GPUInUse values, one matches"),
        pytest.param({dn.USE_GPU_TYPE: "AMD,INTEL,MLU"}, False,
                     id="Multiple GPUInUse values, none matches"),
        pytest.param({dn.NOUSE_GPU_TYPE: "NVIDIA"}, False, id="Single GPUNoUse value matches"),
        pytest.param({dn.NOUSE_GPU_TYPE: "nvidia"}, False, id="GPUNoUse mixed case matches"),
        pytest.param({dn.NOUSE_GPU_TYPE: "AMD,NVIDIA,INTEL"}, False,
                     id="Multiple GPUNoUse values, one matches"),
        pytest.param({dn.NOUSE_GPU_TYPE: "AMD,INTEL,MLU"}, True,
                     id="Multiple GPUNoUse values, none matches"),
        pytest.param({}, True, id="Empty annotations map"),
        pytest.param(None, True, id="Nil annotations map"),
    ],
)
def test_vgpu_check_gpu_type(annotations: dict[str, str] | None, want: bool) -> None:
    """vgpu TestCheckGPUtype: use-gputype lists the types allowed, nouse-gputype those
    refused, case-insensitively, against card type "NVIDIA"."""
    assert vgpu.gpu_type_allowed(annotations, "NVIDIA") is want
