"""proportion: queues share the cluster by weight (water-filling), over-share queues wait
and give back what they hold beyond their deserved share (SPEC 3.6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, PodGroupPhase, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api.resource import (
    EPSILON_NANOS,
    add,
    fits,
    less_equal,
    less_equal_in_dims,
    min_dims,
    scale,
    share,
    subtract,
    sum_resources,
)
from koordqueue.scheduler.api.task_info import ALLOCATED_STATUSES
from koordqueue.scheduler.framework.interface import Plugin, Vote
from koordqueue.scheduler.framework.session import EventHandler, Session

_MAX_ROUNDS = 64


@dataclass(slots=True)
class QueueAttr:
    """Per-queue accounting for one session."""

    name: str
    weight: int
    real_capability: Resources
    guarantee: Resources
    request: Resources = field(default_factory=Resources)
    allocated: Resources = field(default_factory=Resources)
    inqueue: Resources = field(default_factory=Resources)
    deserved: Resources = field(default_factory=Resources)
    share: float = 0.0

    def update_share(self) -> None:
        """Dominant share of allocated over deserved."""
        self.share = share(self.allocated, self.deserved)


def _is_empty(res: Resources) -> bool:
    return all(v <= EPSILON_NANOS for v in res.values())


def water_fill(attrs: list[QueueAttr], total: Resources) -> None:
    """Give each unmet queue its weight's fraction of what is left, capped by its real
    capability and its request (never below its guarantee), until nothing changes."""
    remaining = total
    met: set[str] = set()
    for _ in range(_MAX_ROUNDS):
        total_weight = sum(a.weight for a in attrs if a.name not in met)
        if total_weight <= 0:
            break
        before = remaining
        gained: dict[str, int] = {}
        for attr in attrs:
            if attr.name in met:
                continue
            old = attr.deserved
            grown = attr.deserved + scale(remaining, Fraction(attr.weight, total_weight))
            grown = min_dims(grown, attr.real_capability)
            grown = Resources({k: min(v, attr.request.get_nanos(k)) for k, v in grown.items()})
            attr.deserved = grown.max(attr.guarantee)
            if less_equal(attr.request, attr.deserved) or less_equal(
                attr.real_capability, attr.deserved
            ):
                met.add(attr.name)
            for k in set(old) | set(attr.deserved):
                gained[k] = gained.get(k, 0) + attr.deserved.get_nanos(k) - old.get_nanos(k)
        remaining = (remaining - Resources(gained)).clamp_nonnegative()
        if _is_empty(remaining) or remaining == before:
            break
    for attr in attrs:
        attr.update_share()


class ProportionPlugin(Plugin):
    """Queue order by share, overused when allocated >= deserved, allocatable within
    capability, enqueue within capability, reclaim from queues beyond deserved."""

    name = "proportion"

    def on_session_open(self, session: Session) -> None:
        total = session.total_resource
        total_guarantee = sum_resources(q.guarantee for q in session.queues.values())
        attrs: dict[str, QueueAttr] = {}
        for job in session.jobs.values():
            queue = session.queues[job.queue]
            attr = attrs.get(queue.name)
            if attr is None:
                real = (total - total_guarantee + queue.guarantee).clamp_nonnegative()
                if queue.capability is not None:
                    real = min_dims(real, queue.capability)
                attr = attrs[queue.name] = QueueAttr(
                    queue.name, queue.weight, real, queue.guarantee
                )
            requested: list[Resources] = [attr.request]
            allocated: list[Resources] = [attr.allocated]
            for status, tasks in job.task_status_index.items():
                if status in ALLOCATED_STATUSES:
                    for t in tasks.values():
                        allocated.append(t.resreq)
                        requested.append(t.resreq)
                elif status is TaskStatus.PENDING:
                    requested.extend(t.resreq for t in tasks.values())
            attr.request = sum_resources(requested)
            attr.allocated = sum_resources(allocated)
            if job.phase is PodGroupPhase.INQUEUE:
                attr.inqueue = (
                    attr.inqueue + (job.min_request() - job.allocated).clamp_nonnegative()
                )
        water_fill(list(attrs.values()), total)
        self.attrs = attrs

        def queue_order(left: QueueInfo, right: QueueInfo) -> int:
            la, ra = attrs.get(left.name), attrs.get(right.name)
            ls = la.share if la else 0.0
            rs = ra.share if ra else 0.0
            return 0 if ls == rs else (-1 if ls < rs else 1)

        def overused(queue: QueueInfo) -> bool:
            attr = attrs.get(queue.name)
            return attr is not None and less_equal(attr.deserved, attr.allocated)

        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            attr = attrs.get(queue.name)
            if attr is None:
                return True
            return less_equal_in_dims(
                add(attr.allocated, task.resreq), attr.real_capability, task.resreq
            )

        def reclaimable(reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            victims = []
            held: dict[str, Resources] = {}
            for candidate in candidates:
                queue = session.jobs[candidate.job].queue
                attr = attrs.get(queue)
                if attr is None:
                    continue
                allocated = held.setdefault(queue, attr.allocated)
                if not fits(reclaimer.resreq, allocated):
                    continue
                if not less_equal(allocated, attr.deserved):
                    held[queue] = allocated - candidate.resreq
                    victims.append(candidate)
            return victims

        def enqueueable(job: JobInfo) -> Vote:
            queue = session.queues[job.queue]
            attr = attrs.get(queue.name)
            if attr is None or queue.capability is None or job.min_resources is None:
                return Vote.PERMIT
            need = job.min_request() + attr.allocated + attr.inqueue
            return (
                Vote.PERMIT
                if less_equal_in_dims(need, attr.real_capability, job.min_request())
                else Vote.REJECT
            )

        def enqueued(job: JobInfo) -> None:
            attr = attrs.get(job.queue)
            if attr is not None:
                attr.inqueue = attr.inqueue + job.min_request()

        def on_allocate(task: TaskInfo) -> None:
            attr = attrs[session.jobs[task.job].queue]
            attr.allocated = add(attr.allocated, task.resreq)
            attr.update_share()

        def on_deallocate(task: TaskInfo) -> None:
            attr = attrs[session.jobs[task.job].queue]
            attr.allocated = subtract(attr.allocated, task.resreq)
            attr.update_share()

        session.add_queue_order_fn(self.name, queue_order)
        session.add_overused_fn(self.name, overused)
        session.add_allocatable_fn(self.name, allocatable)
        session.add_reclaimable_fn(self.name, reclaimable)
        session.add_job_enqueueable_fn(self.name, enqueueable)
        session.add_job_enqueued_fn(self.name, enqueued)
        session.add_event_handler(self.name, EventHandler(on_allocate, on_deallocate))
