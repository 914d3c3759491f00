"""shuffle action: the case of volcano-sh/volcano pkg/scheduler/actions/shuffle/shuffle_test.go
(TestShuffle), and what the victim-tasks switch and a pdb beside the choosing plugin change
(Volcano's tier rule for victim tasks: union within a tier, the first tier with a victim
decides; volcano-sh/volcano framework/session_plugins.go VictimTasks, the same in v1.14.1
and v1.15.1). Volcano's shuffle_test.go has that one case; pdb_test.go's VictimTasks cases
are in test_pdb_plugin.py.

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
ALL_PODS = ("pod1-1", "pod1-2", "pod1-3", "pod2-1", "pod2-2", "pod3-1", "pod3-2")
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


def _shuffle(
    snapshot: ClusterSnapshot,
    *plugins: tuple[str, set[str]],
    separate: tuple[str, set[str]] | None = None,
) -> Outcome:
    """shuffle with `plugins` in one tier and `separate`, when given, alone in a second."""
    config = tiers(*plugins)
    if separate is not None:
        second = tiers(separate)
        config = dataclasses.replace(config, tiers=(*config.tiers, *second.tiers))
    return run(snapshot, config, "shuffle")


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


def _budget(name: str, selector: Mapping[str, Any], allowed: int) -> Mapping[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "test"},
        "spec": {"selector": selector},
        "status": {"disruptionsAllowed": allowed},
    }


KEEP_POD2_1 = _budget("keep-pod2-1", {"matchLabels": {LABEL: "pod2-1"}}, 0)
KEEP_ALL = _budget("keep-all", {"matchExpressions": [{"key": LABEL, "operator": "Exists"}]}, 0)


def test_a_pdb_in_the_same_tier_widens_the_choice() -> None:
    """Volcano's VictimTasks unites a tier's answers (v1.14.1 and v1.15.1 alike): pdb's
    function answers every running pod its budgets allow (all but pod2-1), so beside the
    chooser every pod goes, pod2-1 because the chooser names it. Until issue 34 part 2 the
    answers were intersected and this evicted pod1-1 and pod3-1 only (fails so)."""
    out = _shuffle(_cluster((KEEP_POD2_1,)), (CHOOSER, {"Victim"}), ("pdb", {"Victim"}))
    assert out.evicted == [f"test/{name}" for name in ALL_PODS]


def test_the_first_tier_with_a_victim_decides() -> None:
    """The chooser's tier comes first and names victims: pdb's later tier is not asked, so
    pod2-1 goes although its budget allows no disruption."""
    out = _shuffle(_cluster((KEEP_POD2_1,)), (CHOOSER, {"Victim"}), separate=("pdb", {"Victim"}))
    assert out.evicted == ["test/pod1-1", "test/pod2-1", "test/pod3-1"]


def test_a_tier_that_names_no_victim_leaves_the_choice_to_the_next() -> None:
    """pdb first, its budget allowing no disruption of any pod: it names none, so the
    chooser's tier decides (an answering tier with no victim decided nothing-to-evict
    before issue 34 part 2: fails so, evicting none)."""
    out = _shuffle(_cluster((KEEP_ALL,)), ("pdb", {"Victim"}), separate=(CHOOSER, {"Victim"}))
    assert out.evicted == ["test/pod1-1", "test/pod2-1", "test/pod3-1"]
