"""The controller put together: one state, the components that take it, wired explicitly.

Each component gets the state and, by name, the reactions of another component it calls;
nothing reaches another component through the state. The order below is the order of their
dependencies: quotas (none), queues (quotas), units (none), resync (quotas, queues, units),
admission rounds (resync's timers, fired first in each round), then the workload
reconcilers (units, admission: `Reactions`), one per served kind (integrations.serve).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from koordqueue.domain.engine import AdmissionEngine, RoundResult
from koordqueue.kube.api import Kind, Listing, ObjectApi
from koordqueue.kube.controller.admission import AdmissionRounds
from koordqueue.kube.controller.checks import AdmissionChecks
from koordqueue.kube.controller.consumers import ConsumerReconciler
from koordqueue.kube.controller.integrations import built_in, serve
from koordqueue.kube.controller.queues import QueueHandlers
from koordqueue.kube.controller.quotas import QuotaHandlers, log_duplicate_quota
from koordqueue.kube.controller.resync import Resync
from koordqueue.kube.controller.state import ControllerState
from koordqueue.kube.controller.units import UnitHandlers
from koordqueue.kube.controller.workloads import Reactions
from koordqueue.kube.controller.writes import Writer
from koordqueue.kube.events import EventRecorder
from koordqueue.kube.gcfreeze import GcFreezer
from koordqueue.kube.settings import ControllerSettings


class Controller:
    """The quota-to-queue controller; `on_*` take watch events, `admission_round` decides.

    Call them from one thread: the OwnerLoop's, or the caller's own (tests), in which case
    every write runs at once and its outcome is taken in before the call returns. The
    properties are views of the state, for the operator and tests.
    """

    def __init__(
        self,
        api: ObjectApi,
        settings: ControllerSettings | None = None,
        recorder: EventRecorder | None = None,
        clock: Callable[[], float] = time.time,
        writers: int | None = None,
        *,
        gc_freeze: bool = False,
    ) -> None:
        self.gc = GcFreezer(gc_freeze)
        """`gc_freeze`: the process is `koordqueue run`'s, so the informers' decoded objects
        are frozen out of the collector's full passes (kube/gcfreeze.py): after each relist,
        and after rounds (at most every second)."""
        self.state = state = ControllerState(
            api, settings, recorder, clock, writers, on_duplicate_quota=log_duplicate_quota
        )
        self.quotas = QuotaHandlers(state)
        self.checks = AdmissionChecks(state)
        self.queues = QueueHandlers(state, self.quotas, self.checks.queue_changed)
        self.quotas.queue_of = self.queues.live.get
        self.units = UnitHandlers(state, self.checks.on_reserved)
        self.resyncer = Resync(
            state, self.quotas, self.queues, self.units, on_relisted=self.gc.after_relist
        )
        self.rounds = AdmissionRounds(
            state,
            before_round=self.resyncer.fire_timers,
            reserve=self.checks.reserve,
            phase_landed=self.units.phase_landed,
        )
        self.reactions = Reactions(
            on_unit=self.units.on_unit,
            write_unit_phase=self.units.write_unit_phase,
            execute=self.rounds.execute,
        )
        # the kinds every cluster has, from the start; register_integrations adds (at
        # operator start) those behind a CRD
        serve(self, built_in(state.settings.integrations))

    # --- what the operator and the owner loop call --------------------------------------------
    def on_unit(self, event_type: str | None, obj: dict[str, Any]) -> None:
        self.units.on_unit(event_type, obj)

    def on_quota(self, event_type: str | None, obj: dict[str, Any], apply: bool = True) -> None:
        self.quotas.on_quota(event_type, obj, apply)

    def on_admission_check(self, event_type: str | None, obj: dict[str, Any]) -> None:
        """Kueue's AdmissionCheck objects (any thread: it only updates a catalogue)."""
        self.checks.on_admission_check(event_type, obj)

    def on_queue(self, event_type: str | None, obj: dict[str, Any]) -> None:
        self.queues.on_queue(event_type, obj)

    def resync(self, listings: dict[Kind, Listing] | None = None) -> dict[Kind, Listing]:
        """The start-up resync (resync.py): list everything, or fold `listings`."""
        return self.resyncer.resync(listings)

    def fire_timers(self) -> None:
        """Each kind's due looks, the periodic resync when due (each round does it first)."""
        self.resyncer.fire_timers()

    def admission_round(self) -> RoundResult:
        result = self.rounds.admission_round()
        self.gc.after_pass()
        return result

    def sync_usage(self) -> None:
        """The Queues' usage annotations when due, without a round (admission.py)."""
        self.rounds.sync_usage()

    def quota_object(self, name: str) -> dict[str, Any] | None:
        """The object of the quota in force called `name`."""
        return self.quotas.quota_object(name)

    def close(self) -> None:
        """Wait for the writes in flight."""
        self.state.close()

    # --- views of the state -----------------------------------------------------------------
    @property
    def api(self) -> ObjectApi:
        return self.state.api

    @property
    def settings(self) -> ControllerSettings:
        return self.state.settings

    @property
    def engine(self) -> AdmissionEngine:
        return self.state.engine

    @property
    def writer(self) -> Writer:
        return self.state.writer

    @property
    def writers(self) -> int:
        return self.state.writers

    @property
    def clock(self) -> Callable[[], float]:
        return self.state.clock

    @property
    def ready(self) -> threading.Event:
        return self.state.ready

    @property
    def wake(self) -> threading.Event:
        return self.state.wake

    @property
    def consumers(self) -> dict[str, ConsumerReconciler]:
        return self.state.consumers

    @property
    def units_being_created(self) -> dict[str, dict[str, Any] | None]:
        return self.state.units_being_created

    @property
    def round_writes_pending(self) -> bool:
        return self.state.round_writes_pending
