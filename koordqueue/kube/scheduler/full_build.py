"""The snapshot from scratch: every node, job and queue converted from the raw objects.

The reference the incremental build (snapshot.py's `SnapshotBuilder`) must equal
(`SchedulerCache.rebuild`, which the tests compare with `build`): the same orders, which
snapshot.py's docstring gives, so either build gives the same session.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordqueue.kube.scheduler import convert
from koordqueue.kube.scheduler.hypernodes import hyper_nodes
from koordqueue.kube.scheduler.numa import numatopologies
from koordqueue.kube.scheduler.snapshot import Built, add_ours, labels_of, pdbs_in_order
from koordqueue.kube.scheduler.store import CachedKind
from koordqueue.kube.scheduler.vc_fields import resource_quotas
from koordqueue.scheduler import ClusterSnapshot
from koordqueue.scheduler.api import JobInfo, NodeInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api.node_usage import NodeUsage
from koordqueue.scheduler.framework.indexed import IndexedSnapshot, SnapshotIndex, placed
from koordqueue.scheduler.gates import GateState, GateView, classify_gates, opted_in


def full_build(
    objs: Mapping[CachedKind, list[dict[str, Any]]], assumed: Mapping[str, str],
    scheduler_name: str, *, gates_enabled: bool = False,
    node_usage: Mapping[str, NodeUsage] | None = None,
) -> Built:
    """A snapshot converted from scratch: every node, job and queue from the raw objects."""
    nodes: dict[str, NodeInfo] = {}
    for raw in objs[CachedKind.NODE]:
        if convert.node_ready(raw):
            info = convert.node_info(raw)
            nodes[info.name] = info
    jobs: dict[str, JobInfo] = {}
    groups: dict[str, dict[str, Any]] = {}
    by_key: dict[str, JobInfo] = {}
    priorities = convert.priority_classes(objs.get(CachedKind.PRIORITY_CLASS, ()))
    for raw in objs[CachedKind.POD_GROUP]:
        job = convert.job_info(raw, priorities)
        key = f"{job.namespace}/{job.name}"
        jobs[key] = by_key[key] = job
        groups[key] = raw
    built = Built(ClusterSnapshot(), groups=groups)
    candidates: set[str] = set()
    reserved: set[str] = set()
    orphans: list[TaskInfo] = []
    for pod in sorted(objs[CachedKind.POD], key=convert.pod_uid):  # not the store's order
        task = convert.task_info(pod)
        if (pod.get("spec") or {}).get("schedulerName") != scheduler_name:
            host = nodes.get(task.node_name or "")
            if host is not None and task.uid not in host.tasks:
                task.status = TaskStatus.RUNNING
                host.add_task(task)
            continue
        if task.status is TaskStatus.PENDING and task.uid in assumed:
            task.status = TaskStatus.BINDING
            task.node_name = assumed[task.uid]
        group = convert.group_name(pod)
        if group is None:
            job = convert.standalone_job(pod, task)
            jobs[convert.STANDALONE_KEY + task.uid] = job
        else:
            found = by_key.get(f"{task.namespace}/{group}")
            if found is None:  # no PodGroup: not scheduled, but a placed pod holds its node
                if task.status is not TaskStatus.PENDING and task.node_name:
                    orphans.append(task)
                continue
            job = found
        job.add_task(task)
        built.pods[task.uid] = pod
        if not (pod.get("spec") or {}).get("nodeName"):
            built.pending[task.uid] = job.uid
        if gates_enabled and task.status is TaskStatus.PENDING:
            state = classify_gates(convert.gate_names(pod))
            opt = opted_in(convert.meta(pod).get("annotations"))
            if state in (GateState.OURS_ONLY, GateState.OURS_AND_OTHERS) and not opt:
                built.gate_without_opt_in.append(convert.pod_key(pod))
            elif state is GateState.OURS_ONLY:
                candidates.add(task.uid)
            elif state is GateState.NONE and opt:
                reserved.add(task.uid)
    built.gate_without_opt_in.sort()
    index = SnapshotIndex()
    ours: dict[str, list[TaskInfo]] = {}
    for job in jobs.values():
        index.put_job(job)
        for task in placed(job):
            ours.setdefault(task.node_name or "", []).append(task)
    for task in orphans:
        ours.setdefault(task.node_name or "", []).append(task)
    ordered = [nodes[name] for name in sorted(nodes)]
    for node in ordered:
        add_ours(node, ours.get(node.name, ()))
        index.put_node(node)
    built.group_jobs = frozenset(by_key[key].uid for key in groups)
    built.snapshot = IndexedSnapshot(
        nodes=ordered, jobs=list(jobs.values()),
        queues=[convert.queue_info(q) for q in objs[CachedKind.QUEUE]], index=index,
        pdbs=pdbs_in_order(objs.get(CachedKind.PDB, ())),
        hypernodes=hyper_nodes(objs.get(CachedKind.HYPER_NODE, ())),
        resource_quotas=resource_quotas(objs.get(CachedKind.RESOURCE_QUOTA, ())),
        numatopologies=numatopologies(objs.get(CachedKind.NUMATOPOLOGY, ())),
        node_usage=dict(node_usage or {}),
        namespace_labels={
            str(convert.meta(ns).get("name", "")): labels_of(ns)
            for ns in objs.get(CachedKind.NAMESPACE, ())
        },
    )
    built.view = GateView(frozenset(candidates), frozenset(reserved))
    return built
