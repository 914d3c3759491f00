"""The generic integration reconciler (koordqueue/kube/integration_reconciler.py) against the
in-memory API: unit creation, resume on admission, Running / Succeed / Failed, suspend on
preemption, pod groups, deletion, CRD detection."""

from __future__ import annotations

import copy
import logging
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
from koordqueue.domain.job_extension import queue_unit_for_job
from koordqueue.domain.names import INTEGRATION_SUSPEND_ANNOTATION, POD_ADMISSION_GATE
from koordqueue.domain.queue_unit import Phase
from koordqueue.kube import integration_reconciler as reconciler_module
from koordqueue.kube.api import POD as POD_KIND
from koordqueue.kube.api import QUEUE_UNIT, ApiError, Kind
from koordqueue.kube.integration_reconciler import (
    CRD,
    IntegrationReconciler,
    crd_installed,
    enabled_integrations,
    kind_of,
)
from tests.unit.integrations.helpers import condition, jobset, kubeflow_job, pod, template
from tests.unit.kube.memory_api import MemoryApi

NOW = 1_000_000.0
TJ = "test-job"
PY_UNIT = "test-job-py-qu"
MPI_UNIT = "test-job-mpi-qu"


def reconciler(api: MemoryApi, integration: Integration, **kwargs: Any) -> IntegrationReconciler:
    return IntegrationReconciler(
        api,
        integration,
        clock=lambda: NOW,
        go_now=lambda: "go-now",
        api_now=lambda: "2026-01-01T00:00:00Z",
        **kwargs,
    )


def put(api: MemoryApi, integration: Integration, obj: dict[str, Any]) -> dict[str, Any]:
    return api.create(kind_of(integration), obj, obj["metadata"]["namespace"])


def unit(api: MemoryApi, name: str, namespace: str) -> dict[str, Any]:
    found = api.get(QUEUE_UNIT, name, namespace)
    assert found is not None
    return found


def set_phase(api: MemoryApi, name: str, namespace: str, phase: Phase) -> None:
    api.merge_patch(
        QUEUE_UNIT,
        name,
        {"status": {"phase": phase.value, "lastUpdateTime": "2026-01-01T00:00:00Z"}},
        namespace,
        "status",
    )


def crd(plural: str, group: str, version: str, served: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "versions": [{"name": version, "served": served}]},
    }


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
def pytorch(api: MemoryApi, **kwargs: Any) -> dict[str, Any]:
    job = kubeflow_job(
        "PyTorchJob",
        {"Master": (1, template("2", "4Gi")), "Worker": (2, template("1", "2Gi"))},
        **kwargs,
    )
    return put(api, PYTORCH_JOB, job)


def current(api: MemoryApi, integration: Integration, name: str, ns: str) -> dict[str, Any]:
    found = api.get(kind_of(integration), name, ns)
    assert found is not None
    return found


def test_a_held_pytorchjob_gets_an_enqueued_unit_and_a_queuing_condition() -> None:
    api = MemoryApi()
    job = pytorch(api)
    result = reconciler(api, PYTORCH_JOB).on_event("ADDED", job)
    assert result.created is not None
    made = unit(api, PY_UNIT, "default")
    assert made["status"]["phase"] == "Enqueued"
    assert made["spec"]["resource"] == {"cpu": "4", "memory": "8Gi"}
    assert made["spec"]["consumerRef"]["kind"] == "PyTorchJob"
    assert made["metadata"]["labels"]["quota.scheduling.koordinator.sh/name"] == "q"
    conditions = current(api, PYTORCH_JOB, TJ, "default")["status"]["conditions"]
    assert [(c["type"], c["status"]) for c in conditions] == [("Queuing", "True")]


def test_a_pytorchjob_that_runs_unheld_gets_no_unit() -> None:
    api = MemoryApi()
    job = pytorch(api, suspend=False)
    result = reconciler(api, PYTORCH_JOB).on_event("ADDED", job)
    assert result.skipped == "not managed"
    assert api.get(QUEUE_UNIT, PY_UNIT, "default") is None


