"""deviceshare plugin: cases of volcano-sh/volcano pkg/scheduler/plugins/deviceshare/
deviceshare_test.go (TestArguments, TestVgpuScore, Test_FilterNode; the same in v1.14.1 and
v1.15.1), then the plugin in a session: predicate, score, allocate and the bind annotations,
on nodes and pods as Volcano's device plugins and users write them.

Moved by v1.15.1 (these were written against v1.14.1): the spread score of TestVgpuScore is
0, not 100 (GPUScore now rewards UsedNum == 0, and is asked after the tentative add; Volcano's
test checks only that the score is not above 100); Test_FilterNode's GPUs are given in binpack
order, lowest index first among equals (sortedDeviceIndicesByPolicy; Volcano's test checks
only the fit); the binpack / spread case (spread no longer scores, so node order decides,
and spread orders the GPUs); the node whose handshake said "Deleted" (the handshake is no
longer read; a node without allocatable vGPU resources has none).

Checked failing with the feature switched off (`conf(None)`, deviceshare not configured, or
its `deviceshare.*Enable` argument false): each session case below says what then happens.
The v1.15.1 updates were checked failing with the change switched off: `gpu_score`'s spread
as v1.14.1 (TestVgpuScore), `card_order` highest index first (Test_FilterNode, the spread
case), the allocatable check dropped (the node without vGPU resources).
"""

from __future__ import annotations

import pytest

from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.devices import vgpu
from koordqueue.scheduler.devices.vgpu import VGpuCard, VGpuDevices
from koordqueue.scheduler.framework.interface import Arguments
from koordqueue.scheduler.plugins.deviceshare import DeviceShareArguments, DeviceSharePlugin

from .devices import (
    VGPU_ALLOCATABLE,
    annotations_of,
    cluster,
    conf,
    gpushare_node,
    placed,
    plain_node,
    pod_devices,
    pod_object,
    schedule,
    vgpu_node,
)

SHARING = {dn.GPU_SHARING_ENABLE: "true"}
NUMBER = {dn.GPU_NUMBER_ENABLE: "true"}


def test_arguments() -> None:
    """TestArguments: VGPUEnable, SchedulePolicy binpack, ScheduleWeight 10 are read."""
    plugin = DeviceSharePlugin(Arguments({
        dn.VGPU_ENABLE: True, dn.SCHEDULE_POLICY: "binpack", dn.SCHEDULE_WEIGHT: 10}))
    assert plugin.args.weight == 10
    assert plugin.args.policy == "binpack"
    assert plugin.args.vgpu and not plugin.args.gpushare


def test_conflicting_switches_are_named_and_the_second_ignored() -> None:
    """Volcano exits on sharing + number, or gpushare + vGPU; here a warning names both."""
    args = DeviceShareArguments(Arguments({**SHARING, **NUMBER, dn.VGPU_ENABLE: True}))
    assert args.gpu_sharing and not args.gpu_number and not args.vgpu
    assert [dn.GPU_NUMBER_ENABLE in w for w in args.warnings] == [True, False]
    assert dn.VGPU_ENABLE in args.warnings[1]


def _one_gpu(used_num: int, used_mem: int) -> VGpuDevices:
    return VGpuDevices("n", [VGpuCard(0, "GPU-0", 10, 30000, "NVIDIA", True,
                                      used_num, used_mem)])


def test_vgpu_score() -> None:
    """TestVgpuScore: a pod of 1 vGPU with 1000 memory on a GPU of 30000 already holding 3000
    (1 share) scores 4000 x 100 / 30000 under binpack; on an idle GPU, 0 under spread
    (v1.15.1: the GPU is no longer idle once the pod is counted on it; v1.14.1 gave 100)."""
    pod = pod_devices("p3", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "1000"}])
    binpack = _one_gpu(1, 3000).fit(pod, "binpack")
    assert not isinstance(binpack, str)
    assert binpack[1] == pytest.approx(4000 * 100 / 30000)
    spread = _one_gpu(0, 0).fit(pod, "spread")
    assert not isinstance(spread, str)
    assert spread[1] == 0.0
    assert vgpu.node_score(binpack[1], 10) == 130.0  # rounded, then weighted


