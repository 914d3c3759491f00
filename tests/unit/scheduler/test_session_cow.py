"""Copy-on-write jobs in the session (issue 19, part 1): jobs with nothing to place are shared
with the snapshot until an eviction writes them; that must decide exactly like cloning every
job, and never write the snapshot."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from koordqueue.scheduler import SessionResult, run_session
from koordqueue.scheduler.framework import session as session_module

from .test_properties import SETTINGS, WITH_PREEMPT, Cluster, clusters


def _decisions(result: SessionResult) -> tuple[Any, ...]:
    return (
        result.binds, result.evictions, result.pipelined, result.phase_updates,
        sorted((uid, e.message()) for uid, e in result.fit_errors.items()),
        sorted(result.job_conditions.items()),
    )


def _state(cluster: Cluster) -> list[tuple[Any, ...]]:
    return [
        (t.uid, t.status, t.node_name, j.phase)
        for j in cluster.snapshot.jobs for t in j.tasks.values()
    ]


@SETTINGS
@given(clusters(max_nodes=4, max_jobs=8))
def test_sharing_unchanged_jobs_decides_like_cloning_every_job(cluster: Cluster) -> None:
    before = _state(cluster)
    shared = run_session(cluster.snapshot, WITH_PREEMPT)
    assert _state(cluster) == before  # the shared jobs were not written
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(session_module, "_may_change", lambda job: True)
        cloned = run_session(cluster.snapshot, WITH_PREEMPT)
    assert _decisions(shared) == _decisions(cloned)


def test_a_fully_running_job_is_shared_and_copied_when_evicted_from() -> None:
    from koordqueue.domain.resources import Resources
    from koordqueue.scheduler import ClusterSnapshot
    from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
    from koordqueue.scheduler.framework import default_config, open_session

    running = TaskInfo("r0", "r0", resreq=Resources.of(cpu="1"), status=TaskStatus.RUNNING,
                       node_name="n0")
    job = JobInfo("low", tasks=[running])
    snapshot = ClusterSnapshot([NodeInfo("n0", Resources.of(cpu="1"))], [job],
                               [QueueInfo("default")])
    session = open_session(snapshot, default_config())
    assert session.jobs["low"] is job
    session.evict_task(running)  # the caller holds the snapshot's task
    assert session.jobs["low"] is not job
    assert running.status is TaskStatus.RUNNING
    assert session.jobs["low"].tasks["r0"].status is TaskStatus.RELEASING
    assert session.nodes["n0"].tasks["r0"] is session.jobs["low"].tasks["r0"]
