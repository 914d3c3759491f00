"""preempt: a starving job evicts only lower-priority tasks of its own queue."""

from __future__ import annotations

from koordqueue.scheduler import run_session

from .builders import DEFAULT_TIERS, config, job, node, running, snapshot, task

PREEMPT = config("enqueue, allocate, preempt", *DEFAULT_TIERS)


def test_preempt_evicts_only_lower_priority_tasks() -> None:
    jobs = [
        job("low", [running("l", "n1")], priority=1),
        job("same", [running("s", "n1")], priority=5),
        job("high", [running("h", "n1")], priority=10),
        job("new", [task("p")], priority=5),
    ]
    result = run_session(snapshot([node("n1", cpu="3")], jobs), PREEMPT)
    assert [(e.task, e.reason) for e in result.evictions] == [("l", "preempt")]
    assert [(r.task, r.node) for r in result.pipelined] == [("p", "n1")]


def test_preempt_evicts_nothing_when_all_running_tasks_have_higher_priority() -> None:
    jobs = [
        job("high", [running("h", "n1", cpu="2")], priority=10),
        job("new", [task("p", cpu="2")], priority=5),
    ]
    result = run_session(snapshot([node("n1", cpu="2")], jobs), PREEMPT)
    assert result.evictions == ()
    assert result.pipelined == ()


def test_preempt_does_not_cross_queues() -> None:
    from koordqueue.scheduler.api import QueueInfo

    queues = [QueueInfo("qa"), QueueInfo("qb")]
    jobs = [
        job("low", [running("l", "n1", cpu="2")], priority=1, queue="qa"),
        job("new", [task("p", cpu="2")], priority=9, queue="qb"),
    ]
    result = run_session(snapshot([node("n1", cpu="2")], jobs, queues), PREEMPT)
    assert result.evictions == ()


def test_preempt_spares_system_critical_pods() -> None:
    jobs = [
        job("sys", [running("c", "n1", priority_class_name="system-node-critical")], priority=0),
        job("new", [task("p")], priority=9),
    ]
    result = run_session(snapshot([node("n1", cpu="1")], jobs), PREEMPT)
    assert result.evictions == ()


def test_preempt_does_not_break_a_victim_gang_below_min_available() -> None:
    jobs = [
        job("gang", [running("g1", "n1"), running("g2", "n1")], priority=1, min_available=2),
        job("new", [task("p")], priority=9),
    ]
    result = run_session(snapshot([node("n1", cpu="2")], jobs), PREEMPT)
    assert result.evictions == ()
