"""What a QueueUnit holds: spec.resource less the share of its reclaimable pods
(reclaimable.py), each pod set's per-pod request read from its template as the job
integrations read a workload's (integrations.base.pod_requests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordqueue.domain.integrations.base import InvalidJobError, pod_requests
from koordqueue.domain.reclaimable import (
    InvalidReclaimablePodsError,
    PodSetShare,
    parse_reclaimable_pods,
    reclaimed,
)
from koordqueue.domain.resources import Resources


def pod_set_shares(raw: object) -> list[PodSetShare]:
    """spec.podSet as shares (each template's effective pod request); raises naming the
    field when a template's quantity cannot be read."""
    out: list[PodSetShare] = []
    for i, entry in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(entry, Mapping):
            continue
        template = entry.get("template") or {}
        path = f"spec.podSet[{i}].template.spec"
        try:
            request = pod_requests(template.get("spec") or {}, path=path, kind="QueueUnit")
        except InvalidJobError as exc:
            raise InvalidReclaimablePodsError(exc.field, exc.reason) from exc
        count = entry.get("count")
        count = count if isinstance(count, int) and not isinstance(count, bool) else 0
        out.append(PodSetShare(str(entry.get("name") or ""), count, request))
    return out


def held_request(
    spec: Mapping[str, Any], status: Mapping[str, Any], resource: Resources
) -> Resources:
    """What a unit holds (or asks for): spec.resource less the share of its reclaimable pods."""
    pods = parse_reclaimable_pods(status.get("reclaimablePods"))
    if not any(pod.count for pod in pods):
        return resource
    return (resource - reclaimed(pod_set_shares(spec.get("podSet")), pods)).clamp_nonnegative()
