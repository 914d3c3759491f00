"""Volcano's unit-test vocabulary (uthelper, util.Build*) over koordqueue's scheduler.

Why: the conformance cases are transcriptions of volcano-sh/volcano's own tests; keeping their
builders' shape (a pod has a namespace, a node name and a phase; a PodGroup names its queue,
minMember and phase; a queue has deserved and capability) lets a reader check each case line
by line against the original. Only inputs are built here; every test states its expectations.

Modelling notes (where koordqueue's data model differs from Volcano's, without changing any
rule under test):
- Volcano adds `pods: 1` to every task's request; koordqueue's tasks carry none. Every rule
  under test ignores `pods` (Volcano's IgnoredScalarResource), so the outcomes do not change.
- Job uid is "<ns>/<podgroup>", task uid "<ns>-<pod>", as Volcano's builders make them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koordqueue.domain.resources import Resources
from koordqueue.kube.scheduler.convert import task_info
from koordqueue.scheduler import ClusterSnapshot, SchedulerConfig, parse_config
from koordqueue.scheduler.api import (
    JobInfo,
    NodeInfo,
    PodGroupPhase,
    QueueInfo,
    Taint,
    TaskInfo,
    TaskStatus,
)
from koordqueue.scheduler.framework import open_session, run_actions
from koordqueue.scheduler.framework.interface import ExtensionPoint
from koordqueue.scheduler.framework.session import Session

NS = "ns1"


def rl(cpu: str = "", memory: str = "", scalars: Mapping[str, str] | None = None) -> Resources:
    """api.BuildResourceList: cpu and memory only when given and non-zero (Volcano holds
    them as fields, so a zero one is the same as none); scalars always (a scalar named at
    0 is a named dimension for reclaim)."""
    raw: dict[str, str] = {}
    for name, value in (("cpu", cpu), ("memory", memory)):
        if value and Resources.of({name: value}).get_nanos(name) != 0:
            raw[name] = value
    raw.update(scalars or {})
    return Resources.of(raw)


def node(
    name: str,
    allocatable: Resources,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint] = (),
) -> NodeInfo:
    """util.BuildNode (with `spec.taints` when given)."""
    return NodeInfo(name, allocatable, labels=labels, taints=taints)


@dataclass
class Pod:
    """util.BuildPod: a pod of a PodGroup, Running on a node or Pending."""

    name: str
    node: str
    running: bool
    request: Resources
    group: str
    preemptable: bool = True
    selector: Mapping[str, str] | None = None
    priority: int = 0
    role: str = ""
    namespace: str | None = None
    preempt_never: bool = False
    labels: Mapping[str, str] | None = None
    spec: Mapping[str, Any] | None = None
    priority_class: str = ""


def pod(
    name: str,
    node_name: str,
    running: bool,
    request: Resources,
    group: str,
    *,
    preemptable: bool = True,
    selector: Mapping[str, str] | None = None,
    priority: int = 0,
    role: str = "",
    namespace: str | None = None,
    preempt_never: bool = False,
    labels: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
    priority_class: str = "",
) -> Pod:
    """util.BuildPod(ns, name, node, phase, request, group, labels, selector);
    `preemptable=False` stands for the `volcano.sh/preemptable: "false"` label, `role` for
    `volcano.sh/task-spec`; `namespace` overrides the case's namespace; `preempt_never`
    stands for `spec.preemptionPolicy: Never` (util.BuildPodWithPreemptionPolicy).
    `labels` and `spec` (affinity, tolerations, topologySpreadConstraints: the API fields of
    util.BuildPodWithAffinity and friends) make the pod an API object converted by the kube
    adapter, as the live scheduler converts it; `priority_class` is its priorityClassName."""
    return Pod(
        name,
        node_name,
        running,
        request,
        group,
        preemptable,
        selector,
        priority,
        role,
        namespace,
        preempt_never,
        labels,
        spec,
        priority_class,
    )


@dataclass
class PodGroup:
    """util.BuildPodGroup."""

    name: str
    queue: str
    min_member: int
    phase: PodGroupPhase
    min_resources: Resources | None = None
    priority: int = 0
    task_min: Mapping[str, int] | None = None
    namespace: str | None = None


def pg(
    name: str,
    queue: str,
    min_member: int,
    phase: PodGroupPhase,
    min_resources: Resources | None = None,
    priority: int = 0,
    *,
    task_min: Mapping[str, int] | None = None,
    namespace: str | None = None,
) -> PodGroup:
    """util.BuildPodGroup(name, ns, queue, minMember, taskMinMember, phase)
    [+ Spec.MinResources]; `priority` is the value of its priority class."""
    return PodGroup(name, queue, min_member, phase, min_resources, priority, task_min, namespace)


def queue(
    name: str,
    deserved: Resources | None = None,
    capability: Resources | None = None,
    *,
    priority: int = 0,
    parent: str | None = None,
    state: str = "Open",
    weight: int = 1,
    guarantee: Resources | None = None,
) -> QueueInfo:
    """util.BuildQueueWithResourcesQuantity(name, deserved, capability) and friends."""
    return QueueInfo(
        name,
        weight=weight,
        capability=capability,
        deserved=deserved,
        guarantee=guarantee or Resources(),
        parent=parent,
        priority=priority,
        state=state,
    )


def build(
    nodes: Sequence[NodeInfo],
    pods: Iterable[Pod],
    groups: Iterable[PodGroup],
    queues: Sequence[QueueInfo],
    namespace: str = NS,
) -> ClusterSnapshot:
    """The cluster the way Volcano's cache sees it (all in `namespace`); pods of unknown
    groups are dropped."""
    jobs: dict[str, JobInfo] = {}
    for g in groups:
        ns = g.namespace or namespace
        jobs[g.name] = JobInfo(
            f"{ns}/{g.name}",
            g.name,
            namespace=ns,
            task_min_available=dict(g.task_min or {}),
            queue=g.queue,
            min_available=g.min_member,
            min_resources=g.min_resources,
            phase=g.phase,
            priority=g.priority,
        )
    for p in pods:
        if p.group not in jobs:
            continue
        jobs[p.group].add_task(_task(p, p.namespace or namespace))
    return ClusterSnapshot(nodes, list(jobs.values()), queues)


def _task(p: Pod, namespace: str) -> TaskInfo:
    uid = f"{namespace}-{p.name}"
    status = TaskStatus.RUNNING if p.running else TaskStatus.PENDING
    if p.spec is None and p.labels is None:
        return TaskInfo(
            uid,
            p.name,
            namespace,
            role=p.role,
            resreq=p.request,
            status=status,
            node_name=p.node or None,
            node_selector=dict(p.selector or {}),
            preemptable=p.preemptable,
            priority=p.priority,
            preempt_never=p.preempt_never,
            priority_class_name=p.priority_class,
        )
    spec: dict[str, Any] = {"containers": [{"name": "c"}], **(p.spec or {})}
    if p.node:
        spec["nodeName"] = p.node
    if p.selector:
        spec["nodeSelector"] = dict(p.selector)
    meta: dict[str, Any] = {"uid": uid, "name": p.name, "namespace": namespace}
    if p.labels:
        meta["labels"] = dict(p.labels)
    converted = task_info({"metadata": meta, "spec": spec, "status": {"phase": "Pending"}})
    return dataclasses.replace(
        converted,
        role=p.role,
        resreq=p.request,
        init_resreq=p.request,
        status=status,
        preemptable=p.preemptable,
        priority=p.priority,
        preempt_never=p.preempt_never,
        priority_class_name=p.priority_class,
    )


def tiers(
    *plugins: tuple[str, Iterable[str]],
    arguments: Mapping[str, Mapping[str, object]] | None = None,
) -> SchedulerConfig:
    """One tier, each plugin with the extension points the Volcano case switches on
    (`("capacity", {"Allocatable", "QueueOrder"})` for `EnabledAllocatable: &trueValue, ...`).

    Why every other switch is written off: Volcano's session treats a switch the test leaves
    nil as off (`isEnabled(nil) == false`; only the YAML loader defaults them to on)."""
    every = sorted({p.switch for p in ExtensionPoint})
    lines = ['actions: "allocate"', "tiers:", "- plugins:"]
    for name, enabled in plugins:
        on = {f"enable{point}" for point in enabled}
        unknown = on - set(every)
        assert not unknown, f"unknown switches {unknown}"
        lines.append(f"  - name: {name}")
        lines.extend(f"    {switch}: {str(switch in on).lower()}" for switch in every)
        args = (arguments or {}).get(name)
        if args:
            lines.append("    arguments:")
            lines.extend(f"      {key}: {value}" for key, value in args.items())
    return parse_config("\n".join(lines) + "\n")


@dataclass
class Outcome:
    """What a Volcano case asserts: binds (pod -> node), evictions, pipelined tasks per
    PodGroup (pod -> node) and PodGroup phases."""

    binds: dict[str, str]
    evicted: list[str]
    pipelined: dict[str, dict[str, str]]
    phases: dict[str, PodGroupPhase]
    session: Session


def run(snapshot: ClusterSnapshot, config: SchedulerConfig, actions: str) -> Outcome:
    """Open a session, run `actions` in order, close it, and collect the outcome."""
    names = tuple(a.strip() for a in actions.split(","))
    session = open_session(snapshot, dataclasses.replace(config, actions=names))
    run_actions(session)
    result = session.close()
    pipelined: dict[str, dict[str, str]] = {}
    for job in session.jobs.values():
        for task in job.task_status_index.get(TaskStatus.PIPELINED, {}).values():
            pipelined.setdefault(f"{job.namespace}/{job.name}", {})[
                f"{task.namespace}/{task.name}"
            ] = task.node_name or ""
    phases = {f"{job.namespace}/{job.name}": job.phase for job in session.jobs.values()}
    for update in result.phase_updates:
        phases[f"{update.namespace}/{update.name}"] = update.new
    return Outcome(
        binds={f"{b.namespace}/{b.name}": b.node for b in result.binds},
        evicted=sorted(f"{e.namespace}/{e.name}" for e in result.evictions),
        pipelined=pipelined,
        phases=phases,
        session=session,
    )


def node_order_scores(
    snapshot: ClusterSnapshot, config: SchedulerConfig
) -> dict[str, dict[str, float]]:
    """`ssn.NodeOrderFn(task, node)` for every task on every node: the node-order scores the
    session's enabled plugins register, summed, keyed by "<ns>/<pod>" then node name."""
    session = open_session(snapshot, config)
    engine = session.placement
    nodes = session.node_list
    idx = np.arange(len(nodes), dtype=np.intp)
    out: dict[str, dict[str, float]] = {}
    for job in session.jobs.values():
        for task in job.tasks.values():
            total = np.zeros(len(nodes), dtype=np.float64)
            for batch in engine.batch_scores:
                total += batch(task, idx)
            for one in engine.scores:
                total += np.array([one(task, n) for n in nodes], dtype=np.float64)
            out[f"{task.namespace}/{task.name}"] = {n.name: float(total[n.index]) for n in nodes}
    return out
