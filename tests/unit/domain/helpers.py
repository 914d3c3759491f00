"""Small builders shared by the domain tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from koordqueue.domain import QuotaSpec, QuotaTree, Resources
from koordqueue.domain.names import ROOT_QUOTA

GPU = "nvidia.com/gpu"


def res(raw: Mapping[str, str | int] | None = None, /, **kw: str | int) -> Resources:
    """Resources.of with a dict for names that are not identifiers (nvidia.com/gpu)."""
    return Resources.of(raw, **kw)


def quota(
    name: str,
    max: Mapping[str, str | int] | None = None,
    parent: str = ROOT_QUOTA,
    *,
    namespace: str = "default",
    min: Mapping[str, str | int] | None = None,
    created: str = "",
) -> QuotaSpec:
    return QuotaSpec(
        name=name,
        max=Resources.of(max or {}),
        min=Resources.of(min or {}),
        parent=parent,
        namespace=namespace,
        created=created,
    )


def tree(
    *quotas: QuotaSpec,
    rate: Any = 1,
    on_duplicate: Callable[[QuotaSpec, QuotaSpec], None] | None = None,
) -> QuotaTree:
    t = QuotaTree(oversell_rate=rate, on_duplicate=on_duplicate)
    for q in quotas:
        t.upsert(q)
    return t


def elastic_quota(
    name: str = "team-a",
    *,
    namespace: str = "team-a-ns",
    labels: Mapping[str, Any] | None = None,
    annotations: Mapping[str, Any] | None = None,
    spec: Any = None,
) -> dict[str, Any]:
    """An ElasticQuota object as the API server returns it."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        metadata["labels"] = dict(labels)
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": metadata,
        "spec": {"max": {"cpu": "10", "memory": "20Gi"}, "min": {"cpu": "1"}}
        if spec is None
        else spec,
    }
