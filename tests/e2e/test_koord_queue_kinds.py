"""Issue 26 on the real API server: Koord-Queue's further kinds and Kueue's training-operator
kinds (XGBoostJob, PaddleJob, JAXJob), as kubectl shows them.

Their CRDs (vendored in tests/crds/integrations/) are installed and one controller runs with
`--integrations all`: it serves every kind the plane has. There is no framework operator here,
so the test writes each workload's status as its operator would (kubectl status patches). For
each kind, on a quota of 2 cpu that preempts units not yet running:

- `low` (1 cpu), created held with the quota label, gets its unit (consumerRef, resource),
  is admitted (Dequeued, an Admitted event naming the quota) and released (its own field);
- `urgent` (2 cpu, priority 100) preempts it: `low`'s unit is back to Enqueued with a
  Preempted event and `low` is held again; `urgent` is admitted and released;
- `urgent` runs (unit Running), then succeeds (unit Succeed, admissions cleared): the quota
  goes back and `low` is admitted and released again; it runs, then fails (unit Failed).

A RayCluster never finishes: its quota goes back when it is deleted. MPIJob v1alpha1 (Aliyun's
fork) shares its CRD's name with mpi-operator's v2beta1 one: its test swaps the CRD in, runs
its own controller, and puts the v2beta1 CRD back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.domain.names import (
    ENABLE_PREEMPTION_ANNOTATION,
    INTEGRATION_SUSPEND_ANNOTATION,
    WAIT_FOR_PODS_RUNNING_ANNOTATION,
)
from tests.e2e import kq
from tests.e2e.running_controller import RunningController
from tests.unit.integrations.kq_kinds import (
    kubeflow_job,
    mpijob_v1alpha1,
    pod_template,
    raycluster,
    rayjob,
    spark_role,
    sparkapp,
    tfjob,
    workflow,
)

CRD_DIR = Path(__file__).resolve().parents[1] / "crds" / "integrations"
MPI_V1ALPHA1_CRD = CRD_DIR / "mpijob-v1alpha1" / "kubeflow.org_mpijobs.yaml"
MPI_V2BETA1_CRD = CRD_DIR / "kubeflow.org_mpijobs.yaml"
QU = "queueunits.scheduling.x-k8s.io"
NOW = "2026-01-01T00:00:00Z"

Status = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """How the test makes, reads and finishes one kind's workloads."""

    name: str
    resource: str  # kubectl's plural.group
    suffix: str
    consumer_kind: str
    make: Callable[[str, str, str, int, str | None], dict[str, Any]]
    """(name, namespace, quota, cpu, priority class or None) -> the held manifest."""
    held: Callable[[dict[str, Any]], bool]
    running: Status | None
    succeeded: Status | None
    failed: Status | None
    status_subresource: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def _condition(kind: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": "True",
        "reason": kind,
        "message": "set by the test, as the operator would",
        "lastTransitionTime": NOW,
        "lastUpdateTime": NOW,
    }


def _make_tfjob(name: str, ns: str, quota: str, cpu: int, pc: str | None) -> dict[str, Any]:
    role = (1, pod_template(str(cpu), "256Mi", priority_class=pc))
    return _plain(tfjob(name, ns, quota, roles={"Worker": role}))


def _kueue_training(kind: str) -> Callable[[str, str, str, int, str | None], dict[str, Any]]:
    """A one-Worker job of `kind`, its priority class in runPolicy.schedulingPolicy (Kueue's
    rule; its template names none)."""

    def make(name: str, ns: str, quota: str, cpu: int, pc: str | None) -> dict[str, Any]:
        role = (1, pod_template(str(cpu), "256Mi"))
        return _plain(
            kubeflow_job(kind, name, ns, quota, {"Worker": role}, scheduling_priority_class=pc)
        )

    return make


def _make_rayjob(name: str, ns: str, quota: str, cpu: int, pc: str | None) -> dict[str, Any]:
    return _plain(rayjob(name, ns, quota, head=pod_template(str(cpu), priority_class=pc)))


