"""The allocate fast paths (issue 16, part 2) decide exactly like the plain per-task path.

Three fast paths: the placement engine refreshes the few nodes a placement changed with the
plugins' scalar twins (`ScalarPredicate` / `ScalarScore`) instead of numpy; allocate sorts a
job's tasks once (by the plugins' task order keys) instead of popping a heap; enqueue and
allocate keep their job queues by the plugins' job order keys instead of a heap of
comparisons. The references here switch them off (every refresh through the batch
callbacks; heaps of comparisons, as before) and must give the same session result on
random small snapshots.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from unittest import mock

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.scheduler import ClusterSnapshot, SessionResult, run_session
from koordqueue.scheduler.actions import allocate as allocate_module
from koordqueue.scheduler.api import (
    HostPort,
    JobInfo,
    NodeInfo,
    QueueInfo,
    Taint,
    TaskInfo,
    TaskStatus,
)
from koordqueue.scheduler.framework import placement as placement_module
from koordqueue.scheduler.framework.config import parse_config
from koordqueue.scheduler.framework.placement import NodeTensor, ScalarPredicate, ScalarScore
from koordqueue.scheduler.framework.session import KeyedJobQueue, Session, open_session
from koordqueue.scheduler.framework.util import PriorityQueue

from .builders import DEFAULT_TIERS, config, milli

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DEFAULT = config("enqueue, allocate, backfill", *DEFAULT_TIERS)
BINPACK = config(
    "enqueue, allocate, backfill, preempt",
    ("priority", "gang"),
    ("drf", "predicates", "proportion", "nodeorder", "binpack"),
)

_SHAPES = [
    milli({"cpu": 500, "memory": 512 * 2**20 * 1000}),
    milli({"cpu": 1000, "memory": 1024 * 2**20 * 1000}),
    milli({"cpu": 1500}),
    milli({"cpu": 2000, "memory": 4096 * 2**20 * 1000}),
]
_PORT = (HostPort(8080),)


@st.composite
def snapshots(draw: st.DrawFn) -> ClusterSnapshot:
    """Nodes (some pod-limited, tainted or cordoned), gang jobs of mostly identical tasks
    (so one cache entry serves several placements), some running, some with host ports or
    node selectors."""
    nodes = []
    for i in range(draw(st.integers(1, 16))):
        amounts = {
            "cpu": draw(st.sampled_from([2000, 4000, 8000])),
            "memory": draw(st.sampled_from([4096, 8192])) * 2**20 * 1000,
        }
        if draw(st.booleans()):
            amounts["pods"] = draw(st.integers(1, 4)) * 1000
        taints = draw(
            st.sampled_from(
                [(), (), (), (Taint("dedicated", "x"),), (Taint("spot", "", "PreferNoSchedule"),)]
            )
        )
        nodes.append(
            NodeInfo(
                f"n{i}",
                milli(amounts),
                labels={"zone": draw(st.sampled_from(["a", "b"]))},
                taints=taints,
                unschedulable=draw(st.integers(0, 9)) == 0,
            )
        )
    queues = [QueueInfo(f"q{q}", weight=draw(st.integers(1, 3))) for q in range(2)]
    jobs = []
    for j in range(draw(st.integers(1, 6))):
        shape = draw(st.sampled_from(_SHAPES))
        ports = _PORT if draw(st.integers(0, 4)) == 0 else ()
        selector = {"zone": "a"} if draw(st.integers(0, 4)) == 0 else {}
        count = draw(st.integers(1, 6))
        tasks = []
        for t in range(count):
            task = TaskInfo(
                f"j{j}t{t}",
                f"j{j}t{t}",
                resreq=shape,
                priority=draw(st.integers(0, 2)),
                host_ports=ports,
                node_selector=dict(selector),
                creation=float(draw(st.integers(0, 3))),
            )
            if draw(st.integers(0, 5)) == 0:
                task.status = TaskStatus.RUNNING
                task.node_name = draw(st.sampled_from(nodes)).name
            tasks.append(task)
        jobs.append(
            JobInfo(
                f"j{j}",
                queue=draw(st.sampled_from(queues)).name,
                min_available=draw(st.integers(1, count)),
                tasks=tasks,
                creation=float(j),
            )
        )
    return ClusterSnapshot(nodes, jobs, queues)


def _heap_queue(session: Session, tasks: Iterable[TaskInfo]) -> list[TaskInfo]:
    """The order a heap popped per task gives (the path before the sort), reversed so that
    `pop()` yields it."""
    heap = PriorityQueue(session.task_order_less, tasks)
    out = []
    while not heap.empty():
        out.append(heap.pop())
    out.reverse()
    return out


def _comparison_jobs(session: Session) -> PriorityQueue[JobInfo]:
    """The job queue before the keyed one: a heap of the session's comparisons."""
    return PriorityQueue(session.job_order_less)


