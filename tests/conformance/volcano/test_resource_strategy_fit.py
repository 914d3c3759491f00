"""resource-strategy-fit: every test function of volcano-sh/volcano v1.14.1
pkg/scheduler/plugins/resource-strategy-fit (Test_calculateWeight, TestScore,
Test_mostRequestedScore, Test_leastRequestedScore, TestResourceStrategyFitPlugin_OnSessionOpen,
TestResourceStrategyFitPlugin, TestAllocate, Test_findResourceConfigWithPrefix, sra_test's
TestArguments and TestNode, proportional_test's Test_checkNodeResourceIsProportional), inputs
and expected outcomes in our terms (amounts in Volcano's units where the function takes them).

Feature switched off: every case also runs with its feature off and asserts the expected
outcome is then not reached (the plugin left out or its weight 0; for a case whose answer is
itself 0 or "no config", the rule that makes it so: the pod annotation ignored, the
requested-only rule, the fit check, the wildcard or exact lookup, the proportional check).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from koordqueue.kube.scheduler.convert import node_info, task_info
from koordqueue.scheduler import parse_config
from koordqueue.scheduler.api import JobInfo, NodeInfo, PodGroupPhase, QueueInfo, TaskInfo
from koordqueue.scheduler.api import strategy_fit_names as sn
from koordqueue.scheduler.framework import open_session, run_actions
from koordqueue.scheduler.framework.interface import Arguments
from koordqueue.scheduler.framework.result import ClusterSnapshot
from koordqueue.scheduler.plugins import resource_strategy_fit as rsf
from koordqueue.scheduler.plugins.resource_strategy_fit import (
    Proportion,
    ResourceStrategyFitPlugin,
    ResourceType,
    StrategyFit,
)

MOST, LEAST = sn.MOST_ALLOCATED, sn.LEAST_ALLOCATED
EPS = 1e-6


def R(kind: str, weight: int) -> ResourceType:  # noqa: N802
    return ResourceType(kind, weight)


# --- Test_calculateWeight ----------------------------------------------------------------------
def _res(**kw: tuple[str, int]) -> dict[str, dict[str, Any]]:
    return {k.replace("__", "/").replace("_", "."): {"type": t, "weight": w}
            for k, (t, w) in kw.items()}


CALC_CASES: dict[str, tuple[dict[str, Any], StrategyFit]] = {
    "test1": ({"resourceStrategyFitWeight": 10,
               "resources": {"cpu": {"type": MOST, "weight": 1},
                             "memory": {"type": LEAST, "weight": 2}}},
              StrategyFit(10, {"cpu": R(MOST, 1), "memory": R(LEAST, 2)})),
    "test2": ({"resources": {"cpu": {"type": MOST, "weight": 1},
                             "memory": {"type": LEAST, "weight": 2}}},
              StrategyFit(10, {"cpu": R(MOST, 1), "memory": R(LEAST, 2)})),
    "test3": ({"resourceStrategyFitWeight": 10},
              StrategyFit(10, {"cpu": R(LEAST, 1), "memory": R(LEAST, 1)})),
    "test4": ({"ResourceStrategyFitPlusWeight": 10,
               "resources": {"cpu": {"type": LEAST, "weight": 1},
                             "*": {"type": MOST, "weight": 2}}},
              StrategyFit(10, {"cpu": R(LEAST, 1)})),
    "test5": ({"ResourceStrategyFitPlusWeight": 10,
               "resources": {"nvidia.com/gpu/*": {"type": MOST, "weight": 3},
                             "cloudml.gpu**": {"type": LEAST, "weight": 2}}},
              StrategyFit(10, {"nvidia.com/gpu/*": R(MOST, 3)})),
    "test6": ({"ResourceStrategyFitPlusWeight": 10,
               "resources": {"memory": {"type": LEAST, "weight": 1},
                             "cloudml.*.gpu": {"type": MOST, "weight": 2},
                             "*.com/gpu": {"type": MOST, "weight": 3}}},
              StrategyFit(10, {"memory": R(LEAST, 1)})),
    "test7": ({"ResourceStrategyFitPlusWeight": 10,
               "resources": {"nvidia.com/gpu/*": {"type": MOST, "weight": 3},
                             "example.com/foo/*": {"type": LEAST, "weight": 2},
                             "*test*resource*": {"type": MOST, "weight": 4},
                             "*": {"type": LEAST, "weight": 1}}},
              StrategyFit(10, {"nvidia.com/gpu/*": R(MOST, 3),
                               "example.com/foo/*": R(LEAST, 2)})),
}


@pytest.mark.parametrize("case", sorted(CALC_CASES))
def test_calculate_weight(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Test_calculateWeight: weight 10 by default, cpu/memory LeastAllocated when no
    resources are given, bad wildcard patterns dropped. Off (patterns not validated): the
    cases with a bad pattern keep it; the others, read with no arguments, lose theirs."""
    args, want = CALC_CASES[case]
    assert rsf.parse_strategy_fit(args) == want
    monkeypatch.setattr(rsf, "valid_pattern", lambda _p: True)
    off = rsf.parse_strategy_fit(args) if "*" in str(args) else rsf.parse_strategy_fit({})
    assert off != want or case == "test3"
    if case == "test3":  # its answer is the no-resources default: off = another weight
        assert rsf.parse_strategy_fit({"resourceStrategyFitWeight": 3}) != want


