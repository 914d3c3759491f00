"""The batch/v1 Job extension as pure functions (SPEC 2.6).

The adapter calls these with the Job object it watched; everything Kubernetes-specific about
the *rules* (resource totals, pod-set count, phase from Job status, retry back-off) is here, so
it is unit-tested without a cluster and reused by the simulator.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any, Final

from koordqueue.domain.names import KOORD_QUEUE_GROUP, KOORD_QUEUE_VERSION
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.queue_unit import Phase
from koordqueue.domain.resources import Resources

BACKOFF_BASE: Final = 10.0
BACKOFF_CAP: Final = 15 * 60.0
BACKOFF_JITTER: Final = 0.10


class InvalidJobError(ValueError):
    """A Job whose pod template cannot be turned into a resource request."""

    def __init__(self, key: str, field: str, reason: str) -> None:
        self.key = key
        self.field = field
        self.reason = reason
        super().__init__(f"Job {key}: {field}: {reason}")


def _requests(container: Mapping[str, Any], field: str) -> Resources:
    resources = container.get("resources") or {}
    # Kubernetes defaults requests to limits when only limits are given.
    limits = Resources.parse(resources.get("limits"), f"{field}.resources.limits")
    requests = Resources.parse(resources.get("requests"), f"{field}.resources.requests")
    return Resources({**limits.as_dict(), **requests.as_dict()})


def pod_requests(pod_spec: Mapping[str, Any], key: str = "?") -> Resources:
    """Effective pod request: max(sum of containers, each init container) + overhead.

    Restartable (sidecar) init containers run alongside the app and are summed as well.
    """
    try:
        total = Resources()
        for i, container in enumerate(pod_spec.get("containers") or []):
            total = total + _requests(container, f"spec.template.spec.containers[{i}]")
        init_peak = Resources()
        sidecars = Resources()
        for i, container in enumerate(pod_spec.get("initContainers") or []):
            request = _requests(container, f"spec.template.spec.initContainers[{i}]")
            if container.get("restartPolicy") == "Always":
                sidecars = sidecars + request
            else:
                init_peak = init_peak.max(sidecars + request)
        effective = (total + sidecars).max(init_peak)
        overhead = Resources.parse(pod_spec.get("overhead"), "spec.template.spec.overhead")
        return (effective + overhead).nonzero()
    except InvalidQuantityError as exc:
        raise InvalidJobError(key, exc.field, f"{exc.value!r}: {exc.reason}") from exc


def job_key(job: Mapping[str, Any]) -> str:
    metadata = job.get("metadata") or {}
    return f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"


def pod_set_count(job: Mapping[str, Any]) -> int:
    """min(parallelism, completions − succeeded); parallelism defaults to 1."""
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    parallelism = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    if completions is None:
        return max(parallelism, 0)
    succeeded = int((job.get("status") or {}).get("succeeded") or 0)
    return max(min(parallelism, int(completions) - succeeded), 0)


def job_resource(job: Mapping[str, Any]) -> Resources:
    """spec.resource of the unit: parallelism × the pod template's effective requests."""
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    parallelism = 1 if parallelism is None else int(parallelism)
    pod_spec = ((spec.get("template") or {}).get("spec")) or {}
    return pod_requests(pod_spec, job_key(job)) * parallelism


def is_created_suspended(job: Mapping[str, Any]) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def queue_unit_for_job(
    job: Mapping[str, Any], priority_of_class: Callable[[str], int | None] | None = None
) -> dict[str, Any]:
    """The QueueUnit object for a suspended Job: same namespace/name, owner ref, copied metadata."""
    metadata = job.get("metadata") or {}
    spec = job.get("spec") or {}
    pod_spec = ((spec.get("template") or {}).get("spec")) or {}
    class_name = pod_spec.get("priorityClassName") or ""
    priority = pod_spec.get("priority")
    if priority is None:
        priority = (
            priority_of_class(class_name) if class_name and priority_of_class else None
        ) or 0
    resource = job_resource(job)
    unit_spec: dict[str, Any] = {
        "consumerRef": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace", "default"),
            "uid": metadata.get("uid"),
        },
        "priority": int(priority),
        "queue": "",
        "resource": resource.to_quantities(),
        "podSet": [
            {
                "name": "main",
                "count": pod_set_count(job),
                "template": spec.get("template") or {},
            }
        ],
    }
    if class_name:
        unit_spec["priorityClassName"] = class_name
    return {
        "apiVersion": f"{KOORD_QUEUE_GROUP}/{KOORD_QUEUE_VERSION}",
        "kind": "QueueUnit",
        "metadata": {
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace", "default"),
            "labels": dict(metadata.get("labels") or {}),
            "annotations": dict(metadata.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": metadata.get("name"),
                    "uid": metadata.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": unit_spec,
    }


def phase_from_job(job: Mapping[str, Any]) -> Phase | None:
    """The unit phase a (resumed) Job's status implies, or None when it says nothing yet."""
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") in ("Complete", "SuccessCriteriaMet"):
            return Phase.SUCCEED
        if condition.get("type") in ("Failed", "FailureTarget"):
            return Phase.FAILED
    if (status.get("active") or 0) > 0 or (status.get("ready") or 0) > 0:
        return Phase.RUNNING
    return None


def backoff_delay(attempt: int, rng: random.Random | None = None) -> float:
    """Seconds before retry `attempt` (1-based): 10 s doubling, capped at 15 min, ±10% jitter."""
    base = min(BACKOFF_BASE * 2 ** min(max(attempt - 1, 0), 32), BACKOFF_CAP)
    jitter: float = (rng or random.Random()).uniform(-BACKOFF_JITTER, BACKOFF_JITTER)
    return float(base * (1 + jitter))
