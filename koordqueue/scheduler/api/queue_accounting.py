"""Queue accounting shared by capacity, proportion and the snapshot index's per-queue sums,
in Volcano's resource model.

Why a module of its own (in api/, below the framework and the plugins): both plugins hold a
queue's capability, inqueue and elastic amounts the same way (Volcano keeps cpu and memory as
fixed fields, so an unset one reads 0), and the two must not drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, PodGroupPhase, TaskStatus
from koordqueue.scheduler.api.resource import STANDARD_RESOURCES

INFINITE: Final = 10**30
"""Stands for Volcano's MaxFloat64 (an unset cpu/memory capability, the root's capability)."""


def min_dims_infinity(left: Mapping[str, int], cap: Mapping[str, int]) -> Resources:
    """Volcano's MinDimensionResource(cap, Infinity) over left's dimensions: a dimension
    absent from `cap` is unlimited."""
    return Resources({k: min(v, cap[k]) if k in cap else v for k, v in left.items()})


def with_standard(res: Mapping[str, int] | None) -> dict[str, int]:
    """A resource list as Volcano holds it: cpu and memory always present (0 when unset)."""
    out = dict(res.items()) if res is not None else {}
    for name in STANDARD_RESOURCES:
        out.setdefault(name, 0)
    return out


def flat_capability(capability: Resources | None) -> dict[str, int] | None:
    """A queue's capability outside a hierarchy: None when unset; an unset or non-positive
    cpu/memory means unlimited."""
    if capability is None or capability.is_empty():
        return None
    out = with_standard(capability)
    for name in STANDARD_RESOURCES:
        if out[name] <= 0:
            out[name] = INFINITE
    return out


def exceeded_part(left: Mapping[str, int], right: Mapping[str, int]) -> Resources:
    """Volcano's ExceededPart: what left has beyond right, per dimension (never negative)."""
    return Resources({k: max(v - right.get(k, 0), 0) for k, v in left.items()})


def elastic(job: JobInfo) -> Resources:
    """What a job holds beyond its minResources (all of it when it has none); enqueue checks
    subtract it, since it can be given back."""
    return exceeded_part(job.allocated, job.min_request())


def inqueue(job: JobInfo, deduct: Resources | None = None) -> Resources:
    """What a job's enqueue still reserves: minResources not yet covered by its allocation,
    for Inqueue jobs and for Running jobs whose allocated tasks reached minMember (Volcano's
    GetInqueueResource); `deduct` (gated demand) is taken off."""
    if job.min_resources is None:
        return Resources()
    if job.phase is PodGroupPhase.RUNNING:
        placed = job.count(
            TaskStatus.BOUND, TaskStatus.BINDING, TaskStatus.RUNNING, TaskStatus.ALLOCATED
        )
        if placed < job.min_available:
            return Resources()
    elif job.phase is not PodGroupPhase.INQUEUE:
        return Resources()
    allocated = job.allocated
    left = Resources(
        {
            k: v - allocated.get(k, 0)
            for k, v in job.min_request().items()
            if v - allocated.get(k, 0) > 0
        }
    )
    return (left - deduct).clamp_nonnegative() if deduct else left
