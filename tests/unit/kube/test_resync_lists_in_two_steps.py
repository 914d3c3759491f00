"""The periodic resync lists the QueueUnits and folds them before it lists the workloads
(issue 36, RSS): one read of both held the two listings and every unit the controller keeps
at once, the process's peak memory with 10,000 Jobs pending (bench_curve's depth run). What
it folds is the same: a refused workload list still ends each consumer's window, and no
second resync starts while the first's workload list is out.

The units are listed as their metadata first (issue 27: decoding 15,000 whole units a minute
was 31 % of the controller's samples in a polled window; managedFields come with the metadata,
so the saving is ~15 % of the bytes); only those at a version the engine does not hold are
read whole, by name when few, else by one list."""

from __future__ import annotations

from typing import Any

from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE_UNIT, ApiError, Kind, Listing
from koordqueue.kube.controller import Controller
from koordqueue.kube.controller.resync import READ_ONE_BY_ONE
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import quota, unit


class RecordingApi(MemoryApi):
    """MemoryApi that notes, at each Job list, whether the controller already knows `probe`."""

    def __init__(self) -> None:
        super().__init__()
        self.controller: Controller | None = None
        self.probe = ""
        self.known_at_job_list: list[bool] = []
        self.refuse_jobs = False

    def list_with_version(self, kind: Kind, *args: Any, **kwargs: Any) -> Listing:
        if kind == JOB and self.controller is not None and self.probe:
            self.known_at_job_list.append(self.probe in self.controller.state.unit_objects)
            if self.refuse_jobs:
                raise ApiError(500, "Internal Server Error", "refused", "GET", "/jobs")
        return super().list_with_version(kind, *args, **kwargs)


def _setup() -> tuple[RecordingApi, Controller]:
    api = RecordingApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="2"), "default")
    c = Controller(api, ControllerSettings(), writers=1)
    c.resync()
    api.controller = c
    missed = api.create(QUEUE_UNIT, unit("missed", "q"), "ns")  # no event: the resync finds it
    api.probe = str(missed["metadata"]["uid"])
    return api, c


def test_the_units_are_folded_before_the_workloads_are_listed() -> None:
    api, c = _setup()
    c.resyncer.start_resync()
    assert api.known_at_job_list == [True]
    assert [u.name for u in c.engine.units()] == ["missed"]
    assert c.state.resync_window is None and not c.resyncer.workloads_pending
    assert c.consumers["Job"].resync_touched is None  # its window ended
    c.close()


def test_a_refused_workload_list_ends_each_window_and_the_next_resync_runs() -> None:
    api, c = _setup()
    api.refuse_jobs = True
    c.resyncer.start_resync()
    assert api.known_at_job_list == [True]
    assert not c.resyncer.workloads_pending
    assert c.consumers["Job"].resync_touched is None
    api.refuse_jobs = False
    c.resyncer.start_resync()
    assert api.known_at_job_list == [True, True]
    c.close()


class CountingApi(MemoryApi):
    """MemoryApi noting each read of QueueUnits: "metadata", "whole" (a list), "get NAME"."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def list_with_version(self, kind: Kind, *args: Any, **kwargs: Any) -> Listing:
        if kind == QUEUE_UNIT:
            self.reads.append("metadata" if kwargs.get("metadata_only") else "whole")
        return super().list_with_version(kind, *args, **kwargs)

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        if kind == QUEUE_UNIT:
            self.reads.append(f"get {name}")
        return super().get(kind, name, namespace)


def _backlog(n: int) -> tuple[CountingApi, Controller]:
    """`n` units made by hand, waiting in a quota of 0 (no phase: rounds write messages)."""
    api = CountingApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="0"), "default")
    for i in range(n):
        api.create(QUEUE_UNIT, unit(f"u{i:03d}", "q"), "ns")
    c = Controller(api, ControllerSettings(manage_jobs=False), writers=1)
    c.resync()
    api.reads.clear()
    return api, c


def _edit_unseen(api: CountingApi, name: str, priority: int) -> None:
    """A new version of the unit whose event the controller never saw."""
    edited = unit(name, "q")
    edited["metadata"]["uid"] = f"uid-{name}"
    edited["spec"]["priority"] = priority
    api.apply(QUEUE_UNIT, edited)


def test_an_unchanged_backlog_is_read_as_its_metadata_alone() -> None:
    api, c = _backlog(50)
    held = {u.uid: u for u in c.engine.units()}
    c.resyncer.start_resync()
    assert api.reads == ["metadata"]
    assert api.metadata_lists == 1
    assert all(c.engine.unit(uid) is u for uid, u in held.items())  # not folded again
    assert c.state.resync_window is None and not c.resyncer.workloads_pending
    c.close()


def test_units_changed_or_deleted_unseen_are_read_by_name_and_repaired() -> None:
    api, c = _backlog(50)
    _edit_unseen(api, "u007", priority=9)
    del api.objects[("queueunits", "ns", "u008")]  # its DELETED event lost
    c.resyncer.start_resync()
    assert api.reads == ["metadata", "get u007"]
    edited = c.engine.unit("uid-u007")
    assert edited is not None and edited.priority == 9
    assert c.engine.unit("uid-u008") is None
    assert len(c.engine.units()) == 49
    c.close()


def test_many_units_changed_unseen_are_read_by_one_whole_list() -> None:
    changed = READ_ONE_BY_ONE + 1
    api, c = _backlog(changed + 10)
    for i in range(changed):
        _edit_unseen(api, f"u{i:03d}", priority=5)
    c.resyncer.start_resync()
    assert api.reads == ["metadata", "whole"]
    priorities = sorted(u.priority for u in c.engine.units())
    assert priorities == [0] * 10 + [5] * changed
    c.close()
