"""Hypothesis properties of a whole session: capacity safety and gang atomicity."""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.domain.resources import Missing, Resources
from koordqueue.scheduler import ClusterSnapshot, SessionResult, parse_config, run_session
from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus

from .builders import DEFAULT_TIERS, config, milli

# KQ_HYPOTHESIS_EXAMPLES raises the budget for a deeper local run; CI keeps the suite fast.
SETTINGS = settings(
    max_examples=int(os.environ.get("KQ_HYPOTHESIS_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
DEFAULT = config("enqueue, allocate, backfill", *DEFAULT_TIERS)
WITH_PREEMPT = config("enqueue, allocate, backfill, preempt, reclaim", *DEFAULT_TIERS)
CAPACITY = parse_config("""
actions: "enqueue, allocate, backfill, reclaim"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: capacity
  - name: nodeorder
  - name: binpack
""")

cpu_milli = st.sampled_from([0, 100, 250, 500, 1000, 1500, 2000, 4000])
mem_mi = st.sampled_from([0, 128, 512, 1024, 4096])


@dataclass
class Cluster:
    snapshot: ClusterSnapshot
    running_on: dict[str, Resources]


@st.composite
def clusters(
    draw: st.DrawFn, with_capability: bool = False, max_nodes: int = 5, max_jobs: int = 6
) -> Cluster:
    """Random nodes, queues and gang jobs; some tasks already running (always fitting)."""
    nodes = []
    for i in range(draw(st.integers(1, max_nodes))):
        alloc = milli(
            {
                "cpu": draw(st.sampled_from([1000, 2000, 4000, 8000])),
                "memory": draw(st.sampled_from([2048, 8192])) * 2**20 * 1000,
            }
        )
        labels = {"zone": draw(st.sampled_from(["a", "b"]))}
        nodes.append(NodeInfo(f"n{i}", alloc, labels=labels))
    queues = []
    for q in range(draw(st.integers(1, 3))):
        cap = None
        if with_capability and draw(st.booleans()):
            cap = milli({"cpu": draw(st.sampled_from([500, 1000, 3000, 6000]))})
        queues.append(QueueInfo(f"q{q}", weight=draw(st.integers(1, 4)), capability=cap))
    free = {n.name: n.allocatable.as_dict() for n in nodes}
    running_on: dict[str, Resources] = {n.name: Resources() for n in nodes}
    used_by_queue: dict[str, Resources] = {q.name: Resources() for q in queues}
    jobs = []
    for j in range(draw(st.integers(1, max_jobs))):
        queue = draw(st.sampled_from(queues))
        tasks = []
        count = draw(st.integers(1, 5))
        for t in range(count):
            req = milli(
                {"cpu": draw(cpu_milli), "memory": draw(mem_mi) * 2**20 * 1000}
            ).nonzero()
            selector = {"zone": "a"} if draw(st.integers(0, 4)) == 0 else {}
            task = TaskInfo(
                f"j{j}t{t}",
                f"j{j}t{t}",
                resreq=req,
                priority=draw(st.integers(0, 3)),
                node_selector=selector,
            )
            host = draw(st.sampled_from([None, *free]))
            within_cap = queue.capability is None or (used_by_queue[queue.name] + req).less_equal(
                queue.capability, Missing.INFINITY
            )
            if host is not None and within_cap and req.less_equal(free[host]):
                task.status = TaskStatus.RUNNING
                task.node_name = host
                for k, v in req.items():
                    free[host][k] -= v
                running_on[host] = running_on[host] + req
                used_by_queue[queue.name] = used_by_queue[queue.name] + req
            tasks.append(task)
        jobs.append(
            JobInfo(
                f"j{j}",
                queue=queue.name,
                min_available=draw(st.integers(1, count)),
                priority=draw(st.integers(0, 3)),
                tasks=tasks,
                creation=float(j),
            )
        )
    return Cluster(ClusterSnapshot(nodes, jobs, queues), running_on)


def _placed(result: SessionResult, cluster: Cluster) -> dict[str, Resources]:
    tasks = {t.uid: t for j in cluster.snapshot.jobs for t in j.tasks.values()}
    per_node = dict(cluster.running_on)
    for bind in result.binds:
        per_node[bind.node] = per_node[bind.node] + tasks[bind.task].resreq
    return per_node


@SETTINGS
@given(clusters())
def test_allocate_never_overcommits_a_node(cluster: Cluster) -> None:
    result = run_session(cluster.snapshot, DEFAULT)
    nodes = {n.name: n for n in cluster.snapshot.nodes}
    for name, used in _placed(result, cluster).items():
        assert used.less_equal(nodes[name].allocatable, epsilon=100_000), name


@SETTINGS
@given(clusters())
def test_gang_job_is_bound_all_or_nothing_up_to_min_available(cluster: Cluster) -> None:
    result = run_session(cluster.snapshot, DEFAULT)
    bound: dict[str, int] = {}
    for bind in result.binds:
        bound[bind.job] = bound.get(bind.job, 0) + 1
    for job in cluster.snapshot.jobs:
        if job.uid not in bound:
            continue
        already = job.ready_task_num()
        assert already + bound[job.uid] >= job.min_available, job.uid


@SETTINGS
@given(clusters(with_capability=True))
def test_committed_session_never_exceeds_a_queue_capability(cluster: Cluster) -> None:
    result = run_session(cluster.snapshot, CAPACITY)
    tasks = {t.uid: (j.queue, t) for j in cluster.snapshot.jobs for t in j.tasks.values()}
    usage: dict[str, Resources] = {q.name: Resources() for q in cluster.snapshot.queues}
    evicted = {e.task for e in result.evictions}
    for queue, task in tasks.values():
        if task.status is TaskStatus.RUNNING and task.uid not in evicted:
            usage[queue] = usage[queue] + task.resreq
    for placed in [*(b.task for b in result.binds), *(p.task for p in result.pipelined)]:
        queue, task = tasks[placed]
        usage[queue] = usage[queue] + task.resreq
    for q in cluster.snapshot.queues:
        if q.capability is not None:
            assert usage[q.name].less_equal(q.capability, Missing.INFINITY, epsilon=100_000), q


@SETTINGS
@given(clusters())
def test_evictions_and_reservations_never_overcommit_future_idle(cluster: Cluster) -> None:
    result = run_session(cluster.snapshot, WITH_PREEMPT)
    tasks = {t.uid: t for j in cluster.snapshot.jobs for t in j.tasks.values()}
    nodes = {n.name: n for n in cluster.snapshot.nodes}
    per_node = _placed(result, cluster)
    for eviction in result.evictions:
        per_node[eviction.node] = per_node[eviction.node] - tasks[eviction.task].resreq
    for reservation in result.pipelined:
        per_node[reservation.node] = per_node[reservation.node] + tasks[reservation.task].resreq
    for name, used in per_node.items():
        assert used.less_equal(nodes[name].allocatable, epsilon=100_000), name


@SETTINGS
@given(clusters())
def test_session_never_mutates_the_snapshot(cluster: Cluster) -> None:
    before = [
        (t.uid, t.status, t.node_name) for j in cluster.snapshot.jobs for t in j.tasks.values()
    ]
    run_session(cluster.snapshot, WITH_PREEMPT)
    after = [
        (t.uid, t.status, t.node_name) for j in cluster.snapshot.jobs for t in j.tasks.values()
    ]
    assert before == after


SCORING = config(
    "enqueue, allocate, backfill, preempt",
    ("priority", "gang"),
    ("drf", "predicates", "proportion", "nodeorder", "binpack"),
)


@SETTINGS
@given(clusters(max_nodes=40, max_jobs=12))
def test_incremental_placement_cache_decides_like_a_full_recompute(cluster: Cluster) -> None:
    from koordqueue.scheduler.framework import placement

    cached = run_session(cluster.snapshot, SCORING)
    original = placement._CACHE_SIZE
    placement._CACHE_SIZE = 0  # every lookup recomputes all nodes with the numpy path
    try:
        fresh = run_session(cluster.snapshot, SCORING)
    finally:
        placement._CACHE_SIZE = original
    assert cached.binds == fresh.binds
    assert cached.pipelined == fresh.pipelined
    assert cached.evictions == fresh.evictions
