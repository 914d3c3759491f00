"""network-topology-aware plugin: cases of volcano-sh/volcano v1.14.1
pkg/scheduler/plugins/network-topology-aware/network_topology_aware_test.go (every test
function), run through the plugin's registered callbacks in a real session.

Volcano's node-score tests set the pending task's JobAllocatedHyperNode from the PodGroup's
`volcano.sh/job-allocated-hypernode` annotation (their parseTask); here the same value is
put where allocate puts it during a turn (`SessionTopology.scoring`). A case whose PodGroup
has a SubGroupPolicy is run with the group's networkTopology on the job itself (koordqueue
has no sub-groups; the scores read the same fields). Volcano's scores over a node list are
the plugin's dynamic score with those nodes as the candidates.

Switched off and run (each fails then, checked): the closeness score (no score for a pod
of a topology job: every closeness case but the first, hard and soft, 12 of 14; the case
"LCA is the cluster top" also scores s3-n1, in the job's HyperNode, so that it can fail:
as Volcano wrote it, its two nodes score 0 either way); a span-less topology pod scored as
a normal pod (the first case); the tie-break by task count (both "ties" cases and the
network topology pod of TestBatchNodeOrderFn); the HyperNode-level binpacking of normal pods
(TestBatchNodeOrderFn cases 2-4 and Test_batchNodeOrderFnForNormalPods); the fading (every
tier weighted 1: cases 2-4); the per-HyperNode sums of the resource cache
(initHyperNodeResourceCache); the HyperNode scores' overuse check (TestHyperNodeOrderFn,
both); the gradient's descent under its root (the six "selected" pre-filter cases), its
idle half ("idle ok, future short", job and sub-job), its future-idle half ("idle short,
future ok"), the whole pre-filter ("both short"); argument parsing (TestNew, the two
customised cases) and Volcano's defaults (a default weight of 0: all three).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from koordqueue.domain.quantity import MILLI_NANO
from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot
from koordqueue.scheduler.api import JobInfo, NodeInfo, PodGroupPhase, TaskInfo, TaskStatus
from koordqueue.scheduler.api.hypernode import HyperNode, NetworkTopology
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.callbacks import PURPOSE_EVICT
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.topology import CLUSTER_TOP
from koordqueue.scheduler.plugins.network_topology_aware import (
    NetworkTopologyAwarePlugin,
    TopologyArguments,
    parse_arguments,
    reverse_and_cap,
)

from .harness import Pod, build, node, pg, pod, queue, rl, tiers
from .topology import hard, nodes_of, parent_of, soft, with_topology

PLUGIN = "network-topology-aware"
INQUEUE = PodGroupPhase.INQUEUE
EPS = 0.1
PODS = {"pods": "10"}

STANDARD = [
    parent_of("s0", 3, "s1", "s2"),
    parent_of("s1", 2, "s3", "s4"),
    parent_of("s2", 2, "s5", "s6"),
    nodes_of("s3", 1, "s3-n1", "s3-n2"),
    nodes_of("s4", 1, "s4-n1", "s4-n2"),
    nodes_of("s5", 1, "s5-n1", "s5-n2"),
    nodes_of("s6", 1, "s6-n1", "s6-n2"),
]
"""s0 (tier 3) over s1 and s2 (tier 2), each over two tier-1 HyperNodes of two nodes."""
STANDARD_NODES = [f"s{h}-n{i}" for h in (3, 4, 5, 6) for i in (1, 2)]


def _session(
    nodes: Sequence[NodeInfo],
    pods: Sequence[Pod],
    hypernodes: Sequence[HyperNode],
    *,
    topology: NetworkTopology | None = None,
    arguments: Mapping[str, object] | None = None,
    min_member: int = 1,
    switches: frozenset[str] = frozenset({"HyperNodeOrder", "NodeOrder", "HyperNodeGradient"}),
) -> Session:
    snapshot = build(nodes, pods, [pg("pg1", "q1", min_member, INQUEUE)], [queue("q1")], "c1")
    snapshot = with_topology(snapshot, hypernodes, {"pg1": topology} if topology else None)
    config = tiers((PLUGIN, switches), arguments={PLUGIN: dict(arguments or {})})
    return open_session(snapshot, config)


def _pending(session: Session) -> tuple[JobInfo, TaskInfo]:
    """parseTask: the job's first pending task."""
    job = next(iter(session.jobs.values()))
    task = next(t for t in job.tasks.values() if t.status is TaskStatus.PENDING)
    return job, task