def _make_raycluster(name: str, ns: str, quota: str, cpu: int, pc: str | None) -> dict[str, Any]:
    return _plain(raycluster(name, ns, quota, head=pod_template(str(cpu), priority_class=pc)))


def _make_spark(name: str, ns: str, quota: str, cpu: int, pc: str | None) -> dict[str, Any]:
    app = sparkapp(
        name,
        ns,
        quota,
        mode="client",
        executor=spark_role(1, "512m"),
        instances=cpu,
        priority_class=pc,
    )
    return _plain(app)


def _make_workflow(name: str, ns: str, quota: str, cpu: int, pc: str | None) -> dict[str, Any]:
    priority = 100 if pc else None  # a Workflow's spec.priority is the value itself
    return _plain(workflow(name, ns, quota, min_resources=f"cpu: {cpu}", priority=priority))


def _make_mpijob(name: str, ns: str, quota: str, cpu: int, pc: str | None) -> dict[str, Any]:
    job = mpijob_v1alpha1(
        name, ns, quota, replicas=cpu, template=pod_template("1", priority_class=pc)
    )
    return _plain(job)


def _plain(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].pop("uid", None)  # the API server gives it
    return obj


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("spec") or {}


def _notes(obj: dict[str, Any]) -> dict[str, Any]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _spark_state(state: str) -> Status:
    return {"applicationState": {"state": state}, "driverInfo": {}}


KINDS = [
    Kind(
        "kubeflow.org/tfjob",
        "tfjobs.kubeflow.org",
        "tf-qu",
        "TFJob",
        _make_tfjob,
        lambda o: bool((_spec(o).get("runPolicy") or {}).get("suspend")),
        {"conditions": [_condition("Running")]},
        {"conditions": [_condition("Succeeded")]},
        {"conditions": [_condition("Failed")]},
    ),
    Kind(
        "ray.io/rayjob",
        "rayjobs.ray.io",
        "ray-qu",
        "RayJob",
        _make_rayjob,
        lambda o: _spec(o).get("suspend") is True,
        {"jobDeploymentStatus": "Running"},
        {"jobDeploymentStatus": "Complete"},
        {"jobDeploymentStatus": "Failed"},
    ),
    Kind(
        "ray.io/raycluster",
        "rayclusters.ray.io",
        "raycluster-qu",
        "RayCluster",
        _make_raycluster,
        lambda o: _spec(o).get("suspend") is True,
        {"readyWorkerReplicas": 1},
        None,  # a RayCluster never finishes: deleted instead
        None,
    ),
    Kind(
        "sparkoperator.k8s.io/sparkapplication",
        "sparkapplications.sparkoperator.k8s.io",
        "spark-qu",
        "SparkApplication",
        _make_spark,
        lambda o: (
            _notes(o).get(INTEGRATION_SUSPEND_ANNOTATION) == "true"
            and _spec(o).get("suspend") is True
        ),
        _spark_state("RUNNING"),
        _spark_state("COMPLETED"),
        _spark_state("FAILED"),
    ),
    Kind(
        "argoproj.io/workflow",
        "workflows.argoproj.io",
        "wf-qu",
        "Workflow",
        _make_workflow,
        lambda o: _spec(o).get("suspend") is True,
        {"phase": "Running"},
        {"phase": "Succeeded"},
        {"phase": "Failed"},
        status_subresource=False,
    ),
    *(
        Kind(
            f"kubeflow.org/{kind.lower()}",
            f"{kind.lower()}s.kubeflow.org",
            suffix,
            kind,
            _kueue_training(kind),
            lambda o: bool((_spec(o).get("runPolicy") or {}).get("suspend")),
            {"conditions": [_condition("Running")]},
            {"conditions": [_condition("Succeeded")]},
            {"conditions": [_condition("Failed")]},
        )
        for kind, suffix in (("XGBoostJob", "xgb-qu"), ("PaddleJob", "paddle-qu"),
                             ("JAXJob", "jax-qu"))
    ),
]
MPI_V1ALPHA1 = Kind(
    "kubeflow.org/mpijob-v1alpha1",
    "mpijobs.kubeflow.org",
    "mpi-qu",
    "MPIJob",
    _make_mpijob,
    lambda o: _notes(o).get(INTEGRATION_SUSPEND_ANNOTATION) == "true",
    {"launcherStatus": "Active"},
    {"launcherStatus": "Succeeded"},
    {"launcherStatus": "Failed"},
)


