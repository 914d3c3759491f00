"""The controller's one owner (issue 15, part 2): events and write outcomes on one thread,
writes on a bounded pool, in order per object, by priority; the periodic resync folds its
lists without undoing what happened while they were read."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE_UNIT, ObjectApi
from koordqueue.kube.controller import Controller, OwnerLoop
from koordqueue.kube.controller.workloads import WorkloadReconciler
from koordqueue.kube.controller.writes import Apis, Priority, Writer
from koordqueue.kube.events import EventRecorder
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import quota, unit


class Step:
    """A write that records when it ran and, until released, blocks its writer thread."""

    def __init__(self, name: str, log: list[str], gate: threading.Event | None = None) -> None:
        self.name, self.log, self.gate = name, log, gate

    def run(self, apis: Apis) -> str:
        if self.gate is not None:
            self.gate.wait(5)
        self.log.append(self.name)
        return self.name


def pool_writer(workers: int) -> tuple[Writer, list[Callable[[], None]]]:
    posted: list[Callable[[], None]] = []
    api = MemoryApi()
    writer = Writer(Apis(api, EventRecorder(api)))
    writer.use_pool(workers, posted.append)
    return writer, posted


def wait_until(probe: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_writes_of_one_object_run_in_order_and_report_back_through_post() -> None:
    writer, posted = pool_writer(workers=4)
    ran: list[str] = []
    seen: list[str] = []
    for i in range(20):
        writer.submit(Step(f"w{i}", ran), seen.append, key="unit-a")
    wait_until(lambda: len(posted) == 20)
    assert ran == [f"w{i}" for i in range(20)]
    assert seen == []  # outcomes are the owner's to take in, not the writer threads'
    for continuation in posted:
        continuation()
    assert seen == ran
    writer.close()


def test_started_work_is_written_before_new_work_and_events_last() -> None:
    writer, _ = pool_writer(workers=1)
    ran: list[str] = []
    gate = threading.Event()
    writer.submit(Step("blocker", ran, gate))
    wait_until(lambda: writer.backlog() == 0)  # the one thread holds the blocker
    writer.submit(Step("event", ran), priority=Priority.BACKGROUND)
    writer.submit(Step("new unit", ran), priority=Priority.START)
    writer.submit(Step("admission", ran))
    gate.set()
    wait_until(lambda: len(ran) == 4)
    assert ran == ["blocker", "admission", "new unit", "event"]
    writer.close()


class OwnerThreadApi(MemoryApi):
    """MemoryApi that notes which threads called it."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()

    def merge_patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.threads.add(threading.current_thread().name)
        return super().merge_patch(*args, **kwargs)


def test_a_job_posted_to_the_loop_is_admitted_and_resumed_with_state_touched_by_one_thread() -> (
    None
):
    api = OwnerThreadApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="2"), "default")
    controller = Controller(api, ControllerSettings(admission_period=0.2), writers=4)
    touched: set[str] = set()
    fold = controller.on_unit

    def on_unit(event_type: str | None, obj: dict[str, Any]) -> None:
        touched.add(threading.current_thread().name)
        fold(event_type, obj)

    controller.on_unit = on_unit  # type: ignore[method-assign]
    owner = OwnerLoop(controller, controller.writers)
    owner.start().result(5)
    job = api.create(
        JOB,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "labels": {QUOTA_NAME_LABEL: "q"}},
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                },
            },
        },
        "ns",
    )
    owner.handler("jobs", controller.consumers["Job"].on_event)("ADDED", job)
    waiting = api.create(QUEUE_UNIT, unit("waiting", "q"), "ns")
    owner.handler("queueunits", controller.on_unit)("ADDED", waiting)  # admitted by a round

    def settled() -> bool:
        j, u = api.get(JOB, "j", "ns") or {}, api.get(QUEUE_UNIT, "j", "ns") or {}
        return j["spec"]["suspend"] is False and (u.get("status") or {}).get("phase") == "Dequeued"

    wait_until(settled)
    wait_until(lambda: (api.get(QUEUE_UNIT, "waiting", "ns") or {}).get("status") is not None)
    owner.stop()
    controller.close()
    assert touched == {"kq-controller"}
    assert api.threads and all(name.startswith("kq-write") for name in api.threads)