def _scores(session: Session, task: TaskInfo, names: Sequence[str]) -> dict[str, float]:
    """ssn.BatchNodeOrderFn(task, nodes): the plugin's node scores with `names` as the
    candidates (0 where it scores nothing)."""
    engine = session.placement
    index = {n.name: n.index for n in session.node_list}
    eff = np.full(len(session.node_list), -np.inf)
    for name in names:
        eff[index[name]] = 0.0
    total = np.zeros(len(session.node_list))
    for make in engine.dynamic_scores:
        scorer = make(task)
        if scorer is not None:
            extra = scorer(eff)
            if extra is not None:
                total += extra
    return {name: float(total[index[name]]) for name in names}


def _plugin(session: Session) -> NetworkTopologyAwarePlugin:
    plugin = session.plugins[PLUGIN]
    assert isinstance(plugin, NetworkTopologyAwarePlugin)
    return plugin


# --- TestNew -------------------------------------------------------------------------------


def test_new_without_arguments() -> None:
    """TestNew, "build plugin with no arguments": every weight 1, normal pods binpacked
    with fading 0.8."""
    assert parse_arguments({}) == TopologyArguments(1, 1, 1, {}, True, 0.8)


def test_new_with_valid_arguments() -> None:
    """TestNew, "build plugin with customized valid arguments": a listed resource without a
    weight of its own weighs 1 (the case's gpu weight key is misspelt)."""
    args = parse_arguments(
        {
            "weight": 2,
            "hypernode.binpack.cpu": 3,
            "hypernode.binpack.memory": 4,
            "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpuxxx": 5,
            "hypernode.binpack.resources.example.com/foo": 6,
            "hypernode.binpack.normal-pod.enable": False,
            "hypernode.binpack.normal-pod.fading": 0,
        }
    )
    assert args == TopologyArguments(
        2, 3, 4, {"nvidia.com/gpu": 1, "example.com/foo": 6}, False, 0.0
    )


def test_new_with_invalid_arguments() -> None:
    """TestNew, "build plugin with customized invalid arguments": negative weights and
    fading, and a non-boolean enable, fall back to the defaults."""
    args = parse_arguments(
        {
            "weight": -1,
            "hypernode.binpack.cpu": -1,
            "hypernode.binpack.memory": -1,
            "hypernode.binpack.resources": "nvidia.com/gpuxxx, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpu": -1,
            "hypernode.binpack.resources.example.com/foo": -1,
            "hypernode.binpack.normal-pod.enable": "a",
            "hypernode.binpack.normal-pod.fading": -1,
        }
    )
    assert args == TopologyArguments(
        1, 1, 1, {"nvidia.com/gpuxxx": 1, "example.com/foo": 1}, True, 0.8
    )


# --- TestNetworkTopologyAwareNodeScore_Hard / _Soft ----------------------------------------

TWO_TIERS = [
    parent_of("s0", 2, "s1", "s2"),
    nodes_of("s1", 1, "s1-n1", "s1-n2"),
    nodes_of("s2", 1, "s2-n1", "s2-n2"),
]
ONE_TIER = TWO_TIERS[1:]
SMALL_NODES = ["s1-n1", "s1-n2", "s2-n1", "s2-n2"]
S0_WITHOUT_S2 = [parent_of("s0", 3, "s1"), *STANDARD[1:]]

