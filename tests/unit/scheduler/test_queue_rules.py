"""Queue priority, queue state and best-effort queues in capacity and proportion (issue 18)."""

from __future__ import annotations

import pytest

from koordqueue.scheduler import SchedulerConfig, parse_config, run_session
from koordqueue.scheduler.api import PodGroupPhase, QueueInfo
from koordqueue.scheduler.framework import open_session

from .builders import job, node, res, running, snapshot, task


def _config(plugin: str, actions: str = "enqueue, allocate, reclaim") -> SchedulerConfig:
    return parse_config(f"""
actions: "{actions}"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: {plugin}
""")


@pytest.mark.parametrize("plugin", ["capacity", "proportion"])
def test_closed_queue_gets_no_allocation_and_keeps_what_runs(plugin: str) -> None:
    queues = [QueueInfo("q", state="Closed")]
    jobs = [
        job("holder", [running("r0", "n1")], queue="q"),
        job("waiting", [task("t0")], queue="q"),
    ]
    result = run_session(snapshot([node("n1", cpu="8")], jobs, queues), _config(plugin))
    assert result.binds == ()
    assert result.evictions == ()


@pytest.mark.parametrize("plugin", ["capacity", "proportion"])
def test_closing_queue_does_not_enqueue_a_job_with_min_resources(plugin: str) -> None:
    queues = [QueueInfo("q", state="Closing")]
    pending = job(
        "pg", [task("t0")], queue="q", phase=PodGroupPhase.PENDING, min_resources=res("1", "1Gi")
    )
    result = run_session(snapshot([node("n1", cpu="8")], [pending], queues), _config(plugin))
    assert result.binds == ()
    assert result.phase_updates == ()


def test_higher_priority_queue_is_served_first() -> None:
    queues = [QueueInfo("a-low", priority=1), QueueInfo("b-high", priority=10)]
    jobs = [
        job("low", [task("l0", cpu="2")], queue="a-low"),
        job("high", [task("h0", cpu="2")], queue="b-high"),
    ]
    result = run_session(snapshot([node("n1", cpu="2")], jobs, queues), _config("capacity"))
    assert [b.task for b in result.binds] == ["h0"]


@pytest.mark.parametrize("plugin", ["capacity", "proportion"])
def test_queue_priority_wins_over_a_lower_share(plugin: str) -> None:
    """The busy priority-10 queue (higher share) still orders before the idle priority-1 one."""
    low, high = QueueInfo("low", priority=1), QueueInfo("high", priority=10)
    jobs = [
        job("busy", [running("r0", "n1"), task("h0")], queue="high"),
        job("idle", [task("l0")], queue="low"),
    ]
    session = open_session(
        snapshot([node("n1", cpu="4")], jobs, [low, high]), _config(plugin, "allocate")
    )
    assert session.queue_order_less(high, low)
    assert not session.queue_order_less(low, high)


def test_queue_with_deserved_goes_before_a_best_effort_queue_at_equal_share() -> None:
    """Both queues have share 1: the best-effort one by definition, the other at its
    deserved; the one with a deserved is served first."""
    queues = [QueueInfo("a-best-effort"), QueueInfo("b-deserved", deserved=res("1", "1Gi"))]
    jobs = [
        job("held", [running("r0", "n1")], queue="b-deserved"),
        job("be", [task("e0")], queue="a-best-effort"),
        job("de", [task("d0")], queue="b-deserved"),
    ]
    result = run_session(
        snapshot([node("n1", cpu="2", memory="2Gi")], jobs, queues), _config("capacity")
    )
    assert [b.task for b in result.binds] == ["d0"]
