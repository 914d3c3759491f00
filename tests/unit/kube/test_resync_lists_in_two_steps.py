"""The periodic resync lists the QueueUnits and folds them before it lists the workloads
(issue 36, RSS): one read of both held the two listings and every unit the controller keeps
at once, the process's peak memory with 10,000 Jobs pending (bench_curve's depth run). What
it folds is the same: a refused workload list still ends each consumer's window, and no
second resync starts while the first's workload list is out."""

from __future__ import annotations

from typing import Any

from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE_UNIT, ApiError, Kind, Listing
from koordqueue.kube.controller import Controller
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