def _crd_name(path: Path) -> str:
    text = path.read_text()
    return str(next(d for d in yaml.safe_load_all(text) if d)["metadata"]["name"])


def _install(kubectl: Any, paths: list[Path]) -> None:
    for path in paths:
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path), timeout=120)
    names = [f"crd/{_crd_name(p)}" for p in paths]
    kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    for name in names:  # discovery can lag behind Established
        plural = name.removeprefix("crd/")
        kq.wait_for(
            lambda p=plural: kubectl("get", p, "-A", check=False).returncode == 0,
            what=f"{plural} served",
        )


def _swap_mpijob_crd(kubectl: Any, to: Path) -> None:
    """Delete mpijobs.kubeflow.org (its objects go with it), then install `to`."""
    kubectl(
        "delete", "crd", "mpijobs.kubeflow.org", "--ignore-not-found", "--wait=true", timeout=120
    )
    _install(kubectl, [to])


@pytest.fixture
def aliyun_mpijob(kubectl: Any, kubeconfig: Path) -> Iterator[RunningController]:
    """The v1alpha1 CRD in place of v2beta1 and a controller serving it; put back after."""
    _swap_mpijob_crd(kubectl, MPI_V1ALPHA1_CRD)
    try:
        with RunningController(kubeconfig, integrations="kubeflow.org/mpijob-v1alpha1") as rc:
            yield rc
    finally:
        _swap_mpijob_crd(kubectl, MPI_V2BETA1_CRD)


@pytest.fixture(scope="module")
def served(integration_crds: list[str], kubeconfig: Path) -> Iterator[RunningController]:
    """Every vendored CRD but the v1alpha1 MPIJob one, and a controller for `all`."""
    with RunningController(kubeconfig, integrations="all") as rc:
        yield rc


@pytest.fixture
def ns(kubectl: Any) -> str:
    return kq.namespace(kubectl, kq.unique("kinds"))


# --- what an operator reads and does ------------------------------------------------------
def unit(kubectl: Any, ns: str, name: str) -> dict[str, Any]:
    found = kq.get(kubectl, QU, name, ns)
    assert found is not None, f"no unit {ns}/{name}"
    return found


def wait_phase(kubectl: Any, ns: str, name: str, *phases: str) -> None:
    kq.wait_for(
        lambda: kq.phase(kubectl, ns, name) in phases,
        what=f"{name} in {phases}",
        state=lambda: kq.get(kubectl, QU, name, ns),
    )


def admitted(kubectl: Any, ns: str, name: str, quota: str, times: int = 1) -> None:
    wait_phase(kubectl, ns, name, "Dequeued", "Running")
    assert unit(kubectl, ns, name)["status"]["admissions"]
    events = kq.wait_for(
        lambda: (e := kq.events_for(kubectl, ns, name, "Admitted")) and e,
        what=f"{name} Admitted event",
    )
    assert all(quota in e["message"] for e in events)


def set_status(kubectl: Any, kind: Kind, name: str, ns: str, status: Status) -> None:
    sub = ["--subresource=status"] if kind.status_subresource else []
    patch = json.dumps({"status": status})
    kubectl("patch", kind.resource, name, "-n", ns, *sub, "--type=merge", "-p", patch)


def is_held(kubectl: Any, kind: Kind, name: str, ns: str) -> bool:
    return kind.held(kq.get(kubectl, kind.resource, name, ns) or {})


def wait_released(kubectl: Any, kind: Kind, name: str, ns: str) -> None:
    kq.wait_for(
        lambda: not is_held(kubectl, kind, name, ns),
        what=f"{name} released",
        state=lambda: kq.get(kubectl, kind.resource, name, ns),
    )


