"""The one workload reconciler (koordqueue/kube/controller/workloads.py) for each kind, through
the controller on the in-memory API: unit creation, resume on admission, Running / Succeed /
Failed, suspend on preemption, pod groups, deletion, CRD detection.

(Issue 25: these drove a second reconciler that called the API inline; they now drive the
controller's, the only one. Its quota has no room, so a unit stays Enqueued until the test
writes its phase, as a round or the scheduler would, and hands the unit to the controller.)
"""

from __future__ import annotations

import copy
import logging
import re
import time
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from koordqueue.domain.integrations import (
    BATCH_JOB,
    JOBSET,
    MPI_JOB,
    POD,
    PYTORCH_JOB,
    Integration,
)
from koordqueue.domain.integrations.batch_job import CONTROLLER_UID_LABEL
from koordqueue.domain.integrations.reconcile import target_of
from koordqueue.domain.job_extension import queue_unit_for_job
from koordqueue.domain.names import (
    INTEGRATION_SUSPEND_ANNOTATION,
    POD_ADMISSION_GATE,
    QUEUE_POLICY_KEY,
    REASON_INVALID_JOB,
)
from koordqueue.domain.queue_unit import Phase
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT, ApiError, Kind
from koordqueue.kube.api import POD as POD_KIND
from koordqueue.kube.controller import Controller
from koordqueue.kube.controller import integrations as reconciler_module
from koordqueue.kube.controller.integrations import (
    BUILT_IN_GROUPS,
    CRD,
    crd_installed,
    enabled_integrations,
    kind_of,
    register_integrations,
)
from koordqueue.kube.controller.status import now_string
from koordqueue.kube.controller.workload_writes import WorkloadWrite
from koordqueue.kube.controller.workloads import WorkloadReconciler
from koordqueue.kube.settings import ControllerSettings
from tests.unit.integrations.helpers import condition, jobset, kubeflow_job, pod, template
from tests.unit.kube.memory_api import MemoryApi

TJ = "test-job"
PY_UNIT = "test-job-py-qu"
MPI_UNIT = "test-job-mpi-qu"
GO_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,9})? \+0000 UTC m=\+\d+\.\d{9}$")


def crd(plural: str, group: str, version: str, served: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "versions": [{"name": version, "served": served}]},
    }


