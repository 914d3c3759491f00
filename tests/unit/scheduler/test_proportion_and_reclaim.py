"""proportion: deserved by weight; reclaim takes back what a queue holds beyond it."""

from __future__ import annotations

from koordqueue.scheduler import parse_config, run_session
from koordqueue.scheduler.api import QueueInfo
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.plugins.proportion import ProportionPlugin

from .builders import DEFAULT_TIERS, config, job, node, res, running, snapshot, task

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


def _deserved_cpu(session_plugins: object, queue: str) -> int:
    assert isinstance(session_plugins, ProportionPlugin)
    return session_plugins.attrs[queue].deserved.milli("cpu")


def test_proportion_splits_deserved_by_weight() -> None:
    queues = [QueueInfo("qa", weight=3), QueueInfo("qb", weight=1)]
    jobs = [
        job("a", [task(f"a{i}") for i in range(20)], queue="qa"),
        job("b", [task(f"b{i}") for i in range(20)], queue="qb"),
    ]
    session = open_session(
        snapshot([node("n1", cpu="8", memory="64Gi")], jobs, queues),
        config("allocate", *DEFAULT_TIERS),
    )
    plugin = session.plugins["proportion"]
    assert _deserved_cpu(plugin, "qa") == 6000
    assert _deserved_cpu(plugin, "qb") == 2000


def test_proportion_gives_what_a_small_queue_does_not_need_to_the_others() -> None:
    queues = [QueueInfo("qa", weight=1), QueueInfo("qb", weight=1)]
    jobs = [
        job("a", [task(f"a{i}") for i in range(20)], queue="qa"),
        job("b", [task("b0")], queue="qb"),
    ]
    session = open_session(
        snapshot([node("n1", cpu="8", memory="64Gi")], jobs, queues),
        config("allocate", *DEFAULT_TIERS),
    )
    plugin = session.plugins["proportion"]
    assert _deserved_cpu(plugin, "qb") == 1000
    assert _deserved_cpu(plugin, "qa") == 7000


def test_proportion_caps_deserved_at_capability() -> None:
    queues = [QueueInfo("qa", weight=3, capability=res("2")), QueueInfo("qb", weight=1)]
    jobs = [
        job("a", [task(f"a{i}") for i in range(20)], queue="qa"),
        job("b", [task(f"b{i}") for i in range(20)], queue="qb"),
    ]
    session = open_session(
        snapshot([node("n1", cpu="8", memory="64Gi")], jobs, queues),
        config("allocate", *DEFAULT_TIERS),
    )
    plugin = session.plugins["proportion"]
    assert _deserved_cpu(plugin, "qa") == 2000
    assert _deserved_cpu(plugin, "qb") == 6000


def test_reclaim_takes_back_resources_beyond_deserved() -> None:
    queues = [QueueInfo("qa"), QueueInfo("qb")]
    holder = job("a", [running(f"r{i}", "n1") for i in range(4)], queue="qa")
    # reclaim serves a starving job up to its minAvailable per session (gang's IsStarving)
    wanting = job("b", [task("b0"), task("b1")], queue="qb", min_available=2)
    result = run_session(
        snapshot([node("n1", cpu="4", memory="16Gi")], [holder, wanting], queues), RECLAIM
    )
    assert len(result.evictions) == 2
    assert {e.reason for e in result.evictions} == {"reclaim"}
    assert {e.job for e in result.evictions} == {"a"}
    assert sorted(r.task for r in result.pipelined) == ["b0", "b1"]


def test_reclaim_leaves_non_reclaimable_queues_alone() -> None:
    queues = [QueueInfo("qa", reclaimable=False), QueueInfo("qb")]
    holder = job("a", [running(f"r{i}", "n1") for i in range(4)], queue="qa")
    wanting = job("b", [task("b0"), task("b1")], queue="qb")
    result = run_session(
        snapshot([node("n1", cpu="4", memory="16Gi")], [holder, wanting], queues), RECLAIM
    )
    assert result.evictions == ()


def test_reclaim_does_not_take_from_a_queue_within_its_deserved_share() -> None:
    queues = [QueueInfo("qa"), QueueInfo("qb")]
    holder = job("a", [running("r0", "n1")], queue="qa")  # deserved 1 cpu, holds 1 cpu
    wanting = job("b", [task(f"b{i}", cpu="2") for i in range(4)], queue="qb")
    result = run_session(
        snapshot([node("n1", cpu="2", memory="16Gi")], [holder, wanting], queues), RECLAIM
    )
    assert result.evictions == ()
