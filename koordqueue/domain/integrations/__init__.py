"""Job integrations: one module per framework, one registry keyed by `--integrations` name.

Adding a kind is one module with an `Integration` subclass and its tests, plus one entry
here. The names are Kueue's (`batch/job`, `kubeflow.org/pytorchjob`, ...), so a user moving
between the two writes the same flag.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from koordqueue.domain.integrations.appwrapper import AppWrapper
from koordqueue.domain.integrations.argo import ArgoWorkflow
from koordqueue.domain.integrations.base import (
    DeleteWorkload,
    Integration,
    InvalidJobError,
    JobStatus,
    ListSelector,
    Mutation,
    PodSet,
    Reference,
    WorkloadKind,
    WorkloadPatch,
    queue_unit_for,
)
from koordqueue.domain.integrations.batch_job import BatchJob
from koordqueue.domain.integrations.jobset import JobSet
from koordqueue.domain.integrations.kubeflow import (
    JAXJob,
    MPIJob,
    PaddleJob,
    PyTorchJob,
    TFJob,
    XGBoostJob,
)
from koordqueue.domain.integrations.mpijob_v1alpha1 import MPIJobV1alpha1
from koordqueue.domain.integrations.pod import Pod
from koordqueue.domain.integrations.pod_parents import POD_PARENTS
from koordqueue.domain.integrations.ray import RayCluster, RayJob
from koordqueue.domain.integrations.spark import SparkApplication
from koordqueue.domain.integrations.trainjob import TrainJob

BATCH_JOB: Final = BatchJob()
PYTORCH_JOB: Final = PyTorchJob()
MPI_JOB: Final = MPIJob()
JOBSET: Final = JobSet()
POD: Final = Pod()
APPWRAPPER: Final = AppWrapper()
TF_JOB: Final = TFJob()
RAY_JOB: Final = RayJob()
RAY_CLUSTER: Final = RayCluster()
SPARK_APPLICATION: Final = SparkApplication()
ARGO_WORKFLOW: Final = ArgoWorkflow()
MPI_JOB_V1ALPHA1: Final = MPIJobV1alpha1()
XGBOOST_JOB: Final = XGBoostJob()
PADDLE_JOB: Final = PaddleJob()
JAX_JOB: Final = JAXJob()
TRAIN_JOB: Final = TrainJob()

INTEGRATIONS: Final[Mapping[str, Integration]] = {
    i.name: i
    for i in (
        BATCH_JOB,
        PYTORCH_JOB,
        MPI_JOB,
        JOBSET,
        POD,
        # Kueue's further kinds (issue 26)
        APPWRAPPER,
        # Koord-Queue's further kinds (issue 26)
        TF_JOB,
        RAY_JOB,
        RAY_CLUSTER,
        SPARK_APPLICATION,
        ARGO_WORKFLOW,
        MPI_JOB_V1ALPHA1,
        # Kueue's training-operator kinds (issue 26)
        XGBOOST_JOB,
        PADDLE_JOB,
        JAX_JOB,
        # Kubeflow Trainer (issue 26)
        TRAIN_JOB,
    )
}
"""Every integration by its `--integrations` name. Where two serve the same kind at different
versions (MPIJob), the first listed wins when a cluster serves both."""
ALL: Final = "all"
"""`--integrations all`: every integration (those whose CRD is missing are skipped)."""
DEFAULT_INTEGRATIONS: Final = (BATCH_JOB.name,)
"""What is served without the flag: batch/v1 Job only, as before the flag existed."""


def by_kind(kind: str, api_version: str | None = None) -> Integration | None:
    """The integration serving objects of `kind` (and `api_version`, when given)."""
    for integration in INTEGRATIONS.values():
        workload = integration.workload
        if workload.kind == kind and api_version in (None, workload.api_version):
            return integration
    return None


def parse_integrations(names: str | Iterable[str]) -> tuple[Integration, ...]:
    """`--integrations` ("batch/job,pod" or a list; `all` for every one) to integrations, in
    order, no repeats. A pod parent's name (deployment, statefulset: pod_parents.py) stands
    for `pod`, whose path queues its pods (Kueue's implicitly enabled frameworks).

    Raises ValueError naming the unknown entries and the known ones.
    """
    chosen = (POD.name if name in POD_PARENTS else name for name in integration_names(names))
    return tuple(INTEGRATIONS[name] for name in dict.fromkeys(chosen))


def integration_names(names: str | Iterable[str]) -> list[str]:
    """The `--integrations` entries as given, blanks dropped, no repeats (ValueError naming
    the unknown ones and the known ones)."""
    items = names.split(",") if isinstance(names, str) else list(names)
    wanted: list[str] = []
    for item in (item.strip() for item in items):
        wanted.extend(INTEGRATIONS if item == ALL else [item] if item else [])
    wanted = list(dict.fromkeys(wanted))
    unknown = [name for name in wanted if name not in INTEGRATIONS and name not in POD_PARENTS]
    if unknown:
        known = ", ".join([*INTEGRATIONS, *POD_PARENTS])
        raise ValueError(f"unknown integrations {', '.join(unknown)} (known: {known})")
    return wanted


__all__ = [
    "ALL",
    "APPWRAPPER",
    "ARGO_WORKFLOW",
    "BATCH_JOB",
    "DEFAULT_INTEGRATIONS",
    "INTEGRATIONS",
    "JAX_JOB",
    "JOBSET",
    "MPI_JOB",
    "MPI_JOB_V1ALPHA1",
    "PADDLE_JOB",
    "POD",
    "PYTORCH_JOB",
    "RAY_CLUSTER",
    "RAY_JOB",
    "SPARK_APPLICATION",
    "TF_JOB",
    "TRAIN_JOB",
    "XGBOOST_JOB",
    "DeleteWorkload",
    "Integration",
    "InvalidJobError",
    "JobStatus",
    "ListSelector",
    "Mutation",
    "PodSet",
    "Reference",
    "WorkloadKind",
    "WorkloadPatch",
    "by_kind",
    "integration_names",
    "parse_integrations",
    "queue_unit_for",
]
