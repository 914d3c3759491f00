"""Preemption that lifts inter-pod anti-affinity and topology spread failures: cases of
kubernetes/kubernetes pkg/scheduler/framework/plugins/defaultpreemption/
default_preemption_test.go, TestDryRunPreemption, run through koordqueue's preempt action
(and one through reclaim) with `priority` and `predicates` (each pod its own job of the pod's
priority; priorities low 0, mid 100, high 1000; smallRes 100m/100; nodes of veryLargeRes
500m/500 labelled hostname=<name> and zone=<zone>).

kube-scheduler keeps a node whose filters fail only for reasons preemption may resolve
(anti-affinity, spread skew), removes the lower-priority pods and re-runs the filters. The
preempt action evicts victims in victim order until the preemptor fits and the node passes
the inter-pod filters; the counts behind those filters follow the evictions.
"""

from __future__ import annotations

from collections.abc import Sequence

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot, parse_config, run_session
from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo
from koordqueue.scheduler.framework.result import SessionResult
from tests.conformance.kubescheduler.harness import exists, make_pod, spread, term

LOW, MID, HIGH = 0, 100, 1000
SMALL = Resources.of(cpu="100m", memory="100")
VERY_LARGE = Resources.of(cpu="500m", memory="500", pods="110")
HOST, ZONE = "hostname", "zone"
FOO = {"foo": ""}

PREEMPT = parse_config(
    """
actions: "preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
"""
)


def _node(spec: str) -> NodeInfo:
    """A TestDryRunPreemption node name: "name/zone" gives labels hostname and zone."""
    name, *rest = spec.split("/")
    labels = {HOST: name}
    if rest:
        labels[ZONE] = rest[0]
    return NodeInfo(name, VERY_LARGE, labels=labels)


def _pod(name: str, priority: int, task: TaskInfo, request: Resources = SMALL) -> JobInfo:
    task.priority = priority
    task.resreq = task.init_resreq = request
    return JobInfo(task.job, name, namespace="default", priority=priority, tasks=[task])


def _snapshot(nodes: Sequence[str], jobs: Sequence[JobInfo]) -> ClusterSnapshot:
    return ClusterSnapshot([_node(n) for n in nodes], list(jobs), [QueueInfo("default")])


def _outcome(result: SessionResult) -> tuple[list[str], list[tuple[str, str]]]:
    return (
        sorted(e.task for e in result.evictions),
        [(r.task, r.node) for r in result.pipelined],
    )


def _anti_affinity_case() -> ClusterSnapshot:
    """ "pod with anti-affinity is preempted", node1 only (node2, where p fits without
    preemption, is no candidate in the dry run)."""
    anti = [term(exists("foo"), HOST)]
    return _snapshot(
        ["node1"],
        [
            _pod("p1.1", LOW, make_pod("p1.1", node="node1", labels=FOO, anti_affinity=anti)),
            _pod("p1.2", MID, make_pod("p1.2", node="node1")),
            _pod("p1.3", HIGH, make_pod("p1.3", node="node1")),
            _pod("p", HIGH, make_pod("p", labels=FOO)),
        ],
    )


def test_victims_anti_affinity_is_lifted_by_its_eviction() -> None:
    """default_preemption_test.go TestDryRunPreemption, "pod with anti-affinity is
    preempted": p (label foo) fits node1's resources but p1.1's required anti-affinity
    (Exists foo, hostname) rejects it; the candidate is node1 with the single victim p1.1
    (p1.2, also of lower priority, is reprieved)."""
    assert _outcome(run_session(_anti_affinity_case(), PREEMPT)) == (["p1.1"], [("p", "node1")])


def test_spread_skew_is_lifted_by_evicting_a_lower_priority_pod() -> None:
    """default_preemption_test.go TestDryRunPreemption, "preemption to resolve pod topology
    spread filter failure": p spreads (maxSkew 1, DoNotSchedule) over zone and hostname;
    zone1 holds 3 foo pods, zone2 2, so every node fails. kube-scheduler's candidates are
    node-a with victim pod-a2 and node-b with victim pod-b1 (pod-a1, mid priority, is
    reprieved); either choice evicts one low-priority pod. (The case's pods request
    nothing; here each requests smallRes, which every node holds, so that none is a
    best-effort pod, which only backfill places.)"""
    sel = exists("foo")
    preemptor = make_pod(
        "p",
        labels=FOO,
        spread_constraints=[
            spread(1, ZONE, "DoNotSchedule", sel),
            spread(1, HOST, "DoNotSchedule", sel),
        ],
    )
    jobs = [
        _pod("pod-a1", MID, make_pod("pod-a1", node="node-a", labels=FOO)),
        _pod("pod-a2", LOW, make_pod("pod-a2", node="node-a", labels=FOO)),
        _pod("pod-b1", LOW, make_pod("pod-b1", node="node-b", labels=FOO)),
        _pod("pod-x1", HIGH, make_pod("pod-x1", node="node-x", labels=FOO)),
        _pod("pod-x2", HIGH, make_pod("pod-x2", node="node-x", labels=FOO)),
        _pod("p", HIGH, preemptor),
    ]
    result = run_session(_snapshot(["node-a/zone1", "node-b/zone1", "node-x/zone2"], jobs), PREEMPT)
    assert _outcome(result) in (
        (["pod-a2"], [("p", "node-a")]),
        (["pod-b1"], [("p", "node-b")]),
    )
