"""The generic job reconcile's decisions, for every integration (Kueue's jobframework shape).

Pure: the controller's one workload reconciler (koordqueue/kube/controller/workloads.py) asks
these with what it holds (the workload's objects, its unit, the engine's view) and turns the
answers into typed API writes for its writer pool. Nothing here knows one kind from another:
the kind's own rules come through its `Integration`.

Three rules learnt on batch/v1 Job hold here for every kind:

- The enqueue mark rides on the resume (`EnqueuePlan.mark`): a single object whose mark is
  annotations only gets them on its unit at creation, and on itself with its resume (or, when
  its unit waits, just before the unit's first status), one workload write instead of two.
- A workload that lost that write (a leader killed between its unit's admission and the
  resume) reads as never enqueued: when its unit carries the mark, it is queued as the unit
  says (`effective_status`), else nothing would ever resume it.
- A copy of an object older than our own resume or suspend of it (a lower
  metadata.generation) is not reconciled (`is_stale`): it would resume or suspend it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from koordqueue.domain.integrations.base import (
    DeleteWorkload,
    Integration,
    JobStatus,
    Mutation,
    Obj,
    WorkloadPatch,
    meta,
)
from koordqueue.domain.names import (
    JOB_ENQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
)
from koordqueue.domain.queue_unit import Phase

ENQUEUE_MARK: Final = (JOB_HAS_ENQUEUED_ANNOTATION, JOB_ENQUEUE_TIMESTAMP_ANNOTATION)
"""The annotations that mark a workload enqueued; its unit holds copies."""

Generation = tuple[str, int]
"""(uid, metadata.generation) of an object as our last resume or suspend of it left it."""


def enqueue_mark(obj: Obj) -> dict[str, str]:
    """The enqueue mark's annotations `obj` carries (a unit: those copied from its workload)."""
    notes = meta(obj).get("annotations") or {}
    return {name: str(notes[name]) for name in ENQUEUE_MARK if notes.get(name)}


def generation_of(obj: Obj) -> Generation:
    m = meta(obj)
    return str(m.get("uid")), int(m.get("generation") or 0)


def is_stale(obj: Obj, seen: Generation | None) -> bool:
    """`obj` is a copy from before our last resume/suspend of the same object (`seen`).

    The watch delivers the newer version after it, so the copy is dropped rather than
    reconciled: reconciling a copy from before the resume would resume it again (a second
    workload write per admission).
    """
    if seen is None:
        return False
    uid, generation = generation_of(obj)
    return seen[0] == uid and generation < seen[1]


def effective_status(
    integration: Integration, members: Sequence[Obj], pod_running: bool, unit: Obj
) -> JobStatus:
    """Where the workload stands, with the unit's enqueue mark standing in for a lost one."""
    status = integration.status(members, pod_running)
    if status is JobStatus.CREATED and enqueue_mark(unit):
        return JobStatus.QUEUING
    return status


@dataclass(frozen=True, slots=True)
class EnqueuePlan:
    """How a held workload is marked enqueued when its unit is made."""

    before: tuple[tuple[int, WorkloadPatch], ...]
    """(member index, patch) written before the unit is created (a condition on a status
    subresource, a group's members): what cannot ride on a later write."""
    mark: dict[str, str] | None
    """Annotations of a single object's mark, written later: on the unit at creation, then on
    the object with its resume, or before its unit's first status (None: nothing rides)."""


def _annotations_only(patch: WorkloadPatch) -> dict[str, str] | None:
    body = patch.body
    if patch.subresource is not None or set(body) != {"metadata"}:
        return None
    metadata = body.get("metadata") or {}
    if set(metadata) != {"annotations"}:
        return None
    return {str(k): str(v) for k, v in (metadata.get("annotations") or {}).items()}


def plan_enqueue(
    integration: Integration, members: Sequence[Obj], now: str, now_rfc3339: str
) -> EnqueuePlan:
    before: list[tuple[int, WorkloadPatch]] = []
    mark: dict[str, str] | None = None
    single = len(members) == 1 and integration.group_name(members[0]) is None
    for index, member in enumerate(members):
        for patch in integration.enqueue(member, now, now_rfc3339):
            riding = _annotations_only(patch) if single else None
            if riding is not None and mark is None:
                mark = riding
            else:
                before.append((index, patch))
    return EnqueuePlan(tuple(before), mark)