def test_filter_node_three_exclusive_gpus_of_different_memory() -> None:
    """Test_FilterNode case0: 3 vGPUs with 100 cores each fit on 3 GPUs of 30000, 20000 and
    30000 memory (no memory asked: each takes all of its GPU's), in binpack order: none used,
    so the lowest index first (v1.15.1; v1.14.1 went from the highest index down)."""
    devices = VGpuDevices("node1", [VGpuCard(i, f"GPU-{i}", 10, mem, "NVIDIA")
                                    for i, mem in enumerate((30000, 20000, 30000))])
    pod = pod_devices("p1", [{dn.VGPU_NUMBER: "3", dn.VGPU_CORES: "100"}])
    fitted = devices.fit(pod, "binpack")
    assert not isinstance(fitted, str)
    assert [[(u, m, c) for u, _t, m, c in ctr] for ctr in fitted[0]] == [
        [("GPU-0", 30000, 100), ("GPU-1", 20000, 100), ("GPU-2", 30000, 100)]]
    busy = pod_devices("p2", [{dn.VGPU_NUMBER: "1", dn.VGPU_CORES: "100"}])
    devices.add("p0", [[("GPU-0", "NVIDIA", 10, 10)]])  # GPU-0 shared: not exclusive now
    again = devices.fit(pod, "binpack")
    assert isinstance(again, str) and "not enough gpu fitted" in again
    assert not isinstance(devices.fit(busy, "binpack"), str)


# --- the plugin in a session -------------------------------------------------------------------
def test_gpu_memory_goes_to_the_gpu_with_room_and_the_index_is_written() -> None:
    """Two GPUs of 16000 (32000 / 2); GPU 0 holds a running pod's 10000. A pod asking 12000
    gets GPU 1 (`volcano.sh/gpu-index: "1"`); then one asking 5000 gets GPU 0 (the lowest id
    with room: GPU 1 has 4000 left after the first); one asking 4500 then fits on no GPU
    (1000 and 4000 left) though the node has 4500 left in all. Without deviceshare all three
    bind (the resource fit sees only the node's 32000): checked."""
    running = pod_object("r", [{dn.GPU_MEMORY: "10000"}], node="n1", running=True,
                         annotations={dn.GPU_INDEX: "0"})
    a = pod_object("a", [{dn.GPU_MEMORY: "12000"}])
    b = pod_object("b", [{dn.GPU_MEMORY: "5000"}])
    c = pod_object("c", [{dn.GPU_MEMORY: "4500"}])
    result = schedule(cluster([gpushare_node("n1", 32000, 2)], [running, a, b, c]), conf(SHARING))
    assert placed(result) == {"a": "n1", "b": "n1"}
    assert annotations_of(result, "a") == {dn.GPU_INDEX: "1"}
    assert annotations_of(result, "b") == {dn.GPU_INDEX: "0"}
    nodes = [gpushare_node("n1", 32000, 2)]
    assert placed(schedule(cluster(nodes, [running, a, b, c]), conf(None))) == {
        "a": "n1", "b": "n1", "c": "n1"}


def test_gpu_memory_larger_than_any_gpu_is_refused_naming_the_device() -> None:
    """24000 fits the node's 32000 but no GPU of 16000: FailedScheduling names GpuShare and
    volcano.sh/gpu-memory. Without deviceshare it is bound to n1: checked."""
    big = pod_object("big", [{dn.GPU_MEMORY: "24000"}])
    result = schedule(cluster([gpushare_node("n1", 32000, 2), plain_node("n2")], [big]),
                      conf(SHARING))
    assert placed(result) == {}
    message = result.pod_cause("ns1-big", "ns1/big")
    assert message is not None
    assert "GpuShare no enough gpu memory" in message and dn.GPU_MEMORY in message
    assert "Insufficient volcano.sh/gpu-memory" in message  # n2 has no such GPUs


