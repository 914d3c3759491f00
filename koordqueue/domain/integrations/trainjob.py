"""Kubeflow Trainer's TrainJob (trainer.kubeflow.org/v1alpha1): spec.suspend holds it; its pods
are those of the JobSet its training runtime makes.

A TrainJob names a (Cluster)TrainingRuntime (`spec.runtimeRef`); the trainer controller
builds a JobSet from the runtime's template with the TrainJob's overrides, and Kueue
(pkg/controller/jobs/trainjob, v0.17.0, with trainer v2.2.0's runtime code) queues the pod
sets of that JobSet. The same rules here, one pod set per replicated Job, in the runtime's
order, named after it:

- pods per replica: the Job template's `parallelism` (default 1); for the Job labelled
  `trainer.kubeflow.org/trainjob-ancestor-step: trainer` whose runtime has an `mlPolicy`,
  `mlPolicy.numNodes` (default 1). The TrainJob's `spec.trainer.numNodes` then overrides it:
  on that trainer Job, or, under an MPI policy, on the Job named `node` (less one, at least
  1, when `runLauncherAsNode`);
- replicas: 1 for the trainer and the dataset / model initializer Jobs, else the replicated
  Job's `replicas` (default 1);
- per-pod request: the pod template's, with the container named `node` of the trainer Job
  (and of the Job named `node` under MPI's `runLauncherAsNode`) taking
  `spec.trainer.resourcesPerNode` whole when it gives limits or requests.

The runtime is read by the kube edge (`references`, then `resolved`); a runtime that is not
there is an InvalidJobError naming `spec.runtimeRef` (Kueue: "runtime 'x' not found"), so no
unit asks for a guessed request. Held and marked as every spec.suspend kind (spec_suspend.py);
finished on the Complete or Failed condition; running when a Job has ready pods
(`status.jobsStatus[].ready`, the JobSet's copy).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from koordqueue.domain.integrations.base import (
    InvalidJobError,
    JobStatus,
    Obj,
    PodSet,
    Reference,
    WorkloadKind,
    annotations_of,
    condition_true,
    object_key,
    pod_count,
    pod_requests,
)
from koordqueue.domain.integrations.spec_suspend import SpecSuspendWorkload, spec_of
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
)
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.resources import Resources

KIND: Final = "TrainJob"
TRAINER_GROUP: Final = "trainer.kubeflow.org"
TRAINER_VERSION: Final = "v1alpha1"
CLUSTER_TRAINING_RUNTIME: Final = WorkloadKind(
    TRAINER_GROUP, TRAINER_VERSION, "ClusterTrainingRuntime", "clustertrainingruntimes"
)
TRAINING_RUNTIME: Final = WorkloadKind(
    TRAINER_GROUP, TRAINER_VERSION, "TrainingRuntime", "trainingruntimes"
)
RUNTIME_KINDS: Final = {k.kind: k for k in (CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME)}
DEFAULT_RUNTIME_KIND: Final = CLUSTER_TRAINING_RUNTIME.kind
"""The CRD's default for spec.runtimeRef.kind (and TRAINER_GROUP for apiGroup)."""
ANCESTOR_LABEL: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER: Final = "trainer"
INITIALIZERS: Final = frozenset({"dataset-initializer", "model-initializer"})
NODE: Final = "node"
"""The trainer container's name, and the MPI node Job's."""
CONDITION_COMPLETE: Final = "Complete"
CONDITION_FAILED: Final = "Failed"
MSG_RUNTIME_NOT_FOUND: Final = "{kind} {name!r} not found"
MSG_RUNTIME_UNSUPPORTED: Final = "{value!r}: unsupported runtime (known: {known})"
MSG_NO_REPLICATED_JOBS: Final = "{kind} {name!r} has no spec.template.spec.replicatedJobs"

Runtimes = Mapping[Reference, Obj | None]


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _dig(value: Any, *keys: str) -> dict[str, Any]:
    """The map at `keys` under `value` ({} where a step is missing or not a map)."""
    for k in keys:
        value = _dict(value).get(k)
    return _dict(value)


