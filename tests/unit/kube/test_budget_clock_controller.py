"""Issue 35 point 2 through the controller: the budget's clock starts when the Job runs.

The e2e test (tests/e2e/test_unit_lifecycle.py) saw a running Job with a 2 s budget never
deactivated (no MaximumExecutionTimeExceeded event). The Running write's answer was folded into
the engine as the engine's own older copy with the new phase: without the PodsReady time the
written object carries, so the clock never started. When the watch reported the write before
its answer came back, that answer undid the watch's newer copy. Both tests fail without the fix
in UnitHandlers.write_unit_phase (checked by reverting it).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from koordqueue.domain import names
from koordqueue.kube.api import QUEUE_UNIT, Kind
from koordqueue.kube.controller import Controller
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_job_extension_controller import (
    Clock,
    feed_unit,
    make,
    set_job_status,
    submit,
    unit,
)

GATES = "QueueUnitActive=true,MaximumExecutionTime=true"


class WatchFirstApi(MemoryApi):
    """Reports each unit status write to `watch` before the write's answer returns."""

    watch: Callable[[dict[str, Any]], None] | None = None

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        written = super().merge_patch(kind, name, patch, namespace, subresource)
        if self.watch is not None and kind == QUEUE_UNIT and subresource == "status":
            self.watch(copy.deepcopy(written))
        return written


def _start(api: MemoryApi) -> tuple[Controller, Clock]:
    c, clock = make(api, feature_gates=GATES)
    job = submit(c, api, "j")
    job["metadata"].setdefault("annotations", {})[names.MAX_EXEC_TIME_ANNOTATION] = "2"
    c.consumers["Job"].on_event("MODIFIED", job)
    feed_unit(c, api, "j")
    assert unit(api, "j")["spec"]["maximumExecutionTimeSeconds"] == 2
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    return c, clock


def _run_past_the_budget(c: Controller, api: MemoryApi, clock: Clock) -> None:
    set_job_status(c, api, "j", active=1, ready=1)
    assert unit(api, "j")["status"]["phase"] == "Running"
    clock.offset += 0.5
    c.admission_round()
    # under 1.5 s of 2 (conditions' times are whole seconds): not yet
    assert unit(api, "j")["spec"].get("active") is not False
    clock.offset += 2.0
    c.admission_round()


def test_the_clock_starts_from_the_running_write_itself() -> None:
    api = MemoryApi()
    c, clock = _start(api)
    _run_past_the_budget(c, api, clock)
    assert unit(api, "j")["spec"]["active"] is False
    c.close()


def test_the_clock_starts_when_the_watch_reports_the_write_before_its_answer() -> None:
    api = WatchFirstApi()
    c, clock = _start(api)
    api.watch = lambda obj: c.on_unit("MODIFIED", obj)
    _run_past_the_budget(c, api, clock)
    assert unit(api, "j")["spec"]["active"] is False
    c.close()
