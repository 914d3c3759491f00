"""numa-aware in a session (Volcano v1.14.1 has no test of the plugin itself, only of its
policy and provider packages: test_numaaware_policy.py): pods and Numatopology objects as
users and Volcano's resource exporter write them, converted by the kube adapter.

Feature switched off: each case also schedules with numa-aware left out of the
configuration, and asserts the outcome differs (said per case).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordqueue.kube.scheduler.convert import node_info, task_info
from koordqueue.kube.scheduler.numa import numatopologies
from koordqueue.scheduler import ClusterSnapshot, SchedulerConfig, parse_config
from koordqueue.scheduler.api import JobInfo, NodeInfo, PodGroupPhase, QueueInfo
from koordqueue.scheduler.api import numa_names as nn
from koordqueue.scheduler.api.numa import parse_cpuset
from koordqueue.scheduler.framework import open_session, run_actions
from koordqueue.scheduler.framework.result import SessionResult

NS = "ns1"


def numatopo(name: str, free: str, policy: str = "single-numa-node",
             cpu_manager: str = "static", reserved: str | None = None) -> dict[str, Any]:
    """A Numatopology as the exporter writes it: 2 NUMA nodes x 4 cpus (2 cores each)."""
    spec: dict[str, Any] = {
        "policies": {nn.CPU_MANAGER_POLICY: cpu_manager, nn.TOPOLOGY_MANAGER_POLICY: policy},
        "numares": {"cpu": {"allocatable": free, "capacity": 8}},
        "cpuDetail": {str(c): {"numa": c // 4, "socket": c // 4, "core": c // 2}
                      for c in range(8)},
    }
    if reserved is not None:
        spec["resReserved"] = {"cpu": reserved}
    return {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology",
            "metadata": {"name": name}, "spec": spec}


def node(name: str) -> NodeInfo:
    amounts = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return node_info({
        "metadata": {"name": name},
        "status": {"capacity": amounts, "allocatable": amounts,
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })


def pod(name: str, cpus: str, policy: str | None = "single-numa-node", *,
        guaranteed: bool = True) -> dict[str, Any]:
    limits = {"cpu": cpus, "memory": "1Gi"} if guaranteed else {}
    meta: dict[str, Any] = {"uid": f"{NS}-{name}", "name": name, "namespace": NS,
                            "creationTimestamp": f"2026-01-01T00:00:{len(name):02d}Z"}
    if policy is not None:
        meta["annotations"] = {nn.NUMA_POLICY_KEY: policy}
    return {"metadata": meta, "spec": {"containers": [{"name": "main", "resources": {
        "requests": {"cpu": cpus, "memory": "1Gi"}, "limits": limits}}]},
        "status": {"phase": "Pending"}}


def cluster(nodes: list[str], topologies: list[dict[str, Any]],
            pods: list[dict[str, Any]]) -> ClusterSnapshot:
    jobs = []
    for i, obj in enumerate(pods):
        task = task_info(obj)
        job = JobInfo(f"{NS}/{task.name}", task.name, namespace=NS, queue="q",
                      min_available=1, phase=PodGroupPhase.INQUEUE, creation=float(i))
        job.add_task(task)
        jobs.append(job)
    return ClusterSnapshot([node(n) for n in nodes], jobs, [QueueInfo("q", weight=1)],
                           numatopologies=numatopologies(topologies))


def conf(numa: bool, arguments: Mapping[str, object] | None = None) -> SchedulerConfig:
    lines = ['actions: "allocate"', "tiers:", "- plugins:", "  - name: predicates"]
    if numa:
        lines.append("  - name: numa-aware")
        if arguments:
            lines.append("    arguments:")
            lines += [f"      {k}: {v}" for k, v in arguments.items()]
    return parse_config("\n".join(lines) + "\n")


def schedule(snapshot: ClusterSnapshot, numa: bool = True) -> SessionResult:
    session = open_session(snapshot, conf(numa))
    run_actions(session)
    return session.close()


def placed(result: SessionResult) -> dict[str, str]:
    return {b.name: b.node for b in result.binds}


def test_single_numa_node_skips_a_node_whose_free_cpus_are_split() -> None:
    """n1 has 6 free cpus, 3 per NUMA node: 4 cpus fit no single node there, so the pod goes
    to n2 (all free). Off: name order puts it on n1."""
    snap = cluster(["n1", "n2"], [numatopo("n1", "1-3,5-7"), numatopo("n2", "0-7")],
                   [pod("p", "4")])
    assert placed(schedule(snap)) == {"p": "n2"}
    assert placed(schedule(snap, numa=False)) == {"p": "n1"}


def test_a_refusal_names_the_plugin_the_container_and_the_policy() -> None:
    """No node fits: the pod stays pending and its reason (what explain and the pod's
    event show) names numa-aware, the container and "cannot be assigned by numa"; a node
    with another policy is refused for that. Off: placed on n1."""
    snap = cluster(["n1", "n2"],
                   [numatopo("n1", "1-3,5-7"), numatopo("n2", "0-7", policy="best-effort")],
                   [pod("p", "4")])
    result = schedule(snap)
    assert placed(result) == {}
    message = result.pod_cause(f"{NS}-p", f"{NS}/p") or ""
    assert "numa-aware: container main cannot be assigned by numa" in message
    assert "single-numa-node" in message
    assert nn.POLICY_DIFFERS.format(task="single-numa-node", node="best-effort") in message
    assert placed(schedule(snap, numa=False)) == {"p": "n1"}


def test_pods_of_one_session_take_cpus_and_the_cache_is_told() -> None:
    """Three 4-cpu pods on one 2x4 node: the first two take NUMA 0 and NUMA 1, the third
    finds no NUMA node with 4 free cpus (the node's 16 cpus would hold it); the cpus of the
    two bound pods are reported for the cache. Off: all three placed."""
    snap = cluster(["n1"], [numatopo("n1", "0-7")], [pod("a", "4"), pod("b", "4"), pod("c", "4")])
    result = schedule(snap)
    assert placed(result) == {"a": "n1", "b": "n1"}
    assert result.numa_assigned == {f"{NS}-a": ("n1", {"cpu": parse_cpuset("0-3")}),
                                    f"{NS}-b": ("n1", {"cpu": parse_cpuset("4-7")})}
    assert len(placed(schedule(snap, numa=False))) == 3


def test_policy_needs_a_numatopology_and_a_static_cpu_manager() -> None:
    """A pod with a policy is refused by a node without a Numatopology, and by one whose cpu
    manager is not static; a pod that is not Guaranteed, or has no policy on a node whose
    topology manager is none, is not judged. Off: p goes to n0 (name order)."""
    snap = cluster(["n0", "n1", "n2"],
                   [numatopo("n1", "0-7", cpu_manager="none"), numatopo("n2", "0-7")],
                   [pod("p", "4"), pod("q", "4", guaranteed=False), pod("r", "4", None)])
    result = schedule(snap)
    assert placed(result)["p"] == "n2"
    assert placed(result)["q"] == "n0" and placed(result)["r"] == "n0"
    cause = result.fit_errors
    assert cause == {}
    assert placed(schedule(snap, numa=False))["p"] == "n0"


def test_score_prefers_fewer_numa_nodes() -> None:
    """best-effort admits a 4-cpu pod on n1 whose free cpus span both NUMA nodes, but n2
    holds it on one: fewer NUMA nodes score higher (100 against 0). Off: n1 (name order)."""
    snap = cluster(["n1", "n2"],
                   [numatopo("n1", "0-1,4-5", policy="best-effort"),
                    numatopo("n2", "4-7", policy="best-effort")],
                   [pod("p", "4", "best-effort")])
    assert placed(schedule(snap)) == {"p": "n2"}
    assert placed(schedule(snap, numa=False)) == {"p": "n1"}


def test_weight_argument_is_read() -> None:
    """Volcano's `weight` argument (default 1) scales the score."""
    from koordqueue.scheduler.framework.interface import Arguments
    from koordqueue.scheduler.plugins.numa_aware import NumaAwarePlugin

    assert NumaAwarePlugin(Arguments({nn.WEIGHT: 5})).weight == 5
    assert NumaAwarePlugin(Arguments({})).weight == 1
