"""The ElasticQuota as the domain sees it, parsed and validated once at the edge."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordqueue.domain.names import (
    ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION,
    QUOTA_IS_PARENT_LABEL,
    QUOTA_OVERSOLD_TYPE_FORCE,
    QUOTA_PARENT_LABEL,
    ROOT_QUOTA,
)
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.resources import Resources


class InvalidQuotaError(ValueError):
    """An ElasticQuota object the controller cannot use; `field` says where the problem is."""

    def __init__(self, name: str, field: str, reason: str) -> None:
        self.name = name
        self.field = field
        self.reason = reason
        super().__init__(f"ElasticQuota {name or '<unnamed>'}: {field}: {reason}")


@dataclass(frozen=True, slots=True)
class QuotaSpec:
    """One quota node: its name, parent, guaranteed (min) and limit (max) resources."""

    name: str
    max: Resources = field(default_factory=Resources)
    min: Resources = field(default_factory=Resources)
    parent: str = ROOT_QUOTA
    namespace: str = "default"
    is_parent: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict, hash=False)
    """The ElasticQuota's annotations, kept as Koord-Queue's ElasticQuotaInfo keeps the object."""
    created: str = ""
    """metadata.creationTimestamp (RFC 3339, as the API writes it; "" when unknown): of two
    same-name quotas the older is in force (`precedence`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidQuotaError(
                str(self.name or ""), "metadata.name", "must be a non-empty string"
            )
        if not isinstance(self.parent, str) or not self.parent:
            raise InvalidQuotaError(
                self.name, f"labels[{QUOTA_PARENT_LABEL}]", "must be a non-empty string"
            )


def precedence(created: str, namespace: str) -> tuple[bool, str, str]:
    """Sort key of same-name quotas in different namespaces; the first is in force.

    Names are cluster-wide (SPEC 2.1), so only one copy can count: the oldest
    creationTimestamp, the namespace breaking a tie (and ordering copies without a timestamp,
    as in a scenario file). A function of the objects alone, so the same copy wins at every
    resync, after a restart and on every replica (issue 33: "the last reconciled wins" made
    it flip at each resync).
    """
    return (not created, created, namespace)


def is_oversold(annotations: Mapping[str, str] | None) -> bool:
    """Whether a unit's usage counts as oversold rather than guaranteed.

    Koord-Queue (`utils.IsQueueUnitOversold`): only the actual-oversold-type annotation
    `ForceQuotaOverSold` is oversold; `ForbiddenQuotaOverSold`, any other value and no
    annotation are guaranteed (legacy units). It splits accounting; CheckUsage ignores it.
    """
    if not annotations:
        return False
    return annotations.get(ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION) == QUOTA_OVERSOLD_TYPE_FORCE


def parent_from_labels(labels: Mapping[str, object] | None) -> str:
    """The parent quota name: the parent label, or the root when missing or empty (SPEC 2.5)."""
    value = (labels or {}).get(QUOTA_PARENT_LABEL)
    if value is None or value == "":
        return ROOT_QUOTA
    if not isinstance(value, str):
        raise TypeError(f"label {QUOTA_PARENT_LABEL} must be a string, got {type(value).__name__}")
    return value


def quota_from_object(obj: Mapping[str, Any]) -> QuotaSpec:
    """Parse an ElasticQuota object (Kubernetes-style dict) into a QuotaSpec.

    Raises InvalidQuotaError naming the field for every kind of bad input, so the
    controller can turn it into one clear event instead of crashing.
    """
    if not isinstance(obj, Mapping):
        raise InvalidQuotaError("", "<object>", f"expected a map, got {type(obj).__name__}")
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        raise InvalidQuotaError("", "metadata", "missing")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidQuotaError("", "metadata.name", "must be a non-empty string")
    labels = metadata.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise InvalidQuotaError(name, "metadata.labels", "must be a map")
    try:
        parent = parent_from_labels(labels)
    except TypeError as exc:
        raise InvalidQuotaError(name, f"metadata.labels[{QUOTA_PARENT_LABEL}]", str(exc)) from exc
    annotations = metadata.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        raise InvalidQuotaError(name, "metadata.annotations", "must be a map")
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise InvalidQuotaError(name, "spec", "must be a map")
    try:
        max_ = Resources.parse(spec.get("max"), "spec.max")
        min_ = Resources.parse(spec.get("min"), "spec.min")
    except InvalidQuantityError as exc:
        raise InvalidQuotaError(name, exc.field, f"{exc.value!r}: {exc.reason}") from exc
    return QuotaSpec(
        name=name,
        namespace=str(metadata.get("namespace") or "default"),
        parent=parent,
        max=max_,
        min=min_,
        is_parent=labels.get(QUOTA_IS_PARENT_LABEL) == "true",
        annotations={str(k): str(v) for k, v in annotations.items()},
        created=str(metadata.get("creationTimestamp") or ""),
    )
