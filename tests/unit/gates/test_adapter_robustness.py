"""The scheduler adapter never crashes on what a cluster can contain.

Hypothesis generates schema-valid but awkward clusters — pods bound to unknown nodes, zero
or huge requests, bad quantities, PodGroups naming missing queues, gates, not-ready nodes —
and every session built from them must run, bind only pending pods of ours, and never place
more on a node than it can hold: its allocatable less every placed pod's request, whatever the
pod's PodGroup or queue (a job dropped for a missing queue or PodGroup is not scheduled, but
its placed pods still hold their nodes, as in Volcano's cache).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.kube.scheduler import convert
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.scheduler.framework import run_session

quantity = st.sampled_from(["0", "100m", "1", "3", "64", "1Gi", "bogus", "-1"])


@st.composite
def pods(draw: st.DrawFn, index: int) -> dict[str, Any]:
    requests = draw(st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity, max_size=2))
    spec: dict[str, Any] = {
        "schedulerName": draw(st.sampled_from(["volcano", "volcano", "default-scheduler"])),
        "containers": [{"name": "c", "resources": {"requests": requests}}],
    }
    if draw(st.booleans()):
        spec["nodeName"] = draw(st.sampled_from(["n0", "n1", "ghost"]))
    if draw(st.booleans()):
        spec["nodeSelector"] = {"zone": draw(st.sampled_from(["a", "b"]))}
    if draw(st.booleans()):
        spec["schedulingGates"] = [
            {
                "name": draw(
                    st.sampled_from(["scheduling.volcano.sh/queue-allocation-gate", "other/gate"])
                )
            }
        ]
    group = draw(st.sampled_from(["pg0", "pg1", "missing"])) if draw(st.booleans()) else None
    phase = draw(st.sampled_from(["Pending", "Pending", "Running", "Succeeded"]))
    return pod(index, spec, group, phase)


def pod(index: int, spec: dict[str, Any], group: str | None, phase: str) -> dict[str, Any]:
    annotations = {"scheduling.k8s.io/group-name": group} if group else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p{index}",
            "namespace": "ns",
            "uid": f"uid-p{index}",
            "resourceVersion": "1",
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def cpu_pod(index: int, cpu: str, node: str | None, group: str | None, phase: str) -> Any:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node:
        spec["nodeName"] = node
    return pod(index, spec, group, phase)


def free_room(pod_objs: tuple[dict[str, Any], ...], node_name: str, cpu: str) -> Resources:
    """What the raw objects leave free on a node: allocatable less the requests of every
    pod placed on it and not finished (the oracle, independent of the cache's jobs)."""
    held = Resources()
    for obj in pod_objs:
        on = (obj.get("spec") or {}).get("nodeName")
        if on == node_name and obj["status"]["phase"] not in ("Succeeded", "Failed"):
            held = held + convert.task_info(obj).resreq
    return Resources.parse({"cpu": cpu, "memory": "8Gi", "pods": "110"}, "alloc") - held


def node(name: str, cpu: str, ready: bool, zone: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "labels": {"zone": zone},
        },
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def group(name: str, min_member: int, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"minMember": min_member, "queue": queue},
        "status": {"phase": "Inqueue"},
    }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 10).flatmap(lambda n: st.tuples(*(pods(i) for i in range(n)))),
    st.lists(
        st.tuples(st.sampled_from(["1", "2", "4"]), st.booleans(), st.sampled_from(["a", "b"])),
        min_size=0,
        max_size=2,
    ),
    st.tuples(st.integers(0, 4), st.sampled_from(["default", "nowhere"])),
    st.booleans(),
)
# a bound pod of a PodGroup whose queue is missing: its job is dropped, its 100m still held
@example((cpu_pod(0, "100m", "n0", "pg0", "Running"), cpu_pod(1, "1", None, None, "Pending")),
         [("1", True, "a")], (1, "nowhere"), False)
# a bound pod naming a PodGroup that does not exist: no job, its 100m still held
@example((cpu_pod(0, "100m", "n0", "missing", "Running"), cpu_pod(1, "1", None, None, "Pending")),
         [("1", True, "a")], (1, "default"), False)
def test_any_cluster_gives_a_session_that_runs_and_never_overcommits(
    pod_objs: tuple[dict[str, Any], ...],
    node_specs: list[tuple[str, bool, str]],
    pg: tuple[int, str],
    gates: bool,
) -> None:
    cache = SchedulerCache()
    cache.replace(
        CachedKind.QUEUE,
        [
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "default", "uid": "q", "resourceVersion": "1"},
                "spec": {"weight": 1},
            }
        ],
    )
    cache.replace(
        CachedKind.NODE,
        [node(f"n{i}", cpu, ready, zone) for i, (cpu, ready, zone) in enumerate(node_specs)],
    )
    cache.replace(CachedKind.POD_GROUP, [group("pg0", pg[0], pg[1]), group("pg1", 1, "default")])
    cache.replace(CachedKind.POD, list(pod_objs))
    built = cache.build(gates_enabled=gates)
    result = run_session(built.snapshot)
    pending = {
        uid for uid, pod in built.pods.items() if not (pod.get("spec") or {}).get("nodeName")
    }
    assert {b.task for b in result.binds} <= pending
    placed: dict[str, Resources] = {}
    for b in result.binds:
        task = next(t for j in built.snapshot.jobs for t in j.tasks.values() if t.uid == b.task)
        placed[b.node] = placed.get(b.node, Resources()) + task.request
    for name, extra in placed.items():
        cpu = node_specs[int(name[1:])][0]
        free = free_room(pod_objs, name, cpu)
        assert extra.less_equal(free, epsilon=100_000), (name, extra, free)