_CLOSENESS_CASES = [
    pytest.param(
        STANDARD, STANDARD_NODES, [], "", ["s3-n1", "s4-n1", "s5-n1"], 1, 1,
        {"s3-n1": 0.0, "s4-n1": 0.0, "s5-n1": 0.0},
        id="first scheduling: every node 0",
    ),
    pytest.param(
        S0_WITHOUT_S2, STANDARD_NODES, ["s3-n1", "s3-n2"], "s3",
        ["s5-n1", "s6-n1", "s3-n1"], 1, 1, {"s5-n1": 0.0, "s6-n1": 0.0, "s3-n1": 100.0},
        id="LCA is the cluster top: 0",
    ),
    pytest.param(
        STANDARD, STANDARD_NODES, ["s3-n1", "s3-n2"], "s3", ["s3-n1", "s4-n1", "s5-n1"], 1, 1,
        {"s3-n1": 100.0, "s4-n1": 66.6, "s5-n1": 33.3},
        id="by the LCA's tier",
    ),
    pytest.param(
        TWO_TIERS, SMALL_NODES, ["s1-n1"], "s1", ["s1-n1", "s2-n1"], 1, 1,
        {"s1-n1": 100.0, "s2-n1": 50.0},
        id="two tiers",
    ),
    pytest.param(
        ONE_TIER, SMALL_NODES, ["s1-n1"], "s1", ["s1-n1", "s2-n1"], 1, 1,
        {"s1-n1": 100.0, "s2-n1": 0.0},
        id="one tier",
    ),
    pytest.param(
        STANDARD, STANDARD_NODES, ["s3-n1", "s3-n2"], "s3", ["s3-n1", "s4-n1", "s5-n1"], 2, 1,
        {"s3-n1": 200.0, "s4-n1": 133.3, "s5-n1": 66.6},
        id="plugin weight 2",
    ),
    pytest.param(
        STANDARD, STANDARD_NODES, ["s3-n1", "s3-n2", "s4-n1"], "s1",
        ["s3-n1", "s4-n1", "s5-n1"], 1, 3,
        {"s3-n1": 116.6, "s4-n1": 91.6, "s5-n1": 33.3},
        id="ties broken by the job's task count",
    ),
]  # fmt: skip


def _closeness(
    mode: str,
    hypernodes: list[HyperNode],
    node_names: list[str],
    running_on: list[str],
    allocated: str,
    score_nodes: list[str],
    weight: int,
    min_member: int,
    expected: dict[str, float],
) -> None:
    nodes = [node(n, rl("2", "4Gi", PODS)) for n in node_names]
    pods = [pod(f"p{i}", n, True, rl("2", "4G"), "pg1") for i, n in enumerate(running_on, 1)]
    pods.append(pod(f"p{len(pods) + 1}", "", False, rl("2", "4G"), "pg1"))
    topology = hard(0) if mode == "hard" else soft(0)
    session = _session(
        nodes, pods, hypernodes, topology=topology, arguments={"weight": weight},
        min_member=min_member,
    )  # fmt: skip
    job, task = _pending(session)
    session.topology.scoring[job.uid] = allocated
    scores = _scores(session, task, score_nodes)
    for name, value in expected.items():
        assert math.isclose(scores[name], value, abs_tol=EPS), (name, scores)


@pytest.mark.parametrize(
    ("hypernodes", "node_names", "running_on", "allocated", "score_nodes", "weight",
     "min_member", "expected"),
    _CLOSENESS_CASES,
)  # fmt: skip
def test_node_score_hard(
    hypernodes: list[HyperNode], node_names: list[str], running_on: list[str], allocated: str,
    score_nodes: list[str], weight: int, min_member: int, expected: dict[str, float],
) -> None:  # fmt: skip
    """TestNetworkTopologyAwareNodeScore_Hard, its seven cases: 1 in the job's HyperNode,
    else (top tier - LCA tier) / (top tier - lowest tier), the cluster top counting as the
    highest tier; nodes tied at the best score gain the share of the job's tasks on their
    HyperNode; x 100 x weight."""
    _closeness("hard", hypernodes, node_names, running_on, allocated, score_nodes, weight,
               min_member, expected)  # fmt: skip


