"""Identity shortcuts of the placement hot path decide exactly like plain look-ups (issue 16).

The pods of a gang share one interned placement key and one request object, so the
placement engine reuses the cache entry it used last when the key is the same object,
nodeorder reuses its last multi-level scorer the same way, and `NodeTensor.refresh` finds
the rows of a request by the object's identity. The reference here defeats every identity
match (each `static_key()` answer is a fresh equal tuple, every request a fresh equal
object) so that everything goes through equality look-ups; the decisions must not change.
"""

from __future__ import annotations

import random
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot, SessionResult, run_session
from koordqueue.scheduler.api import (
    JobInfo,
    NodeAffinity,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    QueueInfo,
    Taint,
    TaskInfo,
    TaskStatus,
    Toleration,
)
from koordqueue.scheduler.api import task_info as task_info_module
from koordqueue.scheduler.api.task_info import PlacementKey, PreferredSchedulingTerm
from koordqueue.scheduler.framework import node_tensor
from koordqueue.scheduler.framework.placement import NodeTensor
from koordqueue.scheduler.framework.session import open_session, run_actions

from .builders import DEFAULT_TIERS, config, milli

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DEFAULT = config("enqueue, allocate, backfill", *DEFAULT_TIERS)

_SHAPES = [
    milli({"cpu": 500, "memory": 512 * 2**20 * 1000}),
    milli({"cpu": 1000, "memory": 1024 * 2**20 * 1000}),
    milli({"cpu": 1500}),
]


def _prefer(weights: tuple[int, int]) -> NodeAffinity:
    """Preferred node affinity to gold and silver nodes: several score levels over nodes."""
    gold = NodeSelectorTerm((NodeSelectorRequirement("tier", "In", ("gold",)),))
    silver = NodeSelectorTerm((NodeSelectorRequirement("tier", "In", ("silver",)),))
    return NodeAffinity(
        preferred=(
            PreferredSchedulingTerm(weights[0], gold),
            PreferredSchedulingTerm(weights[1], silver),
        )
    )


_AFFINITIES = [None, _prefer((50, 20)), _prefer((10, 40))]


@st.composite
def snapshots(draw: st.DrawFn) -> ClusterSnapshot:
    """Nodes of three tiers (some PreferNoSchedule-tainted), gang jobs whose shapes and
    preferred node affinities alternate, so the last-used entry and scorer keep changing."""
    nodes = [
        NodeInfo(
            f"n{i}",
            milli(
                {"cpu": draw(st.sampled_from([2000, 4000])), "memory": 8192 * 2**20 * 1000}
            ),
            labels={"tier": draw(st.sampled_from(["gold", "silver", "bronze"]))},
            taints=(Taint("spot", "", "PreferNoSchedule"),) if draw(st.booleans()) else (),
        )
        for i in range(draw(st.integers(2, 12)))
    ]
    queues = [QueueInfo("q0"), QueueInfo("q1", weight=2)]
    jobs = []
    for j in range(draw(st.integers(1, 6))):
        shape = draw(st.sampled_from(_SHAPES))
        affinity = draw(st.sampled_from(_AFFINITIES))
        count = draw(st.integers(1, 5))
        tasks = [
            TaskInfo(f"j{j}t{t}", f"j{j}t{t}", resreq=shape, affinity=affinity)
            for t in range(count)
        ]
        jobs.append(
            JobInfo(
                f"j{j}",
                queue=queues[j % 2].name,
                min_available=draw(st.integers(1, count)),
                tasks=tasks,
                creation=float(j),
            )
        )
    return ClusterSnapshot(nodes, jobs, queues)


def _decisions(result: SessionResult) -> tuple[object, ...]:
    return (
        result.binds,
        result.pipelined,
        result.phase_updates,
        {uid: (e.total_nodes, e.node_reasons) for uid, e in result.fit_errors.items()},
        dict(result.job_conditions),
    )


_static_key = TaskInfo.static_key


def _fresh_key(task: TaskInfo) -> PlacementKey:
    """An equal key that is never the object asked for before (no identity match)."""
    return tuple(_static_key(task))


def _fresh_request_refresh(original: object) -> object:
    def refresh(self: NodeTensor, node: NodeInfo, touched: Resources | None = None) -> None:
        copy = None if touched is None else Resources(dict(touched.items()))
        original(self, node, copy)  # type: ignore[operator]

    return refresh


@SETTINGS
@given(snapshots())
def test_identity_shortcuts_decide_like_equality_lookups(snapshot: ClusterSnapshot) -> None:
    fast = run_session(snapshot, DEFAULT)
    with (
        mock.patch.object(TaskInfo, "static_key", _fresh_key),
        mock.patch.object(NodeTensor, "refresh", _fresh_request_refresh(NodeTensor.refresh)),
    ):
        plain = run_session(snapshot, DEFAULT)
    assert _decisions(fast) == _decisions(plain)


