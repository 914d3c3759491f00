"""usage plugin: cases of volcano-sh/volcano pkg/scheduler/plugins/usage/usage_test.go
(TestUsage_predicateFn, TestUsage_nodeOrderFn), then the plugin in a session: a pod kept off
the hot node, and the refusal `explain` shows.

Every case: nodes n1..n5 with 4 cpu, 8Gi and 10 pods, a pod asking 1 cpu and 1Gi in
pg1 / queue q1, usage.weight 5 and thresholds cpu 80 / mem 80. Volcano's readings are
NodeInfo.ResourceUsage for the period "10m"; here they are the snapshot's `node_usage`.
The clock is fixed (Volcano's tests read time.Now).

Switched off and run (`test_each_case_fails_with_usage_off`: usage left out of the conf):
both refusing predicate cases, every scored node-order case and the session case fail;
the cases expecting a pass or a 0 hold either way and are not counted. Checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

import pytest

from koordqueue.scheduler.api import PodGroupPhase
from koordqueue.scheduler.api import load_names as ln
from koordqueue.scheduler.api.node_usage import NodeUsage
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.plugins.usage import UsagePlugin

from .harness import build, node, pg, pod, queue, rl, run, tiers
from .test_nodegroup_plugin import OK, verdicts

NOW = 1_800_000_000.0
PENDING = PodGroupPhase.PENDING
NODE = rl("4", "8Gi", {"pods": "10"})
_off = False


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(UsagePlugin, "clock", staticmethod(lambda: NOW))
    yield


def _verdicts(readings: Mapping[str, NodeUsage], args: Mapping[str, object],
              points: set[str]) -> dict[str, tuple[str, float]]:
    nodes = [node(f"n{i}", NODE) for i in range(1, 6)]
    snapshot = build(nodes, [pod("p1", "", False, rl("1", "1Gi"), "pg1")],
                     [pg("pg1", "q1", 0, PENDING)], [queue("q1")], "c1")
    snapshot = dataclasses.replace(snapshot, node_usage=dict(readings))
    plugin = "gang" if _off else ln.USAGE
    config = tiers((plugin, points), arguments={plugin: dict(args)})
    return verdicts(open_session(snapshot, config))["c1/p1"]


ARGS = {"usage.weight": 5, "thresholds": {"cpu": 80, "mem": 80}}
PREDICATE_READINGS = {
    "n1": NodeUsage(81, 60, NOW), "n2": NodeUsage(60, 81, NOW), "n3": NodeUsage(80, 79, NOW),
    "n4": NodeUsage(90, 81, NOW - 360), "n5": NodeUsage(90, 81, 0.0),
}
PREDICATE_WANT = {
    "n1": ln.ERR_USAGE.format(reason=ln.ERR_USAGE_CPU),
    "n2": ln.ERR_USAGE.format(reason=ln.ERR_USAGE_MEMORY),
    "n3": OK, "n4": OK, "n5": OK,
}


def _predicate() -> dict[str, str]:
    row = _verdicts(PREDICATE_READINGS, ARGS, {"Predicate"})
    return {name: reason for name, (reason, _score) in row.items()}


def test_usage_predicate_fn() -> None:
    """TestUsage_predicateFn: strictly over a threshold refuses (cpu checked first); a
    reading six minutes old, or none, passes."""
    assert _predicate() == PREDICATE_WANT


SCORE_READINGS = {
    "n1": NodeUsage(30, 50, NOW), "n2": NodeUsage(60, 50, NOW), "n3": NodeUsage(60, 80, NOW),
    "n4": NodeUsage(10, 20, NOW - 360), "n5": NodeUsage(0, 0, 0.0),
}
SCORE_CASES = {
    "cpu 1 mem 1": ({"cpu.weight": 1, "memory.weight": 1},
                    {"n1": 300.0, "n2": 225.0, "n3": 150.0, "n4": 0.0, "n5": 0.0}),
    "cpu 2 mem 8": ({"cpu.weight": 2, "memory.weight": 8},
                    {"n1": 270.0, "n2": 240.0, "n3": 120.0, "n4": 0.0, "n5": 0.0}),
}


def _scores(name: str) -> dict[str, float]:
    weights, _want = SCORE_CASES[name]
    row = _verdicts(SCORE_READINGS, {**ARGS, **weights}, {"NodeOrder"})
    return {n: pytest.approx(s) for n, (_reason, s) in row.items()}  # type: ignore[misc]


@pytest.mark.parametrize("name", list(SCORE_CASES))
def test_usage_node_order_fn(name: str) -> None:
    """TestUsage_nodeOrderFn: the weighted idle share times 100 times usage.weight; 0 for a
    stale reading or none."""
    assert _scores(name) == SCORE_CASES[name][1]


@pytest.mark.parametrize(("args", "want"), [
    ({"usage.weight": -1, "cpu.weight": -2}, (5, 1, 1, 80, 80)),
    ({"thresholds": {"cpu": 120, "mem": -5}}, (5, 1, 1, 80, 80)),
    ({"usage.weight": "7", "thresholds": {"cpu": "85", "mem": 70}}, (5, 1, 1, 80, 70)),
    ({"usage.weight": 3, "cpu.weight": 2, "memory.weight": 0}, (3, 2, 0, 80, 80)),
])
def test_bad_arguments_keep_the_defaults(args: dict[str, object],
                                         want: tuple[int, ...]) -> None:
    """Volcano's newest argument checks: negative weights, thresholds outside 0-100 and
    values that are not whole numbers keep the defaults; the valid rest is taken."""
    from koordqueue.scheduler.framework.interface import Arguments

    p = UsagePlugin(Arguments(args))
    assert (p.weight, p.cpu_weight, p.mem_weight, p.cpu_threshold, p.mem_threshold) == want


def _allocate() -> dict[str, str]:
    # without usage the node order ties and the first node by name wins: the hot one
    nodes = [node("a-hot", NODE), node("b-cool", NODE)]
    snapshot = build(nodes, [pod("p1", "", False, rl("1", "1Gi"), "pg1")],
                     [pg("pg1", "q1", 0, PENDING)], [queue("q1")], "c1")
    snapshot = dataclasses.replace(snapshot, node_usage={
        "a-hot": NodeUsage(95, 40, NOW), "b-cool": NodeUsage(10, 20, NOW)})
    plugin = "gang" if _off else ln.USAGE
    config = tiers(("gang", {"JobReady"}), (plugin, {"Predicate", "NodeOrder"}),
                   arguments={plugin: ARGS})
    return run(snapshot, config, "allocate").binds


def test_a_pod_is_kept_off_the_hot_node() -> None:
    assert _allocate() == {"c1/p1": "b-cool"}


def test_each_case_fails_with_usage_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(__name__ + "._off", True)
    got = _predicate()
    for name in ("n1", "n2"):
        assert got[name] != PREDICATE_WANT[name], name
    for name, (_weights, want) in SCORE_CASES.items():
        got_scores = _scores(name)
        assert all(got_scores[n] != want[n] for n in ("n1", "n2", "n3")), name
    assert _allocate() != {"c1/p1": "b-cool"}