@pytest.mark.parametrize(
    ("hypernodes", "node_names", "running_on", "allocated", "score_nodes", "weight",
     "min_member", "expected"),
    _CLOSENESS_CASES,
)  # fmt: skip
def test_node_score_soft(
    hypernodes: list[HyperNode], node_names: list[str], running_on: list[str], allocated: str,
    score_nodes: list[str], weight: int, min_member: int, expected: dict[str, float],
) -> None:  # fmt: skip
    """TestNetworkTopologyAwareNodeScore_Soft, its seven cases (the same as the hard ones,
    with mode soft: the node scores do not depend on the mode)."""
    _closeness("soft", hypernodes, node_names, running_on, allocated, score_nodes, weight,
               min_member, expected)  # fmt: skip


# --- TestBatchNodeOrderFn -------------------------------------------------------------------

FOO = "example.com/foo"
CUSTOM = {
    "weight": 10,
    "hypernode.binpack.cpu": 1,
    "hypernode.binpack.memory": 4,
    "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
    "hypernode.binpack.resources.nvidia.com/gpu": 2,
    "hypernode.binpack.resources.example.com/foo": 3,
    "hypernode.binpack.normal-pod.enable": True,
    "hypernode.binpack.normal-pod.fading": 0,
}


def _mixed_nodes(foo: bool) -> list[NodeInfo]:
    """s3: 2 cpu / 4G, s4: 4 / 4G, s5: 2 / 8G, s6: 4 / 8G (with 8 / 8 / 16 / 16 foo)."""
    shapes = {"s3": ("2", "4G", "8"), "s4": ("4", "4G", "8"), "s5": ("2", "8G", "16"),
              "s6": ("4", "8G", "16")}  # fmt: skip
    out = []
    for name in STANDARD_NODES:
        cpu, mem, amount = shapes[name[:2]]
        out.append(node(name, rl(cpu, mem, {**PODS, **({FOO: amount} if foo else {})})))
    return out


def _batch(
    nodes: list[NodeInfo],
    pods: list[Pod],
    arguments: Mapping[str, object],
    topology: NetworkTopology | None = None,
    allocated: str = "",
) -> dict[str, float]:
    session = _session(nodes, pods, STANDARD, topology=topology, arguments=arguments,
                       min_member=2 if topology else 1)  # fmt: skip
    job, task = _pending(session)
    if topology is not None:
        session.topology.scoring[job.uid] = allocated
    return _scores(session, task, STANDARD_NODES)


def _near(actual: Mapping[str, float], expected: Mapping[str, float]) -> None:
    for name, value in expected.items():
        assert math.isclose(actual[name], value, abs_tol=EPS), (name, dict(actual))


def test_batch_node_order_normal_pod_binpacking_off() -> None:
    """TestBatchNodeOrderFn, "... no hypernode-level binpacking": no score at all."""
    scores = _batch(
        _mixed_nodes(False), [pod("p1", "", False, rl("2", "4G"), "pg1")],
        {"hypernode.binpack.normal-pod.enable": False},
    )  # fmt: skip
    assert scores == dict.fromkeys(STANDARD_NODES, 0.0)


def test_batch_node_order_normal_pod_defaults() -> None:
    """TestBatchNodeOrderFn, "... default plugin arguments": the HyperNode binpacking of
    every tier (the cluster top's too) weighted by 0.8 ^ (tier - 1)."""
    scores = _batch(_mixed_nodes(False), [pod("p1", "", False, rl("2", "4G"), "pg1")], {})
    _near(scores, {"s3-n1": 25.8, "s3-n2": 25.8, "s4-n1": 21.6, "s4-n2": 21.6,
                   "s5-n1": 19.9, "s5-n2": 19.9, "s6-n1": 15.7, "s6-n2": 15.7})  # fmt: skip