@contextmanager
def plain_path() -> Iterator[None]:
    """Every refresh through the batch callbacks, the tasks popped from a heap, the jobs
    kept in a heap of comparisons."""
    with (
        mock.patch.object(placement_module, "_SCALAR_MAX", -1),
        mock.patch.object(allocate_module, "task_queue", _heap_queue),
        mock.patch.object(Session, "job_queue", _comparison_jobs),
    ):
        yield


def _decisions(result: SessionResult) -> tuple[object, ...]:
    return (
        result.binds,
        result.evictions,
        result.pipelined,
        result.phase_updates,
        {uid: (e.total_nodes, e.node_reasons) for uid, e in result.fit_errors.items()},
        dict(result.job_conditions),
    )


@SETTINGS
@given(snapshots())
def test_session_decides_like_the_plain_path(snapshot: ClusterSnapshot) -> None:
    for cfg in (DEFAULT, BINPACK):
        fast = run_session(snapshot, cfg)
        with plain_path():
            plain = run_session(snapshot, cfg)
        assert _decisions(fast) == _decisions(plain)


@SETTINGS
@given(snapshots())
def test_scalar_twins_equal_the_batch_callbacks(snapshot: ClusterSnapshot) -> None:
    session = open_session(snapshot, BINPACK)
    engine = session.placement
    tasks = [t for j in session.jobs.values() for t in j.tasks.values() if not t.best_effort]
    # Place some tasks first so used / pipelined / pod counts differ between nodes.
    for task in tasks[::2]:
        if task.status is TaskStatus.PENDING:
            choice = session.select_node(task)
            if isinstance(choice, tuple):
                session.allocate_task(task, choice[0])
    predicates = [fn for fn, _ in engine.batch_predicates]
    assert predicates and all(isinstance(fn, ScalarPredicate) for fn in predicates)
    assert engine.batch_scores and all(isinstance(fn, ScalarScore) for fn in engine.batch_scores)
    for task in tasks:
        for pred in predicates:
            assert isinstance(pred, ScalarPredicate)
            one = pred.prepare(task)
            for i in range(session.tensor.size):
                expected = bool(pred.batch(task, np.asarray([i], dtype=np.intp))[0])
                assert bool(one(i)) == expected
            # the wide (numpy) path as well
            wide = pred.batch(task, np.arange(session.tensor.size, dtype=np.intp))
            assert [bool(x) for x in wide] == [bool(one(i)) for i in range(session.tensor.size)]
        for score in engine.batch_scores:
            assert isinstance(score, ScalarScore)
            one_score = score.prepare(task)
            for i in range(session.tensor.size):
                assert one_score(i) == float(score.batch(task, np.asarray([i], dtype=np.intp))[0])


def test_scalar_twins_are_used_for_a_placement_refresh() -> None:
    """The fast path is really taken: a second placement of a gang refreshes the changed
    node through the twins (a mutant that never calls them fails this)."""
    # 8 nodes: a cache entry refreshes only the changed nodes when they are at most a quarter
    nodes = [NodeInfo(f"n{i}", milli({"cpu": 4000})) for i in range(8)]
    shape = milli({"cpu": 1000})
    tasks = [TaskInfo(f"t{i}", f"t{i}", resreq=shape) for i in range(3)]
    snapshot = ClusterSnapshot(
        nodes, [JobInfo("j", queue="q", min_available=3, tasks=tasks)], [QueueInfo("q")]
    )
    calls: list[int] = []
    original = placement_module.PlacementEngine._refresher

    def counting(self: placement_module.PlacementEngine, *args: object) -> Callable[[int], None]:
        refresh = original(self, *args)  # type: ignore[arg-type]

        def counted(i: int) -> None:
            calls.append(i)
            refresh(i)

        return counted

    with mock.patch.object(placement_module.PlacementEngine, "_refresher", counting):
        result = run_session(snapshot, DEFAULT)
    assert len(result.binds) == 3
    assert calls == [0, 1]  # the second and third placements each refresh the node before
    # leastrequested spreads identical pods over identical nodes
    assert [b.node for b in result.binds] == ["n0", "n1", "n2"]


