"""The periodic resync skips workloads at the version of a quiet look (quiet_looks.py).

It lists the kind's metadata, reads whole only what changed since the last look that wrote
nothing, and still repairs whatever the watch missed: a workload changed unseen, a unit that
moved on, a look whose write was refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordqueue.kube.api import QUEUE_UNIT, ApiError, Kind
from koordqueue.kube.controller import Controller
from koordqueue.kube.controller.quiet_looks import READ_ONE_BY_ONE
from koordqueue.kube.controller.workloads import WorkloadReconciler
from tests.unit.kube.test_integration_resync import CountingApi, make, next_period
from tests.unit.kube.test_integration_wiring import PYTORCH, UNIT, current, pytorch

KEY = f"default/{UNIT}"


class Api(CountingApi):
    """Counts whole reads of PyTorchJobs; refuses their patches while `refuse` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.job_gets = 0
        self.refuse = False

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        if kind == PYTORCH:
            self.job_gets += 1
        return super().get(kind, name, namespace)

    def merge_patch(
        self, kind: Kind, name: str, patch: Mapping[str, Any], namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        if kind == PYTORCH and self.refuse:
            raise ApiError(403, "Forbidden", "refused", "PATCH", kind.path(namespace, name))
        return super().merge_patch(kind, name, patch, namespace, subresource)


def decisions(consumer: WorkloadReconciler) -> list[str]:
    """The unit keys the consumer reconciles from now on (every look ends in _with_members)."""
    seen: list[str] = []
    original = consumer._with_members

    def counting(key: str, *args: Any, **kwargs: Any) -> None:
        seen.append(key)
        original(key, *args, **kwargs)

    consumer._with_members = counting  # type: ignore[method-assign]
    return seen


def admitted(api: Api) -> tuple[Controller, WorkloadReconciler, Any]:
    """A PyTorchJob admitted and resumed; a first resync looks at its resumed version."""
    c, consumer, clock = make(api)
    consumer.on_event("ADDED", pytorch(api))
    c.admission_round()
    assert current(api)["spec"]["runPolicy"]["suspend"] is False
    next_period(c, clock)  # the resumed version was never an event here: read and looked at
    assert consumer.quiet_looks.at_version(current(api)) is not None
    return c, consumer, clock


def test_a_workload_at_a_quiet_looks_version_is_neither_read_whole_nor_looked_at() -> None:
    api = Api()
    c, consumer, clock = admitted(api)
    looks = decisions(consumer)
    version = current(api)
    gets, metadata_lists = api.job_gets, api.metadata_lists
    next_period(c, clock)
    assert api.metadata_lists == metadata_lists + 2  # the units' and the jobs' metadata
    assert api.job_gets == gets and looks == []
    assert current(api) == version  # nothing written
    next_period(c, clock)
    assert looks == []


def test_a_workload_changed_unseen_is_read_whole_and_repaired() -> None:
    api = Api()
    c, consumer, clock = admitted(api)
    looks = decisions(consumer)
    # suspended behind the controller's back (no event): a new version
    api.merge_patch(PYTORCH, "test-job", {"spec": {"runPolicy": {"suspend": True}}}, "default")
    gets = api.job_gets
    next_period(c, clock)
    assert looks == [KEY]
    assert api.job_gets == gets + 1  # (its changed version, by name)
    assert current(api)["spec"]["runPolicy"]["suspend"] is False  # resumed again


def test_a_quiet_workload_whose_unit_moved_on_is_read_and_looked_at_again() -> None:
    api = Api()
    c, consumer, clock = admitted(api)
    looks = decisions(consumer)
    unit = api.merge_patch(QUEUE_UNIT, UNIT, {"metadata": {"labels": {"x": "y"}}}, "default")
    c.on_unit("MODIFIED", unit)  # the controller holds a newer unit than the quiet look saw
    next_period(c, clock)
    assert looks == [KEY]


def test_a_look_whose_write_was_refused_is_not_quiet_the_next_resync_writes_it() -> None:
    api = Api()
    c, consumer, clock = admitted(api)
    api.merge_patch(PYTORCH, "test-job", {"spec": {"runPolicy": {"suspend": True}}}, "default")
    api.refuse = True  # the resume it decides on is refused (past its retries)
    next_period(c, clock)
    assert current(api)["spec"]["runPolicy"]["suspend"] is True
    assert consumer.quiet_looks.at_version(current(api)) is None
    api.refuse = False
    looks = decisions(consumer)
    next_period(c, clock)  # the same version as the refused look: looked at again
    assert looks == [KEY]
    assert current(api)["spec"]["runPolicy"]["suspend"] is False


def test_many_changed_workloads_are_read_by_one_list() -> None:
    api = Api()
    c, consumer, clock = make(api, cpu="1000")
    for i in range(READ_ONE_BY_ONE + 1):
        consumer.on_event("ADDED", pytorch(api, f"job-{i:03d}"))
    c.admission_round()
    gets, lists = api.job_gets, api.lists.get("pytorchjobs", 0)
    next_period(c, clock)  # every resumed version is new to the controller
    assert api.job_gets == gets  # not one by one
    assert api.lists["pytorchjobs"] == lists + 2  # the metadata, then one whole list
    next_period(c, clock)
    assert api.lists["pytorchjobs"] == lists + 3  # then the metadata alone
