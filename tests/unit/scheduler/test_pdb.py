"""pdb plugin: preempt and reclaim pick no victim whose eviction would break a PodDisruptionBudget,
counting the disruptions the session itself has already spent."""

from __future__ import annotations

from dataclasses import replace

from koordqueue.scheduler import ClusterSnapshot, parse_config, run_session
from koordqueue.scheduler.api import QueueInfo, TaskInfo
from koordqueue.scheduler.api.pdb import PodDisruptionBudget
from koordqueue.scheduler.api.selectors import LabelSelector, LabelSelectorRequirement
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.indexed import index_snapshot
from koordqueue.scheduler.framework.registry import get_plugin_builder
from koordqueue.scheduler.framework.statement import Statement
from koordqueue.scheduler.plugins.pdb import PdbPlugin

from .builders import config, job, node, running, snapshot, task

APP = {"app": "web"}
WEB = LabelSelector((("app", "web"),))
PREEMPT = config("preempt", ("priority", "gang", "conformance", "pdb"), ("predicates",))
PREEMPT_PER_CALL = parse_config("""
actions: "preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: pdb
    arguments:
      pdb.countSessionEvictions: false
- plugins:
  - name: predicates
""")
RECLAIM = parse_config("""
actions: "reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enableReclaimable: false
  - name: pdb
- plugins:
  - name: conformance
  - name: predicates
  - name: proportion
""")


def web(name: str, node_name: str, cpu: str = "2") -> TaskInfo:
    """A running pod labelled app=web (the budgets below select it)."""
    return running(name, node_name, cpu=cpu, labels=APP)


def budget(
    allowed: int, selector: LabelSelector | None = WEB, disrupted: frozenset[str] = frozenset()
) -> PodDisruptionBudget:
    return PodDisruptionBudget("default", "web", selector, allowed, disrupted)


def with_pdbs(snap: ClusterSnapshot, *pdbs: PodDisruptionBudget) -> ClusterSnapshot:
    return replace(snap, pdbs=pdbs)


def two_nodes_two_preemptors() -> ClusterSnapshot:
    """Two full nodes, each running one app=web pod; two pending high-priority jobs of one
    pod each, each pod a node's worth."""
    jobs = [
        job("low1", [web("w1", "n1")], priority=1),
        job("low2", [web("w2", "n2")], priority=1),
        job("high1", [task("p1", cpu="2")], priority=10),
        job("high2", [task("p2", cpu="2")], priority=10),
    ]
    return snapshot([node("n1", cpu="2"), node("n2", cpu="2")], jobs)


def test_pdb_is_a_registered_opt_in_plugin() -> None:
    assert get_plugin_builder("pdb") is PdbPlugin
    # Not named in a tier: budgets are ignored, the only victim is evicted.
    snap = with_pdbs(two_nodes_two_preemptors(), budget(0))
    result = run_session(snap, config("preempt", ("priority", "gang", "conformance")))
    assert sorted(e.task for e in result.evictions) == ["w1", "w2"]


def test_preempt_keeps_a_pod_whose_budget_allows_no_disruption() -> None:
    result = run_session(with_pdbs(two_nodes_two_preemptors(), budget(0)), PREEMPT)
    assert result.evictions == ()
    assert result.pipelined == ()


def test_preempt_takes_the_victim_a_budget_does_not_cover_when_one_exists() -> None:
    jobs = [
        job("low1", [web("w1", "n1")], priority=1),
        job("low2", [running("x2", "n2", cpu="2", labels={"app": "batch"})], priority=1),
        job("high", [task("p", cpu="2")], priority=10),
    ]
    snap = with_pdbs(snapshot([node("n1", cpu="2"), node("n2", cpu="2")], jobs), budget(0))
    result = run_session(snap, PREEMPT)
    assert [e.task for e in result.evictions] == ["x2"]
    assert [(r.task, r.node) for r in result.pipelined] == [("p", "n2")]


def test_two_preemptors_in_one_session_do_not_both_spend_the_last_disruption() -> None:
    result = run_session(with_pdbs(two_nodes_two_preemptors(), budget(1)), PREEMPT)
    assert len(result.evictions) == 1