class ListThenApi(MemoryApi):
    """MemoryApi that runs `after` once a QueueUnit read of the periodic resync is answered
    ("metadata": its list; "get NAME": a unit read whole): what happened between the pool's
    read and the owner's fold."""

    def __init__(self) -> None:
        super().__init__()
        self.after: dict[str, Callable[[], None]] = {}

    def _then(self, read: str) -> None:
        hook = self.after.pop(read, None)
        if hook is not None:
            hook()

    def list_with_version(self, kind: Any, *args: Any, **kwargs: Any) -> Any:
        listed = super().list_with_version(kind, *args, **kwargs)
        if kind == QUEUE_UNIT and kwargs.get("metadata_only"):
            self._then("metadata")
        return listed

    def get(self, kind: Any, name: str, namespace: str | None = None) -> Any:
        found = super().get(kind, name, namespace)
        if kind == QUEUE_UNIT:
            self._then(f"get {name}")
        return found


def test_the_periodic_resync_does_not_bring_back_a_unit_deleted_while_it_listed() -> None:
    """Deleted after the pool's read and before the owner's fold, at either step: listed as
    metadata, or read whole because it had changed unseen."""
    api = ListThenApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="3"), "default")
    api.create(QUEUE_UNIT, unit("kept", "q", phase="Running"), "ns")
    listed_gone = api.create(QUEUE_UNIT, unit("gone", "q", phase="Running"), "ns")
    read_gone = api.create(QUEUE_UNIT, unit("read-gone", "q", phase="Running"), "ns")
    c = Controller(api, ControllerSettings(), writers=1)
    c.resync()
    edited = unit("read-gone", "q", phase="Running")  # changed unseen: read whole by name
    edited["metadata"]["uid"] = read_gone["metadata"]["uid"]
    edited["spec"]["priority"] = 3
    read_gone = api.apply(QUEUE_UNIT, edited)

    def deleted(obj: dict[str, Any]) -> Callable[[], None]:
        def now() -> None:  # the object is gone, and its event reaches the owner first
            api.delete(QUEUE_UNIT, obj["metadata"]["name"], "ns")
            c.on_unit("DELETED", obj)
        return now

    api.after = {"metadata": deleted(listed_gone), "get read-gone": deleted(read_gone)}
    c.resyncer.start_resync()
    assert api.after == {}  # (both ran)
    assert [u.name for u in c.engine.units()] == ["kept"]
    assert str(c.engine.tree.report()[0].used) == "cpu:1"  # its quota is free again
    c.close()


def test_the_periodic_resync_folds_only_versions_the_engine_does_not_hold() -> None:
    """A unit listed at the version the engine holds is not folded again (every unit rebuilt,
    then tried again by the next round: ~1 s a minute of the owner thread with 15,000
    units waiting); a changed one is, and so is one the engine holds in another phase."""
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="1"), "default")
    for name in ("same", "edited", "backing-off"):
        api.create(QUEUE_UNIT, unit(name, "q", phase="Running" if name == "same" else None),
                   "ns")
    c = Controller(api, ControllerSettings(), writers=1)
    c.resync()
    held = {u.name: u for u in c.engine.units()}
    edited = unit("edited", "q")  # a new version (a new object: MemoryApi patches in place)
    edited["metadata"]["uid"] = "uid-edited"
    edited["spec"]["priority"] = 7
    api.apply(QUEUE_UNIT, edited)
    c.engine.requeue("uid-backing-off", 1e12)  # the engine's phase, not yet the API's
    c.resyncer.start_resync()
    after = {u.name: u for u in c.engine.units()}
    assert after["same"] is held["same"]
    assert after["edited"] is not held["edited"] and after["edited"].priority == 7
    assert after["backing-off"] is not held["backing-off"]
    assert after["backing-off"].phase.value == "Enqueued"  # folded: the API's phase again
    c.close()