def test_admitted_pytorchjob_is_resumed_then_runs_then_succeeds() -> None:
    api = MemoryApi()
    rec = reconciler(api, PYTORCH_JOB)
    rec.on_event("ADDED", pytorch(api))
    set_phase(api, PY_UNIT, "default", Phase.DEQUEUED)

    result = rec.on_event("MODIFIED", current(api, PYTORCH_JOB, TJ, "default"))
    assert result.resumed
    job = current(api, PYTORCH_JOB, TJ, "default")
    assert job["spec"]["runPolicy"]["suspend"] is False
    assert job["metadata"]["annotations"][INTEGRATION_SUSPEND_ANNOTATION] == "false"
    assert job["metadata"]["annotations"]["koord-queue/job-dequeue-timestamp"] == "go-now"
    assert [(c["type"], c["status"]) for c in job["status"]["conditions"]] == [("Queuing", "False")]
    assert unit(api, PY_UNIT, "default")["status"]["phase"] == "Dequeued"

    api.merge_patch(
        kind_of(PYTORCH_JOB),
        "test-job",
        {"status": {"conditions": [*job["status"]["conditions"], condition("Running")]}},
        "default",
        "status",
    )
    rec.on_event("MODIFIED", current(api, PYTORCH_JOB, TJ, "default"))
    assert unit(api, PY_UNIT, "default")["status"]["phase"] == "Running"

    api.merge_patch(
        kind_of(PYTORCH_JOB),
        "test-job",
        {"status": {"conditions": [condition("Running", "False"), condition("Succeeded")]}},
        "default",
        "status",
    )
    result = rec.on_event("MODIFIED", current(api, PYTORCH_JOB, TJ, "default"))
    assert result.phase is Phase.SUCCEED
    status = unit(api, PY_UNIT, "default")["status"]
    assert (status["phase"], status["message"], status["admissions"]) == (
        "Succeed",
        "Succeeded",
        [],
    )


def test_a_waiting_unit_leaves_its_job_held() -> None:
    api = MemoryApi()
    rec = reconciler(api, PYTORCH_JOB)
    rec.on_event("ADDED", pytorch(api))
    result = rec.on_event("MODIFIED", current(api, PYTORCH_JOB, TJ, "default"))
    assert not result.resumed and result.phase is None
    assert current(api, PYTORCH_JOB, TJ, "default")["spec"]["runPolicy"]["suspend"]


# --- MPIJob: preemption -------------------------------------------------------------------------
def test_a_preempted_mpijob_is_suspended_and_its_unit_enqueued_again() -> None:
    api = MemoryApi()
    rec = reconciler(api, MPI_JOB)
    job = put(
        api,
        MPI_JOB,
        kubeflow_job("MPIJob", {"Launcher": (1, template("1")), "Worker": (2, template("2"))}),
    )
    rec.on_event("ADDED", job)
    set_phase(api, MPI_UNIT, "default", Phase.DEQUEUED)
    rec.on_event("MODIFIED", current(api, MPI_JOB, TJ, "default"))
    assert current(api, MPI_JOB, TJ, "default")["spec"]["runPolicy"]["suspend"] is False

    set_phase(api, MPI_UNIT, "default", Phase.PREEMPTED)
    result = rec.on_event("MODIFIED", current(api, MPI_JOB, TJ, "default"))
    assert result.suspended and result.phase is Phase.ENQUEUED
    job = current(api, MPI_JOB, TJ, "default")
    assert job["spec"]["runPolicy"]["suspend"] is True
    assert job["metadata"]["annotations"][INTEGRATION_SUSPEND_ANNOTATION] == "true"
    status = unit(api, MPI_UNIT, "default")["status"]
    assert (status["phase"], status["message"]) == ("Enqueued", "Enqueued after preempted")


def test_running_timeout_backs_the_unit_off_and_suspends_the_job() -> None:
    api = MemoryApi()
    rec = reconciler(api, MPI_JOB, running_timeout=60.0, backoff_time=30.0)
    rec.on_event("ADDED", put(api, MPI_JOB, kubeflow_job("MPIJob", {"Worker": (1, template("1"))})))
    set_phase(api, MPI_UNIT, "default", Phase.DEQUEUED)
    rec.on_event("MODIFIED", current(api, MPI_JOB, TJ, "default"))  # resumed: Pending
    late = reconciler(api, MPI_JOB, running_timeout=60.0, backoff_time=30.0)
    late.clock = lambda: 1_767_225_600.0 + 61  # 61 s after lastUpdateTime
    result = late.on_event("MODIFIED", current(api, MPI_JOB, TJ, "default"))
    assert result.phase is Phase.BACKOFF and result.suspended
    assert current(api, MPI_JOB, TJ, "default")["spec"]["runPolicy"]["suspend"] is True


# --- JobSet: the admission seam -----------------------------------------------------------------
def test_jobset_resume_and_suspend_through_its_unit() -> None:
    api = MemoryApi()
    rec = reconciler(api, JOBSET)
    obj = put(
        api,
        JOBSET,
        jobset([("workers", 2, 2, 2, template("1")), ("driver", 1, None, None, template("1"))]),
    )
    rec.on_event("ADDED", obj)
    made = unit(api, "jobset-js-qu", "ns")
    assert [(ps["name"], ps["count"]) for ps in made["spec"]["podSet"]] == [
        ("workers", 4),
        ("driver", 1),
    ]
    assert made["spec"]["resource"] == {"cpu": "5"}
    marked = current(api, JOBSET, "jobset", "ns")["metadata"]["annotations"]
    assert marked["koord-queue/job-has-enqueued"] == "true"
    assert made["metadata"]["annotations"]["koord-queue/job-has-enqueued"] == "true"

    assert rec.resume(made)
    assert current(api, JOBSET, "jobset", "ns")["spec"]["suspend"] is False
    assert not rec.resume(made)  # already running: nothing to write
    assert rec.suspend(made)
    assert current(api, JOBSET, "jobset", "ns")["spec"]["suspend"] is True


