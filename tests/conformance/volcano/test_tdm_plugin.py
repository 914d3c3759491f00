"""tdm plugin: cases of volcano-sh/volcano pkg/scheduler/plugins/tdm/tdm_test.go
(Test_parseRevocableZone, Test_TDM, Test_TDM_victimsFn), then the plugin in a session: the
shuffle action evicting preemptable pods from a zone whose window closed, and a refusal
naming tdm.

Volcano's tests read the wall clock: "0:00-0:01" is closed and "0:00-0:00" (the whole day)
open unless run in the first minute after local midnight. Here the clock is fixed at local
noon, and the eviction period is taken as elapsed (Volcano sleeps through it). Volcano's
VictimTasks is asked with no candidates and returns the plugins' victims; koordqueue's
returns those among the candidates, so the victim cases offer every running pod (what the
shuffle action offers).

Switched off and run (`test_each_case_fails_with_tdm_off`: tdm left out of the
configuration, or the window parse refusing everything): the 5 parse cases with a window
(the 4 error cases hold either way), the 3 Test_TDM cases, the 8 victim cases expecting
evictions (the one expecting none holds either way) and both session cases fail; checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

import pytest

from koordqueue.scheduler.api import PodGroupPhase, TaskInfo
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.plugins.tdm import TdmPlugin, parse_revocable_zone

from .harness import Pod, build, node, pg, pod, queue, rl, run, tiers
from .test_nodegroup_plugin import OK, verdicts

NOW = datetime(2026, 1, 5, 12, 0).timestamp()  # local noon
PENDING, RUNNING = PodGroupPhase.PENDING, PodGroupPhase.RUNNING
BIG = rl("16", "64Gi", {"pods": "10"})
_off = False


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(TdmPlugin, "clock", staticmethod(lambda: NOW))
    monkeypatch.setattr(TdmPlugin, "last_evict_at", 0.0)
    yield


def _plugin() -> str:
    return "binpack" if _off else vn.TDM


PARSE = [
    ("00:00_01:00", 0, True), ("00:00-01:00", 3600, False), ("0:00-23:59", 23 * 3600 + 59 * 60,
                                                               False),
    ("0:00", 0, True), ("1:00-0:00", 23 * 3600, False), ("1:0-0:0", 0, True),
    ("   1:00-0:00    ", 23 * 3600, False), ("23:59-23:59", 24 * 3600, False),
    ("63:59-23:59", 0, True),
]


def _parse(raw: str) -> tuple[float, bool]:
    try:
        if _off:
            raise ValueError(raw)
        start, end = parse_revocable_zone(raw, NOW)
    except ValueError:
        return 0, True
    return end - start, False


@pytest.mark.parametrize(("raw", "delta", "error"), PARSE)
def test_parse_revocable_zone(raw: str, delta: int, error: bool) -> None:
    """Test_parseRevocableZone: "HH:MM-HH:MM", an end at or before the start next day."""
    assert _parse(raw) == (delta, error)


# --- Test_TDM -----------
NODES = [
    node("n1", BIG, {vn.REVOCABLE_ZONE: "rz1"}), node("n2", BIG, {vn.REVOCABLE_ZONE: "rz1"}),
    node("n3", BIG, {}), node("n4", BIG, {}), node("n5", BIG, {vn.REVOCABLE_ZONE: "rz2"}),
]
TDM_CASES: dict[str, tuple[str, bool, dict[str, float]]] = {
    "preemptable task rz available":
        ("p1", True, {"n1": 100.0, "n2": 100.0, "n3": 0.0, "n4": 0.0}),
    "not preemptable task": ("p2", False, {"n3": 0.0, "n4": 0.0}),
    "preemptable task and multiple rz":
        ("p3", True, {"n1": 100.0, "n2": 100.0, "n3": 0.0, "n4": 0.0}),
}
ZONES = {"tdm.revocable-zone.rz1": "0:00-0:00", "tdm.revocable-zone.rz2": "0:00-0:01"}


def _revocable(task: TaskInfo) -> None:
    task.vc = {vn.REVOCABLE_ZONE: "*"}


def _tdm_case(name: str) -> dict[str, float]:
    """The nodes passing the predicate and their scores."""
    pod_name, revocable, _expected = TDM_CASES[name]
    snapshot = build(NODES, [pod(pod_name, "", False, rl("1", "1Gi"), "pg1")],
                     [pg("pg1", "c1", 0, PENDING)], [queue("c1")], "c1")
    if revocable:
        for job in snapshot.jobs:
            for task in job.tasks.values():
                _revocable(task)
    config = tiers((_plugin(), {"Predicate", "NodeOrder"}), arguments={_plugin(): ZONES})
    row = verdicts(open_session(snapshot, config))[f"c1/{pod_name}"]
    return {n: score for n, (reason, score) in row.items() if reason == OK}


@pytest.mark.parametrize("name", list(TDM_CASES))
def test_tdm(name: str) -> None:
    """Test_TDM: rz1's window is the whole day, rz2's the first minute: a pod allowed on
    revocable nodes passes n1/n2 (scored 100) and the ordinary nodes; any other passes only
    the ordinary ones; n5 (rz2, closed) refuses both."""
    assert _tdm_case(name) == TDM_CASES[name][2]


def test_refusals_name_the_plugin_and_the_window() -> None:
    snapshot = build(NODES, [pod("p2", "", False, rl("1", "1Gi"), "pg1")],
                     [pg("pg1", "c1", 0, PENDING)], [queue("c1")], "c1")
    config = tiers((vn.TDM, {"Predicate", "NodeOrder"}), arguments={vn.TDM: ZONES})
    row = verdicts(open_session(snapshot, config))["c1/p2"]
    assert row["n1"][0] == vn.ERR_TDM_NOT_REVOCABLE
    assert row["n5"][0] == "tdm: current time beyond revocable zone rz2:0:00-0:01"


# --- Test_TDM_victimsFn -----------
def _pods_c1() -> list[Pod]:
    return [pod(f"p{i}", "n1", True, rl("1", "1Gi"), "pg1", preemptable=i <= 3,
                namespace="c1") for i in range(1, 6)]


def _pods_c2() -> list[Pod]:
    return [pod(f"p{i}", "n2", True, rl("1", "1Gi"), "pg2", namespace="c2")
            for i in range(6, 11)]


N1, N2 = node("n1", BIG, {vn.REVOCABLE_ZONE: "rz1"}), node("n2", BIG, {vn.REVOCABLE_ZONE: "rz1"})
CLOSED, OPEN = "0:00-0:01", "0:00-0:00"
VICTIM_CASES: list[tuple[Mapping[str, Mapping[str, str]], str, int]] = [
    ({"pg1": {vn.JDB_MAX_UNAVAILABLE: "30%"}}, CLOSED, 2),
    ({"pg1": {vn.JDB_MAX_UNAVAILABLE: "30%"}}, OPEN, 0),
    ({"pg1": {vn.JDB_MAX_UNAVAILABLE: "99%"}}, CLOSED, 3),
    ({"pg2": {vn.JDB_MAX_UNAVAILABLE: "50%"}}, CLOSED, 3),
    ({"pg2": {vn.JDB_MAX_UNAVAILABLE: "50%"}, "pg1": {vn.JDB_MAX_UNAVAILABLE: "90%"}},
     CLOSED, 6),
    ({"pg2": {vn.JDB_MAX_UNAVAILABLE: "3"}}, CLOSED, 3),
    ({"pg2": {vn.JDB_MIN_AVAILABLE: "3"}}, CLOSED, 2),
    ({"pg2": {vn.JDB_MIN_AVAILABLE: "30%"}}, CLOSED, 3),
    ({"pg2": {vn.JDB_MIN_AVAILABLE: "2"}, "pg1": {vn.JDB_MAX_UNAVAILABLE: "3"}}, CLOSED, 6),
]


def _victims(groups: Mapping[str, Mapping[str, str]], window: str) -> int:
    pods: list[Pod] = []
    nodes = []
    if "pg1" in groups:
        pods += _pods_c1()
        nodes.append(N1)
    if "pg2" in groups:
        pods += _pods_c2()
        nodes.append(N2)
    snapshot = build(nodes, pods, [pg(g, "c" + g[-1], 0, RUNNING, namespace="c" + g[-1])
                                   for g in groups], [queue("c1"), queue("c2")])
    for job in snapshot.jobs:
        job.annotations = dict(groups[job.name])
    config = tiers((_plugin(), {"Victim"}), arguments={_plugin(): {
        "tdm.revocable-zone.rz1": window, "tdm.evict.period": "1s"}})
    session = open_session(snapshot, config)
    running = [t for job in session.jobs.values() for t in job.tasks.values()]
    return len(session.victim_tasks(running))


@pytest.mark.parametrize(("groups", "window", "want"), VICTIM_CASES)
def test_tdm_victims_fn(groups: Mapping[str, Mapping[str, str]], window: str,
                        want: int) -> None:
    """Test_TDM_victimsFn: on a closed zone's nodes, each job's running preemptable pods
    (p4, p5 of pg1 are not), as many as its budget lets go."""
    assert _victims(groups, window) == want


def test_the_evict_period_spaces_evictions() -> None:
    """A second call within `tdm.evict.period` evicts nothing."""
    groups = {"pg2": {vn.JDB_MAX_UNAVAILABLE: "3"}}
    assert _victims(groups, CLOSED) == 3
    assert TdmPlugin.last_evict_at == NOW
    assert _victims(groups, CLOSED) == 0


# --- the plugin in a session -----------
def _shuffle() -> list[str]:
    """shuffle with tdm: rz1's window closed, pg2's budget lets 2 of its 5 pods go."""
    snapshot = build([N2], _pods_c2(), [pg("pg2", "c2", 0, RUNNING, namespace="c2")],
                     [queue("c2")])
    for job in snapshot.jobs:
        job.annotations = {vn.JDB_MAX_UNAVAILABLE: "2"}
    config = tiers((_plugin(), {"Victim"}),
                   arguments={_plugin(): {"tdm.revocable-zone.rz1": CLOSED}})
    return run(snapshot, config, "shuffle").evicted


def test_shuffle_evicts_preemptable_pods_when_the_window_closes() -> None:
    assert _shuffle() == ["c2/p6", "c2/p7"]


def _allocate(revocable: Sequence[str]) -> dict[str, str]:
    """Two pods, one allowed on revocable nodes; n0 (ordinary) sorts first."""
    nodes = [node("n0", BIG, {}), node("n1", BIG, {vn.REVOCABLE_ZONE: "rz1"})]
    snapshot = build(nodes, [pod("a", "", False, rl("1", "1Gi"), "pg"),
                             pod("b", "", False, rl("1", "1Gi"), "pg")],
                     [pg("pg", "q", 1, PodGroupPhase.INQUEUE)], [queue("q")])
    for job in snapshot.jobs:
        for task in job.tasks.values():
            if task.name in revocable:
                _revocable(task)
    config = tiers(("predicates", {"Predicate"}), (_plugin(), {"Predicate", "NodeOrder"}),
                   arguments={_plugin(): {"tdm.revocable-zone.rz1": OPEN}})
    return run(snapshot, config, "allocate").binds


def test_a_revocable_pod_goes_to_the_open_revocable_node() -> None:
    assert _allocate(["a"]) == {"ns1/a": "n1", "ns1/b": "n0"}


def test_each_case_fails_with_tdm_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(__name__ + "._off", True)
    for raw, delta, error in PARSE:
        if not error:
            assert _parse(raw) != (delta, error), raw
    for name, case in TDM_CASES.items():
        assert _tdm_case(name) != case[2], name
    for groups, window, want in VICTIM_CASES:
        if want:
            assert _victims(groups, window) != want
    assert _shuffle() != ["c2/p6", "c2/p7"]
    assert _allocate(["a"]) != {"ns1/a": "n1", "ns1/b": "n0"}