def lifecycle(kubectl: Any, kind: Kind, ns: str) -> None:
    quota = kq.unique("kinds")
    kubectl.apply(
        kq.quota(
            quota,
            max_={"cpu": "2"},
            annotations={
                WAIT_FOR_PODS_RUNNING_ANNOTATION: "true",
                ENABLE_PREEMPTION_ANNOTATION: "true",
            },
        )
    )
    pc = kq.unique("urgent")
    kubectl.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc},
            "value": 100,
        }
    )
    low, urgent = f"low-{kind.suffix}", f"urgent-{kind.suffix}"

    # a held workload gets its unit, is admitted against its quota and released
    kubectl.create(kind.make("low", ns, quota, 1, None))
    kq.wait_for(lambda: kq.get(kubectl, QU, low, ns), what=f"{low} created")
    spec = unit(kubectl, ns, low)["spec"]
    assert (spec["consumerRef"]["kind"], spec["consumerRef"]["name"]) == (kind.consumer_kind, "low")
    assert spec["resource"]["cpu"] == "1"
    admitted(kubectl, ns, low, quota)
    wait_released(kubectl, kind, "low", ns)

    # a higher-priority workload preempts it: held again, its unit back in the queue
    kubectl.create(kind.make("urgent", ns, quota, 2, pc))
    kq.wait_for(lambda: kq.get(kubectl, QU, urgent, ns), what=f"{urgent} created")
    assert unit(kubectl, ns, urgent)["spec"]["priority"] == 100
    kq.wait_for(lambda: kq.events_for(kubectl, ns, low, "Preempted"), what=f"{low} preempted")
    wait_phase(kubectl, ns, low, "Enqueued")
    kq.wait_for(
        lambda: is_held(kubectl, kind, "low", ns),
        what="low held again",
        state=lambda: (
            kq.phase(kubectl, ns, low),
            kq.phase(kubectl, ns, urgent),
            kq.get(kubectl, kind.resource, "low", ns),
        ),
    )
    admitted(kubectl, ns, urgent, quota)
    wait_released(kubectl, kind, "urgent", ns)

    # it runs, then finishes (or, a RayCluster, is deleted): the quota goes back to `low`
    assert kind.running is not None
    set_status(kubectl, kind, "urgent", ns, kind.running)
    wait_phase(kubectl, ns, urgent, "Running")
    if kind.succeeded is not None:
        set_status(kubectl, kind, "urgent", ns, kind.succeeded)
        wait_phase(kubectl, ns, urgent, "Succeed")
        assert unit(kubectl, ns, urgent)["status"]["admissions"] == []
    else:
        kubectl("delete", kind.resource, "urgent", "-n", ns)
        kq.wait_for(lambda: kq.get(kubectl, QU, urgent, ns) is None, what=f"{urgent} gone")
    admitted(kubectl, ns, low, quota)
    wait_released(kubectl, kind, "low", ns)
    set_status(kubectl, kind, "low", ns, kind.running)
    wait_phase(kubectl, ns, low, "Running")
    if kind.failed is not None:
        set_status(kubectl, kind, "low", ns, kind.failed)
        wait_phase(kubectl, ns, low, "Failed")
        assert unit(kubectl, ns, low)["status"]["admissions"] == []


def refused(kubectl: Any, kind: Kind, ns: str, obj: dict[str, Any], field_: str) -> None:
    """Bad input: an InvalidJob Warning on the workload naming the field, and no unit."""
    name = obj["metadata"]["name"]
    kubectl.create(obj)
    events = kq.wait_for(
        lambda: kq.events_for(kubectl, ns, name, "InvalidJob"),
        what=f"{name} InvalidJob event",
        state=lambda: kubectl("get", "events", "-n", ns).stdout,
    )
    assert events[0]["type"] == "Warning" and field_ in events[0]["message"], events[0]
    assert events[0]["involvedObject"]["kind"] == kind.consumer_kind
    assert kq.get(kubectl, QU, f"{name}-{kind.suffix}", ns) is None


