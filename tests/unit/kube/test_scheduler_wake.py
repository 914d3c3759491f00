"""Event-driven sessions: which changes wake the scheduling loop, and the loop's timing rules."""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from typing import Any

from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.kube.scheduler.operator import scheduling_loop
from koordqueue.kube.settings import ControllerSettings

NODE: dict[str, Any] = {
    "metadata": {"name": "n1", "resourceVersion": "1"},
    "status": {"allocatable": {"cpu": "2"}, "conditions": [{"type": "Ready", "status": "True"}]},
}


def pod(name: str = "a", node: str = "", phase: str = "Pending",
        scheduler: str = "volcano") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {"schedulerName": scheduler, "nodeName": node,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": phase},
    }


def woke(cache: SchedulerCache, kind: CachedKind, event: str, obj: dict[str, Any]) -> bool:
    cache.work.clear()
    cache.on_event(kind, event, obj)
    return cache.work.is_set()


def test_a_new_pending_pod_of_ours_wakes_the_loop() -> None:
    assert woke(SchedulerCache(), CachedKind.POD, "ADDED", pod())


def test_another_schedulers_pending_pod_does_not() -> None:
    assert not woke(SchedulerCache(), CachedKind.POD, "ADDED", pod(scheduler="default-scheduler"))


def test_our_own_bind_coming_back_does_not() -> None:
    cache = SchedulerCache()
    cache.on_event(CachedKind.POD, "ADDED", pod())
    assert not woke(cache, CachedKind.POD, "MODIFIED", pod(node="n1"))
    assert not woke(cache, CachedKind.POD, "MODIFIED", pod(node="n1", phase="Running"))


def test_a_condition_we_wrote_on_a_pending_pod_does_not() -> None:
    cache = SchedulerCache()
    cache.on_event(CachedKind.POD, "ADDED", pod())
    written = pod()
    written["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    assert not woke(cache, CachedKind.POD, "MODIFIED", written)


def test_a_spec_change_of_a_pending_pod_does() -> None:
    cache = SchedulerCache()
    cache.on_event(CachedKind.POD, "ADDED", pod())
    ungated = pod()
    ungated["spec"]["schedulingGates"] = []
    assert woke(cache, CachedKind.POD, "MODIFIED", ungated)


def test_room_freed_by_a_finished_or_deleted_pod_wakes_the_loop() -> None:
    cache = SchedulerCache()
    cache.on_event(CachedKind.POD, "ADDED", pod(node="n1", phase="Running"))
    assert woke(cache, CachedKind.POD, "MODIFIED", pod(node="n1", phase="Succeeded"))
    assert not woke(cache, CachedKind.POD, "MODIFIED", pod(node="n1", phase="Succeeded"))
    cache.on_event(CachedKind.POD, "ADDED", pod("b", node="n1", phase="Running"))
    assert woke(cache, CachedKind.POD, "DELETED", pod("b", node="n1", phase="Running"))


def test_a_node_heartbeat_does_not_wake_the_loop_but_a_capacity_change_does() -> None:
    cache = SchedulerCache()
    assert woke(cache, CachedKind.NODE, "ADDED", NODE)
    beat = copy.deepcopy(NODE)
    beat["metadata"]["resourceVersion"] = "2"
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-12-03T10:00:00Z"
    assert not woke(cache, CachedKind.NODE, "MODIFIED", beat)
    grown = copy.deepcopy(beat)
    grown["status"]["allocatable"] = {"cpu": "4"}
    assert woke(cache, CachedKind.NODE, "MODIFIED", grown)
    assert woke(cache, CachedKind.NODE, "DELETED", grown)


def test_a_forgotten_assumption_wakes_the_loop() -> None:
    cache = SchedulerCache()
    cache.assume("a", "n1")
    cache.work.clear()
    cache.forget("a")
    assert cache.work.is_set()


class CountingScheduler:
    """What scheduling_loop needs of a Scheduler: settings, cache.work, run_once, relist."""

    def __init__(self, period: float, gap: float) -> None:
        self.settings = ControllerSettings(schedule_period=period, schedule_batch_gap=gap)
        self.cache = SchedulerCache()
        self.sessions: list[float] = []
        self.ran = threading.Event()

    def run_once(self) -> None:
        self.sessions.append(time.monotonic())
        self.ran.set()

    def relist(self) -> None:
        return None


def run_loop(sched: CountingScheduler, body: Any) -> None:
    async def main() -> None:
        task = asyncio.create_task(scheduling_loop(sched))  # type: ignore[arg-type]
        try:
            await asyncio.to_thread(body)
        finally:
            task.cancel()
            sched.cache.work.set()
    asyncio.run(main())


def test_pending_work_starts_a_session_long_before_the_period() -> None:
    sched = CountingScheduler(period=60.0, gap=0.02)

    def body() -> None:
        time.sleep(0.3)  # the loop is waiting, its period far away
        assert sched.sessions == []
        sched.cache.work.set()
        assert sched.ran.wait(10), "no session after work arrived"

    run_loop(sched, body)
    assert len(sched.sessions) == 1


def test_without_work_a_session_still_runs_every_period() -> None:
    sched = CountingScheduler(period=0.2, gap=0.02)
    run_loop(sched, lambda: time.sleep(1.1))
    assert 2 <= len(sched.sessions) <= 7


def test_a_burst_within_the_batch_gap_shares_one_session() -> None:
    sched = CountingScheduler(period=60.0, gap=0.5)

    def body() -> None:
        time.sleep(0.2)
        for _ in range(20):  # many events, well inside the gap
            sched.cache.work.set()
            time.sleep(0.005)
        assert sched.ran.wait(10)
        time.sleep(0.3)

    run_loop(sched, body)
    assert len(sched.sessions) == 1


def test_under_a_sustained_burst_the_gap_grows_to_the_last_sessions_duration() -> None:
    sched = CountingScheduler(period=60.0, gap=0.01)
    ends: list[float] = []

    def slow_session() -> None:
        sched.sessions.append(time.monotonic())
        time.sleep(0.3)  # an expensive session
        ends.append(time.monotonic())

    sched.run_once = slow_session  # type: ignore[method-assign]

    def body() -> None:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:  # work arrives all the time
            sched.cache.work.set()
            time.sleep(0.01)

    run_loop(sched, body)
    idle = [start - end for end, start in zip(ends, sched.sessions[1:], strict=False)]
    assert len(idle) >= 2
    assert min(idle) >= 0.25  # not the 10 ms batch gap: at least the last session's 0.3 s