def test_batch_node_order_normal_pod_custom_arguments() -> None:
    """TestBatchNodeOrderFn, "score empty nodes ... customized plugin arguments": fading 0
    leaves tier 1 alone; per-resource weights; weight 10."""
    scores = _batch(
        _mixed_nodes(True), [pod("p1", "", False, rl("2", "4G", {FOO: "8"}), "pg1")], CUSTOM
    )
    _near(scores, {"s3-n1": 500.0, "s3-n2": 500.0, "s4-n1": 468.75, "s4-n2": 468.75,
                   "s5-n1": 281.3, "s5-n2": 281.3, "s6-n1": 250.0, "s6-n2": 250.0})  # fmt: skip


def test_batch_node_order_normal_pod_on_busy_nodes() -> None:
    """TestBatchNodeOrderFn, "score non-empty nodes ...": s3 is full, so its nodes score 0."""
    request = rl("2", "4G", {FOO: "8"})
    pods = [
        pod("p1", "", False, request, "pg1"),
        pod("p2", "s3-n1", True, request, "pg1"),
        pod("p3", "s3-n2", True, request, "pg1"),
    ]
    scores = _batch(_mixed_nodes(True), pods, CUSTOM)
    _near(scores, {"s3-n1": 0.0, "s3-n2": 0.0, "s4-n1": 468.8, "s4-n2": 468.8,
                   "s5-n1": 281.3, "s5-n2": 281.3, "s6-n1": 250.0, "s6-n2": 250.0})  # fmt: skip


def test_batch_node_order_network_topology_pod() -> None:
    """TestBatchNodeOrderFn, "score nodes for tasks with network topology" (its sub-group's
    hard tier-2 topology on the job): closeness to s1, ties broken by task count."""
    pods = [
        pod("p1", "", False, rl("2", "4G"), "pg1", role="worker"),
        pod("p2", "s4-n1", True, rl("2", "4G"), "pg1", role="worker"),
    ]
    scores = _batch(_mixed_nodes(False), pods, {}, hard(2), "s1")
    _near(scores, {"s3-n1": 66.7, "s3-n2": 66.7, "s4-n1": 116.7, "s4-n2": 116.7,
                   "s5-n1": 33.3, "s5-n2": 33.3, "s6-n1": 33.3, "s6-n2": 33.3})  # fmt: skip


# --- TestHyperNodeOrderFn -------------------------------------------------------------------


def _hypernode_scores(nodes: list[NodeInfo], request: Resources, args: Mapping[str, object]
                      ) -> dict[str, float]:  # fmt: skip
    pods = [pod("p1", "", False, request, "pg1", role="worker"),
            pod("p2", "", False, request, "pg1", role="worker")]  # fmt: skip
    session = _session(nodes, pods, STANDARD, topology=hard(2), arguments=args, min_member=2)
    job, _task = _pending(session)
    names = [h.name for h in STANDARD] + [CLUSTER_TOP]
    return session.hypernode_scores(job, names)


def test_hypernode_order_default_arguments() -> None:
    """TestHyperNodeOrderFn, "... default plugin arguments": how full each HyperNode would
    be with both 4-cpu pods (0 where they do not fit)."""
    scores = _hypernode_scores(_mixed_nodes(False), rl("4", "4G"), {})
    _near(scores, {"s0": 25.0, "s1": 58.3, "s2": 45.8, "s3": 0.0, "s4": 100.0, "s5": 0.0,
                   "s6": 75.0, CLUSTER_TOP: 25.0})  # fmt: skip


