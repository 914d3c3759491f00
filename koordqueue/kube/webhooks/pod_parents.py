"""Deployment and StatefulSet webhook: their pod templates marked for the pod path (issue 26).

Kueue's deployment and statefulset webhooks, on one route: a CREATE or UPDATE of an object
that names a quota gets its pod template marked (domain/integrations/pod_parents.py says
how), so that the pod webhook gates its pods and the pod integration queues them; an UPDATE
Kueue refuses (the quota label changed while replicas are ready, a queued StatefulSet
resized other than to or from 0, its pod spec's admission fields changed) is refused with
every reason at once. failurePolicy Ignore (deploy/webhook.yaml): with the webhook down
nothing is marked and nothing refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from koordqueue.domain.integrations.pod_parents import ParentGating, review_parent
from koordqueue.kube.webhooks.review import json_patch, request_of, response

PATH: Final = "mutate-pod-parents"
"""The URL path (below the server's root) of this webhook."""


def review(request_review: Mapping[str, Any], gating: ParentGating) -> dict[str, Any]:
    """The AdmissionReview answer for one Deployment or StatefulSet request."""
    request = request_of(request_review)
    if request.get("subResource"):
        return response(request_review)  # (scale: its replicas reach us through the object)
    obj = request.get("object") or {}
    old = request.get("oldObject")
    answer = review_parent(
        gating,
        str(request.get("operation") or ""),
        obj,
        old if isinstance(old, Mapping) else None,
        request.get("namespace"),
    )
    if answer.denied is not None:
        return response(request_review, denied=answer.denied)
    ops = json_patch(obj, answer.patch.body) if answer.patch is not None else []
    return response(request_review, patch=ops)


def handler(gating: ParentGating) -> Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]:
    async def handle(request_review: Mapping[str, Any]) -> dict[str, Any]:
        return review(request_review, gating)

    return handle
