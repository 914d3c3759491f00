"""ElasticQuota -> Queue reconciliation against the API (SPEC 2.2).

Server-side apply with our field manager gives exactly the ownership rule the spec asks for:
our fields (priority, policy, parent label, synced annotations) are re-asserted every time,
which reverts hand edits; fields owned by anyone else (foreign annotations) are never touched;
a synced annotation that disappeared from the quota is removed because we owned it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from koordqueue.domain.queue_derivation import DesiredQueue, derive_queue, queue_needs_update
from koordqueue.kube.api import QUEUE, ObjectApi, with_retries

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "koordqueue"


def desired_manifest(desired: DesiredQueue) -> dict[str, Any]:
    manifest = desired.to_manifest()
    manifest["metadata"].setdefault("labels", {})[MANAGED_BY_LABEL] = MANAGED_BY
    return manifest


def queue_drifted(queue: Mapping[str, Any], desired: DesiredQueue) -> bool:
    """True when the live Queue differs from the desired one in a field we own."""
    labels = (queue.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) != MANAGED_BY or queue_needs_update(queue, desired)


def apply_queue(api: ObjectApi, quota: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """Create or reconcile the Queue of `quota`; idempotent, retried on transient errors."""
    desired = derive_queue(quota, namespace)
    return with_retries(lambda: api.apply(QUEUE, desired_manifest(desired)))


def delete_queue(api: ObjectApi, name: str, namespace: str) -> bool:
    return with_retries(lambda: api.delete(QUEUE, name, namespace))
