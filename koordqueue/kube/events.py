"""Kubernetes Events (core/v1), the way `kubectl describe` and `kubectl get events` show them.

Repeats of the same (object, reason, message) bump `count` and `lastTimestamp` on the existing
Event instead of creating a new one, like client-go's event correlator, so a unit rejected for
the same reason every second does not flood etcd.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import structlog
from cachetools import TTLCache

from koordqueue.kube.api import EVENT, ApiError, KubeApi

COMPONENT: Final = "koord-queue"
log = structlog.get_logger(__name__)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def object_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """involvedObject for an API object dict."""
    metadata = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": metadata.get("name", ""),
        "namespace": metadata.get("namespace", ""),
        "uid": metadata.get("uid", ""),
    }
    if metadata.get("resourceVersion"):
        ref["resourceVersion"] = metadata["resourceVersion"]
    return ref


class EventRecorder:
    """Creates and aggregates Events; never raises (an event is not worth a failed reconcile)."""

    def __init__(self, api: KubeApi, ttl: float = 3600.0, maxsize: int = 20_000) -> None:
        self._api = api
        self._seen: TTLCache[tuple[str, str, str, str], tuple[str, str, int]] = TTLCache(
            maxsize=maxsize, ttl=ttl
        )
        self._lock = threading.Lock()
        self._instance = f"{socket.gethostname()}-{os.getpid()}"

    def record(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> bool:
        """Record an event on `obj`; returns False if the API refused it (logged)."""
        ref = object_reference(obj)
        namespace = ref["namespace"] or "default"
        key = (ref["uid"] or f"{namespace}/{ref['name']}", ref["kind"], reason, message)
        now = _now()
        with self._lock:
            previous = self._seen.get(key)
        try:
            if previous is not None:
                name, ns, count = previous
                try:
                    self._api.merge_patch(
                        EVENT, name, {"count": count + 1, "lastTimestamp": now}, ns
                    )
                    with self._lock:
                        self._seen[key] = (name, ns, count + 1)
                    return True
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{ref['name'][:200]}.", "namespace": namespace},
                "involvedObject": ref,
                "reason": reason,
                "message": message[:1024],
                "type": event_type,
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "reportingInstance": self._instance,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            created = self._api.create(EVENT, body, namespace)
            with self._lock:
                self._seen[key] = (created["metadata"]["name"], namespace, 1)
            return True
        except ApiError as exc:
            log.warning("event not recorded", reason=reason, object=ref["name"], error=str(exc))
            return False
