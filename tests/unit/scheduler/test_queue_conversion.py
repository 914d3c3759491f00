"""The Volcano Queue object as the scheduler reads it: spec.priority and status.state."""

from __future__ import annotations

from koordqueue.kube.scheduler.convert import queue_info, task_info


def test_queue_priority_is_read_from_spec() -> None:
    queue = queue_info({"metadata": {"name": "q"}, "spec": {"priority": 10}})
    assert queue.priority == 10


def test_queue_state_is_read_from_status() -> None:
    queue = queue_info({"metadata": {"name": "q"}, "spec": {}, "status": {"state": "Closed"}})
    assert queue.state == "Closed"
    assert not queue.is_open


def test_queue_without_state_is_open() -> None:
    """koordqueue runs no queue controller to write Open, as Volcano's does at creation."""
    queue = queue_info({"metadata": {"name": "q"}, "spec": {}})
    assert queue.is_open


def test_pod_preemption_policy_never_is_read() -> None:
    pod = {"metadata": {"name": "p", "uid": "u"}, "spec": {"preemptionPolicy": "Never"}}
    assert task_info(pod).preempt_never
    assert not task_info({"metadata": {"name": "p", "uid": "u"}, "spec": {}}).preempt_never