def runtime_reference(obj: Obj) -> Reference:
    """The runtime `spec.runtimeRef` names (its CRD defaults: apiGroup trainer.kubeflow.org,
    kind ClusterTrainingRuntime); InvalidJobError for another group or kind."""
    ref = _dict(spec_of(obj).get("runtimeRef"))
    key = object_key(obj)
    name = ref.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidJobError(key, "spec.runtimeRef.name", "must be set", KIND)
    group = ref.get("apiGroup") or TRAINER_GROUP
    kind = ref.get("kind") or DEFAULT_RUNTIME_KIND
    if group != TRAINER_GROUP or kind not in RUNTIME_KINDS:
        known = ", ".join(f"{TRAINER_GROUP}/{k}" for k in RUNTIME_KINDS)
        value = f"{group}/{kind}"
        field = "spec.runtimeRef.apiGroup" if group != TRAINER_GROUP else "spec.runtimeRef.kind"
        reason = MSG_RUNTIME_UNSUPPORTED.format(value=value, known=known)
        raise InvalidJobError(key, field, reason, KIND)
    namespace = None if kind == CLUSTER_TRAINING_RUNTIME.kind else _namespace(obj)
    return Reference(RUNTIME_KINDS[kind], name, namespace)


def _namespace(obj: Obj) -> str:
    return str(_dict(obj.get("metadata")).get("namespace") or "default")


def _patched_job_labels(obj: Obj, job_name: str, labels: Mapping[str, Any]) -> dict[str, Any]:
    """A replicated Job template's labels with the TrainJob's runtimePatches merged in (the
    patches reach the ancestor label; none of their fields can change a count or request)."""
    merged = dict(labels)
    for patch in spec_of(obj).get("runtimePatches") or []:
        for job_patch in _dig(patch, "trainingRuntimeSpec", "template", "spec").get(
            "replicatedJobs"
        ) or []:
            if _dict(job_patch).get("name") == job_name:
                merged.update(_dig(job_patch, "template", "metadata", "labels"))
    return merged


def _resources_per_node(obj: Obj) -> dict[str, Any] | None:
    """spec.trainer.resourcesPerNode when it gives limits or requests (checked quantities)."""
    given = _dict(spec_of(obj).get("trainer")).get("resourcesPerNode")
    if not isinstance(given, Mapping) or not (given.get("limits") or given.get("requests")):
        return None
    field = "spec.trainer.resourcesPerNode"
    try:
        for part in ("limits", "requests"):
            Resources.parse(given.get(part), f"{field}.{part}")
    except InvalidQuantityError as exc:
        reason = f"{exc.value!r}: {exc.reason}"
        raise InvalidJobError(object_key(obj), exc.field, reason, KIND) from exc
    return {k: copy.deepcopy(given[k]) for k in ("limits", "requests") if given.get(k)}


def _pod_template(replicated: Mapping[str, Any], per_node: dict[str, Any] | None) -> dict[str, Any]:
    template = copy.deepcopy(_dig(replicated, "template", "spec", "template"))
    if per_node is not None:
        for container in _dict(template.get("spec")).get("containers") or []:
            if isinstance(container, dict) and container.get("name") == NODE:
                container["resources"] = copy.deepcopy(per_node)
    return template


def runtime_pod_sets(obj: Obj, runtime: Obj, ref: Reference) -> tuple[PodSet, ...]:
    """The pod sets of the JobSet the trainer makes for TrainJob `obj` from `runtime`."""
    key = object_key(obj)
    where = f"{ref.kind.kind} {ref.name}: spec.template.spec.replicatedJobs"
    runtime_spec = _dict(runtime.get("spec"))
    jobs = _dict(_dict(runtime_spec.get("template")).get("spec")).get("replicatedJobs") or []
    if not jobs:
        reason = MSG_NO_REPLICATED_JOBS.format(kind=ref.kind.kind, name=ref.name)
        raise InvalidJobError(key, "spec.runtimeRef", reason, KIND)
    ml_policy = runtime_spec.get("mlPolicy")
    mpi = _dict(ml_policy).get("mpi") if isinstance(ml_policy, Mapping) else None
    launcher_as_node = isinstance(mpi, Mapping) and bool(mpi.get("runLauncherAsNode"))
    trainer = _dict(spec_of(obj).get("trainer"))
    num_nodes = pod_count(trainer.get("numNodes"), 0, key, "spec.trainer.numNodes", KIND)
    per_node = _resources_per_node(obj)

    pod_sets = []
    trainer_seen = False
    for i, raw in enumerate(jobs):
        job = _dict(raw)
        name = str(job.get("name", ""))
        job_template = _dict(job.get("template"))
        labels = _patched_job_labels(obj, name, _dig(job_template, "metadata", "labels"))
        ancestor = labels.get(ANCESTOR_LABEL)
        field = f"{where}[{i}]"
        parallelism = _dict(job_template.get("spec")).get("parallelism")
        count = pod_count(parallelism, 1, key, f"{field}.template.spec.parallelism", KIND)
        is_trainer = ancestor == ANCESTOR_TRAINER
        if is_trainer and isinstance(ml_policy, Mapping):
            at = f"{ref.kind.kind} {ref.name}: spec.mlPolicy.numNodes"
            count = pod_count(ml_policy.get("numNodes"), 1, key, at, KIND)
        if trainer.get("numNodes") is not None:
            if isinstance(mpi, Mapping):
                if name == NODE:
                    count = max(num_nodes - 1, 1) if launcher_as_node else num_nodes
            elif is_trainer and not trainer_seen:  # the first trainer Job (FindPodSetByAncestor)
                count = num_nodes
        trainer_seen = trainer_seen or is_trainer
        if is_trainer or ancestor in INITIALIZERS:
            replicas = 1
        else:
            replicas = pod_count(job.get("replicas"), 1, key, f"{field}.replicas", KIND)
        takes_per_node = is_trainer or (launcher_as_node and name == NODE)
        template = _pod_template(job, per_node if takes_per_node else None)
        path = f"{field}.template.spec.template.spec"
        request = pod_requests(_dict(template.get("spec")), key, path, KIND)
        pod_sets.append(PodSet(name, replicas * count, template, request))
    return tuple(pod_sets)


