"""`volcano.sh/preemptable` on a pod and on a PodGroup (Volcano's GetPodPreemptable and
IsJobPreemptableForGangEviction): the annotation wins over the label, a key absent reads as
preemptable, a value that is not a boolean as not preemptable, with a warning naming the
object. preempt and reclaim read the pod's, gangpreempt and gangreclaim the PodGroup's.
Fails with the conversion taken out (every pod and PodGroup then reads as preemptable)."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from koordqueue.kube.scheduler.convert import job_info, task_info
from koordqueue.kube.scheduler.hypernodes import PREEMPTABLE_KEY
from tests.unit.kube.cache_replay import make_group, make_pod


def _with(obj: dict[str, Any], where: str, value: str) -> dict[str, Any]:
    obj["metadata"].setdefault(where, {})[PREEMPTABLE_KEY] = value
    return obj


def _pod() -> dict[str, Any]:
    return make_pod("p1", 1, True, "g", "n1", "Running", 1, "q")


@pytest.mark.parametrize(
    ("marks", "expected"),
    [
        ((), True),
        ((("annotations", "false"),), False),
        ((("labels", "false"),), False),
        ((("labels", "false"), ("annotations", "true")), True),
        ((("annotations", "0"),), False),
        ((("annotations", "T"),), True),
    ],
)
def test_a_pods_key(marks: tuple[tuple[str, str], ...], expected: bool) -> None:
    pod = _pod()
    for where, value in marks:
        _with(pod, where, value)
    assert task_info(pod).preemptable is expected


def test_a_podgroups_key() -> None:
    assert job_info(make_group("g", 1, 1, "q")).preemptable is True
    group = _with(make_group("g", 1, 1, "q"), "annotations", "false")
    assert job_info(group).preemptable is False


def test_a_value_that_is_not_a_boolean_reads_false_with_a_warning() -> None:
    with capture_logs() as logs:
        preemptable = task_info(_with(_pod(), "annotations", "maybe")).preemptable
    assert preemptable is False
    assert any("ns/p1" in e["event"] and "'maybe'" in e["event"] for e in logs)
