"""proportion: queues share the cluster by weight (water-filling), over-share queues wait
and give back what they hold beyond their deserved share (SPEC 3.6)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api.queue_accounting import elastic, flat_capability, inqueue
from koordqueue.scheduler.api.resource import (
    EPSILON_NANOS,
    IGNORED_SCALARS,
    add,
    insufficient_in_requested_dims,
    less_equal,
    min_dims,
    scale,
    subtract,
    sum_resources,
)
from koordqueue.scheduler.framework.indexed import QueueSums
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
    inqueue: Resources = field(default_factory=Resources)
    elastic: Resources = field(default_factory=Resources)
    deserved: Resources = field(default_factory=Resources)
    _share: float = 0.0
    _stale: bool = False
    """`change` moved `held` since `_share` was computed (`share` recomputes it)."""
    held: dict[str, int] = field(default_factory=dict)
    """The allocated amounts, changed in place by every allocate/deallocate event (one
    placement must not build a resource list); `allocated` is its immutable view."""
    _view: Resources | None = None
    _share_dims: tuple[Resources, list[tuple[str, int]]] | None = None
    """(the deserved they were taken from, its dimensions that count for the share)."""

    @property
    def allocated(self) -> Resources:
        """The allocated amounts as a `Resources` (built when asked after a change)."""
        view = self._view
        if view is None:
            view = self._view = Resources(self.held)
        return view

    @allocated.setter
    def allocated(self, value: Resources) -> None:
        self.held = value.as_dict()
        self._view = value

    @property
    def share(self) -> float:
        """max over deserved's dimensions of allocated/deserved, as of the last change."""
        if self._stale:
            self.update_share()
        return self._share

    @share.setter
    def share(self, value: float) -> None:
        self._share = value
        self._stale = False

    def change(self, request: Resources, sign: int) -> None:
        """allocated += sign * request (the same amounts and names as `allocated + request`);
        the share is recomputed when next read (a gang's placements change it ~10 times
        per turn, the queue order reads it once or twice)."""
        held = self.held
        get = held.get
        for name, amount in request.items():
            held[name] = get(name, 0) + sign * amount
        self._view = None
        self._stale = True

    def update_share(self) -> None:
        """max over deserved's dimensions of allocated/deserved (Volcano's proportion share).

        `deserved_share` with the deserved's non-zero dimensions listed once per deserved
        (the same ratios in the same order: the same float); asked once per placement.
        """
        deserved = self.deserved
        cached = self._share_dims
        if cached is None or cached[0] is not deserved:
            dims = [(n, whole) for n, whole in deserved.items() if whole >= EPSILON_NANOS]
            cached = self._share_dims = (deserved, dims)
        best = 0.0
        get = self.held.get
        for name, whole in cached[1]:
            ratio = get(name, 0) / whole
            if ratio > best:  # noqa: PLR1730 - max(): a call per dimension, per placement
                best = ratio
        self._share = best
        self._stale = False


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
            # met: its request is covered, or it stopped growing (capped by capability)
            if less_equal(attr.request, attr.deserved) or attr.deserved == old:
                met.add(attr.name)
            for k in set(old) | set(attr.deserved):
                gained[k] = gained.get(k, 0) + attr.deserved.get_nanos(k) - old.get_nanos(k)
        remaining = (remaining - Resources(gained)).clamp_nonnegative()
        if _is_empty(remaining) or remaining == before:
            break
    for attr in attrs:
        attr.update_share()


