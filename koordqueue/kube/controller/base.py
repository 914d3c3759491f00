"""What the controller's modules share that is not state: watch event names, object helpers."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

import structlog

from koordqueue.domain import names
from koordqueue.domain.mapping import QuotaName, queue_name_for
from koordqueue.domain.queue_unit import QueueUnit

log = structlog.get_logger(__name__)
WARNING: Final = names.EVENT_WARNING
NORMAL: Final = names.EVENT_NORMAL
ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
"""Watch event types, as the informers and kopf hand them over (None: from a listing)."""


def queue_label(unit: QueueUnit) -> str:
    """The unit's queue for metric labels ("" when it has none or an unusable one)."""
    resolution = queue_name_for(unit.labels)
    return resolution.name if isinstance(resolution, QuotaName) else ""


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def newer(current: Mapping[str, Any] | None, seen: Mapping[str, Any]) -> bool:
    """`current` was seen at a later resourceVersion than `seen` (unknown: False).

    resourceVersions are etcd revisions, comparable as integers (client-go's
    CompareResourceVersion, KEP-5504); anything else compares as unknown.
    """
    if current is None:
        return False
    a, b = meta(current).get("resourceVersion"), meta(seen).get("resourceVersion")
    try:
        return int(str(a)) > int(str(b))
    except ValueError:
        return False


def object_key(obj: Mapping[str, Any]) -> str:
    """namespace/name of an object (namespace "default" when it has none)."""
    m = meta(obj)
    return f"{m.get('namespace', 'default')}/{m.get('name', '')}"


def epoch(timestamp: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 time as the API writes it (None if unreadable)."""
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