def test_hypernode_order_custom_arguments() -> None:
    """TestHyperNodeOrderFn, "... customized plugin arguments" (foo only on every first
    node)."""
    shapes = {"s3": ("2", "4G", "8"), "s4": ("4", "4G", "8"), "s5": ("2", "8G", "16"),
              "s6": ("4", "8G", "16")}  # fmt: skip
    nodes = []
    for name in STANDARD_NODES:
        cpu, mem, foo = shapes[name[:2]]
        nodes.append(node(name, rl(cpu, mem, {**PODS, FOO: foo if name.endswith("1") else "0"})))
    args = {**CUSTOM, "hypernode.binpack.cpu": 3}
    scores = _hypernode_scores(nodes, rl("4", "4G", {FOO: "8"}), args)
    _near(scores, {"s0": 266.7, "s1": 700.0, "s2": 450.0, "s3": 0.0, "s4": 0.0, "s5": 0.0,
                   "s6": 800.0, CLUSTER_TOP: 266.7})  # fmt: skip


# --- Test_initHyperNodeResourceCache / Test_batchNodeOrderFnForNormalPods --------------------


def _large(tiers_count: Sequence[int], fading: float) -> tuple[ClusterSnapshot, list[HyperNode]]:
    """2,000 nodes (100 cpu, 8,000 memory, 10 foo; half of each used), HyperNodes of tiers
    1.. with `tiers_count` HyperNodes each, node i in HyperNode i % count of every tier."""
    count = 2000
    nodes = [node(f"node-{i}", rl("100", "8000", {FOO: "10"})) for i in range(count)]
    pods = [pod(f"used-{i}", f"node-{i}", True, rl("50", "4000", {FOO: "5"}), "busy")
            for i in range(count)]  # fmt: skip
    pods.append(pod("p1", "", False, rl("50", "4000", {FOO: "5"}), "pg1"))
    hypernodes: list[HyperNode] = []
    for tier, number in enumerate(tiers_count, 1):
        members: dict[int, list[str]] = {}
        for i in range(count):
            members.setdefault(i % number, []).append(f"node-{i}")
        hypernodes.extend(
            nodes_of(f"hypernode-tier-{tier}-index-{k}", tier, *members[k]) for k in members
        )
    snapshot = build(
        nodes, pods, [pg("pg1", "q1", 1, INQUEUE), pg("busy", "q1", 1, INQUEUE)], [queue("q1")]
    )
    return with_topology(snapshot, hypernodes), hypernodes


def test_init_hypernode_resource_cache() -> None:
    """Test_initHyperNodeResourceCache (2,000 nodes; 200, 40, 5 and 1 HyperNodes per tier):
    each HyperNode's allocatable and used are its nodes' sums."""
    snapshot, hypernodes = _large([200, 40, 5, 1], 0.8)
    args = {"weight": 10, "hypernode.binpack.cpu": 5, "hypernode.binpack.memory": 5,
            "hypernode.binpack.resources": FOO, f"hypernode.binpack.resources.{FOO}": 5,
            "hypernode.binpack.normal-pod.enable": True,
            "hypernode.binpack.normal-pod.fading": 0.8}  # fmt: skip
    session = open_session(snapshot, tiers((PLUGIN, {"NodeOrder"}), arguments={PLUGIN: args}))
    state = _plugin(session).state
    assert state is not None
    usage = state.usage
    layout = session.topology.layout
    per = {1: 10, 2: 50, 3: 400, 4: 2000}
    for hn in hypernodes:
        h = layout.index[hn.name]
        n = per[hn.tier]
        for name, alloc, used in (("cpu", 100, 50), ("memory", 8000, 4000), (FOO, 10, 5)):
            r = usage.row_of[name]
            assert usage.allocatable[r, h] * MILLI_NANO == n * alloc * 10**9
            assert usage.used[r, h] * MILLI_NANO == n * used * 10**9


