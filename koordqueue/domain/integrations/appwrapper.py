"""AppWrapper (workload.codeflare.dev/v1beta2): several objects released as one.

Kueue's rules (pkg/controller/jobs/appwrapper, with the AppWrapper project's
pkg/utils GetComponentPodSpecs and InferPodSets that it calls): `spec.suspend` holds it;
each of `spec.components[]` wraps one object (`template`) and names where its pods are
(`podSets[]`: a `path` into the template, `replicas`, default 1). Where a component names
none, they are inferred from the wrapped kind: a batch/v1 Job (min(parallelism,
completions)), a JobSet (each replicated Job: replicas × min(parallelism, completions)), a
PyTorchJob (Master, Worker), a RayCluster or RayJob (head 1, each worker group its
replicas), a Pod (1), a Deployment or StatefulSet (replicas); another kind has no pods.
Once the AppWrapper controller has cached them in `status.componentStatus[].podSets`, that
copy is read. Pod sets are numbered over the whole AppWrapper: `<name>-0`, `<name>-1`, ...

It is finished when its phase is Succeeded, or Failed once its resources are gone (the
`ResourcesDeployed` condition no longer True); running when its `PodsReady` condition is True.
One difference: Kueue silently leaves out a pod set whose path does not reach a pod template;
here the AppWrapper is refused with the path named (a unit without those pods would hold too
little quota).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from koordqueue.domain.integrations.base import (
    InvalidJobError,
    JobStatus,
    Obj,
    PodSet,
    WorkloadKind,
    condition_true,
    meta,
    object_key,
    pod_count,
    pod_requests,
)
from koordqueue.domain.integrations.spec_suspend import SpecSuspendWorkload, spec_of

KIND: Final = "AppWrapper"
SUCCEEDED: Final = "Succeeded"
FAILED: Final = "Failed"
RESOURCES_DEPLOYED: Final = "ResourcesDeployed"
PODS_READY: Final = "PodsReady"
QUOTA_RESERVED: Final = "QuotaReserved"
TEMPLATE: Final = "template"
"""Every pod set path starts here: the component's wrapped object."""
_STEP: Final = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


class PathError(ValueError):
    """A pod set path that does not lead to a pod template."""


def value_at(obj: Any, path: str) -> Any:
    """The value `path` ("template.spec.replicatedJobs[0].template") names in a component's
    wrapped object, as AppWrapper's getValueAtPath walks it; raises PathError."""
    if not path.startswith(TEMPLATE):
        raise PathError(f"{path!r}: must start with {TEMPLATE!r}")
    rest, cursor, done = path[len(TEMPLATE):], obj, TEMPLATE
    while rest:
        step = _STEP.match(rest)
        if step is None:
            raise PathError(f"{path!r}: cannot read {rest!r} after {done!r}")
        key, index = step.group(1), step.group(2)
        if key is not None:
            if not isinstance(cursor, Mapping) or key not in cursor:
                raise PathError(f"{path!r}: no field {key!r} at {done!r}")
            cursor = cursor[key]
        else:
            position = int(index)
            if not isinstance(cursor, list) or position >= len(cursor):
                raise PathError(f"{path!r}: no item {position} at {done!r}")
            cursor = cursor[position]
        done += step.group(0)
        rest = rest[step.end():]
    return cursor


def _declared(path: str, replicas: int) -> dict[str, Any]:
    return {"path": path, "replicas": replicas}