def test_a_hand_made_unit_without_a_phase_is_not_folded_again_a_workloads_unit_is() -> None:
    """A QueueUnit made by hand has no phase until admitted (rounds write it messages only):
    listed unchanged, it is the version the engine holds (15,000 of them folded again took the
    owner ~1.6 s per resync, issue 27). A Job's unit listed without a phase is folded again:
    its first phase write never landed (test_failover)."""
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="0"), "default")
    api.create(QUEUE_UNIT, unit("by-hand", "q"), "ns")
    jobs_unit = unit("jobs-unit", "q")
    jobs_unit["spec"]["consumerRef"] = {"apiVersion": "batch/v1", "kind": "Job",
                                        "name": "j", "namespace": "ns"}
    api.create(QUEUE_UNIT, jobs_unit, "ns")
    c = Controller(api, ControllerSettings(manage_jobs=False), writers=1)
    c.resync()
    held = {u.name: u for u in c.engine.units()}
    c.resyncer.start_resync()
    after = {u.name: u for u in c.engine.units()}
    assert after["by-hand"] is held["by-hand"]
    assert after["jobs-unit"] is not held["jobs-unit"]
    c.close()


def _conforms(api: OwnerThreadApi) -> ObjectApi:
    return api


def test_a_unit_seen_before_its_create_call_returned_gets_its_first_phase_before_a_round() -> None:
    """Found by tests/e2e/test_job_extension.py under load: the watch delivered the new unit
    first, a round rejected it with a message-only write, and the creator's first-phase write,
    guarded by the created resourceVersion, then missed: the unit never said Enqueued."""
    from koordqueue.kube.controller.workload_writes import UnitCreated

    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="1"), "default")
    api.create(QUEUE_UNIT, unit("holder", "q", phase="Running"), "ns")  # the quota is full
    c = Controller(api, ControllerSettings(), writers=1)
    c.resync()
    c.units_being_created["ns/second"] = None  # the creator's call is in flight ...
    created = api.create(QUEUE_UNIT, unit("second", "q"), "ns")
    c.on_unit("ADDED", created)  # ... when the watch hands over the new unit
    c.admission_round()
    assert "status" not in (api.get(QUEUE_UNIT, "second", "ns") or {})
    jobs = c.consumers["Job"]
    assert isinstance(jobs, WorkloadReconciler)
    jobs._created("ns/second", [{"metadata": {"name": "second", "namespace": "ns"}}],
                  UnitCreated(created, {}))
    status = (api.get(QUEUE_UNIT, "second", "ns") or {})["status"]
    assert (status["phase"], status["message"]) == ("Enqueued", "Enqueued")
    c.admission_round()
    status = (api.get(QUEUE_UNIT, "second", "ns") or {})["status"]
    limited = "limited quotaName:q, limited resKey:cpu,"
    assert (status["phase"], status["message"]) == ("Enqueued", limited)
    c.close()


def test_writer_threads_start_only_as_writes_in_flight_need_them() -> None:
    """Each writer thread holds a TLS connection of its own: sequential writes keep one
    thread, writes blocked at once get one thread each, never more than the pool's size."""
    writer, _ = pool_writer(workers=8)
    ran: list[str] = []
    for i in range(30):  # one at a time: each finishes before the next is queued
        writer.submit(Step(f"s{i}", ran))
        wait_until(lambda n=i: len(ran) == n + 1 and writer.idle() == 1)
    assert writer.threads() == 1
    gate = threading.Event()
    for i in range(5):
        writer.submit(Step(f"b{i}", ran, gate))
    wait_until(lambda: writer.backlog() == 0)  # all five taken: five threads hold them
    assert writer.threads() == 5
    for i in range(20):
        writer.submit(Step(f"c{i}", ran, gate))
    wait_until(lambda: writer.backlog() == 17)  # the pool is full: the rest wait their turn
    assert writer.threads() == 8
    gate.set()
    wait_until(lambda: len(ran) == 55)
    assert writer.threads() == 8
    writer.close()


def test_a_write_leaves_no_cycle_for_the_collector() -> None:
    """The freezer (kube/gcfreeze.py) freezes queued writes each second: a write that was
    part of a reference cycle stayed in memory until the next full pass, minutes later."""
    writer, posted = pool_writer(workers=4)
    ran: list[str] = []
    gc.collect()
    gc.disable()
    try:
        for i in range(1000):
            writer.submit(Step(f"s{i}", ran), lambda _: None, key=f"k{i % 10}")
        wait_until(lambda: len(ran) == 1000)
        for continuation in posted:
            continuation()
        posted.clear()
        found = gc.collect()
    finally:
        gc.enable()
    assert found < 100  # was ~12 per write: each write's task referred to itself
    writer.close()