def test_two_preemptors_both_evict_with_per_call_counting_as_volcano_does() -> None:
    """pdb.countSessionEvictions: false re-reads the budget on every call (Volcano)."""
    result = run_session(with_pdbs(two_nodes_two_preemptors(), budget(1)), PREEMPT_PER_CALL)
    assert sorted(e.task for e in result.evictions) == ["w1", "w2"]


def test_budget_is_counted_the_same_over_an_indexed_snapshot() -> None:
    snap = index_snapshot(with_pdbs(two_nodes_two_preemptors(), budget(1)))
    assert len(snap.pdbs) == 1
    result = run_session(snap, PREEMPT)
    assert len(result.evictions) == 1


def test_a_discarded_eviction_gives_its_disruption_back() -> None:
    session = open_session(with_pdbs(two_nodes_two_preemptors(), budget(1)), PREEMPT)
    w1 = session.jobs["low1"].tasks["w1"]
    w2 = session.jobs["low2"].tasks["w2"]
    statement = Statement(session)
    statement.evict(w1, "preempt")
    assert session.preemptable(session.jobs["high1"].tasks["p1"], [w2]) == []
    statement.discard()
    assert session.preemptable(session.jobs["high1"].tasks["p1"], [w2]) == [w2]


def test_budget_covers_only_its_namespace_and_labelled_pods() -> None:
    pdb = budget(0)
    assert pdb.covers("default", APP)
    assert not pdb.covers("other", APP)
    assert not pdb.covers("default", {})
    assert not pdb.covers("default", {"app": "batch"})


def test_missing_empty_or_invalid_selector_covers_nothing() -> None:
    assert not budget(0, None).covers("default", APP)
    assert not budget(0, LabelSelector()).covers("default", APP)
    bad = LabelSelector((), (LabelSelectorRequirement("app", "In", ()),))
    assert not budget(0, bad).covers("default", APP)


def test_a_pod_already_in_disrupted_pods_is_not_charged() -> None:
    pdb = budget(0, disrupted=frozenset({"w1"}))
    assert not pdb.charges("default", "w1", APP)
    assert pdb.charges("default", "w2", APP)


def test_unlabelled_pods_stay_victims() -> None:
    jobs = [
        job("low", [running("u", "n1", cpu="2")], priority=1),
        job("high", [task("p", cpu="2")], priority=10),
    ]
    snap = with_pdbs(snapshot([node("n1", cpu="2")], jobs), budget(0, LabelSelector()))
    result = run_session(snap, PREEMPT)
    assert [e.task for e in result.evictions] == ["u"]


def _reclaim_snapshot(min_available: int) -> ClusterSnapshot:
    queues = [QueueInfo("qa"), QueueInfo("qb")]
    holder = job("a", [web(f"r{i}", "n1", cpu="1") for i in range(4)], queue="qa")
    wanting = job("b", [task("b0"), task("b1")], queue="qb", min_available=min_available)
    return snapshot([node("n1", cpu="4", memory="16Gi")], [holder, wanting], queues)


def test_reclaim_keeps_a_pod_whose_budget_allows_no_disruption() -> None:
    snap = _reclaim_snapshot(2)
    assert len(run_session(snap, RECLAIM).evictions) == 2
    assert run_session(with_pdbs(snap, budget(0)), RECLAIM).evictions == ()


def test_reclaim_evicts_no_more_than_the_budget_allows() -> None:
    result = run_session(with_pdbs(_reclaim_snapshot(1), budget(1)), RECLAIM)
    assert len(result.evictions) == 1
    # A gang needing two victims gets none: one is all the budget allows.
    assert run_session(with_pdbs(_reclaim_snapshot(2), budget(1)), RECLAIM).evictions == ()


def test_pdb_keeps_an_indexed_session_quiet() -> None:
    """The plugin answers nothing about jobs (only victims), so enabling it must not make an
    indexed session scan every job."""
    snap = index_snapshot(with_pdbs(two_nodes_two_preemptors(), budget(1)))
    assert open_session(snap, PREEMPT)._quiet
