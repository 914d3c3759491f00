"""A batch/v1 Job's unit creation answered 409 AlreadyExists is an answer, not a conflict.

A 409 on create means an earlier run (or a concurrent look) made the unit; asking again can
only get the same answer, after with_retries' sleeps (0.1 + 0.2 + 0.4 + 0.8 s on a writer
thread). CreateUnit asks once and reports UnitExists, as the integration reconciler does.
"""

from __future__ import annotations

import time
from typing import Any

from koordqueue.domain.integrations import BATCH_JOB
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.kube.api import JOB, QUEUE_UNIT, ApiError, Kind
from koordqueue.kube.controller.workload_writes import (
    CreateRefused,
    CreateUnit,
    PriorityClasses,
    UnitExists,
)
from koordqueue.kube.controller.writes import Apis
from koordqueue.kube.events import EventRecorder
from tests.unit.kube.memory_api import MemoryApi


class CountingApi(MemoryApi):
    """Counts QueueUnit creations; `unavailable` first ones answer 503 (a transient error)."""

    def __init__(self, unavailable: int = 0) -> None:
        super().__init__()
        self.unit_creates = 0
        self.unavailable = unavailable

    def create(self, kind: Kind, body: Any, namespace: str | None = None) -> dict[str, Any]:
        if kind == QUEUE_UNIT:
            self.unit_creates += 1
            if self.unit_creates <= self.unavailable:
                raise ApiError(503, "ServiceUnavailable", "busy", "POST", kind.path())
        return super().create(kind, body, namespace)


def _job(api: MemoryApi) -> dict[str, Any]:
    return api.create(
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


def _create(api: MemoryApi) -> Any:
    write = CreateUnit(JOB, BATCH_JOB, [_job(api)], PriorityClasses(api))
    return write.run(Apis(api, EventRecorder(api)))


def test_already_exists_is_asked_once_and_reported_as_unit_exists() -> None:
    api = CountingApi()
    api.objects[(QUEUE_UNIT.plural, "ns", "j")] = {"metadata": {"name": "j", "namespace": "ns"}}
    started = time.monotonic()
    outcome = _create(api)
    assert isinstance(outcome, UnitExists)
    assert api.unit_creates == 1
    assert time.monotonic() - started < 0.5  # no retry sleeps


def test_a_transient_refusal_is_still_retried() -> None:
    api = CountingApi(unavailable=1)
    outcome = _create(api)
    assert not isinstance(outcome, (UnitExists, CreateRefused))
    assert api.unit_creates == 2
