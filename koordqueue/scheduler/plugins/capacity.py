"""capacity: queues with explicit deserved / capability / guarantee, optionally hierarchical.

Unlike proportion, a queue may grow past its deserved share up to its capability; deserved
only decides what reclaim may take back. Guarantees are reserved: every other queue's real
capability is the cluster minus all guarantees plus its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, PodGroupPhase, QueueInfo, TaskInfo, TaskStatus, names
from koordqueue.scheduler.api.resource import (
    add,
    fits,
    less_equal,
    less_equal_in_dims,
    min_dims,
    share,
    subtract,
    sum_resources,
)
from koordqueue.scheduler.framework.interface import Plugin, Vote
from koordqueue.scheduler.framework.session import EventHandler, Session
from koordqueue.scheduler.gates.reservation import (
    GateState,
    GateView,
    ReservationLedger,
    gated_resources,
)


@dataclass(slots=True)
class CapacityAttr:
    """Per-queue accounting; in hierarchy mode inner queues accumulate their subtree."""

    name: str
    real_capability: Resources | None
    deserved: Resources
    guarantee: Resources
    allocated: Resources = field(default_factory=Resources)
    inqueue: Resources = field(default_factory=Resources)
    share: float = 0.0

    def update_share(self) -> None:
        """Dominant share of allocated over deserved."""
        self.share = share(self.allocated, self.deserved)


class CapacityPlugin(Plugin):
    """Queue order by share; allocatable and enqueueable within capability (up the tree
    when `enableHierarchy` is set); reclaim only from queues beyond deserved."""

    name = "capacity"

    def on_session_open(self, session: Session) -> None:
        hierarchy = session.hierarchy_enabled(self.name)
        total = session.total_resource
        queues = session.queues

        def parent_of(name: str) -> str | None:
            parent = queues[name].parent if name in queues else None
            return parent if parent and parent != names.ROOT_QUEUE and parent in queues else None

        top = [q for q in queues.values() if not hierarchy or parent_of(q.name) is None]
        total_guarantee = sum_resources(q.guarantee for q in top)
        attrs: dict[str, CapacityAttr] = {}
        for queue in queues.values():
            real: Resources | None = (total - total_guarantee + queue.guarantee).clamp_nonnegative()
            if queue.capability is not None:
                assert real is not None
                real = min_dims(real, queue.capability)
            deserved = queue.deserved if queue.deserved is not None else queue.guarantee
            deserved = deserved.max(queue.guarantee)
            attrs[queue.name] = CapacityAttr(queue.name, real, deserved, queue.guarantee)

        chains: dict[str, list[CapacityAttr]] = {}

        def chain(name: str) -> list[CapacityAttr]:
            found = chains.get(name)
            if found is None:
                found = [attrs[name]]
                seen = {name}
                parent = parent_of(name) if hierarchy else None
                while parent is not None and parent not in seen:
                    seen.add(parent)
                    found.append(attrs[parent])
                    parent = parent_of(parent)
                chains[name] = found
            return found

        # SPEC 3.5: reserved capacity of un-gated, still-pending opt-in pods, kept per queue
        # of the chain (key "<queue>/<uid>") so parents see their subtree's reservations.
        raw_view = self.arguments.get("gateView")
        view = raw_view if isinstance(raw_view, GateView) else GateView()
        reservations = ReservationLedger({})
        reservations.rebuild((), ())
        for job in session.jobs.values():
            allocated = job.allocated
            pending = job.task_status_index.get(TaskStatus.PENDING, {}).values()
            # gated demand excludes only-our-gate pods: they take part in the capacity check
            foreign_gated = gated_resources(
                (GateState.OURS_ONLY if t.uid in view.candidates else GateState.OTHERS_ONLY,
                 t.resreq)
                for t in pending
                if t.scheduling_gated
            )
            for attr in chain(job.queue):
                attr.allocated = attr.allocated + allocated
                if job.phase is PodGroupPhase.INQUEUE:
                    attr.inqueue = (
                        attr.inqueue
                        + (job.min_request() - allocated - foreign_gated).clamp_nonnegative()
                    )
                for task in pending:
                    if task.uid in view.reserved:
                        reservations.add(attr.name, f"{attr.name}/{task.uid}", task.resreq)
        self.reservations = reservations
        for attr in attrs.values():
            attr.update_share()
        self.attrs = attrs

        def queue_order(left: QueueInfo, right: QueueInfo) -> int:
            ls, rs = attrs[left.name].share, attrs[right.name].share
            return 0 if ls == rs else (-1 if ls < rs else 1)

        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            for attr in chain(queue.name):
                cap = attr.real_capability
                # the candidate's own reservation is not counted twice
                held = reservations.reserved(attr.name, excluding=f"{attr.name}/{task.uid}")
                if cap is not None and not less_equal_in_dims(
                    add(add(attr.allocated, held), task.resreq), cap, task.resreq
                ):
                    return False
            return True

        def enqueueable(job: JobInfo) -> Vote:
            if job.min_resources is None:
                return Vote.PERMIT
            need = job.min_request()
            for attr in chain(job.queue):
                cap = attr.real_capability
                if cap is not None and not less_equal_in_dims(
                    need + attr.allocated + attr.inqueue, cap, need
                ):
                    return Vote.REJECT
            return Vote.PERMIT

        def enqueued(job: JobInfo) -> None:
            for attr in chain(job.queue):
                attr.inqueue = attr.inqueue + job.min_request()

        def reclaimable(reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            victims = []
            held: dict[str, Resources] = {}
            for candidate in candidates:
                queue = session.jobs[candidate.job].queue
                attr = attrs[queue]
                allocated = held.setdefault(queue, attr.allocated)
                if not fits(reclaimer.resreq, allocated):
                    continue
                if not less_equal(allocated, attr.deserved):
                    held[queue] = allocated - candidate.resreq
                    victims.append(candidate)
            return victims

        def on_change(task: TaskInfo, sign: int) -> None:
            for attr in chain(session.jobs[task.job].queue):
                attr.allocated = (
                    add(attr.allocated, task.resreq)
                    if sign > 0
                    else subtract(attr.allocated, task.resreq)
                )
                attr.update_share()
                # remove the reservation on allocate, restore it on rollback
                key = f"{attr.name}/{task.uid}"
                if sign > 0:
                    reservations.on_allocate(attr.name, key, task.resreq)
                else:
                    reservations.on_deallocate(attr.name, key, task.resreq)

        session.add_queue_order_fn(self.name, queue_order)
        session.add_allocatable_fn(self.name, allocatable)
        session.add_job_enqueueable_fn(self.name, enqueueable)
        session.add_job_enqueued_fn(self.name, enqueued)
        session.add_reclaimable_fn(self.name, reclaimable)
        session.add_event_handler(
            self.name, EventHandler(lambda t: on_change(t, 1), lambda t: on_change(t, -1))
        )
