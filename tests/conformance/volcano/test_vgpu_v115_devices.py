"""The vGPU device under deviceshare, as of volcano-sh/volcano v1.15.1: the cases of
pkg/scheduler/api/devices/nvidia/vgpu/device_info_test.go (TestAddResourceSetsPodGroupKey,
TestReleaseCleansSpeculativeAnnotations, TestReleaseKeepsCommittedAnnotations),
hamicore_test.go (TestHAMICoreFactory_AddPod, TestHAMICoreFactory_AddPodDistinctUIDsAccumulate,
TestHAMICoreFactory_SubPodRemovesEntry), spread_integration_test.go
(TestSpreadPreventsCoLocation, TestBinpackAllowsCoLocation, TestSpreadDifferentGroupsCanShare,
TestSpreadWithNoRoomFails, TestMixedAnnotations) and utils_test.go (TestGetPodGroupKey,
TestDeviceHasPodFromSameGroup, TestSortedDeviceIndicesByPolicy_PicksExpectedDevice,
TestGPUScore, TestBinpackStacksSequentialPods).

The tests v1.15.1 keeps from v1.14.1 unchanged (vgpu TestGetGPUMemoryOfPod, TestAddResource,
TestCheckGPUtype; gpushare TestGetGPUMemoryOfPod, TestGetGPUNumberOfPod) are in
test_gpushare_vgpu_devices.py. Not transcribed, MIG only (they need a geometry ConfigMap's
templates, which koordqueue does not read: without one Volcano falls back to HAMi-core, as
here): mig_test.go's TestFindMatch, TestAddAndSubMigUsed, TestMIGFactory_TryAddPod_WithMemoryFactor,
TestMIGFactory_AddPod_WithMemoryFactor, TestMIGFactory_SubPod_WithMemoryFactor.

Where Volcano's test accepts either outcome (TestBinpackAllowsCoLocation, TestMixedAnnotations:
"may or may not" share), the case asserts the one v1.15.1's code gives (binpack: the fuller
GPU, so the same one). Volcano's Release tests call Release on a bare pod; here the pod's
annotations are the session's (`Session.bind_annotations`): an allocation undone in the
session takes them back; a running pod's are never touched (the scheduler writes pod
annotations only with a bind), so Volcano's stripping of a running pod's annotations when its
bind-phase is not "success" has no case here.

Checked failing with each rule switched off: `VGpuCard.add_pod` counting a pod already on the
GPU (the duplicate and after-allocate AddPod cases); `sub_pod` keeping the pod's entry (the
SubPod case and both Release cases); the PodGroup check dropped from the fit
(TestSpreadPreventsCoLocation, TestSpreadWithNoRoomFails); `pod_group_key` reading only the
Kubernetes annotation (the Volcano annotation case); `has_group` ignoring the zero-usage rule
(the released case); `VGpuDevices.add` recording no PodGroup (TestAddResourceSetsPodGroupKey);
`card_order` highest index first under binpack (the binpack pick; spread's pick and
TestBinpackStacksSequentialPods pass either way, the highest index being idle or the one
stacked on); `gpu_score` with v1.14.1's `used_num == 1` (the idle and shared spread cases);
the restore in `DeviceState.allocate` dropped (the undone eviction gets GPU-b).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from koordqueue.kube.scheduler.convert import task_info
from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.api.devices import PodDevices
from koordqueue.scheduler.devices import vgpu
from koordqueue.scheduler.devices.vgpu import PodUsage, VGpuCard, VGpuDevices
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.statement import Statement

from .devices import NS, cluster, conf, pod_devices, pod_object, vgpu_node

VGPU = {dn.VGPU_ENABLE: "true"}


def _card(index: int = 0, number: int = 4, memory: int = 16384) -> VGpuCard:
    """Volcano's test GPUs: "GPU-<index>", NVIDIA, healthy."""
    return VGpuCard(index, f"GPU-{index}", number, memory, "NVIDIA")


def _counters(card: VGpuCard) -> tuple[int, int, int]:
    return card.used_num, card.used_mem, card.used_core


def _worker(
    name: str, memory: int, *, spread: bool = False, group: str = "",
) -> PodDevices:
    """Volcano's makeVGPUPod: 1 vGPU of `memory` and 25 cores, optionally annotated with the
    spread PodGroup policy and a PodGroup (scheduling.k8s.io/group-name)."""
    annotations: dict[str, str] = {}
    if spread:
        annotations[dn.VGPU_PODGROUP_POLICY] = "spread"
    if group:
        annotations[dn.KUBE_GROUP_NAME] = group
    return pod_devices(name, [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: str(memory),
                               dn.VGPU_CORES: "25"}], annotations=annotations)