def with_mark(mutations: Sequence[Mutation], mark: Mapping[str, str]) -> tuple[Mutation, ...]:
    """`mutations` with the enqueue `mark` in the first metadata patch of the object itself
    (or as a patch of its own first, when there is none)."""
    if not mark:
        return tuple(mutations)
    out = list(mutations)
    for index, mutation in enumerate(out):
        if isinstance(mutation, WorkloadPatch) and mutation.subresource is None:
            body: dict[str, Any] = dict(mutation.body)
            metadata = dict(body.get("metadata") or {})
            metadata["annotations"] = {**mark, **(metadata.get("annotations") or {})}
            body["metadata"] = metadata
            out[index] = WorkloadPatch(body)
            return tuple(out)
    return (WorkloadPatch({"metadata": {"annotations": dict(mark)}}), *out)


def creation_skip(integration: Integration, members: Sequence[Obj]) -> str:
    """Why no unit is made for the workload now ("" when one is: raises InvalidJobError
    for a group whose size cannot be read)."""
    if not members:
        return "no objects"
    if not any(integration.is_managed(m) for m in members):
        return "not managed"  # (started before it was held: not the queue's)
    expected = integration.expected_members(members)
    if len(members) < expected:
        return f"waiting for {expected - len(members)} more"
    status = integration.status(members, bool(integration.pod_running(members)))
    if status not in (JobStatus.CREATED, JobStatus.QUEUING):
        return f"already {status.value}"  # enqueued and released before; its unit is gone
    return ""


_NOT_STARTED: Final = (JobStatus.CREATED, JobStatus.QUEUING, JobStatus.PENDING)
"""No pod runs yet (a kind's status may say QUEUING for an object let go by hand)."""


def hold_again(
    integration: Integration,
    members: Sequence[Obj],
    unit: Obj,
    status: JobStatus,
    *,
    phase: Phase,
    admitted: bool,
) -> bool:
    """A workload of ours let go while its unit waits (Enqueued, not admitted): hold it again.

    Koord-Queue leaves such a workload alone; a quota system must not let it run outside its
    quota (Kueue stops a job whose workload is not admitted). It comes from a release that
    lands after the round that took the quota back, or a suspend flag cleared by hand. Only
    where holding is done in place: a pod let go is deleted to hold it, which only a round's
    preemption decides.
    """
    if admitted or phase is not Phase.ENQUEUED or status not in _NOT_STARTED:
        return False
    if not owned_by(unit, members, integration):
        return False
    writes = [w for m in members for w in integration.suspend(m)]
    return bool(writes) and not any(isinstance(w, DeleteWorkload) for w in writes)


def owned_by(unit: Obj, members: Sequence[Obj], integration: Integration | None = None) -> bool:
    """The unit names one of `members` (or, for a serving pod group, their controller:
    `Integration.owner_uids`) as its owner."""
    if integration is not None:
        uids: set[Any] = set(integration.owner_uids(members))
    else:
        uids = {meta(m).get("uid") for m in members}
    return any(ref.get("uid") in uids for ref in meta(unit).get("ownerReferences") or [])


def made_for(unit: Obj, integration: Integration) -> bool:
    """The integration made the unit (it is owned by an object of its kind)."""
    kind = integration.workload.kind
    return any(ref.get("kind") == kind for ref in meta(unit).get("ownerReferences") or [])


@dataclass(frozen=True, slots=True)
class Target:
    """Where a workload's objects are: one object by name, or a group's by label."""

    namespace: str
    name: str
    group: bool = False


def target_of(integration: Integration, obj: Obj) -> Target:
    m = meta(obj)
    return Target(
        str(m.get("namespace") or "default"),
        integration.consumer_name(obj),
        integration.group_name(obj) is not None,
    )


def target_of_unit(integration: Integration, unit: Obj) -> Target:
    """The workload a unit's consumerRef names (a group when the kind has groups and the
    reference names no single object's uid)."""
    ref = (unit.get("spec") or {}).get("consumerRef") or {}
    namespace = ref.get("namespace") or meta(unit).get("namespace") or "default"
    group = integration.group_label() is not None and not ref.get("uid")
    return Target(str(namespace), str(ref.get("name") or ""), group)
