"""State shared by the controller's handlers, and the helpers they share."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import structlog
from cachetools import TTLCache

from koordqueue.domain import names
from koordqueue.domain.effects import (
    Effect,
    QueueEvent,
    UnitEvent,
)
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.mapping import QuotaName, queue_name_for
from koordqueue.domain.queue_unit import (
    Phase,
    QueueUnit,
)
from koordqueue.domain.quota import QuotaSpec
from koordqueue.kube import metrics
from koordqueue.kube.api import (
    ApiError,
    ObjectApi,
)
from koordqueue.kube.events import EventRecorder
from koordqueue.kube.quota_status import QueueUsageWriter
from koordqueue.kube.settings import ControllerSettings

log = structlog.get_logger(__name__)
WARNING = names.EVENT_WARNING
NORMAL = names.EVENT_NORMAL
STATUS_RETRY_SECONDS = 1.0
"""After a Job-extension write (unit status, unit creation) was refused past its retries,
when to try again (instead of waiting for the next resync)."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _queue_label(unit: QueueUnit) -> str:
    """The unit's queue for metric labels ("" when it has none or an unusable one)."""
    resolution = queue_name_for(unit.labels)
    return resolution.name if isinstance(resolution, QuotaName) else ""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _epoch(timestamp: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 time as the API writes it (None if unreadable)."""
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _admissions(unit_obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """status.admissions of a unit admitted whole: each pod set with all its replicas."""
    pod_sets = (unit_obj.get("spec") or {}).get("podSet") or []
    return [{"name": ps.get("name"), "replicas": int(ps.get("count") or 0)} for ps in pod_sets]


class ControllerBase:
    """The controller's state; each handler module adds the reactions to one kind of object."""

    def __init__(
        self,
        api: ObjectApi,
        settings: ControllerSettings | None = None,
        recorder: EventRecorder | None = None,
        clock: Callable[[], float] = time.time,
        writers: int = 16,
    ) -> None:
        self.api = api
        self.settings = settings or ControllerSettings()
        self.recorder = recorder or EventRecorder(api)
        self.clock = clock
        self.lock = threading.RLock()
        self.engine = AdmissionEngine(self.settings.oversell_rate, self._on_duplicate_quota)
        self.ready = threading.Event()
        self.wake = threading.Event()
        """Set when something happened that may let a unit in (new unit, release, quota change)."""
        self._units: dict[str, dict[str, Any]] = {}  # uid -> last seen QueueUnit object
        self._unit_by_key: dict[str, str] = {}  # namespace/name -> uid
        self._quotas: dict[tuple[str, str], dict[str, Any]] = {}  # (namespace, name) -> object
        self._reported: dict[str, str] = {}  # uid -> last status message written
        self._queue_errors: dict[str, str] = {}
        self._creating: TTLCache[str, bool] = TTLCache(maxsize=100_000, ttl=30)
        self._priorities: TTLCache[str, int | None] = TTLCache(maxsize=1000, ttl=60)
        self._known_metric_queues: set[str] = set()
        self._queue_usage = QueueUsageWriter(api, self.settings.namespace)
        self._job_timers: dict[str, float] = {}  # Job namespace/name -> when to look again
        self._timed_out: set[str] = set()  # unit uids backed off by the running timeout
        self._pool = ThreadPoolExecutor(max_workers=writers, thread_name_prefix="kq-write")
        self._events = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kq-event")

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._events.shutdown(wait=True)


    # --- helpers ------------------------------------------------------------------------
    def _safely(self, operation: str, call: Callable[[], Any]) -> Any:
        """Run one API write; log and count failures instead of crashing the handler."""
        try:
            return call()
        except ApiError as exc:
            metrics.API_ERRORS.labels(operation).inc()
            log.warning("api call failed", operation=operation, error=str(exc))
            return None

    # --- reactions one handler module asks of another (defined in those modules) ---------
    def on_unit(self, event_type: str | None, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def on_job(self, event_type: str | None, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def on_quota(self, event_type: str | None, obj: dict[str, Any], apply: bool = True) -> None:
        raise NotImplementedError

    def on_queue(self, event_type: str | None, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def _on_duplicate_quota(self, previous: QuotaSpec, winner: QuotaSpec) -> None:
        raise NotImplementedError

    def _quota_object(self, name: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def _record_event(self, obj: Mapping[str, Any], effect: UnitEvent | QueueEvent) -> None:
        raise NotImplementedError

    def _execute(self, group: list[Effect]) -> None:
        raise NotImplementedError

    def _reconcile_consumer(self, unit_obj: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _resume_consumer(self, unit_obj: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _suspend_consumer(self, unit_obj: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def fire_job_timers(self) -> None:
        raise NotImplementedError

    def _set_unit_phase(self, unit: QueueUnit, phase: Phase, message: str) -> bool:
        raise NotImplementedError

    def _patch_unit_status(
        self, unit: QueueUnit, patch: dict[str, Any], *, retry: bool = False
    ) -> dict[str, Any] | None:
        raise NotImplementedError
