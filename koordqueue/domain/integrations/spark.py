"""Spark operator's SparkApplication (sparkoperator.k8s.io/v1beta2), after Koord-Queue's
sparkapp.go.

Koord-Queue holds it with the annotation scheduling.x-k8s.io/suspend="true" (an operator
that honours it); the upstream operator (v2.5, what Kueue drives) reads spec.suspend. Both are
written, and either holds it. Pod sets: `driver` (one pod, in cluster mode only) and
`executor` (spec.executor.instances, else spec.dynamicAllocation.initialExecutors, else 1).
A pod's request is read from the Spark fields as Koord-Queue does: cpu from coreRequest, else
cores, else coreLimit; memory from memory (Spark's JVM units: "512m" is 512Mi, "2g" 2Gi) plus
memoryOverhead; a GPU ({name, quantity}) as its resource. The priority is
spec.batchSchedulerOptions.priorityClassName's. The state is status.applicationState.state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from koordqueue.domain.integrations.base import (
    Integration,
    InvalidJobError,
    JobStatus,
    Mutation,
    Obj,
    PodSet,
    WorkloadKind,
    WorkloadPatch,
    annotations_of,
    object_key,
    pod_count,
)
from koordqueue.domain.integrations.ray import is_marked
from koordqueue.domain.names import (
    INTEGRATION_SUSPEND_ANNOTATION,
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_ENQUEUE_TIMESTAMP_ANNOTATION,
)
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.resources import Resources

CLUSTER_MODE: Final = "cluster"
CLIENT_MODE: Final = "client"
DRIVER: Final = "driver"
EXECUTOR: Final = "executor"
SUCCEEDED_STATES: Final = frozenset({"COMPLETED"})
FAILED_STATES: Final = frozenset({"FAILED"})
RUNNING_STATES: Final = frozenset({"RUNNING", "FAILING", "SUCCEEDING"})
JVM_UNITS: Final = {"k": "Ki", "m": "Mi", "g": "Gi", "t": "Ti", "p": "Pi"}
"""Spark's memory suffixes (binary, lower or upper case) as Kubernetes quantities."""


def jvm_memory(value: Any, key: str, field: str) -> Resources:
    """Spark memory ("512m", "2g", "1024", "2Gi") as a memory request."""
    text = str(value).strip()
    suffix = text[-1:].lower()
    if suffix in JVM_UNITS and text[:-1].replace(".", "", 1).isdigit():
        text = text[:-1] + JVM_UNITS[suffix]
    try:
        return Resources.parse({"memory": text}, field)
    except InvalidQuantityError as exc:
        raise InvalidJobError(key, field, f"{value!r}: {exc.reason}", "SparkApplication") from exc


def _quantity(resource: str, value: Any, key: str, field: str) -> Resources:
    try:
        return Resources.parse({resource: str(value)}, field)
    except InvalidQuantityError as exc:
        raise InvalidJobError(key, field, f"{value!r}: {exc.reason}", "SparkApplication") from exc


def spark_pod_request(spec: Mapping[str, Any], key: str, path: str) -> Resources:
    """One driver's or executor's request, from its Spark fields (see the module)."""
    cpu = Resources()
    for name in ("coreRequest", "cores", "coreLimit"):
        if spec.get(name) is not None:
            cpu = _quantity("cpu", spec[name], key, f"{path}.{name}")
            break
    memory = Resources()
    if spec.get("memory") is not None:
        memory = jvm_memory(spec["memory"], key, f"{path}.memory")
        if spec.get("memoryOverhead") is not None:
            memory = memory + jvm_memory(spec["memoryOverhead"], key, f"{path}.memoryOverhead")
    gpu = Resources()
    if spec.get("gpu"):
        name = str(spec["gpu"].get("name") or "")
        if not name:
            raise InvalidJobError(key, f"{path}.gpu.name", "must be set", "SparkApplication")
        quantity = pod_count(
            spec["gpu"].get("quantity"), None, key, f"{path}.gpu.quantity", "SparkApplication"
        )
        gpu = _quantity(name, quantity, key, f"{path}.gpu.quantity")
    return (cpu + memory + gpu).nonzero()


def _template(request: Resources, role: Mapping[str, Any]) -> dict[str, Any]:
    """A pod template standing for the role's pods (the unit's podSet entry)."""
    container = {"name": "spark", "resources": {"requests": request.to_quantities()}}
    meta = {k: dict(role[k]) for k in ("labels", "annotations") if role.get(k)}
    return {"metadata": meta, "spec": {"containers": [container]}}