def test_gc_paused_restores_the_collector_state() -> None:
    """allocate pauses the cyclic collector and gives it back as it found it (on, or off
    when the caller had turned it off), also when the block raises."""
    was = gc.isenabled()
    try:
        gc.enable()
        with allocate_module.gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        try:
            with allocate_module.gc_paused():
                raise RuntimeError("boom")
        except RuntimeError:
            pass
        assert gc.isenabled()
        gc.disable()
        with allocate_module.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()


def test_allocate_runs_with_the_collector_paused() -> None:
    seen: list[bool] = []
    original = allocate_module.AllocateAction._execute

    def spy(self: allocate_module.AllocateAction, session: Session) -> None:
        seen.append(gc.isenabled())
        original(self, session)

    nodes = [NodeInfo("n0", milli({"cpu": 4000}))]
    tasks = [TaskInfo("t0", "t0", resreq=milli({"cpu": 1000}))]
    snapshot = ClusterSnapshot(nodes, [JobInfo("j", queue="q", tasks=tasks)], [QueueInfo("q")])
    was = gc.isenabled()
    gc.enable()
    try:
        with mock.patch.object(allocate_module.AllocateAction, "_execute", spy):
            result = run_session(snapshot, DEFAULT)
        assert seen == [False]
        assert gc.isenabled()
        assert [b.node for b in result.binds] == ["n0"]
    finally:
        if not was:
            gc.disable()


def test_equal_placement_keys_are_one_object() -> None:
    """Pods with equal (but distinct) request objects share one key object, so the caches'
    look-ups compare by identity; a different request gets a different key."""
    a = TaskInfo("a", "a", resreq=milli({"cpu": 1000}))
    b = TaskInfo("b", "b", resreq=milli({"cpu": 1000}))
    c = TaskInfo("c", "c", resreq=milli({"cpu": 2000}))
    assert a.resreq is not b.resreq
    assert a.static_key() is b.static_key()
    assert a.placement_key() is b.placement_key()
    assert a.static_key() != c.static_key()
    assert b.clone().static_key() is a.static_key()


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-2, 2), st.integers(0, 3), st.integers(0, 30)),
        min_size=1,
        max_size=12,
        unique_by=lambda t: t[2],
    )
)
def test_task_order_keys_sort_like_the_comparisons(
    specs: list[tuple[int, int, int]],
) -> None:
    """allocate's sort by the plugins' task order keys gives the order a heap of the
    session's comparisons pops (a key with the wrong sign fails this)."""
    tasks = [
        TaskInfo(f"t{uid}", f"t{uid}", priority=prio, creation=float(created))
        for prio, created, uid in specs
    ]
    snapshot = ClusterSnapshot([], [JobInfo("j", queue="q", tasks=tasks)], [QueueInfo("q")])
    session = open_session(snapshot, DEFAULT)
    assert session.task_order_key() is not None  # the keyed sort is the one under test
    assert allocate_module.task_queue(session, tasks) == _heap_queue(session, tasks)


def test_task_order_without_a_key_falls_back_to_the_comparisons() -> None:
    """A task order function registered without a key turns the keyed sort off (the
    session cannot know its order), and the comparator sort still gives the heap order."""
    tasks = [TaskInfo(f"t{i}", f"t{i}", priority=i % 2) for i in range(5)]
    snapshot = ClusterSnapshot([], [JobInfo("j", queue="q", tasks=tasks)], [QueueInfo("q")])
    session = open_session(snapshot, DEFAULT)
    session.add_task_order_fn("priority", lambda left, right: left.priority - right.priority)
    assert session.task_order_key() is None
    ordered = allocate_module.task_queue(session, tasks)
    assert ordered == _heap_queue(session, tasks)
    assert [t.priority for t in reversed(ordered)] == [0, 0, 0, 1, 1]


