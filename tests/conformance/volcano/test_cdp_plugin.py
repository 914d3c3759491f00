"""cdp plugin: cases of volcano-sh/volcano pkg/scheduler/plugins/cdp/cdp_test.go
(Test_CooldownTimePlugin_podPreemptStableTime, TestPreemptableFn), then the plugin in a
session: a higher-priority pod's preempt and a queue's reclaim leave a pod in its cool-down.

Pods are API objects converted by the kube adapter (the cool-down label / annotation and the
PodScheduled condition's time are what the live scheduler reads).

Switched off and run (`test_each_case_fails_with_cdp_off`: cdp left out of the
configuration, or its parse of `volcano.sh/cooldown-time` answering "not set"): the
"normal" parse case, TestPreemptableFn and both session cases fail; checked. The
"not-enabled" parse case expects "not set" and holds either way, as Volcano wrote it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from koordqueue.kube.scheduler.convert import task_info
from koordqueue.scheduler.api import PodGroupPhase, TaskInfo, TaskStatus
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.plugins import cdp
from koordqueue.scheduler.plugins.cdp import CdpPlugin, cooldown_time

from .harness import build, node, pg, pod, queue, rl, run, tiers

NOW = 1_700_000_000.0
_off = False


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(CdpPlugin, "clock", staticmethod(lambda: NOW))
    yield


def _stamp(seconds_ago: float) -> str:
    return datetime.fromtimestamp(NOW - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_pod(labels: Mapping[str, str], annotations: Mapping[str, str],
             scheduled_ago: float | None, name: str = "test-pod") -> dict[str, Any]:
    """cdp_test.go's makePod: Running with a PodScheduled condition when `scheduled_ago`
    is given, else Pending."""
    status: dict[str, Any] = {"phase": "Pending"}
    if scheduled_ago is not None:
        status = {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True",
             "lastTransitionTime": _stamp(scheduled_ago)}]}
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name, "labels": dict(labels),
                     "annotations": {"scheduling.k8s.io/group-name": "test-group",
                                     **annotations}},
        "spec": {"containers": [{"name": "c"}]},
        "status": status,
    }


def _parsed(annotations: Mapping[str, str]) -> float | None:
    task = task_info(make_pod({}, annotations, 100))
    return None if _off else cooldown_time(task.vc, task.vc)


def test_pod_cooldown_time() -> None:
    """Test_CooldownTimePlugin_podPreemptStableTime: "600s" is 600 seconds; "600abcde" is
    not a duration, so no cool-down."""
    assert _parsed({vn.COOLDOWN_TIME: "600s"}) == 600.0
    assert _parsed({vn.COOLDOWN_TIME: "600abcde"}) is None


def _preemptable() -> list[str]:
    plugin = "binpack" if _off else vn.CDP  # binpack: no preemptable callback
    session = open_session(build([], [], [], [queue("default")]),
                           tiers((plugin, {"Preemptable"})))
    preemptable = {vn.COOLDOWN_TIME: "600s"}
    candidates = [
        task_info(make_pod({"volcano.sh/preemptable": "true"}, preemptable, 100, "task1")),
        task_info(make_pod({"volcano.sh/preemptable": "true"},
                           {vn.COOLDOWN_TIME: "600abcde"}, 100, "task2")),
        task_info(make_pod({"volcano.sh/preemptable": "true"}, preemptable, 800, "task3")),
    ]
    return [t.name for t in session.preemptable(TaskInfo("p", "p"), candidates)]


def test_preemptable_fn() -> None:
    """TestPreemptableFn: task1 (scheduled 100s ago, 600s cool-down) is kept; task2 (a
    cool-down that does not parse) and task3 (scheduled 800s ago) are victims."""
    assert _preemptable() == ["task2", "task3"]


def test_label_wins_over_annotation_and_pending_pods_are_not_protected() -> None:
    """Volcano reads the label first; only a Running pod's PodScheduled time protects."""
    task = task_info(make_pod({vn.COOLDOWN_TIME: "10s"}, {vn.COOLDOWN_TIME: "1h"}, 100))
    assert cooldown_time(task.vc, task.vc) == 10.0
    assert not cdp.protected(task, NOW)
    pending = task_info(make_pod({}, {vn.COOLDOWN_TIME: "1h"}, None))
    assert pending.status is TaskStatus.PENDING and not cdp.protected(pending, NOW)