class Clock:
    """Wall time plus whatever the test adds (unit timestamps are written in real time)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


class Served:
    """A controller serving `integration` on the in-memory API; quota q has no room."""

    def __init__(
        self, integration: Integration, api: MemoryApi | None = None, **settings: Any
    ) -> None:
        self.api = api = api or MemoryApi()
        self.kind = kind = kind_of(integration)
        if kind.group not in BUILT_IN_GROUPS:
            api.create(CRD, crd(kind.plural, kind.group, kind.version))
        api.create(
            ELASTIC_QUOTA,
            {
                "metadata": {
                    "name": "q",
                    "namespace": "default",
                    "labels": {QUEUE_POLICY_KEY: "Priority"},
                },
                "spec": {"max": {"cpu": "1m"}},
            },
            "default",
        )
        self.clock = Clock()
        config = ControllerSettings(integrations=integration.name, **settings)
        self.c = Controller(api, config, clock=self.clock, writers=1)
        register_integrations(self.c)
        self.c.resync()
        for obj in api.list_objects(QUEUE):
            self.c.on_queue("ADDED", obj)
        rec = self.c.consumers[integration.workload.kind]
        assert isinstance(rec, WorkloadReconciler)
        self.rec = rec

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.api.create(self.kind, obj, obj["metadata"]["namespace"])

    def event(self, event_type: str, obj: dict[str, Any]) -> None:
        self.rec.on_event(event_type, obj)

    def current(self, name: str, ns: str) -> dict[str, Any]:
        found = self.api.get(self.kind, name, ns)
        assert found is not None
        return found

    def unit(self, name: str, ns: str) -> dict[str, Any]:
        found = self.api.get(QUEUE_UNIT, name, ns)
        assert found is not None
        return found

    def set_phase(self, name: str, ns: str, phase: Phase) -> None:
        """The unit's phase as a round or the scheduler writes it, seen by the controller
        (Preempted: as the engine's preemption gives the admission back)."""
        status = {"phase": phase.value, "lastUpdateTime": now_string()}
        self.api.merge_patch(QUEUE_UNIT, name, {"status": status}, ns, "status")
        obj = self.unit(name, ns)
        if phase is Phase.PREEMPTED:
            self.c.engine.rollback(obj["metadata"]["uid"])
        self.c.on_unit("MODIFIED", obj)

    def run(self, write: Any) -> bool:
        return bool(write.run(self.c.writer.apis))


# --- CRD detection -------------------------------------------------------------------------
def test_built_in_kinds_need_no_crd() -> None:
    api = MemoryApi()
    assert crd_installed(api, kind_of(BATCH_JOB))
    assert crd_installed(api, kind_of(POD))


def test_a_kind_is_served_when_its_crd_serves_its_version() -> None:
    api = MemoryApi()
    assert not crd_installed(api, kind_of(PYTORCH_JOB))
    api.create(CRD, crd("pytorchjobs", "kubeflow.org", "v1"))
    assert crd_installed(api, kind_of(PYTORCH_JOB))
    api.create(CRD, crd("mpijobs", "kubeflow.org", "v1"))  # training-operator's v1 MPIJob
    assert not crd_installed(api, kind_of(MPI_JOB))
    api.create(CRD, crd("jobsets", "jobset.x-k8s.io", "v1alpha2", served=False))
    assert not crd_installed(api, kind_of(JOBSET))


def test_an_unreadable_crd_counts_as_not_installed() -> None:
    class Forbidden(MemoryApi):
        def get(self, kind: Kind, name: str, namespace: str | None = None) -> Any:
            raise ApiError(403, "Forbidden", "no", "GET", "/x")

    assert not crd_installed(Forbidden(), kind_of(JOBSET))


def test_missing_crds_skip_their_integrations_with_one_log_line_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = MemoryApi()
    api.create(CRD, crd("jobsets", "jobset.x-k8s.io", "v1alpha2"))
    # `koordqueue run`'s logging set up by an earlier test (a level filter, loggers cached on
    # first use) would hide the line from capture_logs: a plain configuration, a fresh logger
    old_config = structlog.get_config()
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        cache_logger_on_first_use=False,
    )
    monkeypatch.setattr(reconciler_module, "log", structlog.get_logger(reconciler_module.__name__))
    with capture_logs() as logs:
        enabled = enabled_integrations(
            api, "batch/job,kubeflow.org/pytorchjob,jobset.x-k8s.io/jobset,pod"
        )
    structlog.configure(**old_config)
    assert enabled == (BATCH_JOB, JOBSET, POD)
    skipped = [entry for entry in logs if "CRD is not installed" in entry["event"]]
    assert [entry["integration"] for entry in skipped] == ["kubeflow.org/pytorchjob"]
    assert skipped[0]["crd"] == "pytorchjobs.kubeflow.org"


def test_an_unknown_integration_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown integrations"):
        enabled_integrations(MemoryApi(), "batch/job,tfjob")


# --- PyTorchJob: the whole life ----------------------------------------------------------------
def pytorch(s: Served, **kwargs: Any) -> dict[str, Any]:
    job = kubeflow_job(
        "PyTorchJob",
        {"Master": (1, template("2", "4Gi")), "Worker": (2, template("1", "2Gi"))},
        **kwargs,
    )
    return s.put(job)


def test_a_held_pytorchjob_gets_an_enqueued_unit_and_a_queuing_condition() -> None:
    s = Served(PYTORCH_JOB)
    s.event("ADDED", pytorch(s))
    made = s.unit(PY_UNIT, "default")
    assert made["status"]["phase"] == "Enqueued"
    assert made["spec"]["resource"] == {"cpu": "4", "memory": "8Gi"}
    assert made["spec"]["consumerRef"]["kind"] == "PyTorchJob"
    assert made["metadata"]["labels"]["quota.scheduling.koordinator.sh/name"] == "q"
    conditions = s.current(TJ, "default")["status"]["conditions"]
    assert [(c["type"], c["status"]) for c in conditions] == [("Queuing", "True")]


