"""The job integrations wired into the live controller (issue 13, wiring), on the in-memory API.

Registration from `--integrations` (a missing CRD skipped with one log line, Jobs still
served), and a PyTorchJob's whole life through the controller's seam: its unit created and
folded into the engine, admitted by a round, the job resumed, its quota released once its
status says Succeeded. The e2e file (tests/e2e/test_integrations.py) shows the same on the
real API server.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from koordqueue.domain.integrations import PYTORCH_JOB
from koordqueue.domain.names import QUEUE_POLICY_KEY, QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import Phase
from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.controller import integrations as reconciler_module
from koordqueue.kube.controller.integrations import (
    CRD,
    WorkloadReconciler,
    kind_of,
    register_integrations,
)
from koordqueue.kube.controller.status import unit_status_patch
from koordqueue.kube.controller.workload_writes import InitialUnitStatus
from koordqueue.kube.settings import ControllerSettings
from tests.unit.integrations.helpers import condition, kubeflow_job, template
from tests.unit.kube.memory_api import MemoryApi

PYTORCH = kind_of(PYTORCH_JOB)
UNIT = "test-job-py-qu"


def install_crd(api: MemoryApi, plural: str, group: str, version: str) -> None:
    api.create(
        CRD,
        {
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "versions": [{"name": version, "served": True}]},
        },
    )


def make(api: MemoryApi, integrations: str, cpu: str = "4") -> Controller:
    api.create(
        ELASTIC_QUOTA,
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": {
                "name": "q",
                "namespace": "default",
                "labels": {QUEUE_POLICY_KEY: "Priority"},
            },
            "spec": {"max": {"cpu": cpu, "memory": "64Gi"}},
        },
        "default",
    )
    c = Controller(api, ControllerSettings(integrations=integrations), writers=1)
    register_integrations(c)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    return c


def pytorch(api: MemoryApi, name: str = "test-job", workers: int = 2) -> dict[str, Any]:
    job = kubeflow_job(
        "PyTorchJob",
        {"Master": (1, template("2", "4Gi")), "Worker": (workers, template("1", "2Gi"))},
        name=name,
    )
    return api.create(PYTORCH, job, "default")


def current(api: MemoryApi, name: str = "test-job") -> dict[str, Any]:
    found = api.get(PYTORCH, name, "default")
    assert found is not None
    return found


def test_a_kind_without_its_crd_is_skipped_with_one_log_line_and_jobs_still_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = MemoryApi()
    # `koordqueue run`'s logging set up by an earlier test (a level filter, loggers cached on
    # first use) would hide the line from capture_logs: a plain configuration, a fresh logger
    old_config = structlog.get_config()
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        cache_logger_on_first_use=False,
    )
    monkeypatch.setattr(reconciler_module, "log", structlog.get_logger(reconciler_module.__name__))
    with capture_logs() as logs:
        c = make(api, "batch/job,jobset.x-k8s.io/jobset")
    structlog.configure(**old_config)
    skipped = [e for e in logs if e["event"] == "integration skipped: its CRD is not installed"]
    assert [e["integration"] for e in skipped] == ["jobset.x-k8s.io/jobset"]
    assert set(c.consumers) == {"Job"}
    job = api.create(
        JOB,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "default", "labels": {QUOTA_NAME_LABEL: "q"}},
            "spec": {
                "suspend": True,
                "parallelism": 1,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                },
            },
        },
        "default",
    )
    c.consumers["Job"].on_event("ADDED", job)
    c.admission_round()
    resumed = api.get(JOB, "j", "default")
    assert resumed is not None and resumed["spec"]["suspend"] is False


def test_installed_kinds_are_registered_under_their_workload_kind() -> None:
    api = MemoryApi()
    install_crd(api, "pytorchjobs", "kubeflow.org", "v1")
    c = make(api, "kubeflow.org/pytorchjob,pod")
    assert set(c.consumers) == {"PyTorchJob", "Pod"}  # no batch/job in the list: no Jobs
    consumer = c.consumers["PyTorchJob"]
    assert isinstance(consumer, WorkloadReconciler)
    assert consumer.watched == PYTORCH


def test_a_pytorchjob_is_queued_admitted_resumed_and_released_through_the_controller() -> None:
    api = MemoryApi()
    install_crd(api, "pytorchjobs", "kubeflow.org", "v1")
    c = make(api, "batch/job,kubeflow.org/pytorchjob")
    consumer = c.consumers["PyTorchJob"]

    consumer.on_event("ADDED", pytorch(api))
    made = api.get(QUEUE_UNIT, UNIT, "default")
    # admitted as it is made (its queue is idle), as every kind's unit is (issue 25)
    assert made is not None and made["status"]["phase"] == "Dequeued"
    uid = made["metadata"]["uid"]
    assert c.engine.unit(uid) is not None  # folded in by the owner, not left to the watch
    assert c.units_being_created == {}  # the hold on its watch event ended with the write

    c.admission_round()
    assert c.engine.is_admitted(uid)
    job = current(api)
    assert job["spec"]["runPolicy"]["suspend"] is False
    used = {row.name: row.used for row in c.engine.tree.report()}["q"]
    assert str(used.to_quantities().get("cpu")) == "4"

    api.merge_patch(
        PYTORCH,
        "test-job",
        {"status": {"conditions": [condition("Succeeded")]}},
        "default",
        "status",
    )
    consumer.on_event("MODIFIED", current(api))
    finished = api.get(QUEUE_UNIT, UNIT, "default")
    assert finished is not None and finished["status"]["phase"] == Phase.SUCCEED.value
    assert not c.engine.is_admitted(uid)
    used = {row.name: row.used for row in c.engine.tree.report()}["q"]
    assert not used.to_quantities().get("cpu")


def test_a_gang_too_big_for_the_free_room_stays_held_whole_while_a_smaller_one_runs() -> None:
    api = MemoryApi()
    install_crd(api, "pytorchjobs", "kubeflow.org", "v1")
    c = make(api, "kubeflow.org/pytorchjob", cpu="7")
    consumer = c.consumers["PyTorchJob"]
    consumer.on_event("ADDED", pytorch(api, "small", workers=1))  # 2 + 1 = 3 cpu
    c.admission_round()
    consumer.on_event("ADDED", pytorch(api, "big", workers=4))  # 2 + 4 x 1 = 6 > 4 free
    c.admission_round()
    big, small = current(api, "big"), current(api, "small")
    assert small["spec"]["runPolicy"]["suspend"] is False
    assert big["spec"]["runPolicy"]["suspend"] is True  # no role resumed on its own
    held = api.get(QUEUE_UNIT, "big-py-qu", "default")
    assert held is not None and held["status"]["phase"] == "Enqueued"
    assert "admissions" not in held["status"] or not held["status"]["admissions"]


def _first_status_after(api: MemoryApi, landed: dict[str, Any]) -> Any:
    """The reconciler's first status write for a new PyTorchJob unit, run after `landed` (a
    round's status patch) reached the unit between the creation and that write."""
    install_crd(api, "pytorchjobs", "kubeflow.org", "v1")
    c = make(api, "kubeflow.org/pytorchjob")
    consumer = c.consumers["PyTorchJob"]
    assert isinstance(consumer, WorkloadReconciler)
    created = copy.deepcopy(
        api.create(
            QUEUE_UNIT,
            {
                "metadata": {"name": UNIT, "namespace": "default"},
                "spec": {"resource": {"cpu": "1"}},
            },
            "default",
        )
    )  # the creation's answer, as the reconciler holds it
    api.merge_patch(QUEUE_UNIT, UNIT, {"status": landed}, "default", "status")
    rv = created["metadata"]["resourceVersion"]
    patch = unit_status_patch("Enqueued", Phase.ENQUEUED, initial=True, resource_version=rv)
    write = InitialUnitStatus("default", UNIT, patch, Phase.ENQUEUED)
    return write.run(c.writer.apis)


