"""ElasticQuota validating webhook: bad quotas are refused at `kubectl apply` (issue 33).

Koordinator's ElasticQuota webhook (pkg/webhook/elasticquota) is the model. The rules are
domain/quota_validation.py's; this module reads the other quotas (a list per review: quotas are
few and their reviews rare, and a list answers the same on every replica, leader or standby)
and turns the answer into an AdmissionReview: denied with every problem and its field, or
allowed with warnings kubectl prints. What the API server checks itself (quantity syntax,
negative amounts) is in the CRD as CEL rules, so a cluster without this webhook still refuses
those; the webhook adds what needs the other quotas (cycles, duplicate names, is-parent under
children) and min within max. No defaulting: an ElasticQuota has no field we fill in.

When the other quotas cannot be read, the quota's own fields are still checked and a warning
says what was not. The controller refuses the same edits when the webhook is down
(kube/controller/quotas.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import structlog

from koordqueue.domain.quota_validation import (
    Problem,
    QuotaReview,
    object_problems,
    review_quota,
    review_quota_delete,
)
from koordqueue.kube.api import ELASTIC_QUOTA, ApiError, ObjectApi
from koordqueue.kube.webhooks.review import invalid_message, request_of, response

log = structlog.get_logger(__name__)
PATH: Final = "validate-elasticquotas"
"""The URL path (below the server's root) of this webhook."""
WARN_NOT_CHECKED: Final = (
    "the other ElasticQuotas could not be read ({error}): cycles, duplicate names and the "
    "parent were not checked"
)

Existing = Sequence[Mapping[str, Any]] | ApiError


def review(request_review: Mapping[str, Any], existing: Existing) -> dict[str, Any]:
    """The AdmissionReview answer for one ElasticQuota request; `existing`: every ElasticQuota
    in the cluster, or the error that kept us from listing them."""
    request = request_of(request_review)
    operation = request.get("operation")
    if request.get("subResource") or operation not in ("CREATE", "UPDATE", "DELETE"):
        return response(request_review)
    new = request.get("object") or {}
    old = request.get("oldObject") or None
    if operation == "DELETE":
        if old is None or isinstance(existing, ApiError):
            return response(request_review)
        return response(
            request_review, warnings=_texts(review_quota_delete(old, existing).warnings)
        )
    if isinstance(existing, ApiError):
        answer = QuotaReview(tuple(object_problems(new)))
        extra = [WARN_NOT_CHECKED.format(error=existing.message or existing.reason)]
    else:
        answer = review_quota(new, old if operation == "UPDATE" else None, existing)
        extra = []
    warnings = [*_texts(answer.warnings), *extra]
    if answer.denied:
        name = str((new.get("metadata") or {}).get("name") or request.get("name") or "")
        message = invalid_message("ElasticQuota", name, answer.denied)
        return response(request_review, denied=message, warnings=warnings)
    return response(request_review, warnings=warnings)


def _texts(problems: Sequence[Problem]) -> list[str]:
    return [str(p) for p in problems]


def handler(api: ObjectApi) -> Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]:
    """The review function the server calls (lists the quotas off the event loop)."""

    async def handle(request_review: Mapping[str, Any]) -> dict[str, Any]:
        existing: Existing
        try:
            existing = await asyncio.to_thread(api.list_objects, ELASTIC_QUOTA)
        except ApiError as exc:
            log.warning("could not list ElasticQuotas for a review", error=str(exc))
            existing = exc
        return review(request_review, existing)

    return handle