def test_a_pytorchjob_that_runs_unheld_gets_no_unit() -> None:
    s = Served(PYTORCH_JOB)
    s.event("ADDED", pytorch(s, suspend=False))
    assert s.api.get(QUEUE_UNIT, PY_UNIT, "default") is None


def test_admitted_pytorchjob_is_resumed_then_runs_then_succeeds() -> None:
    s = Served(PYTORCH_JOB)
    s.event("ADDED", pytorch(s))
    s.set_phase(PY_UNIT, "default", Phase.DEQUEUED)

    s.event("MODIFIED", s.current(TJ, "default"))
    job = s.current(TJ, "default")
    assert job["spec"]["runPolicy"]["suspend"] is False
    assert job["metadata"]["annotations"][INTEGRATION_SUSPEND_ANNOTATION] == "false"
    assert GO_TIME.match(job["metadata"]["annotations"]["koord-queue/job-dequeue-timestamp"])
    assert [(c["type"], c["status"]) for c in job["status"]["conditions"]] == [("Queuing", "False")]
    assert s.unit(PY_UNIT, "default")["status"]["phase"] == "Dequeued"

    s.api.merge_patch(
        s.kind,
        "test-job",
        {"status": {"conditions": [*job["status"]["conditions"], condition("Running")]}},
        "default",
        "status",
    )
    s.event("MODIFIED", s.current(TJ, "default"))
    assert s.unit(PY_UNIT, "default")["status"]["phase"] == "Running"

    s.api.merge_patch(
        s.kind,
        "test-job",
        {"status": {"conditions": [condition("Running", "False"), condition("Succeeded")]}},
        "default",
        "status",
    )
    s.event("MODIFIED", s.current(TJ, "default"))
    status = s.unit(PY_UNIT, "default")["status"]
    assert (status["phase"], status["message"], status["admissions"]) == (
        "Succeed",
        "Succeeded",
        [],
    )


def test_a_waiting_unit_leaves_its_job_held() -> None:
    s = Served(PYTORCH_JOB)
    s.event("ADDED", pytorch(s))
    s.event("MODIFIED", s.current(TJ, "default"))
    assert s.unit(PY_UNIT, "default")["status"]["phase"] == "Enqueued"
    assert s.current(TJ, "default")["spec"]["runPolicy"]["suspend"]


# --- MPIJob: preemption -------------------------------------------------------------------------
def test_a_preempted_mpijob_is_suspended_and_its_unit_enqueued_again() -> None:
    s = Served(MPI_JOB)
    job = s.put(
        kubeflow_job("MPIJob", {"Launcher": (1, template("1")), "Worker": (2, template("2"))})
    )
    s.event("ADDED", job)
    s.set_phase(MPI_UNIT, "default", Phase.DEQUEUED)
    s.event("MODIFIED", s.current(TJ, "default"))
    assert s.current(TJ, "default")["spec"]["runPolicy"]["suspend"] is False

    s.set_phase(MPI_UNIT, "default", Phase.PREEMPTED)
    s.event("MODIFIED", s.current(TJ, "default"))
    job = s.current(TJ, "default")
    assert job["spec"]["runPolicy"]["suspend"] is True
    assert job["metadata"]["annotations"][INTEGRATION_SUSPEND_ANNOTATION] == "true"
    status = s.unit(MPI_UNIT, "default")["status"]
    assert (status["phase"], status["message"]) == ("Enqueued", "Enqueued after preempted")


