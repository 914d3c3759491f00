"""The queueallocationgate plugin inside real sessions (pure framework, no cluster)."""

from __future__ import annotations

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import QueueInfo, TaskInfo
from koordqueue.scheduler.framework import (
    Arguments,
    PluginOption,
    SchedulerConfig,
    Tier,
    open_session,
    register_plugin_builder,
    run_actions,
)
from koordqueue.scheduler.gates import GateView
from koordqueue.scheduler.gates.names import PLUGIN_NAME
from koordqueue.scheduler.gates.plugin import QueueAllocationGatePlugin
from tests.unit.scheduler.builders import (
    DEFAULT_TIERS,
    bound_nodes,
    config,
    job,
    node,
    snapshot,
    task,
)

register_plugin_builder(PLUGIN_NAME, QueueAllocationGatePlugin)
BASE = config("enqueue, allocate, backfill", *DEFAULT_TIERS)
QUEUE = QueueInfo("q", capability=Resources.of(cpu="1", memory="1Gi"))


def gated(name: str, creation: float = 0.0, cpu: str = "1") -> TaskInfo:
    return task(name, cpu=cpu, scheduling_gated=True, creation=creation)


def run(jobs: list, view: GateView, nodes: list | None = None) -> tuple[set[str], list[str]]:
    """(bound task uids, released task uids) of one session."""
    cfg = SchedulerConfig(
        BASE.actions,
        (*BASE.tiers, Tier((PluginOption(PLUGIN_NAME, Arguments({"view": view})),))),
    )
    session = open_session(snapshot(nodes or [node("n", cpu="8", memory="16Gi")], jobs, [QUEUE]),
                           cfg)
    run_actions(session)
    result = session.close()
    plugin = session.plugins[PLUGIN_NAME]
    assert isinstance(plugin, QueueAllocationGatePlugin)
    return set(bound_nodes(result)), plugin.released


def test_a_candidate_passes_when_its_queue_has_room_and_is_not_allocated() -> None:
    bound, released = run([job("j", [gated("c")], queue="q")], GateView(frozenset({"c"})))
    assert (bound, released) == (set(), ["c"])


def test_candidates_pass_in_creation_order_only_while_they_fit() -> None:
    jobs = [job("j2", [gated("late", 2.0)], queue="q"), job("j1", [gated("early", 1.0)], queue="q")]
    _, released = run(jobs, GateView(frozenset({"late", "early"})))
    assert released == ["early"]


def test_a_reservation_keeps_candidates_gated() -> None:
    jobs = [job("r", [task("r", node_selector={"no": "match"})], queue="q"),
            job("c", [gated("c")], queue="q")]
    bound, released = run(jobs, GateView(frozenset({"c"}), frozenset({"r"})))
    assert (bound, released) == (set(), [])


def test_a_reservation_keeps_an_ungated_competitor_out() -> None:
    jobs = [job("x", [task("x", creation=0.0)], queue="q"),
            job("r", [task("r", creation=5.0)], queue="q")]
    bound, _ = run(jobs, GateView(frozenset(), frozenset({"r"})))
    assert bound == {"r"}


def test_a_reserved_pod_is_allocated_within_its_own_reservation() -> None:
    bound, _ = run([job("r", [task("r")], queue="q")], GateView(frozenset(), frozenset({"r"})))
    assert bound == {"r"}


def test_a_rolled_back_gang_keeps_its_reservation() -> None:
    members = [task("r", cpu="0.5", priority=10),
               task("big", cpu="0.5", node_selector={"no": "x"})]
    gang = job("g", members, queue="q", min_available=2)
    jobs = [gang, job("c", [gated("c", cpu="0.75")], queue="q")]
    bound, released = run(jobs, GateView(frozenset({"c"}), frozenset({"r"})))
    assert (bound, released) == (set(), [])