def _gpus(count: int) -> VGpuDevices:
    """Volcano's makeGPUDevices: `count` GPUs of 16384 shared by up to 4 pods."""
    return VGpuDevices("node-1", [_card(i) for i in range(count)])


def _allocate(gpus: VGpuDevices, uid: str, pod: PodDevices, policy: str = "binpack") -> str:
    """Volcano's simulateAllocate (binpack): the GPU given, "" when the pod does not fit."""
    fitted = gpus.fit(pod, policy, group=vgpu.pod_group_key(NS, pod.annotations), commit=uid)
    return "" if isinstance(fitted, str) else fitted[0][0][0][0]


# --- device_info_test.go ---------------------------------------------------------------------

def test_add_resource_sets_pod_group_key() -> None:
    """TestAddResourceSetsPodGroupKey: a placed pod of PodGroup my-job-pg (Kubernetes'
    annotation) is put on GPU-1234 with its PodGroup key, read as the session opens."""
    running = pod_object("p", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "4096"}], node="n1",
                         running=True, annotations={dn.VGPU_IDS: "GPU-1234,NVIDIA,4096,0",
                                                    dn.KUBE_GROUP_NAME: "my-job-pg"})
    session = open_session(cluster([vgpu_node("n1", [("GPU-1234", 10, 16384, "NVIDIA")])],
                                   [running]), conf(VGPU))
    virtual = session.plugins[dn.PLUGIN_NAME].state.vgpu["n1"][1]  # type: ignore[attr-defined]
    assert virtual.cards[0].pods[f"{NS}-p"].group == f"{NS}/my-job-pg"


def _one_gpu_session(*pods: dict[str, object]):  # type: ignore[no-untyped-def]
    session = open_session(cluster([vgpu_node("n1", [("GPU-a", 10, 16000, "NVIDIA"),
                                                     ("GPU-b", 10, 16000, "NVIDIA")])],
                                   list(pods)), conf(VGPU))
    state = session.plugins[dn.PLUGIN_NAME].state  # type: ignore[attr-defined]
    return session, state.vgpu["n1"][1]


def test_release_cleans_speculative_annotations() -> None:
    """TestReleaseCleansSpeculativeAnnotations: a pod given a GPU in the session (its
    annotations: bind-phase allocating) whose allocation is undone loses them and the GPU."""
    fresh = pod_object("w", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "80"}])
    session, virtual = _one_gpu_session(fresh)
    task = next(iter(session.jobs[f"{NS}/w"].tasks.values()))
    statement = Statement(session)
    statement.allocate(task, session.nodes["n1"])
    assert session.bind_annotations[task.uid][dn.BIND_PHASE] == "allocating"
    assert virtual.holds(task.uid)
    statement.discard()
    assert task.uid not in session.bind_annotations
    assert not virtual.holds(task.uid)
    assert [_counters(c) for c in virtual.cards] == [(0, 0, 0), (0, 0, 0)]


def test_release_keeps_committed_annotations() -> None:
    """TestReleaseKeepsCommittedAnnotations: a running pod (bind-phase success) evicted keeps
    its annotations; when the eviction is undone it takes back the GPU they name (GPU-a,
    though the highest index would be tried first) and is given none anew (Volcano's
    alreadyAssignedOnNode and idempotent AddPod)."""
    ids = "GPU-a,NVIDIA,80,0:"
    running = pod_object("w", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "80"}], node="n1",
                         running=True, annotations={dn.VGPU_NODE: "n1", dn.VGPU_IDS: ids,
                                                    dn.BIND_PHASE: "success"})
    session, virtual = _one_gpu_session(running)
    task = next(iter(session.jobs[f"{NS}/w"].tasks.values()))
    statement = Statement(session)
    statement.evict(task, "test")
    assert [_counters(c) for c in virtual.cards] == [(0, 0, 0), (0, 0, 0)]
    statement.discard()
    assert [_counters(c) for c in virtual.cards] == [(1, 80, 0), (0, 0, 0)]
    assert task.uid not in session.bind_annotations
    assert task.devices is not None and task.devices.annotations[dn.VGPU_IDS] == ids


# --- hamicore_test.go ------------------------------------------------------------------------

ONE_ENTRY = [[("GPU-0", "NVIDIA", 1000, 25)]]


@pytest.mark.parametrize("setup", ["fresh", "duplicate", "after allocate"], ids=[
    "fresh add increments counters and seeds PodMap", "duplicate add is a no-op",
    "add after Allocate's TryAddPod and addToPodMap does not double-count"])