def test_running_timeout_backs_the_unit_off_and_suspends_the_job() -> None:
    s = Served(MPI_JOB, job_running_timeout=60.0, job_backoff_time=30.0)
    s.event("ADDED", s.put(kubeflow_job("MPIJob", {"Worker": (1, template("1"))})))
    s.set_phase(MPI_UNIT, "default", Phase.DEQUEUED)
    s.event("MODIFIED", s.current(TJ, "default"))  # resumed: Pending
    s.clock.offset = 61.0  # 61 s after lastUpdateTime
    s.rec.fire_timers()  # (the kind's timers; the controller's would start a resync too)
    assert s.unit(MPI_UNIT, "default")["status"]["phase"] == Phase.BACKOFF.value
    assert s.current(TJ, "default")["spec"]["runPolicy"]["suspend"] is True


# --- JobSet: the admission seam -----------------------------------------------------------------
def test_jobset_resume_and_suspend_through_its_unit() -> None:
    s = Served(JOBSET)
    obj = s.put(
        jobset([("workers", 2, 2, 2, template("1")), ("driver", 1, None, None, template("1"))])
    )
    s.event("ADDED", obj)
    made = s.unit("jobset-js-qu", "ns")
    assert [(ps["name"], ps["count"]) for ps in made["spec"]["podSet"]] == [
        ("workers", 4),
        ("driver", 1),
    ]
    assert made["spec"]["resource"] == {"cpu": "5"}
    marked = s.current("jobset", "ns")["metadata"]["annotations"]
    assert marked["koord-queue/job-has-enqueued"] == "true"
    assert made["metadata"]["annotations"]["koord-queue/job-has-enqueued"] == "true"

    assert s.run(s.rec.resume(made))
    assert s.current("jobset", "ns")["spec"]["suspend"] is False
    assert not s.run(s.rec.resume(made))  # already running: nothing to write
    assert s.run(s.rec.suspend(made))
    assert s.current("jobset", "ns")["spec"]["suspend"] is True


def test_jobset_failed_condition_fails_the_unit() -> None:
    s = Served(JOBSET)
    s.event("ADDED", s.put(jobset([("a", 1, 1, 1, template("1"))])))
    s.set_phase("jobset-js-qu", "ns", Phase.RUNNING)
    s.api.merge_patch(
        s.kind, "jobset", {"status": {"conditions": [condition("Failed")]}}, "ns", "status"
    )
    s.event("MODIFIED", s.current("jobset", "ns"))
    assert s.unit("jobset-js-qu", "ns")["status"]["phase"] == "Failed"


def test_deleting_the_workload_deletes_its_unit() -> None:
    s = Served(JOBSET)
    obj = s.put(jobset([("a", 1, 1, 1, template("1"))]))
    s.event("ADDED", obj)
    uid = s.unit("jobset-js-qu", "ns")["metadata"]["uid"]
    s.api.delete(s.kind, "jobset", "ns")
    s.event("DELETED", obj)
    assert s.api.get(QUEUE_UNIT, "jobset-js-qu", "ns") is None
    assert s.c.engine.unit(uid) is None


def test_a_unit_of_the_same_name_owned_by_another_object_is_left_alone() -> None:
    s = Served(JOBSET)
    other = s.api.create(
        QUEUE_UNIT,
        {
            "metadata": {
                "name": "jobset-js-qu",
                "namespace": "ns",
                "ownerReferences": [{"uid": "someone"}],
            },
            "spec": {"resource": {"cpu": "1"}},
        },
        "ns",
    )
    s.c.on_unit("ADDED", other)
    obj = s.put(jobset([("a", 1, 1, 1, template("1"))]))
    s.event("ADDED", obj)
    assert (
        "annotations" not in s.current("jobset", "ns")["metadata"]
        or not (s.current("jobset", "ns")["metadata"]["annotations"])
    )
    s.event("DELETED", obj)
    assert s.unit("jobset-js-qu", "ns")["metadata"]["uid"] == other["metadata"]["uid"]


