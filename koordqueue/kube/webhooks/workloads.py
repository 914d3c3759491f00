"""Workload defaulting webhook: a labelled workload is held at creation (issue 33).

Kueue's Job webhook suspends every Job that names a queue, so nothing labelled for a quota
can run outside it. This one does the same for every enabled integration's kind (batch/v1
Job, the Kubeflow, Ray, Spark and Argo kinds, ...; plain pods have the pod webhook) with its own
hold, decided by domain/integrations/workload_gate.py. With `--suspend-at-creation=false`
(Koord-Queue's rule: only a workload created held is queued) nothing is changed and a warning
says the workload runs outside its quota. Never refuses (failurePolicy Ignore): a queueing
webhook must not block the creation of workloads; no validation beyond that.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from koordqueue.domain.integrations.workload_gate import WorkloadGating, at_creation
from koordqueue.kube.webhooks.review import json_patch, request_of, response

PATH: Final = "mutate-workloads"
"""The URL path (below the server's root) of this webhook."""


def review(request_review: Mapping[str, Any], gating: WorkloadGating) -> dict[str, Any]:
    """The AdmissionReview answer for one workload request (always allowed)."""
    request = request_of(request_review)
    if request.get("operation") != "CREATE" or request.get("subResource"):
        return response(request_review)
    obj = request.get("object") or {}
    patches, warnings = at_creation(obj, gating, request.get("namespace"))
    ops: list[dict[str, Any]] = []
    for patch in patches:
        ops += json_patch(obj, patch.body)
    return response(request_review, patch=ops, warnings=warnings)


def handler(gating: WorkloadGating) -> Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]:
    async def handle(request_review: Mapping[str, Any]) -> dict[str, Any]:
        return review(request_review, gating)

    return handle
