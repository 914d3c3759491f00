"""PDB-aware preemption: cases of kubernetes/kubernetes
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption_test.go, TestDryRunPreemption
(nodes of veryLargeRes = 500m cpu / 500 memory; priorities mid 100, high 1000; resources
mediumRes 200m/200, largeRes 300m/300, veryLargeRes 500m/500), run through koordqueue's
preempt action with the opt-in `pdb` plugin beside `priority` (each pod its own job).

kube-scheduler's dry run lists every candidate node with its victims and NumPDBViolations;
its SelectCandidate then takes the node with the fewest violations. The cases where that
choice has no violation are what the pdb plugin must reproduce. Where every candidate
violates a budget kube-scheduler still preempts (the PDB is best effort) while Volcano's pdb
plugin, which koordqueue follows, evicts nothing: those cases are run both ways (without the
plugin: kube-scheduler's victims; with it: none), the difference documented in
docs/plugins.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot, parse_config, run_session
from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api.pdb import PodDisruptionBudget
from koordqueue.scheduler.api.selectors import LabelSelector
from koordqueue.scheduler.framework.result import SessionResult

MID, HIGH = 100, 1000
MEDIUM = Resources.of(cpu="200m", memory="200")
LARGE = Resources.of(cpu="300m", memory="300")
VERY_LARGE = Resources.of(cpu="500m", memory="500")
FOO = {"app": "foo"}


def _config(pdb: bool) -> str:
    return f"""
actions: "preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
{"  - name: pdb" if pdb else ""}
- plugins:
  - name: predicates
"""


WITH_PDB = parse_config(_config(True))
WITHOUT_PDB = parse_config(_config(False))


def _pod(name: str, node: str, request: Resources, labels: Mapping[str, str] | None) -> TaskInfo:
    """st.MakePod().Name(name).UID(name).Node(node).Label(...).Priority(mid).Req(request)."""
    return TaskInfo(
        name,
        name,
        "default",
        resreq=request,
        status=TaskStatus.RUNNING,
        node_name=node,
        labels=dict(labels or {}),
    )


def _cluster(
    nodes: Sequence[str],
    init: Sequence[tuple[str, str, Resources, Mapping[str, str] | None]],
    preemptor: Resources,
    pdbs: Sequence[PodDisruptionBudget],
) -> ClusterSnapshot:
    jobs = [JobInfo(name, priority=MID, tasks=[_pod(name, *rest)]) for name, *rest in init]
    pending = TaskInfo("p", "p", "default", resreq=preemptor)
    jobs.append(JobInfo("p", priority=HIGH, tasks=[pending]))
    return ClusterSnapshot(
        [NodeInfo(n, VERY_LARGE) for n in nodes], jobs, [QueueInfo("default")], pdbs=tuple(pdbs)
    )


def _foo_pdb(allowed: int, disrupted: frozenset[str] = frozenset()) -> PodDisruptionBudget:
    """A PDB selecting app=foo (the cases' PDBs have no name or namespace: the default one)."""
    return PodDisruptionBudget("default", "", LabelSelector((("app", "foo"),)), allowed, disrupted)


def _outcome(result: SessionResult) -> tuple[list[str], list[tuple[str, str]]]:
    return (
        sorted(e.task for e in result.evictions),
        [(r.task, r.node) for r in result.pipelined],
    )


def _same_pdb(disrupted: frozenset[str]) -> ClusterSnapshot:
    return _cluster(
        ["node1"],
        [("p1.1", "node1", MEDIUM, FOO), ("p1.2", "node1", MEDIUM, FOO)],
        VERY_LARGE,
        [_foo_pdb(1, disrupted)],
    )


def test_victim_already_in_disrupted_pods_makes_no_violation() -> None:
    """default_preemption_test.go TestDryRunPreemption, "preemption with violation of the pdb
    with pod whose eviction was processed, the victim belongs to DisruptedPods": victims
    p1.1 and p1.2 on node1, NumPDBViolations 0."""
    result = run_session(_same_pdb(frozenset({"p1.2"})), WITH_PDB)
    assert _outcome(result) == (["p1.1", "p1.2"], [("p", "node1")])


def test_preemption_picks_the_node_without_pdb_violation() -> None:
    """default_preemption_test.go TestDryRunPreemption, "preemption looks past numCandidates
    until a non-PDB violating node is found": candidates node1 (p1, 1 violation), node3 (p3,
    none), node5 (p5, 1 violation); SelectCandidate takes the fewest violations: node3."""
    init = [
        ("p1", "node1", LARGE, FOO),
        ("p2", "node2", LARGE, FOO),
        ("p3", "node3", LARGE, None),
        ("p4", "node4", LARGE, None),
        ("p5", "node5", LARGE, FOO),
    ]
    nodes = ["node1", "node2", "node3", "node4", "node5"]
    result = run_session(_cluster(nodes, init, LARGE, [_foo_pdb(0)]), WITH_PDB)
    assert _outcome(result) == (["p3"], [("p", "node3")])


def test_violating_victims_without_alternative_are_evicted_only_without_the_pdb_plugin() -> None:
    """default_preemption_test.go TestDryRunPreemption, "preemption with violation of same
    pdb": kube-scheduler evicts p1.1 and p1.2 (NumPDBViolations 1, no other node). Without
    the pdb plugin koordqueue takes the same victims; with it (Volcano's pdb semantics) the
    budget is never broken and nothing is evicted."""
    assert _outcome(run_session(_same_pdb(frozenset()), WITHOUT_PDB)) == (
        ["p1.1", "p1.2"],
        [("p", "node1")],
    )
    assert _outcome(run_session(_same_pdb(frozenset()), WITH_PDB)) == ([], [])


def test_another_pods_disrupted_entry_does_not_lift_the_violation() -> None:
    """default_preemption_test.go TestDryRunPreemption, "preemption with violation of the pdb
    with pod whose eviction was processed, the victim doesn't belong to DisruptedPods" (p2 in
    DisruptedPods): kube-scheduler evicts both with 1 violation; with the pdb plugin both
    victims are charged, the budget of 1 does not cover them, and nothing is evicted."""
    assert _outcome(run_session(_same_pdb(frozenset({"p2"})), WITHOUT_PDB)) == (
        ["p1.1", "p1.2"],
        [("p", "node1")],
    )
    assert _outcome(run_session(_same_pdb(frozenset({"p2"})), WITH_PDB)) == ([], [])
