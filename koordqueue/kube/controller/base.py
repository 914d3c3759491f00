"""The controller's state, owned by one thread, and the helpers its handler modules share."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import structlog

from koordqueue.domain import names
from koordqueue.domain.effects import Effect, QueueEvent, UnitEvent
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.mapping import QuotaName, queue_name_for
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.kube import metrics
from koordqueue.kube.api import ObjectApi
from koordqueue.kube.controller.writes import Apis, Writer
from koordqueue.kube.events import EventRecorder
from koordqueue.kube.quota_status import QueueUsageWriter
from koordqueue.kube.settings import ControllerSettings

if TYPE_CHECKING:
    from koordqueue.kube.controller.consumers import ConsumerReconciler
    from koordqueue.kube.controller.resync import ResyncWindow

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


class ControllerBase:
    """The controller's state; each handler module adds the reactions to one kind of object.

    Every attribute is read and written by one thread only: the owner loop (loop.py) when
    the controller runs, the caller in unit tests. API calls leave through `writer`.
    """

    def __init__(
        self,
        api: ObjectApi,
        settings: ControllerSettings | None = None,
        recorder: EventRecorder | None = None,
        clock: Callable[[], float] = time.time,
        writers: int | None = None,
    ) -> None:
        self.api = api
        self.settings = settings or ControllerSettings()
        self.recorder = recorder or EventRecorder(api)
        self.clock = clock
        self.writers = writers or self.settings.api_writers
        """Threads of the writer's pool once an owner loop runs the controller."""
        self.writer = Writer(Apis(api, self.recorder))
        self.engine = AdmissionEngine(self.settings.oversell_rate, self._on_duplicate_quota)
        self.ready = threading.Event()
        self.wake = threading.Event()
        """Set when something happened that may let a unit in (new unit, release, quota change)."""
        self.unit_objects: dict[str, dict[str, Any]] = {}  # uid -> last seen QueueUnit object
        self.unit_by_key: dict[str, str] = {}  # namespace/name -> uid
        self.quota_objects: dict[tuple[str, str], dict[str, Any]] = {}  # (namespace, name) ->
        """... the last valid object of each quota (quotas.py)."""
        self.quota_seen: dict[tuple[str, str], dict[str, Any]] = {}
        """(namespace, name) -> the last object seen, valid or not (quotas.py)."""
        self.quota_refused: dict[tuple[str, str], tuple[Any, ...]] = {}
        """(namespace, name) -> the problems of a refused quota (quotas.py)."""
        self.quota_reported: dict[tuple[str, str], tuple[Any, ...]] = {}
        """(namespace, name) -> the status conditions last written (quotas.py)."""
        self.quota_kept: dict[tuple[str, str], object] = {}
        """(namespace, name) -> the status.lastValid last written (quotas.py)."""
        self.reported: dict[str, str] = {}  # uid -> last status message written (or in flight)
        self.queue_errors: dict[str, str] = {}
        self.queues_folded: dict[str, tuple[object, dict[str, Any] | None]] = {}
        """Queue name -> (what of it was last folded, the quota object it was checked
        against): an event that changes neither is skipped (queues.py)."""
        self.timed_out: set[str] = set()  # unit uids backed off by the running timeout
        self.queue_usage = QueueUsageWriter(api, self.settings.namespace)
        self.usage_cadence = metrics.Cadence()  # this controller's, so rounds of another don't
        self.round_writes_pending = False
        """The last round's writes are in flight (the next round waits for them, as it did
        when a round wrote inline: deciding again before they land would only repeat it)."""
        self.round_writes_done_at = 0.0  # time.monotonic() when they were all taken in
        self.units_being_created: dict[str, dict[str, Any] | None] = {}
        """namespace/name of units whose creator has not taken in its create call yet -> the
        watch's version of the unit that came first (held until then, see units.py)."""
        self.resync_window: ResyncWindow | None = None
        """Set while the periodic resync's lists are being read (resync.py)."""
        self.consumers: dict[str, ConsumerReconciler] = {}
        """Reconcilers of the workloads that follow their units, by spec.consumerRef.kind."""
        self.next_resync = clock() + self.settings.resync_period
        """When the periodic resync is due (the controller's clock; resync.py)."""
        self.add_consumers()

    def add_consumers(self) -> None:
        """Register the workload reconcilers (the Controller serves the built-in kinds)."""

    def close(self) -> None:
        """Wait for the writes in flight."""
        self.writer.close()

    def consumer_of(self, unit_obj: Mapping[str, Any]) -> ConsumerReconciler | None:
        """The reconciler of the unit's workload, if it has one we serve."""
        ref = (unit_obj.get("spec") or {}).get("consumerRef") or {}
        kind = ref.get("kind")
        return self.consumers.get(kind) if isinstance(kind, str) and ref.get("name") else None

    def remember_unit(self, uid: str, obj: dict[str, Any], message: str | None = None) -> None:
        """The unit object a write returned; `message` is the status message it wrote."""
        self.unit_objects[uid] = obj
        if message is not None:
            self.reported[uid] = message

    # --- reactions one handler module asks of another (defined in those modules) ---------
    def on_unit(self, event_type: str | None, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def on_quota(self, event_type: str | None, obj: dict[str, Any], apply: bool = True) -> None:
        raise NotImplementedError

    def on_queue(self, event_type: str | None, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def _on_duplicate_quota(self, previous: QuotaSpec, winner: QuotaSpec) -> None:
        raise NotImplementedError

    def quota_object(self, name: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def refresh_quota_status(self) -> None:
        raise NotImplementedError

    def record_event(self, obj: Mapping[str, Any], effect: UnitEvent | QueueEvent) -> None:
        raise NotImplementedError

    def execute(self, planned: list[Effect], done: Callable[[], None] | None = None) -> None:
        raise NotImplementedError

    def fire_timers(self) -> None:
        raise NotImplementedError

    def write_unit_phase(
        self, unit: QueueUnit, phase: Phase, message: str, then: Callable[[bool], None]
    ) -> None:
        raise NotImplementedError
