"""Kinds held by a boolean `spec.suspend` that have no Koord-Queue handle of their own.

AppWrapper and TrainJob hold their pods with `spec.suspend` as a JobSet does, and Koord-Queue
has no handle for them, so the queue's markers are its batch/v1 Job handle's: the
job-has-enqueued / enqueue timestamp annotations (the default `Integration.enqueue`) and the
dequeue timestamp written with the release. One place for that shape: each kind says how it
is read (pod sets, state, and which pod templates its priority comes from); holding,
releasing and the priority rule (the first template naming one) are the same. JobSet is held and
marked the same way and shares this class, saying only when it has started.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordqueue.domain.integrations.base import (
    Integration,
    JobStatus,
    Mutation,
    Obj,
    WorkloadPatch,
    annotations_of,
)
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    JOB_HAS_ENQUEUED_ANNOTATION,
)


def spec_of(obj: Obj) -> dict[str, Any]:
    spec = obj.get("spec")
    return dict(spec) if isinstance(spec, dict) else {}


class SpecSuspendWorkload(Integration):
    """`spec.suspend` holds it; Koord-Queue's Job annotations mark it."""

    def is_suspended(self, obj: Obj) -> bool:
        return bool(spec_of(obj).get("suspend"))

    def _pod_specs(self, obj: Obj) -> list[Mapping[str, Any]]:
        """Its pod templates' specs, in the order its priority is looked for (Kueue's rule
        for these kinds: the first template that names one)."""
        return []

    def priority_class_name(self, obj: Obj) -> str:
        for spec in self._pod_specs(obj):
            if spec.get("priorityClassName"):
                return str(spec["priorityClassName"])
        return ""

    def template_priority(self, obj: Obj) -> int | None:
        for spec in self._pod_specs(obj):
            if spec.get("priority") is not None:
                return int(spec["priority"])
        return None

    def started(self, obj: Obj) -> bool:
        """Whether its operator ever ran it (then it is not the queue's unless enqueued)."""
        return False

    def is_managed(self, obj: Obj) -> bool:
        """Enqueued before, or created held and never started."""
        if annotations_of(obj).get(JOB_HAS_ENQUEUED_ANNOTATION):
            return True
        return self.is_suspended(obj) and not self.started(obj)

    def resume(self, obj: Obj, now: str, now_rfc3339: str | None = None) -> tuple[Mutation, ...]:
        if not self.is_suspended(obj):
            return ()
        return (
            WorkloadPatch(
                {
                    "spec": {"suspend": False},
                    "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: now}},
                }
            ),
        )

    def suspend(self, obj: Obj) -> tuple[Mutation, ...]:
        if self.is_suspended(obj):
            return ()
        return (
            WorkloadPatch(
                {
                    "spec": {"suspend": True},
                    "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: ""}},
                }
            ),
        )

    def held_status(self, obj: Obj) -> JobStatus:
        """Where a workload stands that is neither finished nor running: released (Pending),
        enqueued (Queuing) or not yet seen by the queue (Created)."""
        if not self.is_suspended(obj):
            return JobStatus.PENDING
        if annotations_of(obj).get(JOB_HAS_ENQUEUED_ANNOTATION) == "true":
            return JobStatus.QUEUING
        return JobStatus.CREATED