def test_hami_core_add_pod(setup: str) -> None:
    """TestHAMICoreFactory_AddPod: adding pod-a (1000 memory, 25 cores) to a GPU of 16384
    leaves 1 share, 1000, 25 used, whether it is new, already on the GPU, or was just given
    the GPU by the fit (Allocate) before NodeInfo adds it."""
    gpus = VGpuDevices("n", [_card()])
    card = gpus.cards[0]
    if setup == "duplicate":
        card.used_num, card.used_mem, card.used_core = 1, 1000, 25
        card.pods["pod-a"] = PodUsage(1000, 25)
    elif setup == "after allocate":
        pod = pod_devices("a", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "1000",
                                 dn.VGPU_CORES: "25"}])
        assert not isinstance(gpus.fit(pod, "", commit="pod-a"), str)
    gpus.add("pod-a", ONE_ENTRY)
    assert _counters(card) == (1, 1000, 25)
    assert "pod-a" in card.pods


def test_hami_core_add_pod_distinct_uids_accumulate() -> None:
    """TestHAMICoreFactory_AddPodDistinctUIDsAccumulate: three pods: 3 shares, 3000, 75."""
    gpus = VGpuDevices("n", [_card()])
    for uid in ("pod-a", "pod-b", "pod-c"):
        gpus.add(uid, ONE_ENTRY)
    assert _counters(gpus.cards[0]) == (3, 3000, 75)


def test_hami_core_sub_pod_removes_entry() -> None:
    """TestHAMICoreFactory_SubPodRemovesEntry: added then taken off, the pod leaves no entry
    and the GPU is idle; added again it counts once (1 share, 1000)."""
    gpus = VGpuDevices("n", [_card()])
    gpus.add("pod-a", ONE_ENTRY)
    gpus.remove("pod-a")
    assert "pod-a" not in gpus.cards[0].pods
    assert _counters(gpus.cards[0]) == (0, 0, 0)
    gpus.add("pod-a", ONE_ENTRY)
    assert _counters(gpus.cards[0])[:2] == (1, 1000)


# --- spread_integration_test.go --------------------------------------------------------------

def test_spread_prevents_co_location() -> None:
    """TestSpreadPreventsCoLocation: two pods of PodGroup job-1 annotated spread, on two
    GPUs, get different GPUs (binpack alone would stack them)."""
    gpus = _gpus(2)
    a = _allocate(gpus, "uid-aaa", _worker("worker-0", 4096, spread=True, group="job-1"))
    b = _allocate(gpus, "uid-bbb", _worker("worker-1", 4096, spread=True, group="job-1"))
    assert a and b and a != b


def test_binpack_allows_co_location() -> None:
    """TestBinpackAllowsCoLocation: without the annotation the second pod of job-1 may
    share; under binpack it does (the fuller GPU first)."""
    gpus = _gpus(2)
    a = _allocate(gpus, "uid-aaa", _worker("worker-0", 4096, group="job-1"))
    b = _allocate(gpus, "uid-bbb", _worker("worker-1", 4096, group="job-1"))
    assert a and a == b


def test_spread_different_groups_can_share() -> None:
    """TestSpreadDifferentGroupsCanShare: one GPU; pods of job-1 and job-2, both spread,
    share it."""
    gpus = _gpus(1)
    a = _allocate(gpus, "uid-aaa", _worker("worker-0", 4096, spread=True, group="job-1"))
    b = _allocate(gpus, "uid-bbb", _worker("worker-1", 4096, spread=True, group="job-2"))
    assert a and a == b


def test_spread_with_no_room_fails() -> None:
    """TestSpreadWithNoRoomFails: one GPU; the second spread pod of job-1 does not fit, and
    the refusal names the PodGroup policy."""
    gpus = _gpus(1)
    assert _allocate(gpus, "uid-aaa", _worker("worker-0", 4096, spread=True, group="job-1"))
    second = _worker("worker-1", 4096, spread=True, group="job-1")
    assert _allocate(gpus, "uid-bbb", second) == ""
    refusal = gpus.fit(second, "binpack", group=vgpu.pod_group_key(NS, second.annotations))
    assert refusal == dn.VGPU_PODGROUP_SPREAD.format(group=f"{NS}/job-1")


def test_mixed_annotations() -> None:
    """TestMixedAnnotations: only the annotated pod avoids its group's GPUs; a pod of the
    same group without it is placed, here beside the first (binpack)."""
    gpus = _gpus(2)
    a = _allocate(gpus, "uid-aaa", _worker("worker-0", 4096, spread=True, group="job-1"))
    b = _allocate(gpus, "uid-bbb", _worker("worker-1", 4096, group="job-1"))
    assert a and a == b