def test_batch_node_order_for_normal_pods_at_scale() -> None:
    """Test_batchNodeOrderFnForNormalPods (2,000 nodes; 200, 40 and 5 HyperNodes in tiers
    1-3; fading 1): every node scores 0.515375 before scaling. Volcano's case has a fourth
    tier holding every node and calls the function with tiers 1-4; here the cluster top
    is that fourth tier (it holds every node and sits at tier 4), so the tiers are the
    same. Scaled x 100 x weight 10 as the session reports it."""
    snapshot, _hns = _large([200, 40, 5], 1.0)
    args = {"weight": 10, "hypernode.binpack.cpu": 5, "hypernode.binpack.memory": 5,
            "hypernode.binpack.resources": FOO, f"hypernode.binpack.resources.{FOO}": 5,
            "hypernode.binpack.normal-pod.enable": True,
            "hypernode.binpack.normal-pod.fading": 1}  # fmt: skip
    session = open_session(snapshot, tiers((PLUGIN, {"NodeOrder"}), arguments={PLUGIN: args}))
    job = session.jobs["ns1/pg1"]
    task = next(iter(job.tasks.values()))
    names = [n.name for n in session.node_list]
    scores = _scores(session, task, names)
    assert all(math.isclose(s, 0.515375 * 100 * 10, abs_tol=EPS) for s in scores.values())


# --- TestHyperNodeGradientPreFiltering ------------------------------------------------------


def _prefilter_cluster(running: int, releasing: int, pipelined: int) -> ClusterSnapshot:
    """1,000 nodes of 4 cpu / 8Gi in 100 tier-1 HyperNodes of 10 (hn-1-i) under hn-2-0;
    hn-1-0's nodes hold `running`, `releasing` and `pipelined` cpus (2Gi per cpu) of other
    pods: its idle is 40 - running - releasing, its future idle that plus releasing minus
    pipelined (the states Volcano's case writes into the cache by hand)."""
    nodes = [node(f"node-{i}", rl("4", "8Gi")) for i in range(1000)]
    pods: list[Pod] = []
    slots = iter(f"node-{i}" for i in range(10) for _ in range(4))
    for kind, count in (("run", running), ("rel", releasing), ("pip", pipelined)):
        for k in range(count):
            pods.append(pod(f"{kind}-{k}", next(slots), True, rl("1", "2Gi"), "other"))
    snapshot = build(nodes, pods, [pg("other", "q1", 1, INQUEUE)], [queue("q1")])
    for job in snapshot.jobs:
        for task in job.tasks.values():
            if task.name.startswith("rel"):
                job.update_task_status(task, TaskStatus.RELEASING)
            elif task.name.startswith("pip"):
                job.update_task_status(task, TaskStatus.PIPELINED)
    hypernodes = [
        nodes_of(f"hn-1-{i}", 1, *(f"node-{i * 10 + j}" for j in range(10))) for i in range(100)
    ]
    hypernodes.append(parent_of("hn-2-0", 2, *(f"hn-1-{i}" for i in range(100))))
    return with_topology(snapshot, hypernodes)


