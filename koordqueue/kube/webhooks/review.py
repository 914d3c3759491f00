"""AdmissionReview plumbing shared by every webhook: responses and JSON patches."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from koordqueue.domain.quota_validation import Problem

MAX_WARNING: Final = 256
"""The API server may cut an admission warning longer than this (the Kubernetes docs)."""


def request_of(review: Mapping[str, Any]) -> Mapping[str, Any]:
    payload = review.get("request")
    return payload if isinstance(payload, Mapping) else {}


def response(
    review: Mapping[str, Any],
    *,
    patch: Sequence[Mapping[str, Any]] = (),
    warnings: Sequence[str] = (),
    denied: str | None = None,
    code: int = 422,
) -> dict[str, Any]:
    """An AdmissionReview answering `review`: allowed (with a JSON patch and warnings) or,
    with `denied`, refused with that message (what kubectl prints after the webhook's name)."""
    answer: dict[str, Any] = {"uid": request_of(review).get("uid", ""), "allowed": denied is None}
    if denied is not None:
        answer["status"] = {"code": code, "reason": "Invalid", "message": denied}
    if patch:
        answer["patchType"] = "JSONPatch"
        answer["patch"] = base64.b64encode(json.dumps(list(patch)).encode()).decode("ascii")
    if warnings:
        answer["warnings"] = [
            w if len(w) <= MAX_WARNING else w[: MAX_WARNING - 3] + "..." for w in warnings
        ]
    return {
        "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
        "kind": review.get("kind", "AdmissionReview"),
        "response": answer,
    }


def invalid_message(kind: str, name: str, problems: Sequence[Problem]) -> str:
    """Every problem at once, each on its line with its field, as the API server lists the
    failures of a CRD's own validation."""
    lines = "".join(f"\n* {problem}" for problem in problems)
    return f'{kind} "{name}" is invalid: {lines}'


def _escape(key: str) -> str:
    """A JSON pointer token (RFC 6901): annotation keys hold '/'."""
    return key.replace("~", "~0").replace("/", "~1")


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def json_patch(
    obj: Mapping[str, Any], merge: Mapping[str, Any], path: str = ""
) -> list[dict[str, Any]]:
    """The JSON patch (RFC 6902) that does to `obj` what the merge patch `merge` (RFC 7386)
    would: an admission response can only carry a JSON patch."""
    ops: list[dict[str, Any]] = []
    for key, value in merge.items():
        where = f"{path}/{_escape(key)}"
        current = obj.get(key)
        if value is None:
            if key in obj:
                ops.append({"op": "remove", "path": where})
        elif isinstance(value, Mapping) and isinstance(current, Mapping):
            ops += json_patch(current, value, where)
        else:  # "add" replaces a member that exists, creates one that does not
            ops.append({"op": "add", "path": where, "value": _without_nulls(value)})
    return ops
