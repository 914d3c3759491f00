"""Helpers for controller e2e tests: manifests and polling, all through kubectl."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from koordqueue.domain.names import QUEUE_POLICY_KEY, QUOTA_NAME_LABEL, QUOTA_PARENT_LABEL

T = TypeVar("T")
_counter = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{int(time.time() * 1000) % 10_000_000}-{next(_counter)}"


def wait_for(
    probe: Callable[[], T | None],
    timeout: float = 45.0,
    interval: float = 0.2,
    what: str = "",
    state: Callable[[], Any] | None = None,
) -> T:
    """Poll until `probe` returns something truthy; fail with the last value otherwise."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    seen = state() if state is not None else last
    raise AssertionError(f"timed out after {timeout}s waiting for {what or probe}; state={seen!r}")


def quota(
    name: str,
    namespace: str = "default",
    max_: dict[str, str] | None = None,
    min_: dict[str, str] | None = None,
    parent: str | None = None,
    policy: str | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if parent is not None:
        all_labels[QUOTA_PARENT_LABEL] = parent
    if policy is not None:
        all_labels[QUEUE_POLICY_KEY] = policy
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": all_labels,
            "annotations": dict(annotations or {}),
        },
        "spec": {"max": max_ or {"cpu": "4", "memory": "8Gi"}, "min": min_ or {}},
    }


def job(
    name: str,
    namespace: str,
    quota_name: str | None,
    cpu: str = "1",
    memory: str = "1Gi",
    parallelism: int = 1,
    priority_class: str | None = None,
    annotations: dict[str, str] | None = None,
    suspend: bool = True,
) -> dict[str, Any]:
    labels = {"app": name}
    if quota_name is not None:
        labels[QUOTA_NAME_LABEL] = quota_name
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": ["true"],
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ],
    }
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "suspend": suspend,
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    }


MADE_NAMESPACES: list[tuple[Any, str]] = []
"""Namespaces `namespace()` made, with the kubectl that made them: conftest's
`pods_go_with_their_test` takes the ones a test made and deletes their pods after it."""


def namespace(kubectl: Any, name: str) -> str:
    kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    MADE_NAMESPACES.append((kubectl, name))
    return name


def get(kubectl: Any, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    args = ["get", kind, name, "-o", "json"]
    if namespace:
        args += ["-n", namespace]
    proc = kubectl(*args, check=False)
    if proc.returncode != 0:
        if "NotFound" in proc.stderr or "not found" in proc.stderr:
            return None
        raise AssertionError(proc.stderr)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def events_for(
    kubectl: Any, namespace: str, name: str, reason: str | None = None
) -> list[dict[str, Any]]:
    """Events whose involvedObject is `name` in `namespace`, as `kubectl get events` lists them."""
    doc = kubectl.json(
        "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}"
    )
    items: list[dict[str, Any]] = doc.get("items", [])
    return [e for e in items if reason is None or e.get("reason") == reason]


def phase(kubectl: Any, namespace: str, name: str) -> str | None:
    unit = get(kubectl, "queueunits.scheduling.x-k8s.io", name, namespace)
    if unit is None:
        return None
    value = (unit.get("status") or {}).get("phase")
    return str(value) if value else None
