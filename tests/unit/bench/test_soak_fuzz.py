"""bench/soak_fuzz.py: what it draws stays in its own area, what it expects is the controller's
rule, and a missing answer is reported (the fuzzer can fail).

The fuzzer runs against the live controller only inside bench/soak.py; here an in-memory API
stands in, silent (nobody answers: every wait must end in a report) or answering as the
controller would (no report).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench.soak_fuzz import (
    FUZZ_NAMESPACE,
    HEALTHY,
    UNANSWERED,
    UNSERVED,
    Fuzzer,
    bad_job,
    bad_queue,
    bad_quota,
    bad_unit,
    expected_job,
    expected_queue,
    expected_quota,
    ignored,
)
from koordqueue.domain import names
from koordqueue.domain.integrations import BATCH_JOB
from koordqueue.domain.names import QUOTA_PARENT_LABEL
from koordqueue.kube.api import EVENT, JOB, QUEUE, QUEUE_UNIT, Kind
from tests.unit.kube.memory_api import MemoryApi


class Answering(MemoryApi):
    """Answers a Queue with an unknown policy with the controller's event and gives each
    Job's unit a status, as the controller would; `silent` answers nothing."""

    silent = False

    def list_objects(self, kind: Kind, namespace: str | None = None,
                     *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if kind == EVENT:  # (MemoryApi keeps events in a list of their own)
            return [e for e in self.events if e["metadata"].get("namespace") == namespace]
        return super().list_objects(kind, namespace, *args, **kwargs)

    def create(self, kind: Kind, body: Any, namespace: str | None = None,
               *args: Any, **kwargs: Any) -> dict[str, Any]:
        made = super().create(kind, body, namespace, *args, **kwargs)
        if self.silent:
            return made
        name = made["metadata"]["name"]
        if kind == QUEUE and (expect := expected_queue(made)) is not None:
            reason, message = expect
            super().create(EVENT, {"metadata": {"name": f"{name}.1", "namespace": namespace},
                                   "involvedObject": {"name": name}, "type": "Warning",
                                   "reason": reason, "message": message}, namespace)
        if kind == JOB:
            super().create(QUEUE_UNIT, {"metadata": {"name": BATCH_JOB.unit_name(made),
                                                     "namespace": namespace},
                                        "status": {"phase": "Running"}}, namespace)
        return made


def fuzzer(api: MemoryApi, bound: float = 0.3) -> tuple[Fuzzer, list[tuple[str, str]]]:
    reports: list[tuple[str, str]] = []
    made = Fuzzer(api, 1, bound, lambda kind, detail: reports.append((kind, detail)),
                  lambda: float("-inf"))
    made.setup()
    return made, reports


def queue(name: str, policy: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": names.QUEUE_NAMESPACE},
            "spec": {"queuePolicy": policy}}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_every_drawn_object_is_in_the_fuzzers_area_and_spares_the_healthy_quota(
    data: st.DataObject,
) -> None:
    """The soak's invariants skip exactly these (a fuzz quota under the healthy one could
    take its room and fail the 'good input served' check for the wrong reason)."""
    for maker in (bad_quota, bad_unit, bad_queue, bad_job):
        obj = data.draw(maker("fz-x-1"))
        assert ignored(obj)
        assert (obj["metadata"].get("labels") or {}).get(QUOTA_PARENT_LABEL) != HEALTHY


def test_the_soaks_own_objects_are_not_ignored() -> None:
    assert not ignored({"metadata": {"name": "soak-l0", "namespace": "default"}})
    assert not ignored({"metadata": {"name": "job-1", "namespace": "soak"}})
    assert ignored({"metadata": {"name": "job-1", "namespace": FUZZ_NAMESPACE}})


def test_expectations_are_the_controllers_rules() -> None:
    assert expected_quota({"metadata": {"name": "fz-q", "namespace": "default"},
                           "spec": {"max": {"cpu": "10"}}}) is None
    reason, message = expected_quota({"metadata": {"name": "fz-q", "namespace": "default"},
                                      "spec": {"max": {"cpu": "12xyz"}}}) or ("", "")
    assert reason == names.REASON_INVALID_QUOTA and "12xyz" in message
    assert expected_queue(queue("fz-queue", "Priority")) is None
    assert expected_queue(queue("fz-queue", "Priorität")) == (
        names.REASON_ADD_QUEUE_FAIL,
        names.MSG_UNKNOWN_POLICY.format(queue="fz-queue", policy="Priorität"))
    job = {"metadata": {"name": "fz-job", "namespace": FUZZ_NAMESPACE, "uid": "u"},
           "spec": {"template": {"spec": {"containers": [
               {"name": "c", "resources": {"requests": {"cpu": "12xyz"}}}]}}}}
    reason, message = expected_job(job) or ("", "")
    assert reason == names.REASON_INVALID_JOB and "12xyz" in message


def test_an_unanswered_bad_object_is_reported() -> None:
    """Fails with `_wait` never reporting (checked)."""
    api = Answering()
    api.silent = True
    fuzz, reports = fuzzer(api)
    fuzz.one("queue", queue("fz-queue-1", "NoSuchPolicy"))
    assert [kind for kind, _ in reports] == [UNANSWERED]
    assert "AddQueueFail" in reports[0][1]
    assert api.get(QUEUE, "fz-queue-1", names.QUEUE_NAMESPACE) is None  # cleaned up


def test_an_answered_bad_object_is_not_reported() -> None:
    fuzz, reports = fuzzer(Answering())
    fuzz.one("queue", queue("fz-queue-1", "NoSuchPolicy"))
    fuzz.one("queue", queue("fz-queue-2", "Block"))
    assert reports == []
    assert fuzz.outcomes == {"queue: AddQueueFail event": 1, "queue: served": 1}


def test_a_healthy_job_not_admitted_is_reported_as_unserved() -> None:
    api = Answering()
    fuzz, reports = fuzzer(api)
    fuzz.healthy_served()
    assert reports == []  # the answering API admits it (Running)
    api.silent = True
    started = time.monotonic()
    fuzz.healthy_served()
    assert [kind for kind, _ in reports] == [UNSERVED]
    assert time.monotonic() - started < 5


def test_the_wait_runs_from_the_last_fault() -> None:
    """A fault just before the bound ends gives the answer `bound` more seconds."""
    api = Answering()
    api.silent = True
    reports: list[tuple[str, str]] = []
    fault = [float("-inf")]
    fuzz = Fuzzer(api, 1, 0.4, lambda kind, detail: reports.append((kind, detail)),
                  lambda: fault[0])
    started = time.time()
    fault[0] = started + 0.3
    fuzz._wait("x: never", lambda: False, started)
    assert time.time() - started >= 0.7
    assert reports == [(UNANSWERED, "x: never")]