def test_allocate_keeps_jobs_by_keys_with_the_default_plugins() -> None:
    """priority, gang and drf give job order keys, so the job queues of enqueue and
    allocate are keyed; drf
    with namespace order has none (the namespace weights change with other jobs'
    placements), so the comparisons are used there."""
    nodes = [NodeInfo("n0", milli({"cpu": 4000}))]
    tasks = [TaskInfo("t0", "t0", resreq=milli({"cpu": 1000}))]
    snapshot = ClusterSnapshot(nodes, [JobInfo("j", queue="q", tasks=tasks)], [QueueInfo("q")])
    assert isinstance(open_session(snapshot, DEFAULT).job_queue(), KeyedJobQueue)
    with_namespaces = parse_config(
        'actions: "enqueue, allocate"\n'
        "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n"
        "- plugins:\n  - name: drf\n    enableNamespaceOrder: true\n"
        "  - name: predicates\n  - name: proportion\n"
    )
    session = open_session(snapshot, with_namespaces)
    assert session.job_order_key() is None
    assert isinstance(session.job_queue(), PriorityQueue)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(1, 3), st.booleans()),
        min_size=1,
        max_size=10,
    )
)
def test_job_order_keys_pop_like_the_comparisons(
    specs: list[tuple[int, int, int, bool]],
) -> None:
    """A keyed job queue pops jobs (different priorities, creation times, shares and
    readiness) in the order of a heap of the session's comparisons."""
    nodes = [NodeInfo("n0", milli({"cpu": 64000}))]
    jobs = []
    for j, (prio, created, held, ready) in enumerate(specs):
        running = TaskInfo(f"j{j}r", f"j{j}r", resreq=milli({"cpu": 1000 * held}))
        running.status = TaskStatus.RUNNING
        running.node_name = "n0"
        pending = TaskInfo(f"j{j}p", f"j{j}p", resreq=milli({"cpu": 1000}))
        jobs.append(
            JobInfo(
                f"j{j}",
                queue="q",
                priority=prio,
                min_available=1 if ready else 2,
                tasks=[running, pending],
                creation=float(created),
            )
        )
    session = open_session(ClusterSnapshot(nodes, jobs, [QueueInfo("q")]), DEFAULT)
    keyed = session.job_queue()
    assert isinstance(keyed, KeyedJobQueue)
    plain = _comparison_jobs(session)
    for job in session.jobs.values():
        keyed.push(job)
        plain.push(job)
    popped = []
    while not plain.empty():
        popped.append((keyed.pop().uid, plain.pop().uid))
    assert keyed.empty()
    assert [a for a, _ in popped] == [b for _, b in popped]


@SETTINGS
@given(snapshots(), st.randoms(use_true_random=False))
def test_tensor_after_placements_equals_a_fresh_one(
    snapshot: ClusterSnapshot, rng: random.Random
) -> None:
    """An allocation's refresh copies only idle, used and future idle of the requested
    resources; after random allocations, pipelines and undos the arrays and their Python
    mirrors equal a tensor built afresh from the nodes (a refresh that skips a row fails)."""
    session = open_session(snapshot, DEFAULT)
    tasks = [t for j in session.jobs.values() for t in j.tasks.values() if not t.best_effort]
    placed: list[TaskInfo] = []
    for task in tasks:
        if task.status is not TaskStatus.PENDING:
            continue
        choice = session.select_node(task)
        if isinstance(choice, tuple):
            node, pipelined = choice
            (session.pipeline_task if pipelined else session.allocate_task)(task, node)
            placed.append(task)
        if placed and rng.random() < 0.2:
            session.unallocate_task(placed.pop(rng.randrange(len(placed))))
    tensor = session.tensor
    fresh = NodeTensor(list(tensor.nodes), list(tensor.dims))
    for name in ("idle", "used", "releasing", "pipelined", "future", "pod_count"):
        assert np.array_equal(getattr(tensor, name), getattr(fresh, name)), name
    for name in ("py_idle", "py_used", "py_pipelined", "py_future", "py_pod_count"):
        assert getattr(tensor, name) == getattr(fresh, name), name