def test_jobset_failed_condition_fails_the_unit() -> None:
    api = MemoryApi()
    rec = reconciler(api, JOBSET)
    rec.on_event("ADDED", put(api, JOBSET, jobset([("a", 1, 1, 1, template("1"))])))
    set_phase(api, "jobset-js-qu", "ns", Phase.RUNNING)
    api.merge_patch(
        kind_of(JOBSET), "jobset", {"status": {"conditions": [condition("Failed")]}}, "ns", "status"
    )
    assert rec.on_event("MODIFIED", current(api, JOBSET, "jobset", "ns")).phase is Phase.FAILED
    assert unit(api, "jobset-js-qu", "ns")["status"]["phase"] == "Failed"


def test_deleting_the_workload_deletes_its_unit() -> None:
    api = MemoryApi()
    rec = reconciler(api, JOBSET)
    obj = put(api, JOBSET, jobset([("a", 1, 1, 1, template("1"))]))
    rec.on_event("ADDED", obj)
    api.delete(kind_of(JOBSET), "jobset", "ns")
    assert rec.on_event("DELETED", obj).deleted_unit
    assert api.get(QUEUE_UNIT, "jobset-js-qu", "ns") is None


def test_a_unit_of_the_same_name_owned_by_another_object_is_left_alone() -> None:
    api = MemoryApi()
    rec = reconciler(api, JOBSET)
    api.create(
        QUEUE_UNIT,
        {
            "metadata": {
                "name": "jobset-js-qu",
                "namespace": "ns",
                "ownerReferences": [{"uid": "someone"}],
            }
        },
        "ns",
    )
    obj = put(api, JOBSET, jobset([("a", 1, 1, 1, template("1"))]))
    assert rec.on_event("ADDED", obj).skipped.startswith("unit of the same name")
    assert rec.on_event("DELETED", obj).skipped == "no unit of its own"
    assert api.get(QUEUE_UNIT, "jobset-js-qu", "ns") is not None


def test_an_invalid_request_is_reported_and_makes_no_unit() -> None:
    api = MemoryApi()
    obj = jobset([("a", 1, 1, 1, template("lots"))])
    result = reconciler(api, JOBSET).on_event("ADDED", put(api, JOBSET, obj))
    assert result.error is not None
    assert "JobSet ns/jobset: spec.replicatedJobs[0].template.spec.template.spec.containers[0]" in (
        str(result.error)
    )
    assert api.get(QUEUE_UNIT, "jobset-js-qu", "ns") is None


# --- Pods ------------------------------------------------------------------------------------
def put_pod(api: MemoryApi, p: dict[str, Any]) -> dict[str, Any]:
    return api.create(POD_KIND, p, "ns")


def test_a_pod_group_is_queued_once_whole_and_released_whole() -> None:
    api = MemoryApi()
    rec = reconciler(api, POD)
    first = put_pod(api, pod("driver", group="train", total="3", cpu="2"))
    assert rec.on_event("ADDED", first).skipped == "waiting for 2 more"
    put_pod(api, pod("worker-1", group="train", total="3"))
    last = put_pod(api, pod("worker-2", group="train", total="3"))
    result = rec.on_event("ADDED", last)
    assert result.created is not None
    made = unit(api, "train-pod-qu", "ns")
    assert made["spec"]["resource"] == {"cpu": "4"}
    assert sorted(ps["count"] for ps in made["spec"]["podSet"]) == [1, 2]
    assert [o["name"] for o in made["metadata"]["ownerReferences"]] == [
        "driver",
        "worker-1",
        "worker-2",
    ]

    set_phase(api, "train-pod-qu", "ns", Phase.DEQUEUED)
    assert rec.on_event("MODIFIED", api.get(POD_KIND, "driver", "ns") or {}).resumed
    for name in ("driver", "worker-1", "worker-2"):
        gates = (api.get(POD_KIND, name, "ns") or {})["spec"].get("schedulingGates")
        assert not gates, name

    for name in ("driver", "worker-1", "worker-2"):
        api.merge_patch(POD_KIND, name, {"status": {"phase": "Succeeded"}}, "ns", "status")
    result = rec.on_event("MODIFIED", api.get(POD_KIND, "worker-2", "ns") or {})
    assert result.phase is Phase.SUCCEED