class SparkApplication(Integration):
    name = "sparkoperator.k8s.io/sparkapplication"
    workload = WorkloadKind(
        "sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkapplications"
    )
    unit_suffix = "spark-qu"

    @staticmethod
    def _spec(obj: Obj) -> Mapping[str, Any]:
        return obj.get("spec") or {}

    def _executors(self, obj: Obj) -> int:
        spec, key = self._spec(obj), object_key(obj)
        executor = spec.get("executor") or {}
        if executor.get("instances") is not None:
            field = "spec.executor.instances"
            return pod_count(executor["instances"], 1, key, field, self.workload.kind)
        initial = (spec.get("dynamicAllocation") or {}).get("initialExecutors")
        field = "spec.dynamicAllocation.initialExecutors"
        return pod_count(initial, 1, key, field, self.workload.kind)

    def pod_sets(self, members: Sequence[Obj]) -> tuple[PodSet, ...]:
        obj = members[0]
        spec, key = self._spec(obj), object_key(obj)
        mode = spec.get("mode") or CLUSTER_MODE
        if mode not in (CLUSTER_MODE, CLIENT_MODE):
            reason = f"{mode!r}: must be {CLUSTER_MODE!r} or {CLIENT_MODE!r}"
            raise InvalidJobError(key, "spec.mode", reason, self.workload.kind)
        pod_sets = []
        if mode == CLUSTER_MODE:
            driver = spec.get("driver") or {}
            request = spark_pod_request(driver, key, "spec.driver")
            pod_sets.append(PodSet(DRIVER, 1, _template(request, driver), request))
        executor = spec.get("executor") or {}
        request = spark_pod_request(executor, key, "spec.executor")
        pod_sets.append(
            PodSet(EXECUTOR, self._executors(obj), _template(request, executor), request)
        )
        return tuple(pod_sets)

    def priority_class_name(self, obj: Obj) -> str:
        options = self._spec(obj).get("batchSchedulerOptions") or {}
        return str(options.get("priorityClassName") or "")

    def template_priority(self, obj: Obj) -> int | None:
        return None  # Koord-Queue reads the class only

    def is_suspended(self, obj: Obj) -> bool:
        if annotations_of(obj).get(INTEGRATION_SUSPEND_ANNOTATION) == "true":
            return True
        return self._spec(obj).get("suspend") is True

    @staticmethod
    def _state(obj: Obj) -> str:
        return str(((obj.get("status") or {}).get("applicationState") or {}).get("state") or "")

    def is_managed(self, obj: Obj) -> bool:
        """Enqueued before, or never submitted and held."""
        return is_marked(obj) or (not self._state(obj) and self.is_suspended(obj))

    def enqueue(
        self, obj: Obj, now: str, now_rfc3339: str | None = None
    ) -> tuple[WorkloadPatch, ...]:
        """Koord-Queue's mark, unless its enqueue timestamp is there already."""
        return () if is_marked(obj) else super().enqueue(obj, now, now_rfc3339)

    def resume(self, obj: Obj, now: str, now_rfc3339: str | None = None) -> tuple[Mutation, ...]:
        if not self.is_suspended(obj):
            return ()
        notes = {INTEGRATION_SUSPEND_ANNOTATION: "false", JOB_DEQUEUE_TIMESTAMP_ANNOTATION: now}
        return (WorkloadPatch({"spec": {"suspend": False}, "metadata": {"annotations": notes}}),)

    def suspend(self, obj: Obj) -> tuple[Mutation, ...]:
        if self.is_suspended(obj):
            return ()
        notes = {INTEGRATION_SUSPEND_ANNOTATION: "true", JOB_DEQUEUE_TIMESTAMP_ANNOTATION: ""}
        return (WorkloadPatch({"spec": {"suspend": True}, "metadata": {"annotations": notes}}),)

    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        obj = members[0]
        state = self._state(obj)
        if state in SUCCEEDED_STATES:
            return JobStatus.SUCCEEDED
        if state in FAILED_STATES:
            return JobStatus.FAILED
        if state in RUNNING_STATES:
            return JobStatus.RUNNING
        if not self.is_suspended(obj):
            return JobStatus.PENDING
        if annotations_of(obj).get(JOB_ENQUEUE_TIMESTAMP_ANNOTATION) or is_marked(obj):
            return JobStatus.QUEUING
        return JobStatus.CREATED
