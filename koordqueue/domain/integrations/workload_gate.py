"""Which new workloads are held at creation (Kueue's Job webhook, Default(); issue 33).

The queue serves a workload only when it is held when created (a batch/v1 Job with
`spec.suspend: true`, a PyTorchJob with `runPolicy.suspend`, a JobSet with `spec.suspend`).
One created running, with the quota label, used to run outside its quota without a word. As
Kueue's webhook suspends every Job that names a LocalQueue, the workload webhook suspends at
creation every workload of an enabled integration that names a quota
(`quota.scheduling.koordinator.sh/name`), with the integration's own hold (`suspend`): not in
kube-system or the controller's own namespace, and not when its controller is a workload of
another enabled integration (a JobSet's Jobs: the JobSet is queued). Plain pods have their own
gate (pod_gate.py).

A workload labelled after it was made (created held, its unit waiting) has its labels reach
the unit (`unit_label_patch`): the unit copies the workload's labels only when it is made.

`--suspend-at-creation=false` keeps Koord-Queue's rule: only a workload created held opts in.
The webhook then changes nothing, but its warning says the workload runs outside its quota
(kubectl prints it), and the controller puts the same sentence on the workload as a Warning
event, as it does when no webhook is installed. Pure: objects are the API's JSON as dicts.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from koordqueue.domain.integrations.base import (
    Integration,
    JobStatus,
    Obj,
    WorkloadPatch,
    meta,
)
from koordqueue.domain.integrations.pod import Pod
from koordqueue.domain.integrations.pod_gate import SYSTEM_NAMESPACE
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import WAITING_PHASES, Phase

MSG_OUTSIDE_QUOTA: Final = (
    "{kind} {name} names quota {quota} but was created running: it runs outside quota (no "
    "QueueUnit). Create it held (suspended), or install the koordqueue workload webhook, "
    "which holds it at creation"
)
"""The Warning event (reason RunsOutsideQuota) and the admission warning."""


@dataclass(frozen=True, slots=True)
class WorkloadGating:
    """What decides whether a new workload is held at creation: set once at start-up."""

    excluded_namespaces: frozenset[str]
    """Namespaces whose workloads are never touched (kube-system, the controller's own)."""
    kinds: Mapping[tuple[str, str], Integration]
    """(apiVersion, kind) -> the enabled integration serving it (Pod excluded)."""
    owner_kinds: frozenset[tuple[str, str]]
    """(apiVersion, kind) of every enabled integration's workload: an object whose
    controller is one of them is queued through that owner."""
    suspend: bool = True
    """Hold labelled workloads (Kueue); False: Koord-Queue's rule, only warn."""


def workload_gating(
    own_namespace: str, integrations: Iterable[Integration], suspend: bool = True
) -> WorkloadGating | None:
    """The gating for the enabled `integrations`, or None when none of them is a workload
    kind other than Pod."""
    chosen = [i for i in integrations if not isinstance(i, Pod)]
    if not chosen:
        return None
    kinds = {(i.workload.api_version, i.workload.kind): i for i in chosen}
    return WorkloadGating(
        frozenset({SYSTEM_NAMESPACE, own_namespace}), kinds, frozenset(kinds), suspend
    )


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in meta(obj).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


def quota_of(obj: Mapping[str, Any]) -> str | None:
    value = (meta(obj).get("labels") or {}).get(QUOTA_NAME_LABEL)
    return value if isinstance(value, str) and value else None


def outside_quota_message(integration: Integration, obj: Mapping[str, Any]) -> str | None:
    """The sentence for a workload that names a quota but runs outside it (created running,
    never enqueued); None otherwise."""
    quota = quota_of(obj)
    if quota is None or integration.is_managed(obj):
        return None
    kind = integration.workload.kind
    return MSG_OUTSIDE_QUOTA.format(kind=kind, name=meta(obj).get("name", ""), quota=quota)


def outside_quota(
    integration: Integration, members: Sequence[Obj], owner_kinds: Collection[tuple[str, str]]
) -> str | None:
    """The Warning the controller puts on a workload running outside its quota (reason
    RunsOutsideQuota), or None: a single object (plain pods have the pod webhook, and a
    group's pods are its members) that names a quota, was never held, is not finished, and
    is not the child of another enabled kind's workload (a JobSet's Jobs: the JobSet is
    queued)."""
    if isinstance(integration, Pod) or len(members) != 1:
        return None
    owner = _controller(members[0])
    if owner is not None and (owner.get("apiVersion"), owner.get("kind")) in owner_kinds:
        return None
    if integration.status(members) in (JobStatus.SUCCEEDED, JobStatus.FAILED):
        return None
    return outside_quota_message(integration, members[0])


def at_creation(
    obj: Mapping[str, Any], gating: WorkloadGating, namespace: str | None = None
) -> tuple[tuple[WorkloadPatch, ...], list[str]]:
    """(merge patches that hold the workload, admission warnings) for an object being
    created in `namespace` (the AdmissionReview's request.namespace)."""
    m = meta(obj)
    integration = gating.kinds.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    if integration is None or quota_of(obj) is None:
        return (), []
    if (namespace or m.get("namespace") or "") in gating.excluded_namespaces:
        return (), []
    owner = _controller(obj)
    if owner is not None and (owner.get("apiVersion"), owner.get("kind")) in gating.owner_kinds:
        return (), []  # its owner is queued, not this object
    if integration.is_suspended(obj):
        return (), []  # opted in already
    if not gating.suspend:
        message = outside_quota_message(integration, obj)
        return (), [message] if message else []
    patches = tuple(p for p in integration.suspend(obj) if isinstance(p, WorkloadPatch))
    return patches, []


def unit_label_patch(labels: Mapping[str, Any], unit: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch bringing the unit's labels in line with its workload's `labels`
    (those the unit copies: `Integration.copied_metadata`), or None when they are.

    Every label of the workload is added or updated on the unit (labels others put on the
    unit are kept). The quota label follows, removed too, only while the unit waits in its
    queue: an admitted unit's quota is the one it was admitted into (Kueue likewise refuses a
    queue change of an admitted workload), and a finished one's no longer matters.
    """
    have = meta(unit).get("labels") or {}
    raw = (unit.get("status") or {}).get("phase") or Phase.ENQUEUED.value
    try:
        waiting = Phase(raw) in WAITING_PHASES
    except ValueError:
        waiting = False
    changes: dict[str, Any] = {
        key: value
        for key, value in labels.items()
        if have.get(key) != value and (key != QUOTA_NAME_LABEL or waiting)
    }
    if waiting and QUOTA_NAME_LABEL in have and QUOTA_NAME_LABEL not in labels:
        changes[QUOTA_NAME_LABEL] = None  # a merge patch's null removes it
    return {"metadata": {"labels": changes}} if changes else None