def test_a_new_units_first_status_does_not_overwrite_an_admission_that_landed_first() -> None:
    """The unit's watch event can let a round admit it before the reconciler's first status
    write lands: that write is guarded by the created resourceVersion and dropped."""
    api = MemoryApi()
    written = _first_status_after(api, {"phase": "Dequeued"})
    assert written is None
    after = api.get(QUEUE_UNIT, UNIT, "default")
    assert after is not None and after["status"]["phase"] == "Dequeued"


def test_a_new_units_phase_is_filled_in_when_a_rounds_message_landed_first() -> None:
    """A round may write a rejection message (no phase) before the first status: the phase
    is still written, the round's message kept."""
    api = MemoryApi()
    written = _first_status_after(api, {"message": "limited"})
    assert written is not None and written["status"]["phase"] == Phase.ENQUEUED.value
    after = api.get(QUEUE_UNIT, UNIT, "default")
    assert after is not None
    assert (after["status"]["phase"], after["status"]["message"]) == ("Enqueued", "limited")


def test_a_units_watch_event_during_its_creation_is_held_then_folded_by_the_creator() -> None:
    """While the write that may create a unit is in flight, the unit's phase-less watch event
    waits (units.py): no round decides on it before its first phase is written."""
    api = MemoryApi()
    install_crd(api, "pytorchjobs", "kubeflow.org", "v1")
    c = make(api, "kubeflow.org/pytorchjob")
    consumer = c.consumers["PyTorchJob"]
    posted: list[Any] = []
    c.writer.use_pool(0, posted.append)  # writes queue up; nothing runs them
    job = pytorch(api)
    consumer.on_event("ADDED", job)
    key = f"default/{UNIT}"
    assert key in c.units_being_created
    early = {"metadata": {"name": UNIT, "namespace": "default", "uid": "u1"}, "spec": {}}
    c.on_unit("ADDED", early)
    assert c.engine.unit("u1") is None  # held, not folded
    assert c.units_being_created[key] == early
    c.writer._queue.take()()  # the creation write runs (a writer thread's job) ...
    for continuation in posted:
        continuation()  # ... and its outcome comes back to the owner
    assert c.units_being_created == {}
    made = api.get(QUEUE_UNIT, UNIT, "default")
    assert made is not None and c.engine.unit(made["metadata"]["uid"]) is not None
