"""Only potential victims are charged to a PodDisruptionBudget: kubernetes/kubernetes
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption_test.go,
TestDryRunPreemption, run through koordqueue's preempt action with `priority` and the
opt-in `pdb` plugin in one tier (each pod its own job; priorities mid 100, high 1000, very
high 2000; mediumRes 200m/200, veryLargeRes 500m/500; nodes of veryLargeRes).

kube-scheduler's selectVictimsOnNode hands filterPodsWithPDBViolation only the pods of
lower priority than the preemptor; a pod the preemptor may not evict never uses up a
budget. Volcano's pdb filter charges every candidate it is given, so a protected
higher-priority pod listed first on the node would spend the budget and drop a real victim.
"""

from __future__ import annotations

from collections.abc import Mapping

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot, parse_config, run_session
from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api.pdb import PodDisruptionBudget
from koordqueue.scheduler.api.selectors import LabelSelector
from koordqueue.scheduler.framework.result import SessionResult

MID, HIGH, VERY_HIGH = 100, 1000, 2000
MEDIUM = Resources.of(cpu="200m", memory="200")
VERY_LARGE = Resources.of(cpu="500m", memory="500")
FOO = {"app": "foo"}
WITH_PDB = parse_config(
    """
actions: "preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: pdb
- plugins:
  - name: predicates
"""
)


def _running(name: str, priority: int, request: Resources, labels: Mapping[str, str]) -> JobInfo:
    task = TaskInfo(
        name,
        name,
        "default",
        resreq=request,
        priority=priority,
        status=TaskStatus.RUNNING,
        node_name="node1",
        labels=dict(labels),
    )
    return JobInfo(name, priority=priority, tasks=[task])


def _outcome(result: SessionResult) -> tuple[list[str], list[tuple[str, str]]]:
    return (
        sorted(e.task for e in result.evictions),
        [(r.task, r.node) for r in result.pipelined],
    )


def _case() -> ClusterSnapshot:
    """p0 (app=foo, very high priority, no request) first on node1, then the case's pods."""
    jobs = [
        _running("p0", VERY_HIGH, Resources.of(), FOO),
        _running("p1.1", MID, MEDIUM, FOO),
        _running("p1.2", MID, MEDIUM, FOO),
        JobInfo(
            "p",
            priority=HIGH,
            tasks=[TaskInfo("p", "p", "default", resreq=VERY_LARGE, priority=HIGH)],
        ),
    ]
    budget = PodDisruptionBudget(
        "default", "", LabelSelector((("app", "foo"),)), 1, frozenset({"p1.2"})
    )
    return ClusterSnapshot(
        [NodeInfo("node1", VERY_LARGE)], jobs, [QueueInfo("default")], pdbs=(budget,)
    )


def test_a_higher_priority_pod_does_not_spend_the_budget_of_the_victims() -> None:
    """default_preemption_test.go TestDryRunPreemption, "preemption with violation of the pdb
    with pod whose eviction was processed, the victim belongs to DisruptedPods" (p1.1 and
    p1.2 of app=foo, mid priority, mediumRes on node1; the budget allows 1 disruption and
    lists p1.2 in DisruptedPods; p requests veryLargeRes): victims p1.1 and p1.2,
    NumPDBViolations 0. Added: p0, of app=foo and very high priority, requesting nothing,
    listed first on node1. kube-scheduler's outcome is unchanged (p0 is no potential victim,
    so it is never charged); charging p0 would leave p1.1 violating and nothing evicted."""
    assert _outcome(run_session(_case(), WITH_PDB)) == (["p1.1", "p1.2"], [("p", "node1")])


def test_volcano_charging_lets_the_higher_priority_pod_spend_the_budget() -> None:
    """The same case with `pdb.potentialVictimsOnly: false` (Volcano's pdb filter, which
    charges every candidate in the order given): p0 spends the one disruption, p1.1 is
    dropped as violating, p1.2 alone does not make room, and nothing is evicted."""
    volcano = parse_config(
        """
actions: "preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: pdb
    arguments:
      pdb.potentialVictimsOnly: false
- plugins:
  - name: predicates
"""
    )
    assert _outcome(run_session(_case(), volcano)) == ([], [])
