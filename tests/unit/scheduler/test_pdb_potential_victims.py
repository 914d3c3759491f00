"""pdb plugin: only candidates the rest of the tier would evict are charged to a budget."""

from __future__ import annotations

from dataclasses import replace

from koordqueue.scheduler import ClusterSnapshot, run_session
from koordqueue.scheduler.api import JobInfo
from koordqueue.scheduler.api.pdb import PodDisruptionBudget
from koordqueue.scheduler.api.selectors import LabelSelector
from koordqueue.scheduler.framework import open_session

from .builders import config, job, node, running, snapshot, task

APP = {"app": "web"}
ONE_DISRUPTION = (PodDisruptionBudget("default", "web", LabelSelector((("app", "web"),)), 1),)


def _node_with(*jobs: JobInfo) -> ClusterSnapshot:
    return replace(snapshot([node("n1", cpu="4")], list(jobs)), pdbs=ONE_DISRUPTION)


def test_a_protected_candidate_listed_first_does_not_spend_the_budget() -> None:
    # "keep" (priority 10) may not be evicted by the priority-5 preemptor; "low" may.
    snap = _node_with(
        job("jk", [running("keep", "n1", cpu="1", labels=APP, priority=10)], priority=10),
        job("jl", [running("low", "n1", cpu="3", labels=APP, priority=1)], priority=1),
        job("p", [task("p", cpu="3")], priority=5),
    )
    result = run_session(snap, config("preempt", ("priority", "gang", "pdb"), ("predicates",)))
    assert [e.task for e in result.evictions] == ["low"]
    assert [r.task for r in result.pipelined] == ["p"]


def test_pdb_alone_in_its_tier_charges_every_candidate() -> None:
    # No other plugin of the tier says who is a potential victim: every candidate is one.
    snap = _node_with(
        job("ja", [running("a", "n1", cpu="2", labels=APP)]),
        job("jb", [running("b", "n1", cpu="2", labels=APP)]),
        job("p", [task("p", cpu="1")]),
    )
    session = open_session(snap, config("preempt", ("pdb",), ("predicates",)))
    preemptor = session.jobs["p"].tasks["p"]
    candidates = list(session.nodes["n1"].tasks.values())
    assert [t.uid for t in session.preemptable(preemptor, candidates)] == ["a"]