# --- the plugin in a session -------------------------------------------------------------------
def _protect(snapshot_jobs: list[Any], cooldown: str, scheduled_ago: float) -> None:
    for job in snapshot_jobs:
        for uid, task in list(job.tasks.items()):
            if task.status is TaskStatus.RUNNING:
                job.tasks[uid] = dataclasses.replace(
                    task, vc={vn.COOLDOWN_TIME: cooldown}, scheduled_at=NOW - scheduled_ago)
                job.task_status_index[TaskStatus.RUNNING][uid] = job.tasks[uid]


def _preempt(scheduled_ago: float) -> list[str]:
    """One node of 3 cpu held by a low-priority pod (10m cool-down, scheduled
    `scheduled_ago` seconds ago); a high-priority pod of 3 cpu waits."""
    snapshot = build(
        [node("node1", rl("3", "3G", {"pods": "10"}))],
        [pod("low", "node1", True, rl("3", "3G"), "pg1"),
         pod("high", "", False, rl("3", "3G"), "pg2")],
        [pg("pg1", "q1", 1, PodGroupPhase.RUNNING, priority=100),
         pg("pg2", "q1", 1, PodGroupPhase.INQUEUE, priority=1000)],
        [queue("q1")])
    _protect(list(snapshot.jobs), "10m", scheduled_ago)
    switches = {"TaskOrder", "JobOrder", "Preemptable", "JobStarving"}
    plugins = [("priority", switches)] + ([] if _off else [(vn.CDP, {"Preemptable"})])
    return run(snapshot, tiers(*plugins), "allocate, preempt").evicted


def test_preempt_leaves_a_pod_in_its_cooldown() -> None:
    """Scheduled 1 minute ago with a 10-minute cool-down: not evicted; 20 minutes ago: it
    is."""
    assert _preempt(60) == []
    assert _preempt(1200) == ["ns1/low"]


def _reclaim() -> list[str]:
    """q2 reclaims from q1 (over its share: both pods of the 2-cpu node), whose pods were
    scheduled 1 minute ago with a 10-minute cool-down (the tier of TestReclaim's first
    case: gang and proportion)."""
    one = rl("1", "1G")
    snapshot = build(
        [node("node1", rl("2", "2G", {"pods": "10"}))],
        [pod("q1-a", "node1", True, one, "pg1"), pod("q1-b", "node1", True, one, "pg1"),
         pod("q2-pod", "", False, one, "pg2")],
        [pg("pg1", "q1", 1, PodGroupPhase.INQUEUE, priority=100),
         pg("pg2", "q2", 1, PodGroupPhase.INQUEUE, priority=1000)],
        [queue("q1"), queue("q2")])
    _protect(list(snapshot.jobs), "10m", 60)
    plugins = [("gang", {"Reclaimable", "JobStarving"}),
               ("proportion", {"Reclaimable", "QueueOrder", "Preemptive"})]
    plugins += [] if _off else [(vn.CDP, {"Reclaimable"})]
    return run(snapshot, tiers(*plugins), "reclaim").evicted


def test_reclaim_leaves_a_pod_in_its_cooldown() -> None:
    """Reclaimable: cdp keeps the protected pod out of reclaim's victims."""
    assert _reclaim() == []


def test_each_case_fails_with_cdp_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases above that can fail, with cdp left out (and its parse answering "not
    set")."""
    monkeypatch.setattr(__name__ + "._off", True)
    assert _parsed({vn.COOLDOWN_TIME: "600s"}) != 600.0
    assert _preemptable() != ["task2", "task3"]
    assert _preempt(60) != []
    assert _reclaim() != []
