"""Sessions on an indexed snapshot (issue 19, part 1): nodes shared copy-on-write, quiet jobs
shared and skipped by the scans (their verdicts memoised across sessions), plugins opened
from the index's sums. That must decide exactly like a session on the plain snapshot (which
copies every node and accounts every task), and never write the snapshot."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot, SessionResult, run_session
from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.framework import SchedulerConfig, open_session
from koordqueue.scheduler.framework.indexed import IndexedSnapshot, index_snapshot

from .test_properties import CAPACITY, DEFAULT, SETTINGS, WITH_PREEMPT, Cluster, clusters

CONFIGS = [DEFAULT, WITH_PREEMPT, CAPACITY]


def _decisions(result: SessionResult) -> tuple[Any, ...]:
    return (
        result.binds, result.evictions, result.pipelined, result.phase_updates,
        sorted((uid, e.message()) for uid, e in result.fit_errors.items()),
        sorted(result.job_conditions.items()), result.warnings,
    )


def _node_state(node: NodeInfo) -> tuple[Any, ...]:
    return (
        node.name, sorted((uid, t.status, id(t)) for uid, t in node.tasks.items()),
        node.accounting(), dict(node.ports), node.pod_count,
    )


def _state(snapshot: IndexedSnapshot) -> tuple[Any, ...]:
    jobs = [
        (j.uid, j.phase, dict(j.allocated), j.ready_task_num(),
         sorted((t.uid, t.status, t.node_name) for t in j.tasks.values()))
        for j in snapshot.jobs
    ]
    return [_node_state(n) for n in snapshot.nodes], jobs


def _with_failed_and_missing(cluster: Cluster, data: st.DataObject) -> ClusterSnapshot:
    """Some running tasks finished or failed (quiet jobs with conditions and phase updates),
    some jobs Pending, and maybe a queue gone (its jobs warned about and left out)."""
    snapshot = cluster.snapshot
    for job in snapshot.jobs:
        for task in list(job.tasks.values()):
            if task.status is TaskStatus.RUNNING:
                status = data.draw(st.sampled_from(
                    [TaskStatus.RUNNING, TaskStatus.RUNNING, TaskStatus.SUCCEEDED,
                     TaskStatus.FAILED]
                ))
                job.update_task_status(task, status)
        if data.draw(st.integers(0, 4)) == 0:
            from koordqueue.scheduler.api import PodGroupPhase

            job.phase = PodGroupPhase.PENDING
    queues = list(snapshot.queues)
    if len(queues) > 1 and data.draw(st.booleans()):
        queues = queues[1:]
    return ClusterSnapshot(snapshot.nodes, snapshot.jobs, queues)


@SETTINGS
@given(clusters(max_nodes=4, max_jobs=8), st.sampled_from(CONFIGS), st.data())
def test_an_indexed_session_decides_like_a_full_copy_and_never_writes_it(
    cluster: Cluster, config: SchedulerConfig, data: st.DataObject
) -> None:
    plain = _with_failed_and_missing(cluster, data)
    indexed = index_snapshot(plain)
    before = _state(indexed)
    reference = run_session(plain, config)
    first = run_session(indexed, config)
    assert _state(indexed) == before  # nodes and jobs of the snapshot were not written
    assert _decisions(first) == _decisions(reference)
    second = run_session(indexed, config)  # the memo of quiet jobs' verdicts is reused
    assert _decisions(second) == _decisions(reference)
    assert _state(indexed) == before


@SETTINGS
@given(clusters(max_nodes=4, max_jobs=8), st.data())
def test_the_memo_follows_a_change_of_configuration(
    cluster: Cluster, data: st.DataObject
) -> None:
    plain = _with_failed_and_missing(cluster, data)
    indexed = index_snapshot(plain)
    for config in (DEFAULT, WITH_PREEMPT, DEFAULT):
        assert _decisions(run_session(indexed, config)) == _decisions(run_session(plain, config))


def _bound_cluster(bound: int) -> IndexedSnapshot:
    nodes = [NodeInfo(f"n{i}", Resources.of(cpu="8")) for i in range(4)]
    jobs = [
        JobInfo(f"b{i}", queue="default", tasks=[
            TaskInfo(f"b{i}t", f"b{i}t", resreq=Resources.of(cpu="100m"),
                     status=TaskStatus.RUNNING, node_name=f"n{i % 4}")
        ])
        for i in range(bound)
    ]
    jobs.append(JobInfo("new", queue="default", tasks=[
        TaskInfo("newt", "newt", resreq=Resources.of(cpu="100m"))
    ]))
    return index_snapshot(ClusterSnapshot(nodes, jobs, [QueueInfo("default")]))


def test_an_indexed_session_copies_only_the_nodes_and_jobs_it_writes() -> None:
    snapshot = _bound_cluster(20)
    session = open_session(snapshot, DEFAULT)
    assert [j.uid for j in session.scan_jobs()] == ["new"]
    assert session.jobs["b3"] is snapshot.index.jobs["b3"]  # quiet: shared
    assert all(a is b for a, b in zip(session.node_list, snapshot.nodes, strict=True))
    from koordqueue.scheduler.framework import run_actions

    run_actions(session)
    result = session.close()
    assert [b.task for b in result.binds] == ["newt"]
    node = result.binds[0].node
    written = [n.name for n, s in zip(session.node_list, snapshot.nodes, strict=True)
               if n is not s]
    assert written == [node]
    assert "newt" not in next(n for n in snapshot.nodes if n.name == node).tasks


def test_evicting_from_a_quiet_job_copies_it_and_its_node() -> None:
    snapshot = _bound_cluster(4)
    session = open_session(snapshot, DEFAULT)
    shared = snapshot.index.jobs["b1"].tasks["b1t"]
    session.evict_task(shared)  # the caller holds the snapshot's task
    assert shared.status is TaskStatus.RUNNING
    mine = session.jobs["b1"].tasks["b1t"]
    assert mine is not shared and mine.status is TaskStatus.RELEASING
    assert session.nodes["n1"].tasks["b1t"] is mine
    assert snapshot.nodes[1].tasks["b1t"] is shared
    assert "b1" in [j.uid for j in session.scan_jobs()]
