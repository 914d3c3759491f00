"""Mutating admission webhook for Pods: the scheduling gates they are created with.

Two purposes, one review, one JSON patch:

- the scheduler's queue-allocation gate (SPEC 3.5) on pods that opt in by annotation, with
  the feature gate SchedulingGatesQueueAdmission on;
- the pod integration's admission gate `koord-queue/admission` (issue 13, Kueue's pod
  webhook) on pods that name a quota, when `--integrations` holds `pod`
  (koordqueue/domain/integrations/pod_gate.py decides which), and on a LeaderWorkerSet's
  pods the label naming their group (domain/integrations/leaderworkerset.py).

Served by the process's one webhook server (koordqueue/kube/webhooks/server.py) with our
own review function, because the JSON patch must be exactly `add /spec/schedulingGates/-`
(append to existing gates) or `add /spec/schedulingGates` (create the list); kopf's
diff-based patches would rewrite by index. The review never rejects: a queueing webhook
must not block pod creation, which is also why the MutatingWebhookConfiguration uses
failurePolicy Ignore and a short timeout (deploy/webhook.yaml). Inconsistent pod-group
metadata, which Kueue refuses, comes back as admission warnings.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from koordqueue.domain.integrations import parse_integrations
from koordqueue.domain.integrations.leaderworkerset import group_label_patch, with_group
from koordqueue.domain.integrations.pod import is_gated
from koordqueue.domain.integrations.pod_gate import (
    AdmissionGating,
    admission_gating,
    group_warnings,
    wants_admission_gate,
)
from koordqueue.domain.names import POD_ADMISSION_GATE
from koordqueue.kube.scheduler.features import parse_feature_gates
from koordqueue.kube.settings import ControllerSettings, SchedulerSettings, controller_settings
from koordqueue.scheduler.gates import names
from koordqueue.scheduler.gates.reservation import opted_in

WEBHOOK_PATH: Final = "/mutate-pods"
"""Where the pod review is served (below it, any path: deploy/webhook.yaml uses /gate)."""
CONFIG_NAME: Final = "koordqueue-queue-allocation-gate"


@dataclass(frozen=True, slots=True)
class PodGating:
    """Which gates the review adds: the allocation gate and/or the pod integration's."""

    allocation_gate: bool = True
    """The scheduler's queue-allocation gate on opted-in pods (the feature gate is on)."""
    admission: AdmissionGating | None = None
    """The pod integration's admission gate (None: `pod` is not an enabled integration)."""


def gates_patch(pod: Mapping[str, Any], wanted: Sequence[str]) -> list[dict[str, Any]]:
    """JSON patch ops adding the `wanted` gates the pod does not carry yet, in order.

    One op per gate appended to an existing list, or one op creating the list with all of
    them. Idempotent: a gate the pod already carries (an apiserver retry, a re-invocation
    after another webhook) is never added twice.
    """
    gates = (pod.get("spec") or {}).get("schedulingGates")
    present = (
        {g.get("name") for g in gates if isinstance(g, Mapping)}
        if isinstance(gates, list)
        else set()
    )
    missing = [name for name in dict.fromkeys(wanted) if name not in present]
    if not missing:
        return []
    if isinstance(gates, list):
        return [
            {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": name}}
            for name in missing
        ]
    return [
        {
            "op": "add",
            "path": "/spec/schedulingGates",
            "value": [{"name": name} for name in missing],
        }
    ]


def pod_patch(
    pod: Mapping[str, Any], gating: PodGating, namespace: str | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """(JSON patch ops, admission warnings) for a pod being created in `namespace`."""
    wanted: list[str] = []
    warnings: list[str] = []
    labels: list[dict[str, Any]] = []
    if gating.admission is not None:
        gate = wants_admission_gate(pod, gating.admission, namespace)
        if gate or is_gated(pod):  # (gated: a re-invocation after another webhook)
            labels = group_label_patch(pod)  # a LeaderWorkerSet's pod: its group
        if gate:
            wanted.append(POD_ADMISSION_GATE)
            warnings = group_warnings(with_group(pod))
    if gating.allocation_gate and opted_in((pod.get("metadata") or {}).get("annotations")):
        wanted.append(names.GATE_NAME)  # as before the pod integration: its own rules
    return [*labels, *gates_patch(pod, wanted)], warnings


def review(
    request: Mapping[str, Any], *, enabled: bool = True, admission: AdmissionGating | None = None
) -> dict[str, Any]:
    """An AdmissionReview response for an AdmissionReview request (always allowed).

    `enabled`: the allocation gate's feature gate (off: that gate is never added);
    `admission`: the pod integration's gating (None: its gate is never added).
    """
    payload = request.get("request") or {}
    response: dict[str, Any] = {"uid": payload.get("uid", ""), "allowed": True}
    kind = (payload.get("kind") or {}).get("kind")
    creating = payload.get("operation") == "CREATE" and not payload.get("subResource")
    if kind == "Pod" and creating:
        ops, warnings = pod_patch(
            payload.get("object") or {}, PodGating(enabled, admission), payload.get("namespace")
        )
        if ops:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode("ascii")
        if warnings:
            response["warnings"] = warnings
    return {
        "apiVersion": request.get("apiVersion", "admission.k8s.io/v1"),
        "kind": request.get("kind", "AdmissionReview"),
        "response": response,
    }


def handler(gating: PodGating) -> Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]:
    """The pod review served at WEBHOOK_PATH (kube/webhooks/server.py serves every webhook)."""

    async def handle(request: Mapping[str, Any]) -> dict[str, Any]:
        return review(request, enabled=gating.allocation_gate, admission=gating.admission)

    return handle


def pod_admission_gating(settings: ControllerSettings) -> AdmissionGating | None:
    """The pod integration's gating when `--integrations` holds `pod`, else None."""
    return admission_gating(settings.namespace, parse_integrations(settings.integrations))


def pod_gating(
    settings: SchedulerSettings, *, allocation_gate: bool, controller: bool
) -> PodGating | None:
    """What the pod webhook of this process adds, or None when it has nothing to add.

    `allocation_gate`: this process runs the scheduler that removes the queue-allocation
    gate (it is then added as the feature gate says); `controller`: this process runs the
    controller, which removes the pod integration's gate (when `pod` is enabled).
    """
    admission = pod_admission_gating(controller_settings(settings)) if controller else None
    if not allocation_gate and admission is None:
        return None
    enabled = allocation_gate and parse_feature_gates(settings.feature_gates)[names.FEATURE_GATE]
    return PodGating(enabled, admission)
