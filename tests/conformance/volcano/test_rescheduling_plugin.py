"""rescheduling plugin: cases of volcano-sh/volcano pkg/scheduler/plugins/rescheduling
(node_utilization_util_test.go TestSortPods, the argument cases of rescheduling_test.go in
tests/unit/scheduler/test_rescheduling_args.py), then the plugin in a session: the shuffle
action evicting from an overloaded node once an interval has passed, never at the first
session, and strategies Volcano does not have named in a warning.

TestSortPods' QoS cases are transcribed as far as a task knows its QoS: best-effort (no
request) first; Volcano's Burstable-before-Guaranteed needs limits, which a task does not
carry, so those pods order by creation alone (the case below says which).

Switched off and run (`test_each_case_fails_with_rescheduling_off`: rescheduling left out
of the conf): the session evicting from the hot node fails; checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot
from koordqueue.scheduler.api import PodGroupPhase, TaskInfo, TaskStatus
from koordqueue.scheduler.api import load_names as ln
from koordqueue.scheduler.api.node_usage import NodeUsage
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.plugins.rescheduling import ReschedulingPlugin
from koordqueue.scheduler.plugins.rescheduling_lnu import eviction_order

from .harness import build, node, pg, pod, queue, rl, run, tiers

RUNNING = PodGroupPhase.RUNNING
NOW = [1_800_000_000.0]
_off = False


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    NOW[0] = 1_800_000_000.0
    monkeypatch.setattr(ReschedulingPlugin, "clock", staticmethod(lambda: NOW[0]))
    monkeypatch.setattr(ReschedulingPlugin, "last_run", None)
    yield


def _task(name: str, priority: int = 0, creation: float = 0.0, best_effort: bool = False
          ) -> TaskInfo:
    request = Resources() if best_effort else Resources.parse({"cpu": "1"})
    return TaskInfo(name, name, resreq=request, priority=priority, creation=creation,
                    status=TaskStatus.RUNNING)


@pytest.mark.parametrize(("tasks", "want"), [
    ([], []),
    ([_task("A", 1), _task("B", 2)], ["A", "B"]),
    ([_task("A"), _task("B"), _task("C", best_effort=True)], ["C", "A", "B"]),
    ([_task("A", creation=1), _task("AA", creation=2), _task("B", creation=1),
      _task("BB", creation=2), _task("C", creation=1, best_effort=True),
      _task("CC", creation=2, best_effort=True)], ["CC", "C", "AA", "BB", "A", "B"]),
])
def test_sort_pods(tasks: list[TaskInfo], want: list[str]) -> None:
    """TestSortPods: lower priority first; best-effort first; then the newest. Volcano's
    last case gives CC, C, BB, B, AA, A (B* Burstable, A* Guaranteed); here A* and B* are
    alike, so newest first and the sort keeps their order."""
    assert [t.name for t in sorted(tasks, key=eviction_order)] == want


# --- in a session -------------------------------------------------------------------------
ARGS = {"interval": "5m",
        "strategies": [{"name": "lowNodeUtilization", "parameters": {
            "thresholds": {"cpu": 20, "memory": 20},
            "targetThresholds": {"cpu": 70, "memory": 70}}}]}


def _cluster(age: float = 0.0) -> ClusterSnapshot:
    nodes = [node("hot", rl("10", "10Gi", {"pods": "20"})),
             node("cold", rl("10", "10Gi", {"pods": "20"}))]
    pods = [pod(f"p{i}", "hot", True, rl("2", "2Gi"), "pg1", priority=i) for i in range(4)]
    snapshot = build(nodes, pods, [pg("pg1", "q1", 1, RUNNING)], [queue("q1")], "c1")
    return dataclasses.replace(snapshot, node_usage={
        "hot": NodeUsage(90.0, 85.0, NOW[0] - age),
        "cold": NodeUsage(10.0, 15.0, NOW[0] - age)})


def _shuffle(args: dict[str, object] = ARGS, age: float = 0.0) -> list[str]:
    plugin = "binpack" if _off else ln.RESCHEDULING
    config = tiers((plugin, {"Victim"}), arguments={plugin: args})
    return run(_cluster(age), config, "shuffle").evicted


def test_shuffle_evicts_from_the_hot_node_once_an_interval_has_passed() -> None:
    """90% cpu over the 70% target: p0 (lowest priority, 2 of 10 cpus) goes, leaving 70%,
    which is not over the target, so it is the only one. The first session starts the
    clock (Volcano's lastRescheduleTime is set at start); one interval later it runs; a
    session right after does not."""
    assert _shuffle() == []
    NOW[0] += 300
    assert _shuffle() == ["c1/p0"]
    NOW[0] += 60
    assert _shuffle() == []


def test_a_stale_reading_moves_nothing() -> None:
    """Readings six minutes old: no node is low or high, nothing moves (fresh: p0 goes)."""
    ReschedulingPlugin.last_run = NOW[0] - 600
    assert _shuffle(age=360) == []
    ReschedulingPlugin.last_run = NOW[0] - 600
    assert _shuffle(age=0) == ["c1/p0"]


def test_unknown_strategies_are_named_in_a_warning() -> None:
    args = {"strategies": [{"name": "highNodeUtilization"}, {"name": "lowNodeUtilization"}]}
    config = tiers((ln.RESCHEDULING, {"Victim"}), arguments={ln.RESCHEDULING: args})
    session = open_session(_cluster(), config)
    assert session.warnings == [
        "rescheduling: strategies[0]: unknown strategy 'highNodeUtilization' "
        "(known: lowNodeUtilization); skipped"]
    config = tiers((ln.RESCHEDULING, {"Victim"}),
                   arguments={ln.RESCHEDULING: {"strategies": "lowNodeUtilization"}})
    session = open_session(_cluster(), config)
    assert session.warnings == ["rescheduling: strategies must be a list of {name, "
                                "parameters}, got str; using lowNodeUtilization"]


def test_each_case_fails_with_rescheduling_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(__name__ + "._off", True)
    ReschedulingPlugin.last_run = NOW[0] - 600
    assert _shuffle() != ["c1/p0"]
