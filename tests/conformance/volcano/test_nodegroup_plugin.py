"""nodegroup plugin: cases of volcano-sh/volcano pkg/scheduler/plugins/nodegroup/nodegroup_test.go
(TestNodeGroup, TestNodeGroupResourceLimits, TestNodeGroupResourceLimitAllocationEvent), run
through the plugin's registered callbacks in a real session (one tier: nodegroup with its
predicate and node order on, hierarchy as the case sets it).

Volcano's status codes are Success or UnschedulableAndUnresolvable: here a node passes or
is refused with the reason Volcano gives. TestNodeGroupResourceLimits asserts only codes;
its three cases where nothing is refused also assert the node scores (150 on the preferred
group1, 100 on group2), so that each can fail.

Switched off and run (`test_every_case_fails_with_nodegroup_off`, nodegroup not configured:
every node passes and scores 0): every case fails, checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from koordqueue.scheduler.api import NodeInfo, PodGroupPhase, QueueInfo
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.api.queue_info import NodeGroupAffinity
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.session import Session

from .harness import Pod, build, node, pg, pod, queue, rl, tiers

OK = "Success"
PENDING = PodGroupPhase.PENDING
RUNNING = PodGroupPhase.RUNNING
Verdicts = dict[str, dict[str, tuple[str, float]]]


def _group(name: str) -> dict[str, str]:
    return {vn.NODE_GROUP_NAME_LABEL: name}


def _q(name: str, affinity: NodeGroupAffinity | None, *, parent: str | None = None,
       limits: str | None = None) -> QueueInfo:
    return dataclasses.replace(
        queue(name, parent=parent), node_group_affinity=affinity, node_group_limits=limits)


def _aff(required: Sequence[str] = (), preferred: Sequence[str] = (),
         anti_required: Sequence[str] = (), anti_preferred: Sequence[str] = ()
         ) -> NodeGroupAffinity:
    return NodeGroupAffinity(frozenset(required), tuple(preferred), frozenset(anti_required),
                             frozenset(anti_preferred))


FULL = _aff(["group1", "group3"], ["group3"], ["group2", "group4"], ["group4"])
"""rootQ's and q1's affinity."""
NODES = [
    node("n1", rl("2", "4Gi"), _group("group1")),
    node("n2", rl("4", "16Gi"), _group("group2")),
    node("n3", rl("4", "16Gi"), _group("group3")),
    node("n4", rl("4", "16Gi"), _group("group4")),
    node("n5", rl("4", "16Gi"), {}),
]
_off = False
"""Set by the switch-off test: nodegroup is then left out of the configuration."""


def _session(nodes: Sequence[NodeInfo], pods: Sequence[Pod], groups: Sequence[tuple[str, str]],
             queues: Sequence[QueueInfo], *, arguments: Mapping[str, object] | None = None,
             hierarchy: bool = False, phases: Mapping[str, PodGroupPhase] | None = None,
             ns: str = "c1") -> Session:
    switches = {"Predicate", "NodeOrder"} | ({"Hierarchy"} if hierarchy else set())
    plugin = "gang" if _off else vn.NODEGROUP  # gang registers no predicate or score
    config = tiers((plugin, switches), arguments={plugin: dict(arguments or {})})
    snapshot = build(
        nodes, pods,
        [pg(g, q, 0, (phases or {}).get(g, PENDING)) for g, q in groups], queues, ns)
    return open_session(snapshot, config)


def verdicts(session: Session) -> Verdicts:
    """ssn.PredicateFn and ssn.NodeOrderFn of every task on every node: the reason a node
    is refused (or "Success") and the node's score from the query-time callbacks."""
    engine = session.placement
    nodes = session.node_list
    out: Verdicts = {}
    for job in session.jobs.values():
        for task in job.tasks.values():
            passes = np.ones(len(nodes), dtype=np.bool_)
            for fn, _explain in engine.dynamic_predicates:
                mask = fn(task)
                if mask is not None:
                    passes &= mask
            scores = np.zeros(len(nodes), dtype=np.float64)
            for score_fn in engine.dynamic_scores:
                scorer = score_fn(task)
                extra = scorer(scores) if scorer is not None else None
                if extra is not None:
                    scores = scores + extra
            row: dict[str, tuple[str, float]] = {}
            for n in nodes:
                reason = OK
                if not passes[n.index]:
                    reason = next(
                        r for _fn, explain in engine.dynamic_predicates
                        if (r := explain(task, n)) is not None)
                row[n.name] = (reason, float(scores[n.index]))
            out[f"{task.namespace}/{task.name}"] = row
    return out


