"""deviceshare in a session, for what volcano-sh/volcano v1.15.1 changed in its devices (no
Volcano test of its own covers these end to end): the GPU order per SchedulePolicy, the
PodGroup spread annotation, Releasing pods' GPUs free when the session opens (NodeInfo no
longer adds their devices) while their cards stay closed to their exclusivity rules, a pod
read back once per GPU (idempotent AddPod), a failed fit leaving nothing behind, an undone
eviction giving the same GPU back, and a vGPU pod preempting the pod that holds its GPU.

Checked failing with each change switched off, as each case says.
"""

from __future__ import annotations

from typing import Any

from koordqueue.kube.scheduler.convert import task_info
from koordqueue.scheduler import ClusterSnapshot, parse_config
from koordqueue.scheduler.api import JobInfo, QueueInfo
from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.devices.vgpu import VGpuDevices
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.statement import Statement

from .devices import (
    NS,
    annotations_of,
    cluster,
    conf,
    gpushare_node,
    placed,
    pod_devices,
    pod_object,
    schedule,
    vgpu_node,
)

VGPU = {dn.VGPU_ENABLE: "true"}
TWO = [("GPU-a", 10, 16000, "NVIDIA"), ("GPU-b", 10, 16000, "NVIDIA")]
ONE = TWO[:1]


def _vgpu_pod(name: str, memory: int = 4000, **kw: Any) -> dict[str, Any]:
    return pod_object(name, [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: str(memory)}], **kw)


def _gpus_given(result: Any, pods: str) -> list[str]:
    return [annotations_of(result, p)[dn.VGPU_IDS].split(",")[0] for p in pods]