class ProportionPlugin(Plugin):
    """Queue order by priority then share, overused when allocated >= deserved, allocatable
    and preemptive within deserved (on the requested dimensions), enqueue within real
    capability, reclaim from queues beyond deserved; a queue that is not Open takes no new
    work (Volcano's `plugins/proportion`)."""

    name = "proportion"
    quiet = True

    def on_session_open(self, session: Session) -> None:
        total = session.total_resource
        total_guarantee = sum_resources(q.guarantee for q in session.queues.values())
        sums = session.queue_sums()
        if sums is not None:
            attrs = self._attrs_from_sums(session, sums, total, total_guarantee)
        else:
            attrs = self._attrs_from_jobs(session, total, total_guarantee)
        water_fill(list(attrs.values()), total)
        self.attrs = attrs

        def queue_order(left: QueueInfo, right: QueueInfo) -> int:
            if left.priority != right.priority:
                return right.priority - left.priority
            la, ra = attrs.get(left.name), attrs.get(right.name)
            ls = la.share if la else 0.0
            rs = ra.share if ra else 0.0
            return 0 if ls == rs else (-1 if ls < rs else 1)

        def overused(queue: QueueInfo) -> bool:
            attr = attrs.get(queue.name)
            return attr is not None and less_equal(attr.deserved, attr.held)

        def queue_allocatable(queue: QueueInfo, tasks: list[TaskInfo]) -> bool:
            if not queue.is_open:
                return False
            attr = attrs.get(queue.name)
            if attr is None:
                return True
            total_req = sum_resources(t.resreq for t in tasks)
            future = add(attr.allocated, total_req)
            return not insufficient_in_requested_dims(future, attr.deserved, total_req)

        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            # queue_allocatable(queue, [task]) without the one-task sum and the future list:
            # on each dimension the task asks for, allocated + request <= deserved
            if not queue.is_open:
                return False
            attr = attrs.get(queue.name)
            if attr is None:
                return True
            held, deserved = attr.held.get, attr.deserved.get
            for name, amount in task.resreq.items():
                if (
                    amount > 0
                    and name not in IGNORED_SCALARS
                    and held(name, 0) + amount > deserved(name, 0)
                ):
                    return False
            return True

        def reclaimable(reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            victims = []
            held: dict[str, Resources] = {}
            for candidate in candidates:
                queue = session.jobs[candidate.job].queue
                attr = attrs.get(queue)
                if attr is None:
                    continue
                allocated = held.setdefault(queue, attr.allocated)
                if not less_equal(allocated, attr.deserved):
                    held[queue] = allocated - candidate.resreq
                    victims.append(candidate)
            return victims

        def enqueueable(job: JobInfo) -> Vote:
            queue = session.queues[job.queue]
            if not queue.is_open:
                return Vote.REJECT
            attr = attrs.get(queue.name)
            if attr is None or job.min_resources is None:
                return Vote.PERMIT
            need = job.min_request()
            future = subtract(add(add(need, attr.allocated), attr.inqueue), attr.elastic)
            if insufficient_in_requested_dims(future, attr.real_capability, need):
                return Vote.REJECT
            return Vote.PERMIT

        def enqueued(job: JobInfo) -> None:
            attr = attrs.get(job.queue)
            if attr is not None:
                attr.inqueue = attr.inqueue + job.min_request()

        def on_allocate(task: TaskInfo) -> None:
            attrs[session.jobs[task.job].queue].change(task.resreq, 1)

        def on_deallocate(task: TaskInfo) -> None:
            attrs[session.jobs[task.job].queue].change(task.resreq, -1)

        session.add_queue_order_fn(self.name, queue_order)
        session.add_overused_fn(self.name, overused)
        session.add_allocatable_fn(self.name, allocatable)
        session.add_reclaimable_fn(self.name, reclaimable)
        session.add_preemptive_fn(self.name, queue_allocatable)
        session.add_job_enqueueable_fn(self.name, enqueueable)
        session.add_job_enqueued_fn(self.name, enqueued)
        session.add_event_handler(self.name, EventHandler(on_allocate, on_deallocate))

    @staticmethod
    def _attr(queue: QueueInfo, total: Resources, total_guarantee: Resources) -> QueueAttr:
        real = (total - total_guarantee).clamp_nonnegative() + queue.guarantee
        cap = flat_capability(queue.capability)
        if cap is not None:
            real = min_dims(real, cap)
        return QueueAttr(queue.name, queue.weight, real, queue.guarantee)

    @classmethod
    def _attrs_from_sums(
        cls,
        session: Session,
        sums: Mapping[str, QueueSums],
        total: Resources,
        total_guarantee: Resources,
    ) -> dict[str, QueueAttr]:
        """The same per-queue amounts, from the cache's sums over every job (kept job by
        job) instead of a walk over the jobs."""
        attrs: dict[str, QueueAttr] = {}
        for name, queue_sums in sums.items():
            queue = session.queues.get(name)
            if queue is None or not queue_sums.jobs:
                continue
            attr = attrs[name] = cls._attr(queue, total, total_guarantee)
            attr.request = queue_sums.request.resources()
            attr.allocated = queue_sums.allocated.resources()
            attr.inqueue = queue_sums.min_inqueue.resources()
            attr.elastic = queue_sums.min_elastic.resources()
            if queue_sums.no_min_jobs:
                attr.elastic = attr.elastic + queue_sums.no_min_elastic.resources()
        return attrs

    @classmethod
    def _attrs_from_jobs(
        cls, session: Session, total: Resources, total_guarantee: Resources
    ) -> dict[str, QueueAttr]:
        attrs: dict[str, QueueAttr] = {}
        allocated_acc: dict[str, dict[str, int]] = {}
        request_acc: dict[str, dict[str, int]] = {}
        elastic_acc: dict[str, dict[str, int]] = {}
        for job in session.jobs.values():
            queue = session.queues[job.queue]
            attr = attrs.get(queue.name)
            if attr is None:
                attr = attrs[queue.name] = cls._attr(queue, total, total_guarantee)
            # one accumulator per queue: the job keeps its allocated sum, only its pending
            # tasks are added one by one
            acc_allocated = allocated_acc.setdefault(queue.name, {})
            acc_request = request_acc.setdefault(queue.name, {})
            for name, amount in job.allocated_amounts().items():
                acc_allocated[name] = acc_allocated.get(name, 0) + amount
                acc_request[name] = acc_request.get(name, 0) + amount
            for t in job.task_status_index.get(TaskStatus.PENDING, {}).values():
                for name, amount in t.resreq.items():
                    acc_request[name] = acc_request.get(name, 0) + amount
            if job.min_resources is not None:
                attr.inqueue = attr.inqueue + inqueue(job)
                attr.elastic = attr.elastic + elastic(job)
            else:  # no minResources: nothing reserved, all of the allocation is elastic
                acc_elastic = elastic_acc.setdefault(queue.name, {})
                for name, amount in job.allocated_amounts().items():
                    acc_elastic[name] = acc_elastic.get(name, 0) + max(amount, 0)
        for name, attr in attrs.items():
            attr.request = Resources(request_acc.get(name, {}))
            attr.allocated = Resources(allocated_acc.get(name, {}))
            if name in elastic_acc:
                attr.elastic = attr.elastic + Resources(elastic_acc[name])
        return attrs
