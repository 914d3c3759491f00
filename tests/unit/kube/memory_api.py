"""An in-memory stand-in for KubeApi for controller unit tests (the e2e tests use the real one)."""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Mapping
from typing import Any

from koordqueue.kube.api import ApiError, Kind, ObjectApi


def _terms(selector: str) -> list[str]:
    """A selector's comma-separated terms (commas inside `in (a, b)` do not split)."""
    terms, depth, start = [], 0, 0
    for i, char in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return [term.strip() for term in terms if term.strip()]


def labels_match(selector: str | None, labels: Mapping[str, str]) -> bool:
    """A label selector as the API server reads it: `k=v`, `k==v`, `k!=v`, `k`, `!k`,
    `k in (a,b)`, `k notin (a,b)`, every term must hold."""
    for term in _terms(selector or ""):
        in_set = re.fullmatch(r"(\S+)\s+(in|notin)\s*\((.*)\)", term)
        if in_set:
            key, op, raw = in_set.groups()
            values = {v.strip() for v in raw.split(",")}
            if (op == "in") != (key in labels and labels[key] in values):
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif "!=" in term:
            key, value = (part.strip() for part in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (part.strip() for part in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term not in labels:
            return False
    return True


def fields_match(selector: str | None, obj: Mapping[str, Any]) -> bool:
    """A field selector: `path=v`, `path==v`, `path!=v` on dotted paths (a missing field
    reads as "", so `spec.nodeName=` selects unbound pods, as on the server)."""
    for term in _terms(selector or ""):
        negate = "!=" in term
        path, value = term.replace("!=", "=").replace("==", "=").split("=", 1)
        current: Any = obj
        for part in path.strip().split("."):
            current = current.get(part) if isinstance(current, Mapping) else None
        if ((current or "") == value.strip()) == negate:
            return False
    return True


class MemoryApi:
    """ObjectApi in memory (KubeApi's verbs), with resourceVersions and 404/409 like the server."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._rv = itertools.count(1)
        self.applied: list[str] = []
        self.metadata_lists = 0
        """How many metadata-only lists were asked for."""

    def _key(self, kind: Kind, namespace: str | None, name: str) -> tuple[str, str | None, str]:
        return (kind.plural, namespace if kind.namespaced else None, name)

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.objects.get(self._key(kind, namespace, name))

    def list_objects(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """The server's filters: namespace, label selector, field selector."""
        return [
            o
            for (plural, ns, _), o in self.objects.items()
            if plural == kind.plural
            and (namespace is None or ns == namespace)
            and labels_match(label_selector, (o.get("metadata") or {}).get("labels") or {})
            and fields_match(field_selector, o)
        ]

    def list_with_version(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        *,
        metadata_only: bool = False,
    ) -> tuple[list[dict[str, Any]], str]:
        listed = self.list_objects(kind, namespace, label_selector, field_selector)
        if metadata_only:  # as the API server's PartialObjectMetadataList: no spec, no status
            self.metadata_lists += 1
            listed = [{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                       "metadata": copy.deepcopy(o.get("metadata") or {})} for o in listed]
        return listed, str(next(self._rv))

    def create(
        self, kind: Kind, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        if kind.plural == "events":
            self.events.append(dict(body))
            return {**body, "metadata": {**body["metadata"], "name": f"ev{len(self.events)}"}}
        meta = body["metadata"]
        key = self._key(kind, namespace or meta.get("namespace"), meta["name"])
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", "exists", "POST", kind.path())
        obj = {
            **body,
            "metadata": {
                **meta,
                "uid": f"uid-{meta['name']}",
                "resourceVersion": str(next(self._rv)),
            },
        }
        self.objects[key] = obj
        return obj

    def apply(self, kind: Kind, body: Mapping[str, Any], force: bool = True) -> dict[str, Any]:
        self.applied.append(body["metadata"]["name"])
        meta = body["metadata"]
        key = self._key(kind, meta.get("namespace"), meta["name"])
        obj = {**self.objects.get(key, {}), **body}
        obj["metadata"] = {**meta, "resourceVersion": str(next(self._rv))}
        self.objects[key] = obj
        return obj

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        if kind.plural == "events":
            return {}
        key = self._key(kind, namespace, name)
        obj = self.objects.get(key)
        if obj is None:
            raise ApiError(404, "NotFound", "not found", "PATCH", kind.path())
        want = (patch.get("metadata") or {}).get("resourceVersion")
        if want and want != obj["metadata"].get("resourceVersion"):
            raise ApiError(409, "Conflict", "modified", "PATCH", kind.path())
        for field, value in patch.items():
            if field != "metadata" and isinstance(value, dict):
                obj[field] = {**(obj.get(field) or {}), **value}
        for field in ("labels", "annotations"):  # merge-patch semantics: null deletes a key
            changes = (patch.get("metadata") or {}).get(field)
            if changes:
                merged = {**(obj["metadata"].get(field) or {}), **changes}
                obj["metadata"][field] = {k: v for k, v in merged.items() if v is not None}
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        return obj

    def delete(
        self, kind: Kind, name: str, namespace: str | None = None, uid: str | None = None
    ) -> bool:
        return self.objects.pop(self._key(kind, namespace, name), None) is not None


def _conforms(api: MemoryApi) -> ObjectApi:
    return api  # mypy: MemoryApi has every ObjectApi verb with KubeApi's signatures
