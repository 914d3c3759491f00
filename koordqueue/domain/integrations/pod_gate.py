"""Which new pods the pod integration gates at creation (Kueue's pod webhook, Default()).

The pod integration queues a pod that carries the scheduling gate `koord-queue/admission`.
So that users need not add the gate by hand, the pod webhook adds it to every new pod that
names a quota (the label `quota.scheduling.koordinator.sh/name`, this project's queue-name
label), as Kueue's webhook gates every pod that names a LocalQueue: not in kube-system or the
controller's own namespace (Kueue's default podOptions.namespaceSelector), and not when the
pod's controller is a workload of another enabled integration (its owner is queued instead,
Kueue's "owner managed by Kueue"). A pod already bound to a node is left alone too: the API
server refuses a pod with both a node and a scheduling gate, and the webhook must never make
a creation fail.

Kueue's validating webhook refuses pods whose group metadata is inconsistent; ours never
refuses (failurePolicy Ignore, no validation), so the same checks come back as admission
warnings (kubectl prints them) while the pod is gated anyway: its quota is not bypassed.
Pure: objects are the API's JSON as dicts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from koordqueue.domain.integrations.base import Integration, InvalidJobError, meta
from koordqueue.domain.integrations.pod import Pod, group_total_count, is_gated, role_of
from koordqueue.domain.names import (
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    QUOTA_NAME_LABEL,
)

SYSTEM_NAMESPACE: Final = "kube-system"
"""Never gated (with the controller's own namespace): Kueue's default namespace selector."""
DNS1123_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
DNS1123_SUBDOMAIN_MAX: Final = 253

WARN_GROUP_COUNT_MISSING: Final = (
    f"both the '{POD_GROUP_TOTAL_COUNT_ANNOTATION}' annotation and the '{POD_GROUP_NAME_LABEL}' "
    f"label should be set: metadata.annotations[{POD_GROUP_TOTAL_COUNT_ANNOTATION}] is missing; "
    "the pod stays gated until its group is valid"
)
WARN_GROUP_NAME_MISSING: Final = (
    f"both the '{POD_GROUP_TOTAL_COUNT_ANNOTATION}' annotation and the '{POD_GROUP_NAME_LABEL}' "
    f"label should be set: metadata.labels[{POD_GROUP_NAME_LABEL}] is missing; the pod is "
    "queued alone"
)
WARN_LWS_GROUP_MISSING: Final = (
    f"metadata.labels[{POD_GROUP_NAME_LABEL}]: a LeaderWorkerSet pod whose group cannot be told "
    "(no leaderworkerset.sigs.k8s.io/group-index label, and not a leader named "
    "<lws>-<index>); it stays gated, with no QueueUnit"
)
WARN_GROUP_COUNT_INVALID: Final = (
    "metadata.annotations[{annotation}]: {reason}; the pod stays gated until its group is valid"
)
WARN_GROUP_NAME_INVALID: Final = (
    "metadata.labels[{label}]: {value!r} is not a valid DNS-1123 subdomain (lower case "
    "alphanumerics, '-' and '.'); the group's QueueUnit cannot be named after it"
)


@dataclass(frozen=True, slots=True)
class AdmissionGating:
    """What decides whether a new pod gets the admission gate: set once at start-up."""

    excluded_namespaces: frozenset[str]
    """Namespaces whose pods are never gated (kube-system, the controller's own)."""
    owner_kinds: frozenset[tuple[str, str]]
    """(apiVersion, kind) of the enabled integrations' workloads other than Pod: a pod whose
    controller is one of them belongs to that workload's unit."""


def admission_gating(
    own_namespace: str, integrations: Iterable[Integration]
) -> AdmissionGating | None:
    """The gating for the enabled `integrations`, or None when `pod` is not among them."""
    chosen = list(integrations)
    if not any(isinstance(i, Pod) for i in chosen):
        return None
    owners = frozenset(
        (i.workload.api_version, i.workload.kind) for i in chosen if not isinstance(i, Pod)
    )
    return AdmissionGating(frozenset({SYSTEM_NAMESPACE, own_namespace}), owners)


def _controller(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in meta(pod).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


def wants_admission_gate(
    pod: Mapping[str, Any], gating: AdmissionGating, namespace: str | None = None
) -> bool:
    """Whether a pod being created should get the admission gate it does not have yet.

    `namespace`: the AdmissionReview's request.namespace (a pod created with generateName
    or without metadata.namespace carries it only there).
    """
    m = meta(pod)
    if (namespace or m.get("namespace") or "") in gating.excluded_namespaces:
        return False
    if not (m.get("labels") or {}).get(QUOTA_NAME_LABEL):
        return False  # names no quota: not queued (Kueue: no queue-name, no gate)
    if (pod.get("spec") or {}).get("nodeName"):
        return False  # already bound: a gate would make the API server refuse the pod
    owner = _controller(pod)
    if owner is not None and (owner.get("apiVersion"), owner.get("kind")) in gating.owner_kinds:
        return False  # its owner workload is queued, not the pod
    return not is_gated(pod)


def group_warnings(pod: Mapping[str, Any]) -> list[str]:
    """Kueue's pod-group metadata checks (validatePodGroupMetadata), as warnings."""
    m = meta(pod)
    group = (m.get("labels") or {}).get(POD_GROUP_NAME_LABEL)
    has_count = POD_GROUP_TOTAL_COUNT_ANNOTATION in (m.get("annotations") or {})
    if not group:
        if role_of(pod) is not None:
            return [WARN_LWS_GROUP_MISSING]
        return [WARN_GROUP_NAME_MISSING] if has_count else []
    warnings: list[str] = []
    value = str(group)
    if len(value) > DNS1123_SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN.fullmatch(value):
        warnings.append(WARN_GROUP_NAME_INVALID.format(label=POD_GROUP_NAME_LABEL, value=value))
    if not has_count:
        return [*warnings, WARN_GROUP_COUNT_MISSING]
    try:
        group_total_count(pod)
    except InvalidJobError as exc:
        warnings.append(
            WARN_GROUP_COUNT_INVALID.format(
                annotation=POD_GROUP_TOTAL_COUNT_ANNOTATION, reason=exc.reason
            )
        )
    return warnings