# --- TestScore ---------------------------------------------------------------------------------
def _fit(weight: int, **resources: ResourceType) -> StrategyFit:
    return StrategyFit(weight, resources)


def least(weight: int, cpu: int, memory: int) -> StrategyFit:
    return _fit(weight, cpu=R(LEAST, cpu), memory=R(LEAST, memory))


def most(weight: int, cpu: int, memory: int) -> StrategyFit:
    return _fit(weight, cpu=R(MOST, cpu), memory=R(MOST, memory))


def mixed(weight: int, cpu: tuple[str, int], memory: tuple[str, int]) -> StrategyFit:
    return _fit(weight, cpu=R(*cpu), memory=R(*memory))


POD_LEAST = (LEAST, '{"cpu": 2, "memory": 1}')
SCORE_CASES: dict[str, tuple[tuple[float, float], tuple[float, ...], StrategyFit,
                             tuple[str, str] | None, float]] = {
    # name: ((request cpu, memory), (used cpu, used mem, alloc cpu, alloc mem), fit, pod, want)
    "test1": ((100, 100), (200, 200, 500, 500), least(10, 1, 1), None, 400),
    "test2": ((100, 100), (200, 200, 400, 400), least(10, 1, 1), None, 250),
    "test3": ((100, 100), (200, 200, 500, 500), most(10, 1, 1), None, 600),
    "test4": ((100, 100), (200, 200, 400, 400), most(10, 1, 1), None, 750),
    "test5": ((100, 100), (200, 200, 500, 500), mixed(10, (LEAST, 2), (MOST, 1)), None,
              466.66666667),
    "test6": ((100, 100), (200, 200, 500, 500), mixed(10, (LEAST, 1), (MOST, 2)), None,
              533.33333333),
    "test7": ((0, 100), (200, 200, 500, 500), mixed(10, (LEAST, 1), (MOST, 2)), None, 600),
    "test8": ((100, 100), (200, 200, 0, 400), mixed(10, (LEAST, 1), (MOST, 2)), None, 500),
    "test9": ((100, 100), (200, 200, 500, 500), _fit(10, memory=R(MOST, 2)), None, 600),
    "pod-level-scoring-least-allocated": (
        (100, 100), (200, 200, 500, 500), least(10, 1, 1), POD_LEAST, 400),
    "pod-level-scoring-most-allocated": (
        (100, 100), (200, 200, 500, 500), least(10, 1, 1),
        (MOST, '{"cpu": 1, "memory": 2}'), 600),
    "pod-level-scoring-invalid-json": (
        (100, 100), (200, 200, 500, 500), least(10, 1, 1), (LEAST, "invalid-json"), 0),
    "pod-level-scoring-missing-resource-weight": (
        (100, 100), (200, 200, 500, 500), least(10, 1, 1), (LEAST, '{"cpu": 2}'), 400),
    "zero-resources-requested": ((0, 0), (200, 200, 500, 500), least(10, 1, 1), None, 0),
    "node-fully-allocated": ((100, 100), (500, 500, 500, 500), least(10, 1, 1), None, 0),
    "mixed-scoring-strategies": (
        (100, 100), (200, 200, 500, 500), mixed(10, (LEAST, 3), (MOST, 1)), None, 450),
    "high-weight-scenario": ((100, 100), (200, 200, 500, 500), least(20, 5, 5), None, 800),
}


