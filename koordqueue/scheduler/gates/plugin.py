"""The `queueallocationgate` plugin: reservations during allocate, gate releases at close.

Why a plugin of its own (and not code in allocate/capacity): it composes with whichever queue
plugin is configured (allocatable answers are ANDed), and it only registers callbacks. The
adapter passes the per-session `GateView` as the `view` argument and reads `released` after
the session closed.
"""

from __future__ import annotations

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import TaskInfo, TaskStatus
from koordqueue.scheduler.framework.interface import Arguments, Plugin
from koordqueue.scheduler.framework.session import EventHandler, Session
from koordqueue.scheduler.gates import names
from koordqueue.scheduler.gates.reservation import GateView, ReservationLedger


class QueueAllocationGatePlugin(Plugin):
    """Keeps reserved capacity (allocatable) and picks only-our-gate pods that now fit."""

    name = names.PLUGIN_NAME

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        view = self.arguments.get("view")
        self.view = view if isinstance(view, GateView) else GateView()
        self.ledger = ReservationLedger({})
        self._candidates: list[TaskInfo] = []
        self.released: list[str] = []
        """Task uids that passed the capacity check this session, in check order."""

    def on_session_open(self, session: Session) -> None:
        view = self.view
        self.ledger = ledger = ReservationLedger(
            {name: q.capability for name, q in session.queues.items()}
        )
        reserved: list[tuple[str, str, Resources]] = []
        allocated: list[tuple[str, Resources]] = []
        candidates: list[TaskInfo] = []
        for job in session.jobs.values():
            allocated.append((job.queue, job.allocated))
            for task in job.task_status_index.get(TaskStatus.PENDING, {}).values():
                if task.uid in view.reserved:
                    reserved.append((job.queue, task.uid, task.resreq))
                elif task.uid in view.candidates:
                    candidates.append(task)
        ledger.rebuild(allocated, reserved)
        self._candidates = candidates

        def queue_of(task: TaskInfo) -> str:
            return session.jobs[task.job].queue

        def allocatable(queue: object, task: TaskInfo) -> bool:
            return ledger.fits(queue_of(task), task.uid, task.resreq)

        session.add_allocatable_fn(self.name, allocatable)
        session.add_event_handler(
            self.name,
            EventHandler(
                lambda t: ledger.on_allocate(queue_of(t), t.uid, t.resreq),
                lambda t: ledger.on_deallocate(queue_of(t), t.uid, t.resreq),
            ),
        )

    def on_session_close(self, session: Session) -> None:
        candidates = [t for t in self._candidates if t.status is TaskStatus.PENDING]
        jobs = session.jobs
        candidates.sort(key=lambda t: (-jobs[t.job].priority, -t.priority, t.creation, t.name))
        for task in candidates:
            if self.ledger.admit(jobs[task.job].queue, task.uid, task.resreq):
                self.released.append(task.uid)