def _bad_tfjob(ns: str) -> dict[str, Any]:
    return _plain(tfjob("bad", ns, "q", roles={"Launcher": (1, pod_template())}))


def _bad_rayjob(ns: str) -> dict[str, Any]:
    job = _plain(rayjob("bad", ns, "q", workers=[("Head", 1, pod_template())]))
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0].update(minReplicas=0, maxReplicas=2)
    return job


def _bad_raycluster(ns: str) -> dict[str, Any]:
    cluster = _plain(raycluster("bad", ns, "q", workers=[("w", -1, pod_template())]))
    cluster["spec"]["workerGroupSpecs"][0].update(minReplicas=0, maxReplicas=2)
    return cluster


def _bad_spark(ns: str) -> dict[str, Any]:
    return _plain(sparkapp("bad", ns, "q", executor=spark_role(1, "lots")))


def _bad_workflow(ns: str) -> dict[str, Any]:
    return _plain(workflow("bad", ns, "q", min_resources="cpu: lots"))


def _bad_training(kind: str, role: str) -> Callable[[str], dict[str, Any]]:
    return lambda ns: _plain(kubeflow_job(kind, "bad", ns, "q", {role: (1, pod_template())}))


BAD = {
    "kubeflow.org/tfjob": (_bad_tfjob, "spec.tfReplicaSpecs.Launcher"),
    "kubeflow.org/xgboostjob": (_bad_training("XGBoostJob", "Chief"), "spec.xgbReplicaSpecs.Chief"),
    "kubeflow.org/paddlejob": (_bad_training("PaddleJob", "PS"), "spec.paddleReplicaSpecs.PS"),
    "kubeflow.org/jaxjob": (_bad_training("JAXJob", "Master"), "spec.jaxReplicaSpecs.Master"),
    "ray.io/rayjob": (_bad_rayjob, "spec.rayClusterSpec.workerGroupSpecs[0].groupName"),
    "ray.io/raycluster": (_bad_raycluster, "spec.workerGroupSpecs[0].replicas"),
    "sparkoperator.k8s.io/sparkapplication": (_bad_spark, "spec.executor.memory"),
    "argoproj.io/workflow": (_bad_workflow, "koord-queue/min-resources"),
}


# --- the tests ----------------------------------------------------------------------------
def test_aliyun_mpijob_v1alpha1_held_admitted_preempted_run_and_finished(
    kubectl: Any, aliyun_mpijob: RunningController, ns: str
) -> None:
    """First in the module: its controller stops before `served`'s starts. Then bad input:
    a job sized by spec.gpus (no spec.replicas) gets an InvalidJob event, no unit."""
    lifecycle(kubectl, MPI_V1ALPHA1, ns)
    bad = _plain(mpijob_v1alpha1("bad", ns, "q", replicas=None))
    bad["spec"]["gpus"] = 8
    refused(kubectl, MPI_V1ALPHA1, ns, bad, "spec.replicas")


def test_all_serves_every_installed_kind(served: RunningController) -> None:
    assert served.controller is not None
    kinds = set(served.controller.consumers)
    assert {"Job", "Pod", "PyTorchJob", "MPIJob", "JobSet"} <= kinds  # installed before
    assert {k.consumer_kind for k in KINDS} <= kinds
    assert "TrainJob" in kinds  # its CRD is among the vendored ones (test_integrations_trainjob)
    mpi = served.controller.consumers["MPIJob"]
    assert mpi.integration.name == "kubeflow.org/mpijob"  # v2beta1 is back


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_held_admitted_preempted_run_and_finished(
    kubectl: Any, served: RunningController, ns: str, kind: Kind
) -> None:
    lifecycle(kubectl, kind, ns)


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_bad_input_is_an_event_and_no_unit(
    kubectl: Any, served: RunningController, ns: str, kind: Kind
) -> None:
    build, field_ = BAD[kind.name]
    refused(kubectl, kind, ns, build(ns), field_)