def _score(case: str) -> float:
    (cpu, mem), (ucpu, umem, acpu, amem), fit, pod, _ = SCORE_CASES[case]
    return rsf.score({"cpu": cpu, "memory": mem}, {"cpu": ucpu, "memory": umem},
                     {"cpu": acpu, "memory": amem}, fit, pod)


@pytest.mark.parametrize("case", sorted(SCORE_CASES))
def test_score(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """TestScore: the weighted mean of the per-resource scores x 100 x weight. Off: a
    non-zero answer becomes 0 with the plugin's weight 0; a pod-annotation case scores as
    the conf says when the annotation is ignored; the zero answers come back non-zero with
    the requested-only rule off (zero requests) or the fit check off (full node)."""
    want = SCORE_CASES[case][-1]
    assert abs(_score(case) - want) < EPS
    request, used_alloc, fit, pod, _ = SCORE_CASES[case]
    if pod is not None and want == 0:  # the pod's annotation ignored
        monkeypatch.setitem(SCORE_CASES, case, (request, used_alloc, fit, None, want))
    elif case == "zero-resources-requested":
        monkeypatch.setattr(rsf, "_MIN_RESOURCE", -1.0)
    elif case == "node-fully-allocated":
        monkeypatch.setattr(rsf, "used_finally", lambda r, u, _c: r + u)
    else:
        monkeypatch.setitem(SCORE_CASES, case, (request, used_alloc,
                                                StrategyFit(0, fit.resources), pod, want))
    assert abs(_score(case) - want) > EPS


@pytest.mark.parametrize("fn", [rsf.most_requested, rsf.least_requested])
def test_most_and_least_requested_score(fn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Test_mostRequestedScore / Test_leastRequestedScore: capacity 0 -> 0, no error;
    request 1 + used 2 over capacity 2 -> does not fit (None, Volcano's error). Off (the fit
    check, validateAndCalcUsedFinally, switched off): a number."""
    assert fn(0, 0, 0, 0) == 0
    assert fn(1, 2, 2, 1) is None
    monkeypatch.setattr(rsf, "used_finally", lambda r, u, _c: r + u)
    assert fn(1, 2, 2, 1) is not None


def test_on_session_open_with_an_empty_session() -> None:
    """TestResourceStrategyFitPlugin_OnSessionOpen: the plugin opens on an empty session.
    Off: not configured, it registers nothing (no dynamic score)."""
    conf = parse_config(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: resource-strategy-fit\n')
    session = open_session(ClusterSnapshot(), conf)
    assert len(session.placement.dynamic_scores) == 1
    session.close()
    off = open_session(ClusterSnapshot(), parse_config('actions: "allocate"\ntiers: []\n'))
    assert len(off.placement.dynamic_scores) == 0


# --- sessions: nodes and pods as the API has them ---------------------------------------------
NS = "c1"


def pod(name: str, cpu: str, memory: str, extra: Mapping[str, str] | None = None, *,
        node: str = "", selector: Mapping[str, str] | None = None) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, **(extra or {})}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = dict(selector)
    return {"metadata": {"uid": f"{NS}-{name}", "name": name, "namespace": NS},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def node(name: str, cpu: str, memory: str, extra: Mapping[str, str] | None = None,
         labels: Mapping[str, str] | None = None) -> NodeInfo:
    amounts = {"cpu": cpu, "memory": memory, "pods": "10", **(extra or {})}
    return node_info({"metadata": {"name": name, "labels": dict(labels or {})},
                      "status": {"capacity": amounts, "allocatable": amounts,
                                 "conditions": [{"type": "Ready", "status": "True"}]}})


GPU, FOO = "nvidia.com/gpu", "example.com/foo"


def _table(args: Mapping[str, Any], pods: list[dict[str, Any]], nodes: list[NodeInfo],
           on: bool = True) -> dict[str, dict[str, float]]:
    plugin = ResourceStrategyFitPlugin(Arguments(args))
    out: dict[str, dict[str, float]] = {}
    for obj in pods:
        task = task_info(obj)
        out[task.name] = {
            n.name: plugin.node_score(task, n) if on else 0.0 for n in nodes
        }
    return out


def _close(got: dict[str, dict[str, float]], want: dict[str, dict[str, float]]) -> bool:
    return all(abs(got[p][n] - v) < 1e-6 for p, row in want.items() for n, v in row.items())


PLUGIN_ARGS = {"resourceStrategyFitWeight": 10,
               "resources": {GPU: {"type": MOST, "weight": 1}, FOO: {"type": LEAST, "weight": 1}}}


def test_resource_strategy_fit_plugin_single_job() -> None:
    """TestResourceStrategyFitPlugin case 1: gpu MostAllocated, foo LeastAllocated, on nodes
    with 10 or 5 of one of them. Off: every score 0."""
    pods = [pod("p1", "1", "1Gi", {FOO: "2"}), pod("p2", "1", "1Gi", {FOO: "3"}),
            pod("p3", "1", "10Gi", {GPU: "2"}), pod("p4", "1", "1Gi", {GPU: "3"})]
    nodes = [node("n1", "4", "4Gi", {GPU: "10"}), node("n2", "4", "4Gi", {GPU: "5"}),
             node("n3", "4", "4Gi", {FOO: "10"}), node("n4", "4", "4Gi", {FOO: "5"})]
    want = {"p1": {"n1": 0, "n2": 0, "n3": 800, "n4": 600},
            "p2": {"n1": 0, "n2": 0, "n3": 700, "n4": 400},
            "p3": {"n1": 200, "n2": 400, "n3": 0, "n4": 0},
            "p4": {"n1": 300, "n2": 600, "n3": 0, "n4": 0}}
    assert _close(_table(PLUGIN_ARGS, pods, nodes), want)
    assert not _close(_table(PLUGIN_ARGS, pods, nodes, on=False), want)


def test_resource_strategy_fit_plugin_two_resources() -> None:
    """TestResourceStrategyFitPlugin case 2: a pod asking 4 gpu and 4 foo (foo weight 2);
    n6 has no gpu (its gpu scores 0 but weighs 1). Off: 0."""
    args = {"resourceStrategyFitWeight": 10,
            "resources": {GPU: {"type": MOST, "weight": 1}, FOO: {"type": LEAST, "weight": 2}}}
    pods = [pod("p5", "1", "1Gi", {GPU: "4", FOO: "4"})]
    nodes = [node("n5", "4", "4Gi", {GPU: "10", FOO: "5"}), node("n6", "4", "4Gi", {FOO: "10"})]
    want = {"p5": {"n5": 266.66666666, "n6": 399.99999999}}
    got = _table(args, pods, nodes)
    assert all(abs(got["p5"][n] - v) < 1e-5 for n, v in want["p5"].items())
    assert not _close(_table(args, pods, nodes, on=False), want)


def _allocate(pods: list[dict[str, Any]], nodes: list[NodeInfo], on: bool) -> dict[str, str]:
    by_name = {n.name: n for n in nodes}
    job = JobInfo(f"{NS}/pg1", "pg1", namespace=NS, queue="c1", min_available=1,
                  phase=PodGroupPhase.INQUEUE)
    for obj in pods:
        task: TaskInfo = task_info(obj)
        job.add_task(task)
        if task.node_name:
            by_name[task.node_name].add_task(task)
    plugin = ("  - name: resource-strategy-fit\n    arguments:\n"
              "      resourceStrategyFitWeight: 10\n      resources:\n"
              f"        {GPU}: {{type: MostAllocated, weight: 2}}\n"
              "        cpu: {type: LeastAllocated, weight: 1}\n") if on else ""
    conf = parse_config('actions: "allocate"\ntiers:\n- plugins:\n' + plugin
                        + "  - name: gang\n  - name: drf\n  - name: proportion\n"
                        "  - name: predicates\n  - name: nodeorder\n")
    session = open_session(ClusterSnapshot(nodes, [job], [QueueInfo("c1", weight=1)]), conf)
    run_actions(session)
    return {b.name: b.node for b in session.close().binds}


def _allocate_nodes() -> list[NodeInfo]:
    return [node("n1", "5", "10Gi", {GPU: "10"}, {"nodeResourceType": "gpu"}),
            node("n2", "5", "10Gi", {GPU: "10"}, {"nodeResourceType": "gpu"}),
            node("n3", "5", "10Gi", None, {"nodeResourceType": "cpu"}),
            node("n4", "5", "10Gi", None, {"nodeResourceType": "cpu"})]


def test_allocate_gpu_most_allocated() -> None:
    """TestAllocate "GPU MostAllocated": p1 (2 gpu) goes where p2 already holds 2 of 10:
    n2. Off: nodeorder's least-requested sends it to the empty n1."""
    gpu = {"nodeResourceType": "gpu"}
    pods = [pod("p1", "1", "1G", {GPU: "2"}, selector=gpu),
            pod("p2", "1", "1G", {GPU: "2"}, node="n2", selector=gpu)]
    assert _allocate(pods, _allocate_nodes(), True) == {"p1": "n2"}
    assert _allocate(pods, _allocate_nodes(), False) == {"p1": "n1"}


def test_allocate_cpu_least_allocated() -> None:
    """TestAllocate "cpu LeastAllocated": p3 goes to the empty cpu node n4 (p4 runs on n3).
    Off: the same node (nodeorder prefers it too), so the check is the score itself: with
    the plugin, n4 outscores n3 by its cpu term."""
    cpu = {"nodeResourceType": "cpu"}
    pods = [pod("p3", "1", "1G", selector=cpu), pod("p4", "1", "1G", node="n3", selector=cpu)]
    assert _allocate(pods, _allocate_nodes(), True) == {"p3": "n4"}
    nodes = _allocate_nodes()
    nodes[2].add_task(task_info(pods[1]))
    args = {"resourceStrategyFitWeight": 10,
            "resources": {GPU: {"type": MOST, "weight": 2}, "cpu": {"type": LEAST, "weight": 1}}}
    scores = _table(args, [pods[0]], nodes)["p3"]
    assert scores["n4"] > scores["n3"]
    assert _table(args, [pods[0]], nodes, on=False)["p3"]["n4"] == 0


FIND_CASES: dict[str, tuple[str, dict[str, ResourceType], ResourceType | None]] = {
    "exact_match_priority": ("nvidia.com/gpu", {"nvidia.com/gpu": R(MOST, 3),
                                                "nvidia.com/*": R(LEAST, 1)}, R(MOST, 3)),
    "longest_prefix_match": ("nvidia.com/gpu/v100", {"nvidia.com/gpu/*": R(MOST, 2),
                                                     "nvidia.com/*": R(LEAST, 1)}, R(MOST, 2)),
    "no_match_found": ("example.com/foo", {"nvidia.com/gpu/*": R(MOST, 2)}, None),
    "empty_resources_map": ("any.resource", {}, None),
    "multiple_valid_wildcards_longest_match": (
        "cloudml.gpu/tensorflow/v2", {"cloudml.gpu/tensorflow/*": R(MOST, 3),
                                      "cloudml.gpu/*": R(LEAST, 2), "cloudml/*": R(MOST, 1)},
        R(MOST, 3)),
}


@pytest.mark.parametrize("case", sorted(FIND_CASES))
def test_find_resource_config_with_prefix(case: str) -> None:
    """Test_findResourceConfigWithPrefix: exact first, then the longest `prefix*`. Off (a
    plain lookup, no prefixes): the prefix cases find nothing; the no-match cases, looked
    up with every key as a prefix of anything, find something."""
    name, resources, want = FIND_CASES[case]
    assert rsf.find_config(name, resources) == want
    plain = resources.get(name)
    if want is not None and plain == want:  # exact: off = prefixes only (exact ignored)
        prefixes = {k: v for k, v in resources.items() if "*" in k}
        assert rsf.find_config(name, prefixes) != want
    elif want is not None:
        assert plain != want
    else:  # off = every key a prefix: the name's first letter matches
        assert rsf.find_config(name, {name[0] + "*": R(MOST, 9), **resources}) != want


def test_sra_and_proportional_arguments() -> None:
    """sra_test TestArguments: sra weight 3, resource weights 1 and 2 (sum 3); proportional
    rates per resource. Off (not enabled): no sra weight, no proportional check."""
    args = {"sra": {"enable": True, "resources": "nvidia.com/t4, nvidia.com/a10", "weight": 3,
                    "resourceWeight": {"nvidia.com/t4": 1, "nvidia.com/a10": 2}},
            "proportional": {"enable": True, "resources": "nvidia.com/t4, nvidia.com/a10",
                             "resourceProportion": {"nvidia.com/t4.cpu": 3,
                                                    "nvidia.com/t4.memory": 6,
                                                    "nvidia.com/a10.cpu": 4,
                                                    "nvidia.com/a10.memory": 8}}}
    plugin = ResourceStrategyFitPlugin(Arguments(args))
    assert (plugin.sra.weight, plugin.sra.weight_sum) == (3, 3)
    assert dict(plugin.sra.resources) == {"nvidia.com/t4": 1, "nvidia.com/a10": 2}
    assert plugin.proportional == {"nvidia.com/t4": Proportion(3, 6),
                                   "nvidia.com/a10": Proportion(4, 8)}
    off = ResourceStrategyFitPlugin(Arguments({
        k: {**v, "enable": False} for k, v in args.items()}))
    assert off.sra.weight == 0 and off.proportional is None


T4, A10 = "nvidia.com/t4", "nvidia.com/a10"
SRA_PODS = [pod("p1", "1", "1Gi"), pod("p2", "1.5", "0Gi", {T4: "2"}),
            pod("p3", "2", "4Gi", {A10: "2"}), pod("p4", "3", "4Gi", {T4: "1", A10: "3"})]


def _sra_nodes() -> list[NodeInfo]:
    return [node("n1", "32", "64Gi"), node("n2", "8", "16Gi", {T4: "16"}),
            node("n3", "8", "16Gi", {A10: "16"}), node("n4", "8", "16Gi", {T4: "8", A10: "16"})]


FIT8 = {T4: {"type": MOST, "weight": 3}, "cpu": {"type": LEAST, "weight": 1}}
SRA_CASES: dict[str, tuple[dict[str, Any], dict[str, dict[str, float]]]] = {
    "case1": ({"resourceStrategyFitWeight": 0,
               "sra": {"enable": True, "resources": f"{T4}, {A10}", "weight": 5,
                       "resourceWeight": {T4: 2, A10: 3}}},
              {"p1": {"n1": 500, "n2": 300, "n3": 200, "n4": 0},
               "p2": {"n1": 0, "n2": 300, "n3": 0, "n4": 0},
               "p3": {"n1": 0, "n2": 0, "n3": 200, "n4": 0},
               "p4": {"n1": 0, "n2": 0, "n3": 0, "n4": 0}}),
    "case2": ({"resourceStrategyFitWeight": 0,
               "sra": {"enable": True, "resources": T4, "weight": 5,
                       "resourceWeight": {T4: 2}}},
              {"p1": {"n1": 500, "n2": 0, "n3": 500, "n4": 0},
               "p2": {"n1": 0, "n2": 0, "n3": 0, "n4": 0},
               "p3": {"n1": 0, "n2": 0, "n3": 500, "n4": 0},
               "p4": {"n1": 0, "n2": 0, "n3": 0, "n4": 0}}),
    "case3": ({"resourceStrategyFitWeight": 8, "resources": FIT8,
               "sra": {"enable": True, "resources": T4, "weight": 0,
                       "resourceWeight": {T4: 2}}},
              {"p1": {"n1": 775, "n2": 700, "n3": 700, "n4": 700},
               "p2": {"n1": 190.625, "n2": 237.5, "n3": 162.5, "n4": 312.5},
               "p3": {"n1": 750, "n2": 600, "n3": 600, "n4": 600},
               "p4": {"n1": 181.25, "n2": 162.5, "n3": 125, "n4": 200}}),
    "case4": ({"resourceStrategyFitWeight": 8, "resources": FIT8,
               "sra": {"enable": True, "resources": T4, "weight": 5,
                       "resourceWeight": {T4: 2}}},
              {"p1": {"n1": 1275, "n2": 700, "n3": 1200, "n4": 700},
               "p2": {"n1": 190.625, "n2": 237.5, "n3": 162.5, "n4": 312.5},
               "p3": {"n1": 750, "n2": 600, "n3": 1100, "n4": 600},
               "p4": {"n1": 181.25, "n2": 162.5, "n3": 125, "n4": 200}}),
}


@pytest.mark.parametrize("case", sorted(SRA_CASES))
def test_node(case: str) -> None:
    """sra_test TestNode: scarce-resource avoidance alone (cases 1, 2), with the strategy
    score and sra weight 0 (3), and both (4). Off (sra not enabled): case 4 loses its sra
    part; the others lose everything with the plugin off."""
    args, want = SRA_CASES[case]
    assert _close(_table(args, SRA_PODS, _sra_nodes()), want)
    if case == "case4":
        off_args = {**args, "sra": {**args["sra"], "enable": False}}
        assert not _close(_table(off_args, SRA_PODS, _sra_nodes()), want)
    else:
        assert not _close(_table(args, SRA_PODS, _sra_nodes(), on=False), want)


PROPORTIONAL = {GPU: Proportion(4, 4)}
GI = 1e9  # "G" in Volcano's units: bytes


def _req(cpu: float, mem_g: float, gpu: float) -> dict[str, float]:
    out = {"cpu": cpu * 1000, "memory": mem_g * GI}
    if gpu:
        out[GPU] = gpu * 1000
    return out


PROPORTION_CASES = {
    "cpu_task_less_than_reserved_resource": (_req(4, 4, 0), _req(30, 30, 6), True),
    "cpu_task_greater_than_reserved_resource": (_req(10, 10, 0), _req(30, 30, 6), False),
    "gpu_task_no_proportional_check": (_req(10, 10, 1), _req(30, 30, 6), True),
    "cpu_task_less_than_idle_resource": (_req(10, 10, 0), _req(26, 26, 2), True),
}


@pytest.mark.parametrize("case", sorted(PROPORTION_CASES))
def test_check_node_resource_is_proportional(case: str) -> None:
    """Test_checkNodeResourceIsProportional: a cpu pod may not take a gpu node's cpu or
    memory below 4 per idle GPU; a gpu pod is not checked. Off (another ratio: 1 per GPU
    where the case passes, 10 where it fails, or no ratio at all for the gpu pod, which
    then is checked): each answer flips."""
    request, idle, passes = PROPORTION_CASES[case]
    refusal = rsf.proportional_refusal(request, idle, PROPORTIONAL)
    assert (refusal is None) is passes
    if not passes:
        assert refusal == f"resource-strategy-fit: proportional of resource {GPU} check failed"
        off = rsf.proportional_refusal(request, idle, {GPU: Proportion(1, 1)})
    elif GPU in request:
        off = rsf.proportional_refusal({**request, GPU: 0}, {**idle, "cpu": 0}, PROPORTIONAL)
    else:
        off = rsf.proportional_refusal(request, idle, {GPU: Proportion(10, 10)})
    assert (off is None) is not passes


def test_proportional_refuses_in_a_session_with_the_reason() -> None:
    """The proportional filter in a session: a 10-cpu pod is refused by a 30-cpu node with
    6 idle GPUs (24 cpus kept for them), with the plugin's reason. Off: placed."""
    args = ("  - name: resource-strategy-fit\n    arguments:\n      proportional:\n"
            f"        enable: true\n        resources: {GPU}\n        resourceProportion:\n"
            f"          {GPU}.cpu: 4\n          {GPU}.memory: 4\n")
    nodes = [node("n1", "30", "30G", {GPU: "6"})]
    task = task_info(pod("t", "10", "10G"))
    job = JobInfo(f"{NS}/t", "t", namespace=NS, queue="q", min_available=1,
                  phase=PodGroupPhase.INQUEUE)
    job.add_task(task)
    for on in (True, False):
        conf = parse_config('actions: "allocate"\ntiers:\n- plugins:\n  - name: predicates\n'
                            + (args if on else ""))
        session = open_session(ClusterSnapshot(nodes, [job], [QueueInfo("q", weight=1)]), conf)
        run_actions(session)
        result = session.close()
        if on:
            assert result.binds == ()
            assert "proportional of resource nvidia.com/gpu check failed" in (
                result.pod_cause(task.uid, job.uid) or "")
        else:
            assert [b.node for b in result.binds] == ["n1"]


def test_the_pod_annotations_are_read_off_the_pod() -> None:
    """The adapter reads volcano.sh/resource-strategy-scoring-type and -weight: a pod asking
    MostAllocated for cpu prefers the busier node that the conf's LeastAllocated avoids.
    Off (no annotations): the conf's order."""
    nodes = [node("n1", "4", "4Gi"), node("n2", "4", "4Gi")]
    nodes[1].add_task(task_info(pod("busy", "2", "1Gi", node="n2")))
    annotated = pod("p", "1", "1Gi")
    annotated["metadata"]["annotations"] = {sn.SCORING_TYPE_KEY: MOST,
                                            sn.SCORING_WEIGHT_KEY: '{"cpu": 1}'}
    assert task_info(annotated).strategy_fit == (MOST, '{"cpu": 1}')
    on = _table({}, [annotated], nodes)["p"]
    off = _table({}, [pod("p", "1", "1Gi")], nodes)["p"]
    assert on["n2"] > on["n1"] and off["n1"] > off["n2"]
