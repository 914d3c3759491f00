"""Builders for the deviceshare cases: pods and nodes as API objects (as Volcano's device
plugins and users write them), converted by the kube adapter the live scheduler uses, and a
session over them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from koordqueue.kube.scheduler.convert import node_info, task_info
from koordqueue.scheduler import ClusterSnapshot, SchedulerConfig, parse_config
from koordqueue.scheduler.api import JobInfo, NodeInfo, PodGroupPhase, QueueInfo, TaskInfo
from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.api.devices import PodDevices
from koordqueue.scheduler.framework import open_session, run_actions
from koordqueue.scheduler.framework.result import SessionResult

NS = "ns1"
Resources = Mapping[str, str]


def pod_object(
    name: str,
    containers: Sequence[Resources] = (),
    *,
    init: Sequence[Resources] = (),
    requests: Sequence[Resources] | None = None,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    node: str = "",
    running: bool = False,
    cpu: str = "1",
) -> dict[str, Any]:
    """A pod whose containers limit the given resources (requests equal, as the API server
    defaults extended resources, unless `requests` says otherwise), plus `cpu`."""
    def container(i: int, limits: Resources, kind: str) -> dict[str, Any]:
        req = dict(requests[i]) if requests is not None and kind == "c" else dict(limits)
        return {"name": f"{kind}{i}", "resources": {
            "limits": dict(limits), "requests": {"cpu": cpu, **req}}}

    spec: dict[str, Any] = {
        "containers": [container(i, c, "c") for i, c in enumerate(containers or [{}])],
    }
    if init:
        spec["initContainers"] = [container(i, c, "i") for i, c in enumerate(init)]
    if node:
        spec["nodeName"] = node
    meta: dict[str, Any] = {"uid": f"{NS}-{name}", "name": name, "namespace": NS}
    if annotations:
        meta["annotations"] = dict(annotations)
    if labels:
        meta["labels"] = dict(labels)
    return {"metadata": meta, "spec": spec,
            "status": {"phase": "Running" if running else "Pending"}}


def pod_devices(name: str, containers: Sequence[Resources], **kw: Any) -> PodDevices:
    """The device request the adapter reads off such a pod."""
    devices = task_info(pod_object(name, containers, **kw)).devices
    assert devices is not None
    return devices


def gpushare_node(
    name: str, memory: int, number: int, *, unhealthy: str | None = None, cpu: str = "16",
) -> NodeInfo:
    """A node as Volcano's gpushare device plugin reports it (capacity = allocatable)."""
    amounts = {"cpu": cpu, "memory": "64Gi", "pods": "110",
               dn.GPU_MEMORY: str(memory), dn.GPU_NUMBER: str(number)}
    annotations = {dn.UNHEALTHY_GPU_IDS: unhealthy} if unhealthy is not None else {}
    return node_info(_node(name, amounts, annotations))


def register(*gpus: tuple[str, int, int, str]) -> str:
    """A `volcano.sh/node-vgpu-register` value: (uuid, count, memory, type) per GPU."""
    return "".join(f"{u},{count},{mem},{kind},true,hami-core:" for u, count, mem, kind in gpus)


VGPU_ALLOCATABLE: Mapping[str, str] = {
    dn.VGPU_NUMBER: "100", dn.VGPU_MEMORY: "1000000", dn.VGPU_CORES: "10000"}
"""vGPU resources sized to hold every vGPU, so only the device predicate can refuse."""


def vgpu_node(
    name: str, gpus: Sequence[tuple[str, int, int, str]], *,
    vgpu_resources: Mapping[str, str] = VGPU_ALLOCATABLE,
) -> NodeInfo:
    """A node as the vgpu device plugin registers it: the register annotation and the
    allocatable vGPU resources (`vgpu_resources`)."""
    amounts = {"cpu": "16", "memory": "64Gi", "pods": "110", **vgpu_resources}
    return node_info(_node(name, amounts, {dn.VGPU_REGISTER: register(*gpus)}))


def plain_node(name: str) -> NodeInfo:
    return node_info(_node(name, {"cpu": "16", "memory": "64Gi", "pods": "110"}, {}))


def _node(name: str, amounts: Mapping[str, str], annotations: Mapping[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "annotations": dict(annotations)},
        "status": {"capacity": dict(amounts), "allocatable": dict(amounts),
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def cluster(nodes: Sequence[NodeInfo], pods: Sequence[dict[str, Any]]) -> ClusterSnapshot:
    """One queue; each pod its own job (min 1), running pods set on their nodes."""
    by_name = {n.name: n for n in nodes}
    jobs: list[JobInfo] = []
    for obj in pods:
        task: TaskInfo = task_info(obj)
        job = JobInfo(f"{NS}/{task.name}", task.name, namespace=NS, queue="q",
                      min_available=1, phase=PodGroupPhase.INQUEUE,
                      creation=float(len(jobs)))
        job.add_task(task)
        jobs.append(job)
        if task.node_name:
            by_name[task.node_name].add_task(task)
    return ClusterSnapshot(list(nodes), jobs, [QueueInfo("q", weight=1)])


def conf(arguments: Mapping[str, object] | None, *, plugins: Sequence[str] = ()) -> SchedulerConfig:
    """allocate over predicates (+ nodeorder-free) and deviceshare with `arguments`; None
    leaves deviceshare out (the feature switched off)."""
    lines = ['actions: "allocate"', "tiers:", "- plugins:", "  - name: predicates"]
    lines += [f"  - name: {p}" for p in plugins]
    if arguments is not None:
        lines.append("  - name: deviceshare")
        if arguments:
            lines.append("    arguments:")
            lines += [f"      {k}: {v}" for k, v in arguments.items()]
    return parse_config("\n".join(lines) + "\n")


def schedule(snapshot: ClusterSnapshot, config: SchedulerConfig) -> SessionResult:
    session = open_session(snapshot, config)
    run_actions(session)
    return session.close()


def placed(result: SessionResult) -> dict[str, str]:
    return {b.name: b.node for b in result.binds}


def annotations_of(result: SessionResult, pod: str) -> Mapping[str, str]:
    uid = f"{NS}-{pod}"
    assert uid in {b.task for b in result.binds}, f"{pod} was not bound"
    return result.bind_annotations.get(uid, {})