def test_unhealthy_gpus_are_left_out() -> None:
    """`volcano.sh/gpu-unhealthy-ids: "1"`: only GPU 0 (16000) is offered, so a pod of 12000
    goes to GPU 0 and a second finds none. With the annotation ignored the second takes GPU 1
    (checked)."""
    pods = [pod_object(n, [{dn.GPU_MEMORY: "12000"}]) for n in ("a", "b")]
    result = schedule(cluster([gpushare_node("n1", 32000, 2, unhealthy="1")], pods), conf(SHARING))
    assert placed(result) == {"a": "n1"}
    assert annotations_of(result, "a") == {dn.GPU_INDEX: "0"}


def test_whole_gpus_by_number_take_idle_gpus_only() -> None:
    """GPUNumberEnable (Volcano's exclusive GPUs): 4 GPUs, GPU 1 held by a running pod. A pod
    asking 3 gets the idle 0, 2, 3; one asking 1 more finds none idle and is refused naming
    GpuNumber. Without the switch the second is bound (node capacity 4 is not used up by
    requests, as the running pod asked 1 and the first 3): checked."""
    running = pod_object("r", [{dn.GPU_NUMBER: "1"}], node="n1", running=True,
                         annotations={dn.GPU_INDEX: "1"})
    three = pod_object("three", [{dn.GPU_NUMBER: "3"}])
    one = pod_object("one", [{dn.GPU_NUMBER: "1"}], annotations={})
    nodes = [gpushare_node("n1", 64000, 5, unhealthy="4")]
    result = schedule(cluster(nodes, [running, three, one]), conf(NUMBER))
    assert placed(result) == {"three": "n1"}
    assert annotations_of(result, "three") == {dn.GPU_INDEX: "0,2,3"}
    message = result.pod_cause("ns1-one", "ns1/one")
    assert message is not None and "GpuNumber no enough gpu number" in message


def test_device_free_pods_are_not_asked_about() -> None:
    """A pod naming no device has no device request: the predicate and the score answer None
    (the cost a device-free pod pays is that attribute check)."""
    from koordqueue.scheduler.framework import open_session

    plain = pod_object("plain", [{}])
    session = open_session(cluster([gpushare_node("n1", 32000, 2)], [plain]), conf(SHARING))
    state = session.plugins[dn.PLUGIN_NAME].state  # type: ignore[attr-defined]
    task = next(iter(session.jobs["ns1/plain"].tasks.values()))
    assert task.devices is None
    assert state.predicate(task) is None and state.scorer(task) is None


VGPU = {dn.VGPU_ENABLE: "true"}
GPUS = [("GPU-a", 10, 16000, "NVIDIA-A100"), ("GPU-b", 10, 16000, "NVIDIA-A100")]