class _Counts:
    """Reads the counts of a wrapped object, refusing what its operator would refuse."""

    def __init__(self, key: str, where: str) -> None:
        self.key, self.where = key, where

    def count(self, value: Any, default: int, field: str) -> int:
        where = f"{self.where}.{field.removeprefix(TEMPLATE + '.')}"
        return pod_count(value, default, self.key, where, KIND)

    def job_pods(self, spec: Mapping[str, Any], field: str) -> int:
        """min(parallelism, completions), parallelism defaulting to 1 (the Job controller's)."""
        parallelism = self.count(spec.get("parallelism"), 1, f"{field}.parallelism")
        if spec.get("completions") is None:
            return parallelism
        return min(parallelism, self.count(spec.get("completions"), 1, f"{field}.completions"))

    def ray(self, spec: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
        sets = [_declared(f"{prefix}headGroupSpec.template", 1)]
        for i, group in enumerate(spec.get("workerGroupSpecs") or []):
            if isinstance(group, Mapping) and TEMPLATE in group:
                field = f"{prefix}workerGroupSpecs[{i}]"
                replicas = self.count(group.get("replicas"), 1, f"{field}.replicas")
                sets.append(_declared(f"{field}.template", replicas))
        return sets


def inferred_pod_sets(wrapped: Mapping[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    """The pod sets AppWrapper's InferPodSets finds in a wrapped object (path, replicas).

    `where` is the wrapped object's field (for the error's field name); raises
    InvalidJobError for a count that is negative or not a whole number."""
    counts = _Counts(key, where)
    gvk = (wrapped.get("apiVersion"), wrapped.get("kind"))
    raw = wrapped.get("spec")
    spec: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    if gvk == ("batch/v1", "Job"):
        return [_declared("template.spec.template", counts.job_pods(spec, "spec"))]
    if gvk == ("jobset.x-k8s.io/v1alpha2", "JobSet"):
        sets = []
        for i, job in enumerate(spec.get("replicatedJobs") or []):
            if not isinstance(job, Mapping) or TEMPLATE not in job:
                continue
            field = f"spec.replicatedJobs[{i}]"
            job_spec = (job.get(TEMPLATE) or {}).get("spec") or {}
            per_replica = counts.job_pods(job_spec, f"{field}.template.spec")
            replicas = counts.count(job.get("replicas"), 1, f"{field}.replicas")
            path = f"template.{field}.template.spec.template"
            sets.append(_declared(path, replicas * per_replica))
        return sets
    if gvk == ("kubeflow.org/v1", "PyTorchJob"):
        roles = spec.get("pytorchReplicaSpecs") or {}
        sets = []
        for role in ("Master", "Worker"):
            if isinstance(roles.get(role), Mapping) and TEMPLATE in roles[role]:
                field = f"spec.pytorchReplicaSpecs.{role}"
                replicas = counts.count(roles[role].get("replicas"), 1, f"{field}.replicas")
                sets.append(_declared(f"template.{field}.template", replicas))
        return sets
    if gvk == ("ray.io/v1", "RayCluster"):
        return counts.ray(spec, "template.spec.")
    if gvk == ("ray.io/v1", "RayJob"):
        cluster = spec.get("rayClusterSpec")
        if isinstance(cluster, Mapping):
            return counts.ray(cluster, "template.spec.rayClusterSpec.")
        return []
    if gvk == ("v1", "Pod"):
        return [_declared(TEMPLATE, 1)]
    if gvk in (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")) and TEMPLATE in spec:
        replicas = counts.count(spec.get("replicas"), 1, "spec.replicas")
        return [_declared("template.spec.template", replicas)]
    return []


class AppWrapper(SpecSuspendWorkload):
    name = "workload.codeflare.dev/appwrapper"
    workload = WorkloadKind("workload.codeflare.dev", "v1beta2", KIND, "appwrappers")
    unit_suffix = "aw-qu"

    @staticmethod
    def components(obj: Obj) -> list[Mapping[str, Any]]:
        return [c for c in spec_of(obj).get("components") or [] if isinstance(c, Mapping)]

    def _component_pod_sets(self, obj: Obj) -> list[tuple[int, list[Any], str]]:
        """(component index, its pod sets, where they were read) as the AppWrapper
        controller settles them: its cached copy in status, else declared, else inferred."""
        components = self.components(obj)
        cached = (obj.get("status") or {}).get("componentStatus") or []
        out = []
        for i, component in enumerate(components):
            if len(cached) == len(components) and isinstance(cached[i], Mapping):
                sets, where = cached[i].get("podSets") or [], f"status.componentStatus[{i}].podSets"
            elif component.get("podSets"):
                sets, where = component["podSets"], f"spec.components[{i}].podSets"
            else:
                wrapped = component.get(TEMPLATE)
                where = f"spec.components[{i}].template"
                sets = (
                    inferred_pod_sets(wrapped, object_key(obj), where)
                    if isinstance(wrapped, Mapping)
                    else []
                )
            out.append((i, list(sets), where))
        return out

    def _templates(self, obj: Obj) -> list[tuple[str, Any, Mapping[str, Any], str, str]]:
        """(pod set name, replicas as written, its pod template, the pod set's field, the pod
        spec's field) over every component."""
        key, name = object_key(obj), str(meta(obj).get("name", ""))
        components = self.components(obj)
        found: list[tuple[str, Any, Mapping[str, Any], str, str]] = []
        for i, sets, where in self._component_pod_sets(obj):
            wrapped = components[i].get(TEMPLATE)
            inferred = where.endswith(TEMPLATE)
            for j, declared in enumerate(sets):
                path = str((declared or {}).get("path") or "")
                field = f"{where}{path[len(TEMPLATE):]}" if inferred else f"{where}[{j}]"
                try:
                    pod_template = value_at(wrapped, path)
                except PathError as exc:
                    raise InvalidJobError(key, f"{field}.path", str(exc), KIND) from exc
                if not isinstance(pod_template, Mapping) or not isinstance(
                    pod_template.get("spec"), Mapping
                ):
                    reason = f"{path!r} does not lead to a pod template (no spec)"
                    raise InvalidJobError(key, f"{field}.path", reason, KIND)
                replicas = (declared or {}).get("replicas")
                spec_field = f"spec.components[{i}].{path}.spec"
                found.append((f"{name}-{len(found)}", replicas, pod_template, field, spec_field))
        return found

    def pod_sets(self, members: Sequence[Obj]) -> tuple[PodSet, ...]:
        obj = members[0]
        key = object_key(obj)
        pod_sets = []
        for set_name, replicas, pod_template, field, spec_field in self._templates(obj):
            count = pod_count(replicas, 1, key, f"{field}.replicas", KIND)
            request = pod_requests(pod_template.get("spec") or {}, key, spec_field, KIND)
            pod_sets.append(PodSet(set_name, count, dict(pod_template), request))
        return tuple(pod_sets)

    def _pod_specs(self, obj: Obj) -> list[Mapping[str, Any]]:
        try:
            return [t.get("spec") or {} for _, _, t, _, _ in self._templates(obj)]
        except InvalidJobError:
            return []

    def template_priority(self, obj: Obj) -> int | None:
        """Only an int counts here (the shared rule converts any value): unchanged from
        AppWrapper's first version."""
        for spec in self._pod_specs(obj):
            if isinstance(spec.get("priority"), int):
                return int(spec["priority"])
        return None

    def started(self, obj: Obj) -> bool:
        """The AppWrapper controller reserved quota for it once (it ran before)."""
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c.get("type") == QUOTA_RESERVED for c in conditions)

    def pod_running(self, members: Sequence[Obj]) -> bool | None:
        return condition_true(members[0], PODS_READY)

    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        obj = members[0]
        phase = (obj.get("status") or {}).get("phase")
        if phase == SUCCEEDED:
            return JobStatus.SUCCEEDED
        if phase == FAILED and not condition_true(obj, RESOURCES_DEPLOYED):
            return JobStatus.FAILED  # (Failed while its resources are deleted: not yet)
        if condition_true(obj, PODS_READY) or pod_running:
            return JobStatus.RUNNING
        return self.held_status(obj)