def _p(name: str, group: str, node_name: str = "", running: bool = False) -> Pod:
    return pod(name, node_name, running, rl("2", "4Gi"), group)


UNSAT = vn.ERR_NODE_GROUP_UNSATISFIED
NO_LABEL = vn.ERR_NODE_GROUP_LABEL_NOT_FOUND
NO_AFF = vn.ERR_NODE_GROUP_AFFINITY_NOT_FOUND
SUBSET = {"n1": (OK, 100.0), "n2": (UNSAT, 0.0), "n3": (OK, 150.0), "n4": (OK, -1.0),
          "n5": (NO_LABEL, 0.0)}
"""Cases 0, 3 and 4: required group1/group3, preferred group3, anti group2/group4 (group4
anti-preferred, which lets it back in at score -1)."""

CASES = {
    "soft constraints is subset of hard constraints": (
        [("pg1", "q1")], [_q("q1", FULL, parent="root")], [_p("p1", "pg1")], {}, False,
        {"c1/p1": SUBSET}),
    "soft constraints is not subset of hard constraints": (
        [("pg2", "q2")],
        [_q("q2", _aff(["group1"], ["group3"], ["group2"], ["group4"]), parent="root")],
        [_p("p2", "pg2")], {}, False,
        {"c1/p2": {"n1": (OK, 100.0), "n2": (UNSAT, 0.0), "n3": (OK, 50.0),
                   "n4": (OK, -1.0), "n5": (NO_LABEL, 0.0)}}),
    "no affinity, strict=false: only unlabelled nodes": (
        [("pg5", "root-no-affinity")], [_q("root-no-affinity", None)], [_p("p5", "pg5")],
        {"strict": False}, False,
        {"c1/p5": {"n1": (NO_AFF, 0.0), "n2": (NO_AFF, 0.0), "n3": (NO_AFF, 0.0),
                   "n4": (NO_AFF, 0.0), "n5": (OK, 0.0)}}),
    "affinity inherits from parent queue": (
        [("pg3", "q1-child")],
        [_q("root", FULL), _q("q1", FULL, parent="root"), _q("q1-child", None, parent="q1")],
        [_p("p3", "pg3")], {}, True, {"c1/p3": SUBSET}),
    "affinity inherits from ancestor if parent has none": (
        [("pg4", "q-no-affinity-child")],
        [_q("root", FULL), _q("q-no-affinity", None, parent="root"),
         _q("q-no-affinity-child", None, parent="q-no-affinity")],
        [_p("p4", "pg4")], {}, True, {"c1/p4": SUBSET}),
    "queue without affinity": (
        [("pg4", "q-no-affinity")], [_q("q-no-affinity", None, parent="root")],
        [_p("p4", "pg4")], {}, False,
        {"c1/p4": {"n1": (NO_AFF, 0.0), "n2": (NO_AFF, 0.0), "n3": (NO_AFF, 0.0),
                   "n4": (NO_AFF, 0.0), "n5": (NO_LABEL, 0.0)}}),
    "preferred nodegroup priority ordering": (
        [("pg6", "q3")], [_q("q3", _aff(preferred=["group1", "group3"]))], [_p("p6", "pg6")],
        {"enablePreferredOrder": True}, False,
        {"c1/p6": {"n1": (OK, 50.0), "n2": (UNSAT, 0.0), "n3": (OK, 25.0),
                   "n4": (UNSAT, 0.0), "n5": (NO_LABEL, 0.0)}}),
}


def _node_group_case(name: str) -> Verdicts:
    groups, queues, pods, arguments, hierarchy, _expected = CASES[name]
    return verdicts(_session(NODES, pods, groups, queues, arguments=arguments,
                             hierarchy=hierarchy))


@pytest.mark.parametrize("name", list(CASES))
def test_node_group(name: str) -> None:
    """TestNodeGroup: the reason (Volcano's status code, UnschedulableAndUnresolvable for
    every refusal) and the score of each node, per case."""
    assert _node_group_case(name) == CASES[name][5]