# --- utils_test.go ---------------------------------------------------------------------------

@pytest.mark.parametrize(("annotations", "want"), [
    pytest.param(None, "", id="nil pod"),
    pytest.param({}, "", id="nil annotations"),
    pytest.param({dn.KUBE_GROUP_NAME: "my-pg"}, f"{NS}/my-pg", id="scheduling.k8s.io/group-name"),
    pytest.param({dn.VOLCANO_GROUP_NAME: "job-pg"}, f"{NS}/job-pg",
                 id="scheduling.volcano.sh/group-name (Volcano API)"),
    pytest.param({dn.KUBE_GROUP_NAME: "k8s-pg", dn.VOLCANO_GROUP_NAME: "volcano-pg"},
                 f"{NS}/k8s-pg", id="k8s annotation takes precedence over volcano"),
])
def test_get_pod_group_key(annotations: Mapping[str, str] | None, want: str) -> None:
    """TestGetPodGroupKey, on the annotations the adapter keeps of a vGPU pod (the nil pod:
    no annotations to read)."""
    if annotations is None:
        assert vgpu.pod_group_key(NS, None) == want
        return
    task = task_info(pod_object("p", [{dn.VGPU_NUMBER: "1"}], annotations=annotations))
    assert task.devices is not None
    assert vgpu.pod_group_key(task.namespace, task.devices.annotations) == want


@pytest.mark.parametrize(("usage", "key", "want"), [
    pytest.param(PodUsage(1000, 0, "ns/pg"), "", False, id="empty currentKey"),
    pytest.param(PodUsage(1000, 0, "ns/other"), "ns/my-pg", False, id="no pod from same group"),
    pytest.param(PodUsage(1000, 50, "ns/my-pg"), "ns/my-pg", True,
                 id="same group with non-zero usage"),
    pytest.param(PodUsage(0, 0, "ns/my-pg"), "ns/my-pg", False,
                 id="same group but zero usage (released)"),
    pytest.param(None, "ns/pg", False, id="empty PodMap"),
])
def test_device_has_pod_from_same_group(usage: PodUsage | None, key: str, want: bool) -> None:
    """TestDeviceHasPodFromSameGroup."""
    card = _card()
    if usage is not None:
        card.pods["uid1"] = usage
    assert card.has_group(key) is want


@pytest.mark.parametrize(("count", "seeded", "policy", "want"), [
    pytest.param(2, True, "binpack", 0, id="binpack picks busier device"),
    pytest.param(2, True, "spread", 1, id="spread picks idle device over shared one"),
    pytest.param(3, False, "", 2, id="unset policy preserves legacy descending-index order"),
])
def test_sorted_device_indices_by_policy_picks_expected_device(
    count: int, seeded: bool, policy: str, want: int,
) -> None:
    """TestSortedDeviceIndicesByPolicy_PicksExpectedDevice: GPU 0 holding 4096 (1 share)
    or none; a pod of 4096 is given GPU `want`."""
    gpus = _gpus(count)
    if seeded:
        gpus.cards[0].used_mem, gpus.cards[0].used_num = 4096, 1
    fitted = gpus.fit(_worker("worker", 4096), policy)
    assert not isinstance(fitted, str)
    assert fitted[0][0][0][0] == f"GPU-{want}"


@pytest.mark.parametrize(("policy", "used", "want"), [
    pytest.param("spread", (0, 0), 100.0, id="spread rewards idle GPU"),
    pytest.param("spread", (1, 4096), 0.0, id="spread does not reward shared GPU"),
    pytest.param("spread", (4, 16384), 0.0, id="spread does not reward full GPU"),
    pytest.param("binpack", (4, 16384), 100.0, id="binpack rewards full GPU most"),
    pytest.param("binpack", (0, 0), 0.0, id="binpack does not reward idle GPU"),
    pytest.param("", (1, 4096), 0.0, id="unset policy returns zero"),
])
def test_gpu_score(policy: str, used: tuple[int, int], want: float) -> None:
    """TestGPUScore: a GPU of 16384 idle, shared (1 share, 4096) or full (4, 16384)."""
    card = _card()
    card.used_num, card.used_mem = used
    assert vgpu.gpu_score(policy, card) == want


def test_binpack_stacks_sequential_pods() -> None:
    """TestBinpackStacksSequentialPods: three pods of 4096 on three GPUs, binpack: all on
    the same GPU."""
    gpus = _gpus(3)
    given = {_allocate(gpus, f"uid-{n}", _worker(f"worker-{n}", 4096)) for n in "abc"}
    assert len(given) == 1 and "" not in given
