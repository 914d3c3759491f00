"""The scheduler cache's incremental snapshot equals a snapshot converted from scratch.

Issue 19 (parts 1 and 5): `SchedulerCache.build` redoes only the nodes, jobs and queues that
changed since the last build; after any stream of pod / node / PodGroup / queue events
(adds, updates, deletes, relists, binds assumed and failed binds forgotten) its snapshot must
be the one a full conversion gives, and a session must decide the same on both.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _pod(uid: str, version: int, ours: bool, group: str | None, node: str | None,
         phase: str, cpu: int, queue: str) -> dict[str, Any]:
    annotations: dict[str, str] = {names.QUEUE_NAME_ANNOTATION: queue}
    if group is not None:
        annotations[names.GROUP_NAME_ANNOTATION] = group
    spec: dict[str, Any] = {
        "schedulerName": SCHED if ours else "other",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}],
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "metadata": {"name": uid, "namespace": "ns", "uid": uid,
                     "resourceVersion": str(version), "annotations": annotations},
        "spec": spec, "status": {"phase": phase},
    }


def _node(name: str, version: int, ready: bool, cpu: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": str(version)},
        "status": {"allocatable": {"cpu": str(cpu), "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def _group(name: str, version: int, min_member: int, queue: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                     "resourceVersion": str(version)},
        "spec": {"minMember": min_member, "queue": queue},
    }


def _queue(name: str, version: int, weight: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(version)},
            "spec": {"weight": weight}}


def _namespace(name: str, version: int, team: str | None) -> dict[str, Any]:
    labels = {"kubernetes.io/metadata.name": name, **({"team": team} if team else {})}
    return {"metadata": {"name": name, "resourceVersion": str(version), "labels": labels}}


NAMESPACES = ["ns", "other"]
pods = st.builds(
    lambda uid, ours, group, node, phase, cpu, queue: ("pod", uid, ours, group, node, phase,
                                                       cpu, queue),
    st.sampled_from(PODS), st.booleans(), st.sampled_from([None, *GROUPS]),
    st.sampled_from([None, None, *NODES]),
    st.sampled_from(["Pending", "Pending", "Running", "Succeeded"]),
    st.integers(1, 3), st.sampled_from(QUEUES),
)
nodes = st.tuples(st.just("node"), st.sampled_from(NODES), st.booleans(), st.integers(2, 6))
groups = st.tuples(st.just("group"), st.sampled_from(GROUPS), st.integers(1, 3),
                   st.sampled_from(QUEUES))
queues = st.tuples(st.just("queue"), st.sampled_from(QUEUES), st.integers(1, 3))
namespaces = st.tuples(st.just("namespace"), st.sampled_from(NAMESPACES),
                       st.sampled_from([None, "a", "b"]))
deletes = st.tuples(st.just("delete"), st.sampled_from(list(CachedKind)),
                    st.sampled_from(PODS + NODES + GROUPS + QUEUES + NAMESPACES))
assumes = st.tuples(st.just("assume"), st.sampled_from(PODS), st.sampled_from(NODES))
forgets = st.tuples(st.just("forget"), st.sampled_from(PODS))
relists = st.tuples(st.just("relist"), st.sampled_from(list(CachedKind)))
ticks = st.tuples(st.just("tick"), st.sampled_from([1.0, 40.0]))
builds = st.just(("build",))
ops = st.lists(
    st.one_of(pods, pods, pods, nodes, groups, queues, namespaces, deletes, assumes, assumes,
              forgets, relists, ticks, builds, builds, builds),
    min_size=15, max_size=60,
)


def _task(t: TaskInfo) -> tuple[object, ...]:
    return (t.uid, t.job, t.status, t.node_name, dict(t.resreq), t.priority, t.creation)


def _node_form(n: NodeInfo) -> tuple[object, ...]:
    return (n.name, dict(n.allocatable), n.labels, n.taints, n.unschedulable, n.ready,
            sorted(_task(t) for t in n.tasks.values()), dict(n.idle), dict(n.used))


def _job_form(j: JobInfo) -> tuple[object, ...]:
    return (j.uid, j.name, j.namespace, j.queue, j.min_available, j.phase, j.priority,
            j.min_resources, dict(j.allocated), j.ready_task_num(),
            sorted(_task(t) for t in j.tasks.values()))


def canonical(built: Built) -> tuple[object, ...]:
    snap = built.snapshot
    return (
        sorted(_node_form(n) for n in snap.nodes),
        sorted(_job_form(j) for j in snap.jobs),
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


def replay(stream: list[tuple[Any, ...]]) -> SchedulerCache:
    """Feed the stream, checking incremental == full at every interleaved build."""
    clock = Clock()
    cache = SchedulerCache(SCHED, clock=clock)
    live: dict[CachedKind, dict[str, dict[str, Any]]] = {k: {} for k in CachedKind}
    kind_of = {"pod": CachedKind.POD, "node": CachedKind.NODE,
               "group": CachedKind.POD_GROUP, "queue": CachedKind.QUEUE,
               "namespace": CachedKind.NAMESPACE}
    make = {"pod": _pod, "node": _node, "group": _group, "queue": _queue,
            "namespace": _namespace}
    for version, op in enumerate(stream, start=1):
        if op[0] in kind_of:
            kind = kind_of[op[0]]
            obj = make[op[0]](op[1], version, *op[2:])
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
        elif op[0] == "assume":
            cache.assume(op[1], op[2])
        elif op[0] == "forget":
            cache.forget(op[1])
        elif op[0] == "relist":
            cache.replace(op[1], list(live[op[1]].values()))
        elif op[0] == "tick":
            clock.now += op[1]
        else:
            assert canonical(cache.build()) == canonical(cache.rebuild())
    return cache


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_the_incremental_snapshot_equals_a_full_rebuild(stream: list[tuple[Any, ...]]) -> None:
    cache = replay(stream)
    for gates in (False, True):
        assert canonical(cache.build(gates_enabled=gates)) == canonical(
            cache.rebuild(gates_enabled=gates)
        )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_a_session_decides_the_same_on_the_incremental_snapshot(
    stream: list[tuple[Any, ...]],
) -> None:
    cache = replay(stream)
    assert decisions(cache.build()) == decisions(cache.rebuild())


def test_a_build_with_nothing_changed_hands_out_the_same_snapshot() -> None:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.NODE, "ADDED", _node("n0", 1, True, 4))
    cache.on_event(CachedKind.QUEUE, "ADDED", _queue("default", 1, 1))
    first = cache.build()
    assert cache.build() is first
    cache.on_event(CachedKind.POD, "ADDED", _pod("p0", 2, True, None, None, "Pending", 1,
                                                   "default"))
    second = cache.build()
    assert second is not first and second.generation > first.generation
    assert [j.name for j in second.snapshot.jobs] == ["p0"]


def test_an_unchanged_job_is_shared_between_snapshots_and_a_changed_one_is_not() -> None:
    cache = SchedulerCache(SCHED)
    cache.on_event(CachedKind.NODE, "ADDED", _node("n0", 1, True, 4))
    for uid in ("p0", "p1"):
        cache.on_event(CachedKind.POD, "ADDED", _pod(uid, 2, True, None, None, "Pending", 1,
                                                       "default"))
    before = {j.name: j for j in cache.build().snapshot.jobs}
    cache.on_event(CachedKind.POD, "MODIFIED", _pod("p1", 3, True, None, "n0", "Running", 1,
                                                      "default"))
    after = {j.name: j for j in cache.build().snapshot.jobs}
    assert after["p0"] is before["p0"]
    assert after["p1"] is not before["p1"]