# --- TestNodeGroupResourceLimits ---------------------------------------------------------------
BIG = rl("16", "64Gi", {"pods": "32"})
LIMIT_NODES = [node("n1", BIG, _group("group1")), node("n2", BIG, _group("group2"))]
LIMIT_AFFINITY = _aff(["group1", "group2"], ["group1"])
EXCEEDED = vn.ERR_NODE_GROUP_LIMIT_EXCEEDED
FREE = {"n1": (OK, 150.0), "n2": (OK, 100.0)}
LIMIT_CASES: dict[str, tuple[str | None, bool, dict[str, tuple[str, float]]]] = {
    "no annotation keeps existing behavior": (None, False, FREE),
    "under nodegroup limit permits preferred nodegroup":
        ('{"group1":{"cpu":"3","memory":"8Gi"}}', False, FREE),
    "omitted resource dimension is unlimited": ('{"group1":{"cpu":"3"}}', False, FREE),
    "specified resource dimension is enforced":
        ('{"group1":{"cpu":"1"}}', False, {"n1": (EXCEEDED, 150.0), "n2": (OK, 100.0)}),
    "over nodegroup limit rejects preferred nodegroup and permits fallback":
        ('{"group1":{"cpu":"3","memory":"8Gi"}}', True,
         {"n1": (EXCEEDED, 150.0), "n2": (OK, 100.0)}),
    "invalid annotation rejects queue tasks":
        ('{"group1":{"cpu":', False, {"n1": (vn.ERR_NODE_GROUP_LIMIT_INVALID, 150.0),
                                      "n2": (vn.ERR_NODE_GROUP_LIMIT_INVALID, 100.0)}),
}


def _limit_case(name: str) -> dict[str, tuple[str, float]]:
    limits, used, _expected = LIMIT_CASES[name]
    pods = [_p("pending", "pg-pending")]
    groups = [("pg-pending", "q")]
    if used:  # a running pod of the queue already holds 2 cpu / 4Gi in group1
        pods.append(_p("used", "pg-used", "n1", running=True))
        groups.append(("pg-used", "q"))
    session = _session(LIMIT_NODES, pods, groups, [_q("q", LIMIT_AFFINITY, limits=limits)],
                       phases={"pg-used": RUNNING}, ns="limit")
    return verdicts(session)["limit/pending"]


@pytest.mark.parametrize("name", list(LIMIT_CASES))
def test_node_group_resource_limits(name: str) -> None:
    """TestNodeGroupResourceLimits: the pending pod (2 cpu, 4Gi) against group1's limit
    in the queue's `volcano.sh/nodegroup-resource-limits` annotation."""
    assert _limit_case(name) == LIMIT_CASES[name][2]


def _allocation_event() -> tuple[str | None, str | None]:
    """The second pod's verdict on n1 before and after the first is allocated there."""
    pods = [_p("pending-1", "pg-1"), _p("pending-2", "pg-2")]
    queue_ = _q("q-event-limit", _aff(["group1"]), limits='{"group1":{"cpu":"3","memory":"8Gi"}}')
    session = _session([LIMIT_NODES[0]], pods, [("pg-1", "q-event-limit"),
                                                ("pg-2", "q-event-limit")], [queue_], ns="limit")
    first = session.jobs["limit/pg-1"].tasks["limit-pending-1"]
    second = session.jobs["limit/pg-2"].tasks["limit-pending-2"]
    n1 = session.nodes["n1"]
    before = verdicts(session)["limit/pending-2"]["n1"][0]
    assert verdicts(session)["limit/pending-1"]["n1"][0] == OK
    session.allocate_task(first, n1)
    after = verdicts(session)["limit/pending-2"]["n1"][0]
    del second
    return before, after


def test_node_group_resource_limit_allocation_event() -> None:
    """TestNodeGroupResourceLimitAllocationEvent: two pods of 2 cpu under a group1 limit of
    3 cpu; once the first is allocated on n1, the second no longer fits the group."""
    assert _allocation_event() == (OK, EXCEEDED)


def test_every_case_fails_with_nodegroup_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case above, with nodegroup left out of the configuration: none gives what it
    expects (nodes all pass and score 0)."""
    monkeypatch.setattr(__name__ + "._off", True)
    for name, case in CASES.items():
        assert _node_group_case(name) != case[5], name
    for name, limit_case in LIMIT_CASES.items():
        assert _limit_case(name) != limit_case[2], name
    assert _allocation_event() != (OK, EXCEEDED)
