"""shuffle action: the case of volcano-sh/volcano pkg/scheduler/actions/shuffle/shuffle_test.go
(TestShuffle), and what the victim-tasks switch and a pdb filter in the same tier change.

The shuffle action is the one caller of `Session.victim_tasks` (issue 25 part 6: the pdb
plugin registered a victim-tasks function nothing called). Without the action (before it was
registered) `actions: "shuffle"` is refused as an unknown action and nothing is evicted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from koordqueue.kube.scheduler.convert import pod_disruption_budget
from koordqueue.scheduler import ClusterSnapshot
from koordqueue.scheduler.api import PodGroupPhase, TaskInfo
from koordqueue.scheduler.framework import open_session, registry, run_actions
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.session import Session

from .harness import Outcome, build, node, pg, pod, queue, rl, run, tiers

RUNNING = PodGroupPhase.RUNNING
PODS = {"pods": "10"}
LOW, HIGH = 10, 100
CHOOSER = "low-priority-victims"
LABEL = "app"


class LowPriorityVictims(Plugin):
    """The test's fake plugin: wants every offered task of the low priority evicted."""

    name = CHOOSER

    def on_session_open(self, session: Session) -> None:
        def choose(candidates: list[TaskInfo]) -> list[TaskInfo]:
            return [task for task in candidates if task.priority == LOW]

        session.add_victim_tasks_fn(self.name, choose)


@pytest.fixture(autouse=True)
def chooser() -> Iterator[None]:
    registry.register_plugin_builder(CHOOSER, LowPriorityVictims)
    yield
    registry.unregister_plugin_builder(CHOOSER)


def _cluster(pdbs: tuple[Mapping[str, Any], ...] = ()) -> ClusterSnapshot:
    """Two nodes; three running PodGroups of queue default; seven running pods, one low
    priority pod per group (pod1-1, pod2-1, pod3-1)."""
    one = rl("1", "2G")
    pods = [
        pod(name, host, True, one, group, priority=prio, labels={LABEL: name})
        for name, host, group, prio in (
            ("pod1-1", "node1", "pg1", LOW),
            ("pod1-2", "node1", "pg1", HIGH),
            ("pod1-3", "node1", "pg1", HIGH),
            ("pod2-1", "node1", "pg2", LOW),
            ("pod2-2", "node2", "pg2", HIGH),
            ("pod3-1", "node2", "pg3", LOW),
            ("pod3-2", "node2", "pg3", HIGH),
        )
    ]
    snapshot = build(
        [node("node1", rl("4", "8Gi", PODS)), node("node2", rl("4", "8Gi", PODS))],
        pods,
        [pg(name, "default", 0, RUNNING) for name in ("pg1", "pg2", "pg3")],
        [queue("default")],
        namespace="test",
    )
    return dataclasses.replace(snapshot, pdbs=tuple(pod_disruption_budget(p) for p in pdbs))


def _shuffle(snapshot: ClusterSnapshot, *plugins: tuple[str, set[str]]) -> Outcome:
    return run(snapshot, tiers(*plugins), "shuffle")


def test_shuffle_evicts_the_victims_the_plugin_chooses() -> None:
    """TestShuffle, "select pods with low priority and evict them"."""
    out = _shuffle(_cluster(), (CHOOSER, {"Victim"}))
    assert out.evicted == ["test/pod1-1", "test/pod2-1", "test/pod3-1"]


def test_shuffle_evictions_say_shuffle() -> None:
    config = dataclasses.replace(tiers((CHOOSER, {"Victim"})), actions=("shuffle",))
    session = open_session(_cluster(), config)
    run_actions(session)
    assert [e.reason for e in session.close().evictions] == ["shuffle"] * 3


def test_shuffle_evicts_nothing_when_the_victim_switch_is_off() -> None:
    assert _shuffle(_cluster(), (CHOOSER, set())).evicted == []


def test_a_pdb_in_the_same_tier_keeps_the_victims_its_budget_protects() -> None:
    """pdb's victim-tasks function filters: a budget allowing no disruption of pod2-1
    keeps it (within a tier the answers are intersected; Volcano unites them, which would
    evict every running pod the budgets allow)."""
    budget = {
        "metadata": {"name": "keep-pod2-1", "namespace": "test"},
        "spec": {"selector": {"matchLabels": {LABEL: "pod2-1"}}},
        "status": {"disruptionsAllowed": 0},
    }
    out = _shuffle(_cluster((budget,)), (CHOOSER, {"Victim"}), ("pdb", {"Victim"}))
    assert out.evicted == ["test/pod1-1", "test/pod3-1"]
