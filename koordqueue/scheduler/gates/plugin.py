"""The `queueallocationgate` plugin: reservations during allocate, gate releases at close.

Why a plugin of its own (and not code in allocate/capacity): it composes with whichever queue
plugin is configured (allocatable answers are ANDed), and it only registers callbacks. The
adapter passes the per-session `GateView` as the `view` argument and reads `released` after
the session closed. With a reservation timeout the adapter also passes its `ReservationClock`
(`clock`) and the session's time (`now`); reservations older than the timeout are released at
open, before anything is allocated or admitted, and listed in `expired`.
"""

from __future__ import annotations

from operator import itemgetter

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.framework.interface import Arguments, Plugin
from koordqueue.scheduler.framework.session import EventHandler, Session
from koordqueue.scheduler.gates import names
from koordqueue.scheduler.gates.reservation import (
    Expiry,
    GateView,
    ReservationClock,
    ReservationLedger,
)


def queue_limits(session: Session) -> dict[str, Resources | None]:
    """Each queue's effective capability: the capacity plugin's real capability (capability
    capped by the cluster minus others' guarantees) when it is configured, else the spec's."""
    capacity = session.plugins.get("capacity")
    attrs = getattr(capacity, "attrs", None)
    limits: dict[str, Resources | None] = {}
    for name, queue in session.queues.items():
        attr = attrs.get(name) if isinstance(attrs, dict) else None
        real = getattr(attr, "real_capability", None)
        limits[name] = real if isinstance(real, Resources) else queue.capability
    return limits


class QueueAllocationGatePlugin(Plugin):
    """Keeps reserved capacity (allocatable) and picks only-our-gate pods that now fit."""

    name = names.PLUGIN_NAME

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        view = self.arguments.get("view")
        self.view = view if isinstance(view, GateView) else GateView()
        clock = self.arguments.get("clock")
        self.clock = clock if isinstance(clock, ReservationClock) else None
        now = self.arguments.get("now")
        self.now = float(now) if isinstance(now, int | float) else 0.0
        self.expired: list[Expiry] = []
        """Reservations the timeout released this session (the adapter records the events)."""
        self.ledger = ReservationLedger({})
        self._candidates: list[tuple[tuple[int, int, float, str], str, TaskInfo]] = []
        self.released: list[str] = []
        """Task uids that passed the capacity check this session, in check order."""

    def on_session_open(self, session: Session) -> None:
        view = self.view
        limits = queue_limits(session)
        capped = {name for name, cap in limits.items() if cap is not None}
        self.ledger = ledger = ReservationLedger(limits)
        reserved: list[tuple[str, str, Resources]] = []
        allocated: list[tuple[str, Resources]] = []
        candidates: list[tuple[tuple[int, int, float, str], str, TaskInfo]] = []
        watched = view.reserved | view.candidates
        for job in session.jobs.values():
            if job.queue in capped and job.ready_task_num():
                allocated.append((job.queue, job.allocated))
            if not watched:
                continue
            for task in job.task_status_index.get(TaskStatus.PENDING, {}).values():
                if task.uid in view.reserved:
                    reserved.append((job.queue, task.uid, task.resreq))
                elif task.uid in view.candidates:
                    order = (-job.priority, -task.priority, task.creation, task.name)
                    candidates.append((order, job.queue, task))
        clock = self.clock
        ledger.rebuild(allocated, reserved, clock.since if clock is not None else None)
        if clock is not None and clock.timeout > 0:
            self.expired = ledger.expire(self.now, clock.timeout)
            clock.record(self.expired)
        self._candidates = candidates
        jobs = session.jobs

        # Only queues with a capability need bookkeeping; the others answer at once.
        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            return queue.name not in capped or ledger.fits(queue.name, task.uid, task.resreq)

        def allocated_fn(task: TaskInfo) -> None:
            queue = jobs[task.job].queue
            if queue in capped:
                ledger.on_allocate(queue, task.uid, task.resreq)

        def deallocated_fn(task: TaskInfo) -> None:
            queue = jobs[task.job].queue
            if queue in capped:
                ledger.on_deallocate(queue, task.uid, task.resreq)

        session.add_allocatable_fn(self.name, allocatable)
        session.add_event_handler(self.name, EventHandler(allocated_fn, deallocated_fn))

    def on_session_close(self, session: Session) -> None:
        """Check still-pending candidates in (job priority, priority, creation) order."""
        self._candidates.sort(key=itemgetter(0))
        admit = self.ledger.admit
        clock, now = self.clock, self.now
        for _order, queue, task in self._candidates:
            if task.status is not TaskStatus.PENDING:
                continue
            at = clock.since.get(task.uid, now) if clock is not None else 0.0
            if admit(queue, task.uid, task.resreq, at):
                self.released.append(task.uid)
                if clock is not None:
                    clock.admitted(task.uid, now)