@SETTINGS
@given(snapshots(), st.integers(1, 3))
def test_tensor_refreshed_by_request_identity_equals_a_fresh_one(
    snapshot: ClusterSnapshot, remembered: int
) -> None:
    """After a session's placements (with the identity table starting over every few
    requests) the arrays and mirrors equal a tensor read afresh from the nodes."""
    with mock.patch.object(node_tensor, "_TOUCHED_MAX", remembered):
        session = open_session(snapshot, DEFAULT)
        run_actions(session)
    tensor = session.tensor
    fresh = NodeTensor(session.node_list, tensor.dims)
    for name in ("idle", "used", "releasing", "pipelined", "future", "pod_count"):
        assert np.array_equal(getattr(tensor, name), getattr(fresh, name)), name
    for name in ("py_idle", "py_used", "py_pipelined", "py_future", "py_pod_count"):
        assert getattr(tensor, name) == getattr(fresh, name), name


@SETTINGS
@given(snapshots(), st.randoms(use_true_random=False))
def test_entry_is_the_cached_entry_of_the_task_key(
    snapshot: ClusterSnapshot, rng: random.Random
) -> None:
    """Whatever order tasks are asked in, `_entry` hands out the entry cached under the
    task's key (a shortcut handing out the last entry for another key fails this)."""
    session = open_session(snapshot, DEFAULT)
    engine = session.placement
    tasks = [t for job in session.jobs.values() for t in job.tasks.values()]
    for task in rng.choices(tasks, k=3 * len(tasks)):
        assert engine._entry(task) is engine._cache[task.static_key()]


@SETTINGS
@given(snapshots(), st.randoms(use_true_random=False))
def test_dynamic_scores_do_not_depend_on_the_task_asked_before(
    snapshot: ClusterSnapshot, rng: random.Random
) -> None:
    """nodeorder's dynamic score for a task, asked after other tasks, scores the nodes as
    it does when that task is the first one asked (in a session of its own)."""
    session = open_session(snapshot, DEFAULT)
    (placement_scores,) = session.placement.dynamic_scores
    eff = np.zeros(session.tensor.size, dtype=np.float64)
    tasks = [t for job in session.jobs.values() for t in job.tasks.values()]
    for task in rng.choices(tasks, k=2 * len(tasks)):
        (alone,) = open_session(snapshot, DEFAULT).placement.dynamic_scores
        got, expected = placement_scores(task), alone(task)
        assert (got is None) == (expected is None)
        if got is not None and expected is not None:
            assert _same(got(eff), expected(eff))


def _same(left: np.ndarray | None, right: np.ndarray | None) -> bool:
    if left is None or right is None:
        return left is right
    return bool(np.array_equal(left, right))


def test_refresh_does_not_trust_a_reused_request_id() -> None:
    """A request object remembered by id may be gone and its id reused by another request
    (of other resources): refresh checks the object, not only the id."""
    nodes = [
        NodeInfo(f"n{i}", milli({"cpu": 4000, "memory": 8000})) for i in range(2)
    ]
    tensor = NodeTensor(nodes, ["cpu", "memory"])
    cpu_only = milli({"cpu": 1000})
    memory_only = milli({"memory": 1000})
    tensor.refresh(nodes[0], cpu_only)
    # as if `cpu_only` had died and `memory_only` had been given its id
    tensor._touched_by_id[id(memory_only)] = tensor._touched_by_id.pop(id(cpu_only))
    task = TaskInfo("t", "t", resreq=memory_only)
    task.status = TaskStatus.ALLOCATED
    nodes[1].add_task(task)
    tensor.refresh(nodes[1], memory_only)
    memory = tensor.index["memory"]
    assert tensor.idle[memory, 1] == tensor.py_idle[memory][1] == 7000.0
    assert tensor.used[memory, 1] == 1000.0


_TOLERATIONS = [(), (Toleration("spot", "Exists", "", "PreferNoSchedule"),)]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # which request object
            st.booleans(),  # a fresh equal copy of it instead
            st.sampled_from([{}, {"tier": "gold"}]),
            st.sampled_from(_TOLERATIONS),
            st.sampled_from(_AFFINITIES),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_placement_key_of_unconstrained_pods_by_request_identity(
    specs: list[tuple[int, bool, dict[str, str], tuple[Toleration, ...], NodeAffinity | None]],
) -> None:
    """The key found by the request object's identity is the interned general key (equal to
    it and the same object), with or without node constraints, shared or copied requests."""
    for which, copy, selector, tolerations, affinity in specs:
        request = _SHAPES[which]
        if copy:
            request = Resources(dict(request.items()))
        task = TaskInfo("t", "t", resreq=request, node_selector=dict(selector))
        task.tolerations, task.affinity = tolerations, affinity
        general = (request, tuple(sorted(selector.items())), tolerations, affinity, ())
        key = task.static_key()
        assert key == general
        assert key is task_info_module._interned(general)


def test_placement_key_does_not_trust_a_reused_request_id() -> None:
    """A request remembered by id may be gone and its id reused by another request."""
    first, second = _SHAPES[0], _SHAPES[1]
    TaskInfo("a", "a", resreq=first).static_key()
    # as if `first` had died and `second` had been given its id
    task_info_module._PLAIN_KEYS[id(second)] = task_info_module._PLAIN_KEYS.pop(id(first))
    key = TaskInfo("b", "b", resreq=second).static_key()
    assert key[0] == second != first
    assert key is task_info_module._interned((second, (), (), None, ()))
