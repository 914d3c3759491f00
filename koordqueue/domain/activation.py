"""A workload's annotations onto its unit's spec: active and the execution budget (issue 35).

Koord-Queue's job extension (pkg/jobext/framework/activation.go) reads two annotations of the
workload when the unit is made and on every reconcile after: `scheduling.x-k8s.io/active`
(only when present and a boolean, so a deactivation by the budget is not undone by a workload
that never said anything) and `scheduling.x-k8s.io/max-exec-time-seconds` (with its gate on,
an absent or invalid annotation clears the field). Beyond it, Kueue's label
`kueue.x-k8s.io/max-exec-time-seconds` is read when the annotation is absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from koordqueue.domain.features import FeatureGates
from koordqueue.domain.names import (
    ACTIVE_ANNOTATION,
    KUEUE_MAX_EXEC_TIME_LABEL,
    MAX_EXEC_TIME_ANNOTATION,
)
from koordqueue.domain.queue_unit import QueueUnit

ACTIVE_FIELD: Final = "active"
MAX_EXEC_FIELD: Final = "maximumExecutionTimeSeconds"
INT32_MAX: Final = 2**31 - 1

_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})
"""Go's strconv.ParseBool spellings, which Koord-Queue accepts."""


def active_from(annotations: Mapping[str, str]) -> bool | None:
    """The annotation's boolean; None when absent, empty or not a boolean (ignored)."""
    raw = annotations.get(ACTIVE_ANNOTATION)
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    return None


def _positive_int32(raw: object) -> int | None:
    if not isinstance(raw, str) or not raw.strip().lstrip("+").isdigit():
        return None
    value = int(raw)
    return value if 0 < value <= INT32_MAX else None


def max_exec_from(annotations: Mapping[str, str], labels: Mapping[str, str]) -> int | None:
    """The budget in seconds: the annotation, else Kueue's label; None when neither is a
    positive int32."""
    if MAX_EXEC_TIME_ANNOTATION in annotations:
        return _positive_int32(annotations.get(MAX_EXEC_TIME_ANNOTATION))
    return _positive_int32(labels.get(KUEUE_MAX_EXEC_TIME_LABEL))


def spec_fields(
    annotations: Mapping[str, str], labels: Mapping[str, str], gates: FeatureGates
) -> dict[str, Any]:
    """The spec fields a new unit gets from its workload (only those set)."""
    out: dict[str, Any] = {}
    active = active_from(annotations) if gates.active else None
    if active is not None:
        out[ACTIVE_FIELD] = active
    budget = max_exec_from(annotations, labels) if gates.maximum_execution_time else None
    if budget is not None:
        out[MAX_EXEC_FIELD] = budget
    return out


def spec_patch(
    annotations: Mapping[str, str],
    labels: Mapping[str, str],
    unit_spec: Mapping[str, Any],
    gates: FeatureGates,
) -> dict[str, Any] | None:
    """A merge patch of the unit's spec that brings it in line with its workload; None when
    it is (a cleared budget is written as null, which a merge patch removes)."""
    patch: dict[str, Any] = {}
    if gates.active:
        want = active_from(annotations)
        have = unit_spec.get(ACTIVE_FIELD)
        if want is not None and (have is None or have != want):
            patch[ACTIVE_FIELD] = want
    if gates.maximum_execution_time:
        budget = max_exec_from(annotations, labels)
        if unit_spec.get(MAX_EXEC_FIELD) != budget:
            patch[MAX_EXEC_FIELD] = budget
    return patch or None


def unit_spec_patch(
    workload: Mapping[str, Any], unit: Mapping[str, Any], gates: FeatureGates
) -> dict[str, Any] | None:
    """`spec_patch` for a workload object and its unit object."""
    own = workload.get("metadata") or {}
    return spec_patch(
        own.get("annotations") or {}, own.get("labels") or {}, unit.get("spec") or {}, gates
    )


def budget_left(unit: QueueUnit, now: float) -> float | None:
    """Seconds of execution budget the unit has left at `now` (None: no budget running).

    The clock runs from PodsReady's lastTransitionTime while it is True, on top of what
    earlier admissions banked; waiting for admission or for pods to start is free."""
    if unit.max_exec_seconds is None or not unit.active or unit.pods_ready_since is None:
        return None
    return unit.max_exec_seconds - unit.accumulated_seconds - (now - unit.pods_ready_since)
