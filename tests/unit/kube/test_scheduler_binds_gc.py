"""Binds in batches, the collector freezer, the loop's own thread (issue 19: CPU per pod, p99).

A session's binds go to the pool as a few batches instead of one work item per pod; each
pod still gets its own Binding request. The freezer moves the cache's objects out of the
collector's full passes after a relist (a full collection first, at most every ten minutes)
and after each session (after a young one); the `gc` calls are recorded through a stand-in,
so no test collects the test process.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
from typing import Any

import pytest

from koordqueue.kube import gcfreeze
from koordqueue.kube.api import ApiError
from koordqueue.kube.gcfreeze import GcFreezer
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.kube.scheduler.operator import run_sessions, scheduling_loop
from koordqueue.kube.scheduler.scheduler import BIND_BATCH, Scheduler, bind_batches
from koordqueue.kube.settings import ControllerSettings
from koordqueue.scheduler import Bind

NODE = {"metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
QUEUE = {"metadata": {"name": "default"}, "spec": {"weight": 1}}


class Api:
    """Records every request; lists answer from `listings` (kind plural -> items)."""

    def __init__(self, listings: dict[str, list[dict[str, Any]]] | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.listings = listings or {}

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        self.calls.append((method, path, body))
        return {}

    def create(self, kind: Any, body: Any, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(("POST", kind.path(namespace), body))
        return {"metadata": {"name": "e"}}

    def list_with_version(self, kind: Any, *_: Any) -> tuple[list[dict[str, Any]], str]:
        return self.listings.get(kind.plural, []), "1"


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"schedulerName": "volcano",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"},
    }


def binds(count: int) -> list[Bind]:
    return [Bind(f"u{i}", "ns", f"p{i}", f"j{i}", "n1") for i in range(count)]


class RecordingGc:
    """Stands in for the `gc` module inside gcfreeze: records calls, collects nothing."""

    def __init__(self, enabled: bool = True) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.enabled = enabled

    def isenabled(self) -> bool:
        return self.enabled

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, args))


@pytest.fixture
def fake_gc(monkeypatch: pytest.MonkeyPatch) -> RecordingGc:
    recording = RecordingGc()
    monkeypatch.setattr(gcfreeze, "gc", recording)
    return recording


# --- bind batches ---------------------------------------------------------------------------
def test_bind_batches_keep_every_bind_once_in_session_order() -> None:
    sent = binds(11)
    batches = bind_batches(sent, workers=16)
    assert [b for batch in batches for b in batch] == sent


def test_bind_batches_hold_at_most_bind_batch_each_when_workers_allow() -> None:
    batches = bind_batches(binds(10), workers=16)
    assert len(batches) == 3  # ceil(10 / 4)
    assert max(len(batch) for batch in batches) <= BIND_BATCH


def test_bind_batches_never_exceed_the_workers() -> None:
    batches = bind_batches(binds(100), workers=4)
    assert len(batches) == 4
    assert sorted(len(batch) for batch in batches) == [25, 25, 25, 25]


def test_bind_batches_of_no_binds_is_no_batch() -> None:
    assert bind_batches([], workers=16) == []


def test_each_pod_of_a_batched_round_gets_its_own_binding_request() -> None:
    api = Api()
    sched = Scheduler(api, ControllerSettings())  # type: ignore[arg-type]
    sched.cache.replace(CachedKind.NODE, [NODE])
    sched.cache.replace(CachedKind.QUEUE, [QUEUE])
    names = [f"p{i}" for i in range(9)]
    sched.cache.replace(CachedKind.POD, [pod(n) for n in names])
    outcome = sched.run_once()
    assert len(outcome.binds) == 3  # 9 binds in ceil(9 / 4) work items
    assert outcome.wait_for_binds(10) == (9, 0)
    sched.drain()
    posted = {path: body for method, path, body in api.calls
              if method == "POST" and path.endswith("/binding")}
    assert set(posted) == {f"/api/v1/namespaces/ns/pods/{n}/binding" for n in names}
    body = posted["/api/v1/namespaces/ns/pods/p3/binding"]
    assert body == {
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p3", "namespace": "ns", "uid": "uid-p3"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    sched.close()


def test_a_batch_sends_its_binds_then_the_scheduled_events_of_those_that_bound() -> None:
    class Failing(Api):
        def request(self, method: str, path: str, body: Any = None, **kw: Any) -> dict[str, Any]:
            if (body or {}).get("reason") == "Scheduled":
                threads.append(threading.current_thread().name)
            if path.endswith("/p1/binding"):
                self.calls.append((method, path, body))
                raise ApiError(409, "Conflict", "already bound", method, path)
            return super().request(method, path, body, **kw)

    threads: list[str] = []
    api = Failing()
    sched = Scheduler(api, ControllerSettings())  # type: ignore[arg-type]
    sched.cache.replace(CachedKind.NODE, [NODE])
    sched.cache.replace(CachedKind.QUEUE, [QUEUE])
    sched.cache.replace(CachedKind.POD, [pod(n) for n in ("p0", "p1", "p2")])
    outcome = sched.run_once()
    assert len(outcome.binds) == 1  # 3 binds: one batch
    assert sorted(outcome.binds[0].result(10)) == [False, True, True]
    # written in the batch's own thread before it completed, not by the event writer
    assert len(threads) == 2
    assert all(name.startswith("kq-bind") for name in threads)
    sched.drain()
    posts = [(path, body) for method, path, body in api.calls if method == "POST"]
    binds_sent = [i for i, (path, _) in enumerate(posts) if path.endswith("/binding")]
    assert binds_sent == [0, 1, 2]  # the batch's three binds first
    scheduled = {body["involvedObject"]["name"] for path, body in posts
                 if path == "/api/v1/namespaces/ns/events" and body["reason"] == "Scheduled"}
    assert scheduled == {"p0", "p2"}  # none for the refused one
    sched.close()


# --- the collector freezer -------------------------------------------------------------------
def test_after_relist_reclaims_frozen_garbage_then_freezes(fake_gc: RecordingGc) -> None:
    freezer = GcFreezer(enabled=True)
    freezer.after_relist()
    assert fake_gc.calls == [("unfreeze", ()), ("collect", ()), ("freeze", ())]


def test_a_relist_within_the_full_interval_freezes_after_a_young_collection_only(
    fake_gc: RecordingGc,
) -> None:
    """A full pass stalls the whole process (~1 s with 15,000 units waiting): not at every
    relist, at most every `full_interval` seconds."""
    now = [100.0]
    freezer = GcFreezer(enabled=True, clock=lambda: now[0], full_interval=600.0)
    freezer.after_relist()
    now[0] += 599.0
    freezer.after_relist()
    assert fake_gc.calls[3:] == [("collect", (1,)), ("freeze", ())]
    now[0] += 1.0
    freezer.after_relist()
    assert fake_gc.calls[5:] == [("unfreeze", ()), ("collect", ()), ("freeze", ())]


def test_after_pass_freezes_what_a_young_collection_left(fake_gc: RecordingGc) -> None:
    GcFreezer(enabled=True).after_pass()
    assert fake_gc.calls == [("collect", (1,)), ("freeze", ())]


def test_sessions_within_the_interval_freeze_once(fake_gc: RecordingGc) -> None:
    now = [100.0]
    freezer = GcFreezer(enabled=True, clock=lambda: now[0], interval=1.0)
    freezer.after_pass()
    now[0] += 0.5
    freezer.after_pass()  # too soon: nothing
    assert fake_gc.calls == [("collect", (1,)), ("freeze", ())]
    now[0] += 0.6
    freezer.after_pass()
    assert fake_gc.calls[2:] == [("collect", (1,)), ("freeze", ())]


def test_a_relist_counts_as_the_last_freeze(fake_gc: RecordingGc) -> None:
    now = [100.0]
    freezer = GcFreezer(enabled=True, clock=lambda: now[0], interval=1.0)
    freezer.after_relist()
    now[0] += 0.5
    freezer.after_pass()
    assert [name for name, _ in fake_gc.calls] == ["unfreeze", "collect", "freeze"]


def test_a_disabled_freezer_touches_no_collector_state(fake_gc: RecordingGc) -> None:
    freezer = GcFreezer(enabled=False)
    freezer.after_relist()
    freezer.after_pass()
    assert fake_gc.calls == []


def test_the_freezer_leaves_a_disabled_collector_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    recording = RecordingGc(enabled=False)
    monkeypatch.setattr(gcfreeze, "gc", recording)
    GcFreezer(enabled=True).after_relist()
    assert recording.calls == []


def test_a_relist_freezes_once_and_the_cache_keeps_what_it_listed(
    fake_gc: RecordingGc,
) -> None:
    api = Api({"nodes": [NODE], "queues": [QUEUE], "pods": [pod("a"), pod("b")]})
    sched = Scheduler(api, ControllerSettings(), gc_freeze=True)  # type: ignore[arg-type]
    sched.relist()
    assert [name for name, _ in fake_gc.calls].count("freeze") == 1
    assert fake_gc.calls[-1] == ("freeze", ())  # after the last kind was listed
    assert sched.cache.get(CachedKind.POD, "uid-a") is not None
    assert sched.cache.get(CachedKind.POD, "uid-b") is not None
    sched.close()


def test_a_session_freezes_after_it_applied_and_binds_still_go_out(
    fake_gc: RecordingGc,
) -> None:
    api = Api()
    sched = Scheduler(api, ControllerSettings(), gc_freeze=True)  # type: ignore[arg-type]
    sched.cache.replace(CachedKind.NODE, [NODE])
    sched.cache.replace(CachedKind.QUEUE, [QUEUE])
    sched.cache.replace(CachedKind.POD, [pod("a")])
    assert sched.run_once().wait_for_binds(10) == (1, 0)
    assert fake_gc.calls == [("collect", (1,)), ("freeze", ())]
    sched.close()


def test_a_real_freeze_loses_no_cached_object() -> None:
    """The real collector: frozen objects stay reachable and are still freed by refcount."""
    sched = Scheduler(Api(), ControllerSettings(), gc_freeze=True)  # type: ignore[arg-type]
    sched.cache.replace(CachedKind.NODE, [NODE])
    sched.cache.replace(CachedKind.QUEUE, [QUEUE])
    sched.cache.replace(CachedKind.POD, [pod("a")])
    try:
        sched.gc.after_pass()
        assert gc.get_freeze_count() > 0
        assert sched.cache.get(CachedKind.POD, "uid-a") is not None
        assert sched.run_once().wait_for_binds(10) == (1, 0)
    finally:
        gc.unfreeze()  # give the test process its collector back
        sched.close()


# --- the session loop's thread ---------------------------------------------------------------
class LoopScheduler:
    """What run_sessions needs of a Scheduler; its session fails when told to."""

    def __init__(self, fail: bool = False) -> None:
        self.settings = ControllerSettings(schedule_period=0.05, schedule_batch_gap=0.0)
        self.cache = SchedulerCache()
        self.sessions = 0
        self.fail = fail
        self.ran_twice = threading.Event()

    def run_once(self) -> None:
        self.sessions += 1
        if self.sessions >= 2:
            self.ran_twice.set()
        if self.fail:
            raise RuntimeError("a bug in a session")

    def relist(self) -> None:
        return None


def test_a_stopped_loop_runs_no_session() -> None:
    sched = LoopScheduler()
    stop = threading.Event()
    stop.set()
    run_sessions(sched, stop)  # type: ignore[arg-type]
    assert sched.sessions == 0


def test_a_failing_session_does_not_end_the_loop() -> None:
    sched = LoopScheduler(fail=True)
    stop = threading.Event()
    thread = threading.Thread(target=run_sessions, args=(sched, stop))
    thread.start()
    try:
        assert sched.ran_twice.wait(10), "the loop died with its first session"
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_cancelling_the_loop_stops_its_thread() -> None:
    sched = LoopScheduler()

    async def main() -> None:
        task = asyncio.create_task(scheduling_loop(sched))  # type: ignore[arg-type]
        await asyncio.to_thread(sched.ran_twice.wait, 10)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(main())  # returns only once the loop's thread has ended (executor shutdown)
    count = sched.sessions
    time.sleep(0.15)  # three periods: a live loop would have run sessions
    assert sched.sessions == count