def test_an_invalid_request_is_reported_and_makes_no_unit() -> None:
    s = Served(JOBSET)
    s.event("ADDED", s.put(jobset([("a", 1, 1, 1, template("lots"))])))
    (event,) = [e for e in s.api.events if e["reason"] == REASON_INVALID_JOB]
    assert (
        "JobSet ns/jobset: spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
        in (event["message"])
    )
    assert event["involvedObject"]["kind"] == "JobSet"
    assert s.api.get(QUEUE_UNIT, "jobset-js-qu", "ns") is None


# --- Pods ------------------------------------------------------------------------------------
def test_a_pod_group_is_queued_once_whole_and_released_whole() -> None:
    s = Served(POD)
    s.event("ADDED", s.put(pod("driver", group="train", total="3", cpu="2")))
    assert s.api.get(QUEUE_UNIT, "train-pod-qu", "ns") is None  # waiting for 2 more
    s.put(pod("worker-1", group="train", total="3"))
    s.event("ADDED", s.put(pod("worker-2", group="train", total="3")))
    made = s.unit("train-pod-qu", "ns")
    assert made["spec"]["resource"] == {"cpu": "4"}
    assert sorted(ps["count"] for ps in made["spec"]["podSet"]) == [1, 2]
    assert [o["name"] for o in made["metadata"]["ownerReferences"]] == [
        "driver",
        "worker-1",
        "worker-2",
    ]

    s.set_phase("train-pod-qu", "ns", Phase.DEQUEUED)
    s.event("MODIFIED", s.current("driver", "ns"))
    for name in ("driver", "worker-1", "worker-2"):
        gates = s.current(name, "ns")["spec"].get("schedulingGates")
        assert not gates, name

    for name in ("driver", "worker-1", "worker-2"):
        s.api.merge_patch(POD_KIND, name, {"status": {"phase": "Succeeded"}}, "ns", "status")
    s.event("MODIFIED", s.current("worker-2", "ns"))
    assert s.unit("train-pod-qu", "ns")["status"]["phase"] == Phase.SUCCEED.value


def test_a_group_unit_goes_with_its_last_pod() -> None:
    s = Served(POD)
    pods = [s.put(pod(n, group="g", total="2")) for n in ("a", "b")]
    s.event("ADDED", pods[1])
    assert s.api.get(QUEUE_UNIT, "g-pod-qu", "ns") is not None
    s.api.delete(POD_KIND, "a", "ns")
    s.event("DELETED", pods[0])
    assert s.api.get(QUEUE_UNIT, "g-pod-qu", "ns") is not None
    s.api.delete(POD_KIND, "b", "ns")
    s.event("DELETED", pods[1])
    assert s.api.get(QUEUE_UNIT, "g-pod-qu", "ns") is None


def test_a_single_pod_is_ungated_on_admission_and_deleted_on_preemption() -> None:
    s = Served(POD)
    s.event("ADDED", s.put(pod("solo", extra_gates=["other.io/gate"])))
    made = s.unit("solo-pod-qu", "ns")
    assert s.run(s.rec.resume(made))
    gates = s.current("solo", "ns")["spec"]["schedulingGates"]
    assert gates == [{"name": "other.io/gate"}]
    assert POD_ADMISSION_GATE not in str(gates)
    assert s.run(s.rec.suspend(made))
    assert s.api.get(POD_KIND, "solo", "ns") is None


def test_a_gate_removal_on_a_stale_pod_is_refused_not_forced() -> None:
    s = Served(POD)
    s.event("ADDED", s.put(pod("solo")))
    stale = copy.deepcopy(s.current("solo", "ns"))
    s.api.merge_patch(POD_KIND, "solo", {"metadata": {"labels": {"x": "y"}}}, "ns")  # newer rv
    write = WorkloadWrite(
        s.kind, POD, target_of(POD, stale), True, s.rec.generations, members=[stale]
    )
    assert not s.run(write)
    assert s.current("solo", "ns")["spec"]["schedulingGates"]


