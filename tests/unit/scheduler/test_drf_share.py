"""drf's job share counts only the resources the cluster offers (Volcano drf.go
calculateShare iterates totalResource.ResourceNames())."""

from __future__ import annotations

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot, parse_config
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.plugins.drf import share

from .builders import node, running


def test_a_resource_no_node_offers_is_not_counted() -> None:
    total = Resources.of(cpu=8, memory="64Gi")
    held = Resources.of({"cpu": 1, "example.com/gpu": 1})
    assert share(held, total) == 1 / 8


def test_share_is_the_largest_ratio_over_the_offered_resources() -> None:
    total = Resources.of(cpu=8, memory="8Gi")
    assert share(Resources.of(cpu=2, memory="4Gi"), total) == 0.5
    assert share(Resources(), total) == 0.0


def test_job_order_ignores_a_device_the_cluster_lost() -> None:
    """The job holding 1 cpu and a device no node offers any more (.125) goes before the job
    holding 4 cpu (.5); counting the device as share 1 put it last."""
    device = TaskInfo(
        "d",
        "d",
        resreq=Resources.of({"cpu": 1, "example.com/gpu": 1}),
        status=TaskStatus.RUNNING,
        node_name="n1",
    )
    jobs = [
        JobInfo("device", tasks=[device]),
        JobInfo("busy", tasks=[running(f"b{i}", "n1", "1", "0") for i in range(4)]),
    ]
    cfg = parse_config('actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n')
    session = open_session(
        ClusterSnapshot([node("n1", "8", "64Gi")], jobs, [QueueInfo("default")]), cfg
    )
    assert session.job_order_less(session.jobs["device"], session.jobs["busy"])