@pytest.mark.parametrize(
    ("tier", "minimum", "running", "releasing", "pipelined", "selected"),
    [
        (2, 20, 5, 5, 0, True),    # idle 30, future idle 35
        (2, 20, 10, 0, 15, True),  # idle 30, future idle 15
        (2, 20, 10, 15, 0, True),  # idle 15, future idle 30
        (2, 20, 25, 0, 0, False),  # idle 15, future idle 15
        (1, 10, 15, 5, 0, True),   # idle 20, future idle 25
        (1, 10, 20, 0, 15, True),  # idle 20, future idle 5
        (1, 10, 20, 15, 0, True),  # idle 5, future idle 20
        (1, 10, 35, 0, 0, False),  # idle 5, future idle 5
    ],
    ids=[
        "job idle ok future ok", "job idle ok future short", "job idle short future ok",
        "job both short", "subjob idle ok future ok", "subjob idle ok future short",
        "subjob idle short future ok", "subjob both short",
    ],
)  # fmt: skip
def test_hypernode_gradient_pre_filtering(
    tier: int, minimum: int, running: int, releasing: int, pipelined: int, selected: bool
) -> None:
    """TestHyperNodeGradientPreFiltering, its eight cases (the sub-job ones as a job with
    the sub-job's tier): hn-1-0 is offered when the job's minResources fit its idle or its
    future idle; groups come lowest tier first."""
    snapshot = _prefilter_cluster(running, releasing, pipelined)
    pods = [pod("p1", "", False, rl("1", "2Gi"), "pg1")]
    job_snapshot = build(list(snapshot.nodes), pods, [pg("pg1", "q1", 1, INQUEUE,
                         min_resources=rl(str(minimum), f"{2 * minimum}Gi"))], [queue("q1")])
    merged = ClusterSnapshot(snapshot.nodes, [*snapshot.jobs, *job_snapshot.jobs],
                             snapshot.queues, hypernodes=snapshot.hypernodes)  # fmt: skip
    merged = with_topology(merged, snapshot.hypernodes, {"pg1": hard(tier)})
    session = open_session(merged, tiers((PLUGIN, {"HyperNodeGradient"})))
    job = session.jobs["ns1/pg1"]
    groups = session.hypernode_gradients(job, "hn-2-0")
    assert any("hn-1-0" in group for group in groups) is selected
    tiers_seen = [session.topology.tier(group[0]) for group in groups if group]
    assert tiers_seen == sorted(tiers_seen)


def test_reverse_and_cap_eviction_gradients() -> None:
    """TestReverseAndCapEvictionGradients (v1.15.1): widest gradient first, three HyperNodes
    at most (the last of a cut gradient kept); no cap leaves the gradients as they are."""
    gradients = [["a", "b"], ["c", "d"]]
    assert reverse_and_cap(gradients, 3) == [["c", "d"], ["b"]]
    assert reverse_and_cap(gradients, 0) == gradients


@pytest.mark.parametrize(("cpu", "empty"), [
    pytest.param("20", True, id="no-zone-fits"),
    pytest.param("10", False, id="control: a zone fits"),
])
def test_hypernode_gradient_no_sub_job_policy_respects_hard_topology(cpu: str,
                                                                      empty: bool) -> None:
    """TestHyperNodeGradientForSubJobFn_NoSubJobPolicyRespectsHardTopology (v1.15.1): zones
    a and d of two 8-cpu nodes under a tier-2 region; a job hard within tier 1 whose pending
    task asks 20 cpu gets no eviction gradient from the cluster top: no tier-1 zone can hold
    it, and it does not fall back to the region or the top. (Control: 10 cpu fits a zone.)"""
    names = ("node-a-1", "node-a-2", "node-d-1", "node-d-2")
    nodes = [node(n, rl("8", "32Gi")) for n in names]
    snapshot = build(nodes, [pod("pending-task", "", False, rl(cpu, "1Gi"), "pg1")],
                     [pg("pg1", "q1", 1, INQUEUE)], [queue("q1")])
    hypernodes = [nodes_of("zone-a", 1, *names[:2]), nodes_of("zone-d", 1, *names[2:]),
                  parent_of("region", 2, "zone-a", "zone-d")]
    snapshot = with_topology(snapshot, hypernodes, {"pg1": hard(1)})
    session = open_session(snapshot, tiers((PLUGIN, {"HyperNodeGradient"})))
    job = session.jobs["ns1/pg1"]
    # the sub-job form: a HyperNode must hold the pending task's 20 cpu (the job's
    # minResources, unset here, would let both zones in: checked before the sub-job form)
    groups = session.hypernode_gradients(job, CLUSTER_TOP, PURPOSE_EVICT,
                                         job.pending_request())
    assert (not any(groups)) is empty, groups
    if not empty:
        assert all(session.topology.tier(h) == 1 for group in groups for h in group)