def _releasing(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return obj


def test_schedule_policy_orders_the_gpus_a_pod_is_given() -> None:
    """Three pods of 4000 on two GPUs, no score (weight 0): binpack stacks them on GPU-a
    (none used: the lowest index, then the fuller); spread alternates (the fewest shares
    first); no policy keeps v1.14.1's highest index first (GPU-b). With the order always
    highest index first, binpack and spread give GPU-b three times (checked)."""
    pods = [_vgpu_pod(n) for n in "abc"]
    want = {"binpack": ["GPU-a"] * 3, "spread": ["GPU-a", "GPU-b", "GPU-a"], "": ["GPU-b"] * 3}
    for policy, gpus in want.items():
        arguments = {**VGPU, dn.SCHEDULE_POLICY: policy} if policy else VGPU
        result = schedule(cluster([vgpu_node("n1", TWO)], pods), conf(arguments))
        assert _gpus_given(result, "abc") == gpus, policy


def test_pods_of_a_podgroup_annotated_spread_take_separate_gpus() -> None:
    """Pods of PodGroup job-1 annotated `volcano.sh/vgpu-podgroup-policy: spread`: the first
    two get a GPU each; the third is refused, the reason naming the PodGroup and the policy
    (the memory is there). A pod of job-2 still shares. Without the annotation all four
    share GPU-b (checked; and with the PodGroup check taken out of the fit, checked too)."""
    spread = {dn.VGPU_PODGROUP_POLICY: "spread"}
    pods = [_vgpu_pod(n, annotations={**spread, dn.KUBE_GROUP_NAME: "job-1"}) for n in "abc"]
    pods.append(_vgpu_pod("d", annotations={**spread, dn.KUBE_GROUP_NAME: "job-2"}))
    result = schedule(cluster([vgpu_node("n1", TWO)], pods), conf(VGPU))
    assert placed(result) == {"a": "n1", "b": "n1", "d": "n1"}
    assert _gpus_given(result, "abd") == ["GPU-b", "GPU-a", "GPU-b"]
    message = result.pod_cause("ns1-c", "ns1/c")
    assert message is not None
    assert "deviceshare: hami-vgpu pod group ns1/job-1 already uses every GPU" in message
    plain = [_vgpu_pod(n, annotations={dn.KUBE_GROUP_NAME: "job-1"}) for n in "abcd"]
    off = schedule(cluster([vgpu_node("n1", TWO)], plain), conf(VGPU))
    assert _gpus_given(off, "abcd") == ["GPU-b"] * 4


def test_a_releasing_pods_vgpu_is_free_when_the_session_opens() -> None:
    """One GPU of 16000; a pod being deleted (Releasing) holds 12000 by its annotation. v1.15.1
    counts no device for Releasing pods, so a pod of 8000 is given the GPU. With Releasing
    pods holding their GPUs (v1.14.1) it is refused (checked)."""
    leaving = _releasing(_vgpu_pod("old", 12000, node="n1", running=True,
                                   annotations={dn.VGPU_IDS: "GPU-a,NVIDIA,12000,0:"}))
    result = schedule(cluster([vgpu_node("n1", ONE)], [leaving, _vgpu_pod("new", 8000)]),
                      conf(VGPU))
    assert placed(result) == {"new": "n1"}
    assert _gpus_given(result, ["new"]) == ["GPU-a"]  # type: ignore[arg-type]


def test_a_releasing_pods_shared_gpu_is_free_when_the_session_opens() -> None:
    """gpushare: two GPUs of 16000; a running pod holds 10000 of GPU 1 and a Releasing pod
    10000 of GPU 0 (`volcano.sh/gpu-index`). A pod of 12000 (the node's 32000 less the
    running pod's 10000 leave room) is given GPU 0. With Releasing pods holding their GPUs it
    is refused: no GPU has 12000 free (checked)."""
    staying = pod_object("stay", [{dn.GPU_MEMORY: "10000"}], node="n1", running=True,
                         annotations={dn.GPU_INDEX: "1"})
    leaving = _releasing(pod_object("old", [{dn.GPU_MEMORY: "10000"}], node="n1", running=True,
                                    annotations={dn.GPU_INDEX: "0"}))
    fresh = pod_object("new", [{dn.GPU_MEMORY: "12000"}])
    result = schedule(cluster([gpushare_node("n1", 32000, 2)], [staying, leaving, fresh]),
                      conf({dn.GPU_SHARING_ENABLE: "true"}))
    assert placed(result) == {"new": "n1"}
    assert annotations_of(result, "new") == {dn.GPU_INDEX: "0"}


def test_a_releasing_pods_cards_stay_closed_to_its_rule() -> None:
    """Exclusivity rule app=training; a Releasing training pod's annotation names GPU-b. Its
    memory is free, but Volcano reads its cards from the annotation when the session opens,
    so a new training pod is given GPU-a (the highest index, GPU-b, closed). Without that
    reading it gets GPU-b (checked)."""
    rules = {**VGPU, dn.GPU_EXCLUSIVE_RULES: [{"app": "training"}]}
    leaving = _releasing(_vgpu_pod("old", 1000, node="n1", running=True,
                                   labels={"app": "training"},
                                   annotations={dn.VGPU_IDS: "GPU-b,NVIDIA,1000,0:"}))
    fresh = _vgpu_pod("new", 1000, labels={"app": "training"})
    result = schedule(cluster([vgpu_node("n1", TWO)], [leaving, fresh]), conf(rules))
    assert _gpus_given(result, ["new"]) == ["GPU-a"]  # type: ignore[arg-type]


def test_a_pod_is_read_back_once_per_gpu() -> None:
    """A pod whose two containers (6000 each) share GPU-a: in the session that places it the
    GPU holds 12000, so a pod of 9000 is refused; once it runs, the next session reads it
    back once per GPU (HAMi-core's AddPod skips a pod already there: 6000), and the pod of
    9000 is given GPU-a. With AddPod counting every entry the second session refuses it too
    (checked)."""
    two = pod_object("two", [{dn.VGPU_MEMORY: "6000"}, {dn.VGPU_MEMORY: "6000"}])
    result = schedule(cluster([vgpu_node("n1", ONE)], [two, _vgpu_pod("next", 9000)]),
                      conf(VGPU))
    assert placed(result) == {"two": "n1"}
    ids = annotations_of(result, "two")[dn.VGPU_IDS]
    assert ids == "GPU-a,NVIDIA,6000,0:;GPU-a,NVIDIA,6000,0:"
    running = pod_object("two", [{dn.VGPU_MEMORY: "6000"}, {dn.VGPU_MEMORY: "6000"}],
                         node="n1", running=True, annotations={dn.VGPU_IDS: ids})
    again = schedule(cluster([vgpu_node("n1", ONE)], [running, _vgpu_pod("next", 9000)]),
                     conf(VGPU))
    assert placed(again) == {"next": "n1"}


def test_a_failed_fit_leaves_the_gpus_as_they_were() -> None:
    """Allocate's fit rolls its tentative adds back when a later container does not fit
    (v1.15.1): a pod of two containers of 10000 on one GPU of 16000 is refused and the GPU
    stays idle. Fitting on the real GPUs (v1.14.1) leaves the first container's 10000
    counted (checked)."""
    gpus = VGpuDevices("n", [VGpuDevices.from_source(  # type: ignore[union-attr]
        "n", vgpu_node("n", ONE).devices).cards[0]])  # type: ignore[arg-type]
    pod = pod_devices("p", [{dn.VGPU_MEMORY: "10000"}, {dn.VGPU_MEMORY: "10000"}])
    assert isinstance(gpus.fit(pod, "", commit="uid-p"), str)
    card = gpus.cards[0]
    assert (card.used_num, card.used_mem, card.used_core, card.pods) == (0, 0, 0, {})
    assert gpus.assigned == {}


def test_an_undone_eviction_gives_back_the_same_shared_gpu() -> None:
    """gpushare: a running pod on GPU 1 of two, evicted then the eviction undone, holds GPU
    1 again and is given no GPU anew (no bind annotations). Allocating it as a new pod
    instead gives it GPU 0, the lowest id with room (checked)."""
    running = pod_object("r", [{dn.GPU_MEMORY: "10000"}], node="n1", running=True,
                         annotations={dn.GPU_INDEX: "1"})
    session = open_session(cluster([gpushare_node("n1", 32000, 2)], [running]),
                           conf({dn.GPU_SHARING_ENABLE: "true"}))
    share = session.plugins[dn.PLUGIN_NAME].state.gpushare["n1"][1]  # type: ignore[attr-defined]
    task = next(iter(session.jobs["ns1/r"].tasks.values()))
    statement = Statement(session)
    statement.evict(task, "test")
    assert not share.cards[1].pods
    statement.discard()
    assert {i: dict(c.pods) for i, c in share.cards.items()} == {0: {}, 1: {"ns1-r": 10000}}
    assert task.uid not in session.bind_annotations


PREEMPT = """actions: "allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
"""


def _prioritised(nodes: list[Any], pods: list[tuple[dict[str, Any], int]]) -> ClusterSnapshot:
    """`cluster`, each pod's job with the given priority."""
    by_name = {n.name: n for n in nodes}
    jobs: list[JobInfo] = []
    for obj, priority in pods:
        task = task_info(obj)
        job = JobInfo(f"{NS}/{task.name}", task.name, namespace=NS, queue="q",
                      priority=priority, creation=float(len(jobs)))
        job.add_task(task)
        jobs.append(job)
        if task.node_name:
            by_name[task.node_name].add_task(task)
    return ClusterSnapshot(nodes, jobs, [QueueInfo("q", weight=1)])


def test_a_vgpu_pod_preempts_the_pod_holding_its_gpu() -> None:
    """v1.15.1's preemption for vGPU jobs: one GPU of 16000 (the node offers 16000
    vgpu-memory), a low-priority pod holds 12000 of it; a high-priority pod of 8000 evicts
    it and is pipelined there, the victim's GPU counted free. The node is a preemption
    candidate though the device predicate refuses it (Volcano: Unschedulable). With the
    predicate asked for candidates too, nothing is evicted (checked)."""
    resources = {dn.VGPU_NUMBER: "10", dn.VGPU_MEMORY: "16000", dn.VGPU_CORES: "100"}
    node = vgpu_node("n1", ONE, vgpu_resources=resources)
    low = _vgpu_pod("low", 12000, node="n1", running=True,
                    annotations={dn.VGPU_NODE: "n1", dn.VGPU_IDS: "GPU-a,NVIDIA,12000,0:"})
    result = schedule(_prioritised([node], [(low, 1), (_vgpu_pod("high", 8000), 100)]),
                      parse_config(PREEMPT))
    assert [(e.name, e.reason) for e in result.evictions] == [("low", "preempt")]
    assert placed(result) == {}