class TrainJob(SpecSuspendWorkload):
    """One instance per set of runtimes read: the registry's has none (`resolved` binds)."""

    name = "trainer.kubeflow.org/trainjob"
    workload = WorkloadKind(TRAINER_GROUP, TRAINER_VERSION, KIND, "trainjobs")
    unit_suffix = "tj-qu"

    def __init__(self, runtimes: Runtimes | None = None) -> None:
        self.runtimes: Runtimes = dict(runtimes or {})

    def references(self, obj: Obj) -> tuple[Reference, ...]:
        try:
            return (runtime_reference(obj),)
        except InvalidJobError:
            return ()  # pod_sets says why

    def resolved(self, found: Runtimes) -> TrainJob:
        return TrainJob(found)

    def _runtime(self, obj: Obj) -> tuple[Reference, Obj]:
        ref = runtime_reference(obj)
        runtime = self.runtimes.get(ref)
        if runtime is None:
            reason = MSG_RUNTIME_NOT_FOUND.format(kind=ref.kind.kind, name=ref.name)
            raise InvalidJobError(object_key(obj), "spec.runtimeRef", reason, KIND)
        return ref, runtime

    def pod_sets(self, members: Sequence[Obj]) -> tuple[PodSet, ...]:
        obj = members[0]
        ref, runtime = self._runtime(obj)
        return runtime_pod_sets(obj, runtime, ref)

    def _pod_specs(self, obj: Obj) -> list[Mapping[str, Any]]:
        try:
            return [_dict(p.template.get("spec")) for p in self.pod_sets([obj])]
        except InvalidJobError:
            return []

    @staticmethod
    def _jobs_status(obj: Obj) -> list[Mapping[str, Any]]:
        return [_dict(s) for s in _dict(obj.get("status")).get("jobsStatus") or []]

    def started(self, obj: Obj) -> bool:
        """Any of its Jobs ever active, ready or finished."""
        return any(
            int(s.get(k) or 0) > 0
            for s in self._jobs_status(obj)
            for k in ("active", "ready", "succeeded", "failed")
        )

    def pod_running(self, members: Sequence[Obj]) -> bool | None:
        return any(int(s.get("ready") or 0) > 0 for s in self._jobs_status(members[0]))

    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        obj = members[0]
        if condition_true(obj, CONDITION_COMPLETE):
            return JobStatus.SUCCEEDED
        if condition_true(obj, CONDITION_FAILED):
            return JobStatus.FAILED
        jobs = self._jobs_status(obj)
        if pod_running or any(int(s.get("ready") or 0) > 0 for s in jobs):
            return JobStatus.RUNNING
        if any(int(s.get("active") or 0) > 0 for s in jobs):
            return JobStatus.PENDING
        notes = annotations_of(obj)
        if notes.get(JOB_DEQUEUE_TIMESTAMP_ANNOTATION):
            return JobStatus.PENDING
        if notes.get(JOB_HAS_ENQUEUED_ANNOTATION) == "true":
            return JobStatus.QUEUING
        return JobStatus.CREATED
