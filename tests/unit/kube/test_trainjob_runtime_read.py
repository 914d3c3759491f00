"""The kube edge reads a TrainJob's runtime before its unit is made (workload_writes'
read_references, CreateUnit): the unit's pods come from the runtime as the API has it; a
runtime that is not there refuses the TrainJob (WorkloadInvalid naming spec.runtimeRef, which
the reconciler turns into an InvalidJob event) and no unit is created; a read the API refuses
is a CreateRefused, tried again after the back-off."""

from __future__ import annotations

from typing import Any

from koordqueue.domain.integrations import TRAIN_JOB
from koordqueue.kube.api import QUEUE_UNIT, ApiError, Kind
from koordqueue.kube.controller.workload_writes import (
    CreateRefused,
    CreateUnit,
    PriorityClasses,
    UnitCreated,
    WorkloadInvalid,
)
from koordqueue.kube.controller.workloads import kind_of
from koordqueue.kube.controller.writes import Apis
from koordqueue.kube.events import EventRecorder
from tests.unit.integrations.trainer_kinds import kueue_runtime, runtime, trainjob
from tests.unit.kube.memory_api import MemoryApi

TRAINJOBS = kind_of(TRAIN_JOB)
CLUSTER_RUNTIMES = Kind(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime",
    namespaced=False,
)
RUNTIMES = Kind("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime")


class RefusingApi(MemoryApi):
    """Answers 403 to every runtime read (RBAC without the runtime rows)."""

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        if kind.plural.endswith("trainingruntimes"):
            raise ApiError(403, "Forbidden", "no", "GET", kind.path(namespace, name))
        return super().get(kind, name, namespace)


def _create(api: MemoryApi, job: dict[str, Any]) -> Any:
    made = api.create(TRAINJOBS, job, "ns")
    return CreateUnit(TRAINJOBS, TRAIN_JOB, [made], PriorityClasses(api)).run(
        Apis(api, EventRecorder(api))
    )


def _units(api: MemoryApi) -> list[dict[str, Any]]:
    return api.list_objects(QUEUE_UNIT)


def test_the_unit_counts_the_cluster_runtimes_pods() -> None:
    api = MemoryApi()
    api.create(CLUSTER_RUNTIMES, kueue_runtime())
    outcome = _create(api, trainjob(num_nodes=3))
    assert isinstance(outcome, UnitCreated)
    (unit,) = _units(api)
    assert unit["metadata"]["name"] == "trainjob-tj-qu"
    assert unit["spec"]["resource"] == {"cpu": "4"}
    assert [(p["name"], p["count"]) for p in unit["spec"]["podSet"]] == [("node", 3), ("foo", 1)]


def test_a_namespaced_runtime_is_read_from_the_trainjobs_namespace() -> None:
    api = MemoryApi()
    rt = kueue_runtime()
    rt.update(kind="TrainingRuntime", metadata={"name": "test", "namespace": "ns"})
    api.create(RUNTIMES, rt, "ns")
    assert isinstance(_create(api, trainjob(runtime_kind="TrainingRuntime")), UnitCreated)
    assert _units(api)[0]["spec"]["resource"] == {"cpu": "2"}


def test_a_missing_runtime_is_invalid_and_makes_no_unit() -> None:
    api = MemoryApi()
    api.create(CLUSTER_RUNTIMES, runtime(name="other"))
    outcome = _create(api, trainjob())
    assert isinstance(outcome, WorkloadInvalid)
    assert outcome.error.field == "spec.runtimeRef"
    assert str(outcome.error) == (
        "TrainJob ns/trainjob: spec.runtimeRef: ClusterTrainingRuntime 'test' not found"
    )
    assert _units(api) == []


def test_a_refused_runtime_read_is_tried_again_later() -> None:
    api = RefusingApi()
    outcome = _create(api, trainjob())
    assert isinstance(outcome, CreateRefused) and "Forbidden" in outcome.error
    assert _units(api) == []
