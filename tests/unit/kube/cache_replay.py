"""Random event streams for the scheduler cache, and one replayer for them.

Shared by the cache properties (issue 19, part 5): `test_cache_incremental` checks at every
build that the incremental snapshot equals a full rebuild, `test_cache_sessions` runs a
session at every build and assumes its binds. Both replay the same kind of stream through
`replay`, which hands each build to the caller.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from koordqueue.kube.scheduler import names
from koordqueue.kube.scheduler.cache import Built, CachedKind, SchedulerCache
from koordqueue.scheduler import default_config, run_session
from koordqueue.scheduler.api import JobInfo, NodeInfo, TaskInfo

SCHED = names.DEFAULT_SCHEDULER_NAME
PODS = [f"p{i}" for i in range(4)]
NODES = ["n0", "n1", "n2"]
GROUPS = ["g0", "g1"]
QUEUES = ["default", "q1"]
NAMESPACES = ["ns", "other"]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_pod(uid: str, version: int, ours: bool, group: str | None, node: str | None,
             phase: str, cpu: int, queue: str, tier: str | None = None) -> dict[str, Any]:
    annotations: dict[str, str] = {names.QUEUE_NAME_ANNOTATION: queue}
    if group is not None:
        annotations[names.GROUP_NAME_ANNOTATION] = group
    spec: dict[str, Any] = {
        "schedulerName": SCHED if ours else "other",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}],
    }
    if node is not None:
        spec["nodeName"] = node
    metadata: dict[str, Any] = {"name": uid, "namespace": "ns", "uid": uid,
                                "resourceVersion": str(version), "annotations": annotations}
    if tier is not None:
        metadata["labels"] = {"tier": tier}
    return {"metadata": metadata, "spec": spec, "status": {"phase": phase}}


def make_node(name: str, version: int, ready: bool, cpu: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": str(version)},
        "status": {"allocatable": {"cpu": str(cpu), "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def make_group(name: str, version: int, min_member: int, queue: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                     "resourceVersion": str(version)},
        "spec": {"minMember": min_member, "queue": queue},
    }


def make_queue(name: str, version: int, weight: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(version)},
            "spec": {"weight": weight}}


def make_namespace(name: str, version: int, team: str | None) -> dict[str, Any]:
    labels = {"kubernetes.io/metadata.name": name, **({"team": team} if team else {})}
    return {"metadata": {"name": name, "resourceVersion": str(version), "labels": labels}}


pods = st.builds(
    lambda uid, ours, group, node, phase, cpu, queue, tier: (
        "pod", uid, ours, group, node, phase, cpu, queue, tier
    ),
    st.sampled_from(PODS), st.booleans(), st.sampled_from([None, *GROUPS]),
    st.sampled_from([None, None, *NODES]),
    st.sampled_from(["Pending", "Pending", "Running", "Succeeded"]),
    st.integers(1, 3), st.sampled_from(QUEUES), st.sampled_from([None, None, "a"]),
)
nodes = st.tuples(st.just("node"), st.sampled_from(NODES), st.booleans(), st.integers(2, 6))
groups = st.tuples(st.just("group"), st.sampled_from(GROUPS), st.integers(1, 3),
                   st.sampled_from(QUEUES))
queues = st.tuples(st.just("queue"), st.sampled_from(QUEUES), st.integers(1, 3))
namespaces = st.tuples(st.just("namespace"), st.sampled_from(NAMESPACES),
                       st.sampled_from([None, "a", "b"]))
deletes = st.tuples(st.just("delete"), st.sampled_from(list(CachedKind)),
                    st.sampled_from(PODS + NODES + GROUPS + QUEUES + NAMESPACES))
pod_deletes = st.tuples(st.just("delete"), st.just(CachedKind.POD), st.sampled_from(PODS))
assumes = st.tuples(st.just("assume"), st.sampled_from(PODS), st.sampled_from(NODES))
forgets = st.tuples(st.just("forget"), st.sampled_from(PODS))
relists = st.tuples(st.just("relist"), st.sampled_from(list(CachedKind)))
ticks = st.tuples(st.just("tick"), st.sampled_from([1.0, 40.0]))
edits = st.one_of(
    st.tuples(st.just("edit"), st.sampled_from(PODS), st.just("node"), st.sampled_from(NODES)),
    st.tuples(st.just("edit"), st.sampled_from(PODS), st.just("phase"),
              st.sampled_from(["Running", "Succeeded", "Failed"])),
    st.tuples(st.just("edit"), st.sampled_from(PODS), st.just("tier"),
              st.sampled_from([None, "a", "b"])),
    st.tuples(st.just("edit"), st.sampled_from(PODS), st.just("cpu"), st.integers(1, 3)),
)
"""One change to a live pod, the rest kept (a bind coming back, a kubelet's status update,
a relabel, a resize): what the cache may or may not answer without parsing the pod again."""
builds = st.just(("build",))
ops = st.lists(
    st.one_of(pods, pods, pods, nodes, groups, queues, namespaces, deletes, assumes, assumes,
              forgets, relists, ticks, edits, edits, builds, builds, builds),
    min_size=15, max_size=60,
)

_KINDS = {"pod": CachedKind.POD, "node": CachedKind.NODE, "group": CachedKind.POD_GROUP,
          "queue": CachedKind.QUEUE, "namespace": CachedKind.NAMESPACE}
_MAKE: dict[str, Callable[..., dict[str, Any]]] = {
    "pod": make_pod, "node": make_node, "group": make_group, "queue": make_queue,
    "namespace": make_namespace,
}


def replay(
    stream: list[tuple[Any, ...]], on_build: Callable[[SchedulerCache], None]
) -> SchedulerCache:
    """Feed the stream to a fresh cache (watch events, deletes, assumed and forgotten binds,
    relists of the objects live so far, clock ticks); at each ("build",) call `on_build`."""
    clock = Clock()
    cache = SchedulerCache(SCHED, clock=clock)
    live: dict[CachedKind, dict[str, dict[str, Any]]] = {k: {} for k in CachedKind}
    for version, op in enumerate(stream, start=1):
        if op[0] in _KINDS:
            kind = _KINDS[op[0]]
            obj = _MAKE[op[0]](op[1], version, *op[2:])
            key = f"ns/{op[1]}" if kind is CachedKind.POD_GROUP else op[1]
            event = "MODIFIED" if key in live[kind] else "ADDED"
            live[kind][key] = obj
            cache.on_event(kind, event, obj)
        elif op[0] == "delete":
            kind, name = op[1], op[2]
            key = f"ns/{name}" if kind is CachedKind.POD_GROUP else name
            gone = live[kind].pop(key, None)
            if gone is not None:
                cache.on_event(kind, "DELETED", gone)
        elif op[0] == "edit":
            old = live[CachedKind.POD].get(op[1])
            if old is not None:
                pod = live[CachedKind.POD][op[1]] = _edit(old, version, op[2], op[3])
                cache.on_event(CachedKind.POD, "MODIFIED", pod)
        elif op[0] == "assume":
            cache.assume(op[1], op[2])
        elif op[0] == "forget":
            cache.forget(op[1])
        elif op[0] == "relist":
            cache.replace(op[1], list(live[op[1]].values()))
        elif op[0] == "tick":
            clock.now += op[1]
        else:
            on_build(cache)
    return cache


def _edit(old: dict[str, Any], version: int, what: str, value: Any) -> dict[str, Any]:
    pod = copy.deepcopy(old)
    pod["metadata"]["resourceVersion"] = str(version)
    if what == "node":
        pod["spec"]["nodeName"] = value
    elif what == "phase":
        pod["status"]["phase"] = value
    elif what == "tier":
        if value is None:
            pod["metadata"].pop("labels", None)
        else:
            pod["metadata"]["labels"] = {"tier": value}
    else:
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = str(value)
    return pod


_TASK_FIELDS = [f.name for f in dataclasses.fields(TaskInfo) if not f.name.startswith("_")]


def task_form(t: TaskInfo) -> tuple[object, ...]:
    """Every field of a task a conversion sets (dicts as sorted items)."""
    return tuple(
        sorted(value.items()) if isinstance(value, dict) or name == "labels" else value
        for name in _TASK_FIELDS
        for value in (getattr(t, name),)
    )


def node_form(n: NodeInfo) -> tuple[object, ...]:
    return (n.name, dict(n.allocatable), n.labels, n.taints, n.unschedulable, n.ready,
            sorted(task_form(t) for t in n.tasks.values()), dict(n.idle), dict(n.used))


def job_form(j: JobInfo) -> tuple[object, ...]:
    return (j.uid, j.name, j.namespace, j.queue, j.min_available, j.phase, j.priority,
            j.min_resources, dict(j.allocated), j.ready_task_num(),
            sorted(task_form(t) for t in j.tasks.values()))


def canonical(built: Built) -> tuple[object, ...]:
    snap = built.snapshot
    return (
        sorted(node_form(n) for n in snap.nodes),
        sorted(job_form(j) for j in snap.jobs),
        sorted(repr(q) for q in snap.queues),
        sorted(built.pods), sorted(built.groups),
        built.view, sorted(built.gate_without_opt_in),
        sorted((ns, sorted(labels.items())) for ns, labels in snap.namespace_labels.items()),
    )


def decisions(built: Built) -> tuple[object, ...]:
    result = run_session(built.snapshot, default_config())
    return (
        sorted((b.task, b.node) for b in result.binds),
        sorted((e.task, e.node) for e in result.evictions),
        sorted((u.job, u.old, u.new) for u in result.phase_updates),
        sorted((uid, e.message()) for uid, e in result.fit_errors.items()),
        sorted(result.job_conditions.items()),
    )
