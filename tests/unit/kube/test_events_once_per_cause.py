"""A Warning event is posted once per cause (issue 33.9): not at every session, relist,
restart or re-written condition, and again only when the cause changes.

The pod larger than every node of the issue: its FailedScheduling event and its PodGroup's
Unschedulable event carry kube-scheduler's "0/3 nodes are available: 3 Insufficient cpu.".
"""

from __future__ import annotations

import copy
from typing import Any

from koordqueue.kube.causes import PostedCauses
from koordqueue.kube.events import EventRecorder
from koordqueue.kube.scheduler.cache import SchedulerCache
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.scheduler.store import CachedKind
from koordqueue.kube.settings import ControllerSettings
from tests.unit.cli.test_explain_pod import node, pod, pod_group, queue
from tests.unit.kube.test_explain_pod_reads_the_record import RecordingApi

SUMMARY = "0/3 nodes are available: 3 Insufficient cpu."


def fill(cache: SchedulerCache, pods: list[dict[str, Any]],
         groups: list[dict[str, Any]]) -> None:
    """What a relist does: every kind replaced by a fresh listing."""
    cache.replace(CachedKind.NODE, [node(f"n{i}", "2") for i in range(3)])
    cache.replace(CachedKind.QUEUE, [queue()])
    cache.replace(CachedKind.POD_GROUP, groups)
    cache.replace(CachedKind.POD, pods)


def session(api: RecordingApi, cache: SchedulerCache) -> None:
    scheduler = Scheduler(api, ControllerSettings(), cache=cache,  # type: ignore[arg-type]
                          recorder=EventRecorder(api))  # type: ignore[arg-type]
    try:
        for _ in range(3):
            scheduler.run_once()
            scheduler.drain()
        built = cache.build()  # a resync's relist, then another session
        fill(cache, [copy.deepcopy(p) for p in built.pods.values()],
             [copy.deepcopy(g) for g in built.groups.values()])
        scheduler.run_once()
        scheduler.drain()
    finally:
        scheduler.close()


def shown(api: RecordingApi, obj: dict[str, Any], group: bool = False) -> dict[str, Any]:
    """`obj` as the API server holds it after the writes: what a new leader lists."""
    out = copy.deepcopy(obj)
    name = out["metadata"]["name"]
    if group:
        out["status"] = api.group_status[name]
    else:
        out["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable",
                                        "message": api.conditions[name]}]
    out["metadata"]["resourceVersion"] = "2"
    return out


def said(api: RecordingApi, name: str) -> list[tuple[str, str]]:
    return [(reason, message) for obj, reason, message in api.events if obj == name]


def test_a_cause_is_posted_once_across_sessions_relists_and_a_restart() -> None:
    api = RecordingApi()
    cache = SchedulerCache("volcano")
    big, group = pod("big", cpu="4", group="g"), pod_group("g", 1)
    fill(cache, [big], [group])
    session(api, cache)
    assert said(api, "big") == [("FailedScheduling", SUMMARY)] and api.repeats == 0
    [(reason, message)] = said(api, "g")
    assert reason == "Unschedulable" and message.endswith("; " + SUMMARY)
    assert api.conditions["big"] == SUMMARY

    # a new leader lists the objects as the writes left them: nothing is said again
    restarted = SchedulerCache("volcano")
    fill(restarted, [shown(api, big)], [shown(api, group, group=True)])
    session(api, restarted)
    assert len(said(api, "big")) == 1 and len(said(api, "g")) == 1 and api.repeats == 0

    # the cause changes (the pod now asks for a zone no node has): said once more
    changed = shown(api, big)
    changed["spec"]["nodeSelector"] = {"zone": "nowhere"}
    changed["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    changed["metadata"]["resourceVersion"] = "3"
    fill(restarted, [changed], [shown(api, group, group=True)])
    session(api, restarted)
    selector = "0/3 nodes are available: 3 node(s) didn't match node selector."
    assert said(api, "big")[1:] == [("FailedScheduling", selector)]
    assert [m for _, m in said(api, "g")][1:] == [
        "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; "
        + selector
    ]


def test_a_condition_written_again_is_not_said_again() -> None:
    """Another writer (Volcano's own controller, side by side) resets the PodGroup's status:
    the scheduler writes its condition again at every session, but the cause is the same, so
    no second event. Fails with the dedupe off (PostedCauses.fresh always True): checked."""
    api = RecordingApi()
    cache = SchedulerCache("volcano")
    big, group = pod("big", cpu="4", group="g"), pod_group("g", 1)
    fill(cache, [big], [group])
    scheduler = Scheduler(api, ControllerSettings(), cache=cache,  # type: ignore[arg-type]
                          recorder=EventRecorder(api))  # type: ignore[arg-type]
    try:
        for version in range(2, 6):
            scheduler.run_once()
            scheduler.drain()
            api.group_status.pop("g")  # written this session
            reset = copy.deepcopy(group)
            reset["metadata"]["resourceVersion"] = str(version)  # status reset by another
            cache.replace(CachedKind.POD_GROUP, [reset])
    finally:
        scheduler.close()
    assert len(said(api, "g")) == 1 and len(said(api, "big")) == 1 and api.repeats == 0


def test_posted_causes_remember_per_object_and_reason_and_forget_the_gone() -> None:
    causes = PostedCauses()
    assert causes.fresh("a", "R", "m1") and not causes.fresh("a", "R", "m1")
    assert causes.fresh("a", "Other", "m1")  # another reason is another cause
    assert causes.fresh("a", "R", "m2")  # changed: said again
    causes.seen("b", "R", "m")
    assert not causes.fresh("b", "R", "m")
    causes.forget("a", "R")
    assert causes.fresh("a", "R", "m2")  # gone and back: said again
    causes.keep({"b"})
    assert causes.fresh("a", "Other", "m1") and not causes.fresh("b", "R", "m")
