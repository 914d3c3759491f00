"""Preempt and reclaim lift what their victims contribute to inter-pod anti-affinity and
topology spread: the counts follow the statement's evictions, a discarded statement puts them
back, and a node is taken only once its filters pass."""

from __future__ import annotations

from koordqueue.scheduler import parse_config, run_session
from koordqueue.scheduler.actions.preempt_nodes import filters_pass
from koordqueue.scheduler.api import NodeInfo, QueueInfo, TaskInfo
from koordqueue.scheduler.api.selectors import LabelSelector
from koordqueue.scheduler.api.task_info import (
    PodAffinity,
    PodAffinityTerm,
    TopologySpreadConstraint,
)
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.statement import Statement

from .builders import config, job, node, running, snapshot, task

HOST = "kubernetes.io/hostname"
PREEMPT = config("preempt", ("priority", "gang", "conformance"), ("predicates",))
RECLAIM = parse_config("""
actions: "reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
    enableReclaimable: false
- plugins:
  - name: conformance
  - name: predicates
  - name: proportion
""")


def _selects(value: str) -> LabelSelector:
    return LabelSelector((("app", value),))


def _anti(value: str) -> PodAffinity:
    """Required anti-affinity, per node, against pods labelled app=<value>."""
    term = PodAffinityTerm(HOST, _selects(value), frozenset({"default"}))
    return PodAffinity(anti_required=(term,))


def _host_node(name: str, cpu: str = "4") -> NodeInfo:
    return node(name, cpu=cpu, labels={HOST: name})


def _pending(session: Session, job_uid: str, uid: str) -> TaskInfo:
    return session.jobs[job_uid].tasks[uid]


def test_discarded_eviction_restores_the_victims_anti_affinity() -> None:
    victim = running("v", "n1", labels={"app": "v"}, pod_affinity=_anti("p"))
    jobs = [job("low", [victim], priority=1), job("high", [task("p", labels={"app": "p"})])]
    session = open_session(snapshot([_host_node("n1")], jobs), PREEMPT)
    preemptor = _pending(session, "high", "p")
    assert not filters_pass(session, preemptor, 0)
    statement = Statement(session)
    statement.evict(session.jobs["low"].tasks["v"], "preempt")
    assert filters_pass(session, preemptor, 0)
    statement.discard()
    assert not filters_pass(session, preemptor, 0)


def test_discarded_eviction_restores_the_victims_share_of_a_spread_skew() -> None:
    spread = TopologySpreadConstraint(1, HOST, selector=_selects("s"))
    victim = running("v", "n1", labels={"app": "s"})
    incoming = task("p", labels={"app": "s"}, spread=(spread,))
    jobs = [job("low", [victim], priority=1), job("high", [incoming], priority=2)]
    nodes = [_host_node("n1"), _host_node("n2", cpu="0")]
    session = open_session(snapshot(nodes, jobs), PREEMPT)
    preemptor = _pending(session, "high", "p")
    assert not filters_pass(session, preemptor, 0)  # skew on n1: 1 + 1 - 0 > 1
    statement = Statement(session)
    statement.evict(session.jobs["low"].tasks["v"], "preempt")
    assert filters_pass(session, preemptor, 0)
    statement.discard()
    assert not filters_pass(session, preemptor, 0)


def test_preempt_evicts_in_victim_order_until_the_filters_pass() -> None:
    # p fits n1's free cpu; b's anti-affinity rejects it. Victim order takes "a" (lowest
    # priority) first, the node still fails, so eviction goes on until "b" is gone. As in
    # Volcano there is no reprieve (kube-scheduler would give "a" back: docs/plugins.md).
    a = running("a", "n1")
    b = running("b", "n1", pod_affinity=_anti("p"))
    jobs = [
        job("ja", [a], priority=1),
        job("jb", [b], priority=2),
        job("high", [task("p", labels={"app": "p"})], priority=10),
    ]
    result = run_session(snapshot([_host_node("n1", cpu="3")], jobs), PREEMPT)
    assert sorted(e.task for e in result.evictions) == ["a", "b"]
    assert [(r.task, r.node) for r in result.pipelined] == [("p", "n1")]


def test_preempt_evicts_nothing_when_the_blocker_has_higher_priority() -> None:
    low = running("low", "n1")
    blocker = running("blocker", "n1", pod_affinity=_anti("p"))
    jobs = [
        job("jl", [low], priority=1),
        job("jb", [blocker], priority=100),
        job("high", [task("p", labels={"app": "p"})], priority=10),
    ]
    result = run_session(snapshot([_host_node("n1")], jobs), PREEMPT)
    assert result.evictions == ()
    assert result.pipelined == ()


def test_reclaim_lifts_a_reclaimable_queues_anti_affinity() -> None:
    # qa holds 2 of 3 cpus beyond its deserved 1.5; b0 fits n1's free cpu but r0's
    # anti-affinity rejects it until r0 is reclaimed (r1 is not preemptable).
    r0 = running("r0", "n1", pod_affinity=_anti("b"))
    r1 = running("r1", "n1", preemptable=False)
    holder = job("a", [r0, r1], queue="qa")
    wanting = job(
        "b", [task("b0", labels={"app": "b"}), task("b1", labels={"app": "b"})], queue="qb"
    )
    queues = [QueueInfo("qa"), QueueInfo("qb")]
    result = run_session(
        snapshot([_host_node("n1", cpu="3")], [holder, wanting], queues),
        RECLAIM,
    )
    assert [e.task for e in result.evictions] == ["r0"]
    assert [(r.task, r.node) for r in result.pipelined] == [("b0", "n1")]


def test_an_eviction_that_leaves_a_siblings_anti_affinity_in_place_is_undone() -> None:
    # Both pods of "high" repel each other per host; each node has 1 free cpu beside a
    # low-priority pod of 3. p1 goes to n1 without evicting. For p2, n1 is a candidate
    # (anti-affinity may be lifted by evictions) and evicting v1 frees the room, but p1's
    # pipelined pod still repels p2 there: n1's eviction is undone and p2 takes n2's free cpu.
    lows = [job(f"low{i}", [running(f"v{i}", f"n{i}", cpu="3")], priority=1) for i in (1, 2)]
    pods = [task(f"p{i}", cpu="1", labels={"app": "p"}, pod_affinity=_anti("p")) for i in (1, 2)]
    jobs = [*lows, job("high", pods, min_available=2, priority=10)]
    result = run_session(snapshot([_host_node("n1", "4"), _host_node("n2", "4")], jobs), PREEMPT)
    assert result.evictions == ()
    assert sorted((r.task, r.node) for r in result.pipelined) == [("p1", "n1"), ("p2", "n2")]