def test_a_group_unit_goes_with_its_last_pod() -> None:
    api = MemoryApi()
    rec = reconciler(api, POD)
    pods = [put_pod(api, pod(n, group="g", total="2")) for n in ("a", "b")]
    rec.on_event("ADDED", pods[1])
    api.delete(POD_KIND, "a", "ns")
    assert not rec.on_event("DELETED", pods[0]).deleted_unit
    assert api.get(QUEUE_UNIT, "g-pod-qu", "ns") is not None
    api.delete(POD_KIND, "b", "ns")
    assert rec.on_event("DELETED", pods[1]).deleted_unit
    assert api.get(QUEUE_UNIT, "g-pod-qu", "ns") is None


def test_a_single_pod_is_ungated_on_admission_and_deleted_on_preemption() -> None:
    api = MemoryApi()
    rec = reconciler(api, POD)
    solo = put_pod(api, pod("solo", extra_gates=["other.io/gate"]))
    rec.on_event("ADDED", solo)
    made = unit(api, "solo-pod-qu", "ns")
    assert rec.resume(made)
    gates = (api.get(POD_KIND, "solo", "ns") or {})["spec"]["schedulingGates"]
    assert gates == [{"name": "other.io/gate"}]
    assert POD_ADMISSION_GATE not in str(gates)
    assert rec.suspend(made)
    assert api.get(POD_KIND, "solo", "ns") is None


def test_a_gate_removal_on_a_stale_pod_is_refused_not_forced() -> None:
    api = MemoryApi()
    rec = reconciler(api, POD)
    rec.on_event("ADDED", put_pod(api, pod("solo")))
    stale = copy.deepcopy(api.get(POD_KIND, "solo", "ns") or {})
    api.merge_patch(POD_KIND, "solo", {"metadata": {"labels": {"x": "y"}}}, "ns")  # newer rv
    assert not rec._each([stale], lambda m: POD.resume(m, "now"))
    assert (api.get(POD_KIND, "solo", "ns") or {})["spec"]["schedulingGates"]


# --- batch/v1 Job through the generic path -----------------------------------------------------
def test_a_job_gets_the_same_unit_through_the_generic_reconciler() -> None:
    api = MemoryApi()
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
    stored = put(api, BATCH_JOB, job)
    rec = reconciler(api, BATCH_JOB)
    rec.on_event("ADDED", stored)
    made = unit(api, "j", "ns")
    expected = queue_unit_for_job(current(api, BATCH_JOB, "j", "ns"))
    assert made["spec"] == expected["spec"]
    assert made["metadata"]["annotations"] == expected["metadata"]["annotations"]
    assert made["metadata"]["annotations"]["koord-queue/job-has-enqueued"] == "true"


def test_a_job_with_active_pods_none_ready_has_its_pods_listed() -> None:
    api = MemoryApi()
    rec = reconciler(api, BATCH_JOB)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    rec.on_event("ADDED", put(api, BATCH_JOB, job))
    set_phase(api, "j", "ns", Phase.DEQUEUED)
    api.merge_patch(
        kind_of(BATCH_JOB), "j", {"spec": {"suspend": False}, "status": {"active": 1}}, "ns"
    )
    uid = current(api, BATCH_JOB, "j", "ns")["metadata"]["uid"]  # the Job's pods carry it
    api.create(
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
    result = rec.on_event("MODIFIED", current(api, BATCH_JOB, "j", "ns"))
    assert result.phase is Phase.RUNNING


def test_a_pod_that_is_not_the_queues_costs_no_api_call() -> None:
    class Counting(MemoryApi):
        calls = 0

        def get(self, kind: Kind, name: str, namespace: str | None = None) -> Any:
            Counting.calls += 1
            return super().get(kind, name, namespace)

    api = Counting()
    plain = put_pod(api, pod("plain", gated=False, phase="Running"))
    result = reconciler(api, POD).on_event("MODIFIED", plain)
    assert result.skipped == "not the queue's"
    assert Counting.calls == 0


def test_a_released_pod_is_still_followed_to_its_end() -> None:
    api = MemoryApi()
    rec = reconciler(api, POD)
    rec.on_event("ADDED", put_pod(api, pod("solo")))
    set_phase(api, "solo-pod-qu", "ns", Phase.DEQUEUED)
    assert rec.on_event("MODIFIED", api.get(POD_KIND, "solo", "ns") or {}).resumed
    api.merge_patch(POD_KIND, "solo", {"status": {"phase": "Failed"}}, "ns", "status")
    result = rec.on_event("MODIFIED", api.get(POD_KIND, "solo", "ns") or {})
    assert result.phase is Phase.FAILED
