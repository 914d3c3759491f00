"""Sessions on a cluster without ready nodes decide nothing and do not fail."""

from __future__ import annotations

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo
from koordqueue.scheduler.framework import ClusterSnapshot, run_session


def test_best_effort_pod_without_any_node_is_left_pending() -> None:
    pod = TaskInfo("p", "p")  # empty request: only backfill considers it
    result = run_session(
        ClusterSnapshot(jobs=[JobInfo("j", tasks=[pod])], queues=[QueueInfo("default")])
    )
    assert result.binds == ()


def test_pod_with_a_request_and_no_node_gets_a_fit_error() -> None:
    pod = TaskInfo("p", "p", resreq=Resources.of(cpu="1"))
    result = run_session(
        ClusterSnapshot(jobs=[JobInfo("j", tasks=[pod])], queues=[QueueInfo("default")])
    )
    assert result.binds == ()
    assert "j" in result.job_conditions
