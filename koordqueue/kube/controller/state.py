"""The controller's state: one object, owned by one thread, handed to every component.

Components (quotas.py, queues.py, units.py, admission.py, resync.py, workloads.py) hold no
reference to one another through it: they take the state and, explicitly, the few reactions
of another component they call (wiring.py puts them together). What only one component reads
stays in that component (a quota's last written conditions, a Queue's last folded part, when
the next periodic resync is due); what two or more share is here.

Every attribute is read and written by one thread only: the owner loop (loop.py) when the
controller runs, the caller in unit tests. API calls leave through `writer`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.features import FeatureGates, parse_feature_gates
from koordqueue.domain.queue_preemption import VictimRules
from koordqueue.domain.quota import QuotaSpec
from koordqueue.kube.api import ObjectApi
from koordqueue.kube.controller.base import newer
from koordqueue.kube.controller.consumers import ConsumerReconciler
from koordqueue.kube.controller.queue_items import QueueItemsPublisher
from koordqueue.kube.controller.writes import Apis, Writer
from koordqueue.kube.events import EventRecorder
from koordqueue.kube.settings import ControllerSettings
from koordqueue.kube.visibility.view import Publication

DuplicateQuota = Callable[[QuotaSpec, QuotaSpec], None]
"""Told (in force, ignored) when two ElasticQuotas share a name (quotas.py logs it)."""


@dataclass(slots=True)
class ResyncWindow:
    """What happened between asking for the periodic resync's lists and folding them in."""

    known_units: set[str]
    deleted_units: set[str] = field(default_factory=set)


class ControllerState:
    """The engine, the objects last seen of every unit, and the writer the writes leave by."""

    def __init__(
        self,
        api: ObjectApi,
        settings: ControllerSettings | None = None,
        recorder: EventRecorder | None = None,
        clock: Callable[[], float] = time.time,
        writers: int | None = None,
        *,
        on_duplicate_quota: DuplicateQuota | None = None,
    ) -> None:
        self.api = api
        self.settings = settings or ControllerSettings()
        self.features: FeatureGates = parse_feature_gates(self.settings.feature_gates)
        """The process's one gate set (the flag was checked at start-up)."""
        self.recorder = recorder or EventRecorder(api)
        self.clock = clock
        self.writers = writers or self.settings.api_writers
        """Threads of the writer's pool once an owner loop runs the controller."""
        self.writer = Writer(Apis(api, self.recorder))
        self.engine = AdmissionEngine(
            self.settings.oversell_rate,
            on_duplicate_quota,
            honour_inactive=self.features.active,
            honour_budget=self.features.maximum_execution_time,
            victim_rules=VictimRules(
                self.settings.reclaim_protect_time, self.settings.default_preemptible
            ),
        )
        self.ready = threading.Event()
        """Set once the start-up resync has folded everything in (resync.py)."""
        self.wake = threading.Event()
        """Set when something happened that may let a unit in (new unit, release, quota change)."""
        self.unit_objects: dict[str, dict[str, Any]] = {}  # uid -> last seen QueueUnit object
        self.unit_by_key: dict[str, str] = {}  # namespace/name -> uid
        self.reported: dict[str, str] = {}
        """uid -> the last status message written (or in flight): rounds plan a message once."""
        self.timed_out: set[str] = set()  # unit uids backed off by the running timeout
        self.phases_in_flight: dict[str, int] = {}
        """uid -> a round's phase writes of the unit not yet taken in: an event that says
        another phase meanwhile is held back (units.py), most often one from before them."""
        self.held_in_flight: dict[str, dict[str, Any]] = {}
        """uid -> the last unit version held back while a phase write was in flight: once
        the write lands, it counts if it is newer than the write's answer (a scheduler's
        SchedSucceed written before our SchedReady came back)."""
        self.units_being_created: dict[str, dict[str, Any] | None] = {}
        """namespace/name of units whose creator has not taken in its create call yet -> the
        watch's version of the unit that came first (held until then, see units.py)."""
        self.queue_errors: dict[str, str] = {}
        """Queue name -> why it is not served (queues.py writes, quotas.py reports it)."""
        self.round_writes_pending = False
        """The last round's writes are in flight (the next round waits for them, as it did
        when a round wrote inline: deciding again before they land would only repeat it)."""
        self.round_writes_done_at = 0.0  # time.monotonic() when they were all taken in
        self.resync_window: ResyncWindow | None = None
        """Set while the periodic resync's lists are being read (resync.py)."""
        self.queue_items = QueueItemsPublisher(self.settings.namespace)
        """Queues' status.queueItemDetails: Queue events feed it (queues.py), rounds publish
        from it (admission.py)."""
        self.published = Publication()
        """The last admission round, for readers on other threads (the visibility API):
        the one attribute they read, swapped by the owner thread after each round."""
        self.consumers: dict[str, ConsumerReconciler] = {}
        """Reconcilers of the workloads that follow their units, by spec.consumerRef.kind
        (integrations.serve)."""

    def close(self) -> None:
        """Wait for the writes in flight (Events tried once each: we are stopping)."""
        self.recorder.stop_retrying()
        self.writer.close()

    def consumer_of(self, unit_obj: Mapping[str, Any]) -> ConsumerReconciler | None:
        """The reconciler of the unit's workload, if it has one we serve."""
        ref = (unit_obj.get("spec") or {}).get("consumerRef") or {}
        kind = ref.get("kind")
        return self.consumers.get(kind) if isinstance(kind, str) and ref.get("name") else None

    def remember_unit(self, uid: str, obj: dict[str, Any], message: str | None = None) -> None:
        """The unit object a write returned, unless the watch already showed a newer one: an
        answer taken in late must not put an older version back (the race behind a red CI
        in test_job_extension, where a stale Enqueued hid the scheduler's SchedSucceed).
        `message`, the status message it wrote, is recorded either way: the write landed."""
        if not newer(self.unit_objects.get(uid), obj):
            self.unit_objects[uid] = obj
        if message is not None:
            self.reported[uid] = message