def test_vgpu_binpack_scores_and_spread_orders_the_gpus() -> None:
    """Two vGPU nodes; n1's GPU-b already holds 8000 (a running pod). A pod of 1 vGPU with
    4000: binpack (weight 10) puts it beside it on n1 (GPU-b, the fuller), whose score is
    higher. Spread scores 0 everywhere in v1.15.1 (GPUScore asks for an idle GPU once the pod
    is counted on it), so node order picks n1 too, and there spread gives the idle GPU-a
    (fewest shares used first); v1.14.1's spread scored n2's idle GPU and chose n2. The bind
    writes vgpu-ids-new and its twins. With spread's card order taken out (highest index
    first) spread gives GPU-b (checked)."""
    running = pod_object("r", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "8000"}], node="n1",
                         running=True, annotations={dn.VGPU_IDS: "GPU-b,NVIDIA,8000,0:"})
    fresh = pod_object("p", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "4000"}])
    nodes = [vgpu_node("n1", GPUS), vgpu_node("n2", [("GPU-c", 10, 16000, "NVIDIA-A100")])]
    binpack = schedule(cluster(nodes, [running, fresh]), conf(
        {**VGPU, dn.SCHEDULE_POLICY: "binpack", dn.SCHEDULE_WEIGHT: 10}))
    assert placed(binpack) == {"p": "n1"}
    assert annotations_of(binpack, "p") == {
        dn.VGPU_NODE: "n1", dn.VGPU_IDS: "GPU-b,NVIDIA,4000,0:",
        dn.VGPU_DEVICES_TO_ALLOCATE: "GPU-b,NVIDIA,4000,0:", dn.BIND_PHASE: "allocating"}
    nodes = [vgpu_node("n1", GPUS), vgpu_node("n2", [("GPU-c", 10, 16000, "NVIDIA-A100")])]
    spread = schedule(cluster(nodes, [running, fresh]), conf(
        {**VGPU, dn.SCHEDULE_POLICY: "spread", dn.SCHEDULE_WEIGHT: 10}))
    assert placed(spread) == {"p": "n1"}
    assert annotations_of(spread, "p")[dn.VGPU_IDS] == "GPU-a,NVIDIA,4000,0:"


def test_vgpu_pods_fill_gpus_and_the_next_is_refused() -> None:
    """One GPU of 16000: pods of 10000 and 6000 fill it; a third of 1000 is refused naming
    hami-vgpu and the vGPU resources (allocate's state is the next pod's). A GPU type the pod
    refuses (nouse-gputype A100) is refused too. Without deviceshare all three bind."""
    pods = [pod_object("a", [{dn.VGPU_MEMORY: "10000"}]),
            pod_object("b", [{dn.VGPU_MEMORY: "6000"}]),
            pod_object("c", [{dn.VGPU_MEMORY: "1000"}]),
            pod_object("d", [{dn.VGPU_MEMORY: "1"}], annotations={dn.NOUSE_GPU_TYPE: "a100"})]
    result = schedule(cluster([vgpu_node("n1", GPUS[:1])], pods), conf(VGPU))
    assert placed(result) == {"a": "n1", "b": "n1"}
    message = result.pod_cause("ns1-c", "ns1/c")
    assert message is not None
    assert "deviceshare: hami-vgpu not enough gpu fitted" in message and dn.VGPU_MEMORY in message
    assert placed(schedule(cluster([vgpu_node("n1", GPUS[:1])], pods), conf(None))) == {
        "a": "n1", "b": "n1", "c": "n1", "d": "n1"}


@pytest.mark.parametrize("missing", [dn.VGPU_NUMBER, dn.VGPU_CORES, dn.VGPU_MEMORY])
@pytest.mark.parametrize("value", [None, "0"])
def test_vgpu_node_without_allocatable_vgpu_resources_has_no_vgpus(
    missing: str, value: str | None,
) -> None:
    """v1.15.1's NewGPUDevices: the register annotation alone is not enough; allocatable
    vgpu-number, vgpu-cores and vgpu-memory must all be above 0 (v1.14.1 read the handshake
    annotation instead, which is gone). Without vGPUs the node is left to the resource fit:
    a pod asking only vgpu-number and vgpu-memory is bound to a node lacking vgpu-cores,
    with no vGPU annotations (as Volcano binds it past a nil device). With the check taken
    out every case fails (checked)."""
    resources = {k: v for k, v in VGPU_ALLOCATABLE.items() if k != missing}
    if value is not None:
        resources[missing] = value
    node = vgpu_node("n1", GPUS, vgpu_resources=resources)
    assert node.devices is not None
    assert VGpuDevices.from_source("n1", node.devices) is None
    assert VGpuDevices.from_source("n1", vgpu_node("n1", GPUS).devices) is not None  # type: ignore[arg-type]
    if missing == dn.VGPU_CORES:
        pod = pod_object("p", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "1000"}])
        result = schedule(cluster([node], [pod]), conf(VGPU))
        assert placed(result) == {"p": "n1"}
        assert annotations_of(result, "p") == {}