# --- batch/v1 Job through the generic path -----------------------------------------------------
def test_a_job_gets_the_same_unit_through_the_generic_reconciler() -> None:
    s = Served(BATCH_JOB)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "labels": {"l": "v"}},
        "spec": {
            "suspend": True,
            "parallelism": 2,
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
            },
        },
    }
    s.event("ADDED", s.put(job))
    made = s.unit("j", "ns")
    expected = queue_unit_for_job(s.current("j", "ns"))
    assert made["spec"] == expected["spec"]
    assert made["metadata"]["annotations"] == expected["metadata"]["annotations"]
    assert made["metadata"]["annotations"]["koord-queue/job-has-enqueued"] == "true"


def test_a_job_with_active_pods_none_ready_has_its_pods_listed() -> None:
    s = Served(BATCH_JOB)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "labels": {"quota.scheduling.koordinator.sh/name": "q"},
        },
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    s.event("ADDED", s.put(job))
    s.set_phase("j", "ns", Phase.DEQUEUED)
    s.api.merge_patch(s.kind, "j", {"spec": {"suspend": False}, "status": {"active": 1}}, "ns")
    uid = s.current("j", "ns")["metadata"]["uid"]  # the Job's pods carry it
    s.api.create(
        POD_KIND,
        {
            "metadata": {
                "name": "j-1",
                "namespace": "ns",
                "labels": {CONTROLLER_UID_LABEL: uid},
            },
            "status": {"phase": "Running"},
        },
        "ns",
    )
    s.event("MODIFIED", s.current("j", "ns"))
    assert s.unit("j", "ns")["status"]["phase"] == Phase.RUNNING.value


def test_a_pod_that_is_not_the_queues_costs_no_api_call() -> None:
    class Counting(MemoryApi):
        calls = 0

        def get(self, kind: Kind, name: str, namespace: str | None = None) -> Any:
            Counting.calls += 1
            return super().get(kind, name, namespace)

        def list_objects(self, *args: Any, **kwargs: Any) -> Any:
            Counting.calls += 1
            return super().list_objects(*args, **kwargs)

    s = Served(POD, Counting())
    plain = s.put(pod("plain", gated=False, phase="Running"))
    before = Counting.calls
    s.event("MODIFIED", plain)
    assert Counting.calls == before
    assert s.api.get(QUEUE_UNIT, "plain-pod-qu", "ns") is None


def test_a_released_pod_is_still_followed_to_its_end() -> None:
    s = Served(POD)
    s.event("ADDED", s.put(pod("solo")))
    s.set_phase("solo-pod-qu", "ns", Phase.DEQUEUED)
    s.event("MODIFIED", s.current("solo", "ns"))
    assert not s.current("solo", "ns")["spec"].get("schedulingGates")
    s.api.merge_patch(POD_KIND, "solo", {"status": {"phase": "Failed"}}, "ns", "status")
    s.event("MODIFIED", s.current("solo", "ns"))
    assert s.unit("solo-pod-qu", "ns")["status"]["phase"] == Phase.FAILED.value


@pytest.mark.parametrize("verb", ["resume", "suspend"])
def test_a_refused_read_of_the_workload_is_a_refused_write_not_an_exception(verb: str) -> None:
    """bench/soak.py, api-500 burst: the workload's GET answered 500 raised out of the
    admission's write chain, which never reported back: every round waited 60 s. Fails
    with ReadMembers letting the ApiError up (checked: the write raises it)."""

    class Refusing(MemoryApi):
        refuse = False

        def get(self, kind: Kind, name: str, namespace: str | None = None) -> Any:
            if self.refuse and kind == kind_of(PYTORCH_JOB):
                raise ApiError(500, "InternalError", "injected", "GET", kind.path())
            return super().get(kind, name, namespace)

    api = Refusing()
    s = Served(PYTORCH_JOB, api)
    s.event("ADDED", pytorch(s))
    write = getattr(s.rec, verb)(s.unit(PY_UNIT, "default"))
    api.refuse = True
    with capture_logs() as logs:
        assert not s.run(write)
    api.refuse = False
    assert s.current(TJ, "default")["spec"]["runPolicy"]["suspend"]
    assert [e["event"] for e in logs] == ["could not read workload"]
