"""capacity: queues with explicit deserved / capability / guarantee, optionally hierarchical.

Follows Volcano's `plugins/capacity` rule by rule. A queue may grow past its deserved share
up to its real capability (cluster minus the other queues' guarantees, capped by its own
capability); deserved only decides queue order and what reclaim may take back. Queues order
by `spec.priority` first, then by share (allocated over deserved on the dimensions the
deserved names; a queue with no deserved has share 1), a queue with a deserved first on a tie.
A queue that is not Open takes no new work. With `enableHierarchy` only leaf queues take
jobs; a queue's real capability derives from its parent's; reclaim starts from the queue's
own capability and deserved, and victims come from the closest queues first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo, TaskStatus, names
from koordqueue.scheduler.api.queue_accounting import (
    INFINITE,
    elastic,
    exceeded_part,
    flat_capability,
    inqueue,
    min_dims_infinity,
    with_standard,
)
from koordqueue.scheduler.api.resource import (
    STANDARD_RESOURCES,
    add,
    capacity_share,
    greater_partly_in_relevant_dims,
    insufficient_in_requested_dims,
    intersection,
    less_equal,
    less_equal_partly_zero_filtered,
    subtract,
    sum_resources,
    volcano_empty,
)
from koordqueue.scheduler.framework.callbacks import GANG_RECLAIM, EvictionContext
from koordqueue.scheduler.framework.interface import Plugin, Vote
from koordqueue.scheduler.framework.session import EventHandler, Session
from koordqueue.scheduler.gates.reservation import (
    GateState,
    GateView,
    ReservationLedger,
    gated_resources,
)

ANCESTOR_RECLAIM_LEVEL_ARG: Final = "ancestorReclaimLevel"
"""Volcano's argument (default 0, hierarchy only): how many levels of ancestors reclaim also
consults — a queue may reclaim when such an ancestor is below its deserved, and a victim must
also exceed the deserved of its ancestors up to that level that it does not share with the
reclaimer."""
IMPLICIT_ROOT_ARG: Final = "capacity.implicitRootQueue"
"""Opt-in (default false): with enableHierarchy and no `root` Queue object, stand in an
unlimited root instead of refusing every capacity decision as Volcano does."""


@dataclass(slots=True)
class CapacityAttr:
    """Per-queue accounting; in hierarchy mode inner queues accumulate their subtree."""

    name: str
    real_capability: Resources
    deserved: Resources
    guarantee: Resources
    capability: dict[str, int] = field(default_factory=dict)
    allocated: Resources = field(default_factory=Resources)
    request: Resources = field(default_factory=Resources)
    inqueue: Resources = field(default_factory=Resources)
    elastic: Resources = field(default_factory=Resources)
    share: float = 0.0
    ancestors: list[str] = field(default_factory=list)
    """Root first, parent last (Volcano's order)."""
    children: dict[str, CapacityAttr] = field(default_factory=dict)

    def update_share(self) -> None:
        """Share of allocated over deserved; 1 for a queue with no deserved."""
        self.share = capacity_share(self.allocated, self.deserved)


def compare_share_with_deserved(left: CapacityAttr, right: CapacityAttr) -> int:
    """Lower share first; on a tie, a queue with a deserved before one without."""
    if left.share == right.share:
        has_left, has_right = not volcano_empty(left.deserved), not volcano_empty(right.deserved)
        if has_left == has_right:
            return 0
        return -1 if has_left else 1
    return -1 if left.share < right.share else 1


def ancestor_at_depth(attr: CapacityAttr, depth: int) -> str | None:
    """The ancestor `depth` levels up (1 = parent), or None."""
    if depth <= 0 or len(attr.ancestors) < depth:
        return None
    return attr.ancestors[len(attr.ancestors) - depth]


def queue_level(left: CapacityAttr, right: CapacityAttr) -> int:
    """Index of the deepest common ancestor of two queues (Volcano's getQueueLevel)."""
    level = 0
    for i in range(min(len(left.ancestors), len(right.ancestors))):
        if left.ancestors[i] != right.ancestors[i]:
            return level
        level = i
    return level


class CapacityPlugin(Plugin):
    """Queue order by priority then share; allocatable and enqueueable within real capability
    (up the tree when `enableHierarchy` is set); reclaim only what exceeds deserved on the
    dimensions the reclaimer needs."""

    name = "capacity"
    quiet = True

    def on_session_open(self, session: Session) -> None:
        hierarchy = session.hierarchy_enabled(self.name)
        self.hierarchy = hierarchy
        if hierarchy:
            ready = self._build_hierarchical(session)
        else:
            ready = True
            self._build_flat(session)
        attrs = self.attrs
        self.ready = ready

        def chain(name: str) -> list[CapacityAttr]:
            """The queue and, in hierarchy mode, its ancestors (leaf first)."""
            attr = attrs[name]
            if not hierarchy:
                return [attr]
            return [attr, *(attrs[a] for a in reversed(attr.ancestors))]

        def is_leaf(name: str) -> bool:
            return not attrs[name].children

        self._reservations(session)
        reservations = self.reservations

        def queue_order(left: QueueInfo, right: QueueInfo) -> int:
            if left.priority != right.priority:
                return right.priority - left.priority
            la, ra = attrs.get(left.name), attrs.get(right.name)
            if la is None or ra is None:
                return 0
            if not hierarchy:
                return compare_share_with_deserved(la, ra)
            l_leaf, r_leaf = is_leaf(left.name), is_leaf(right.name)
            if l_leaf != r_leaf:
                return -1 if l_leaf else 1
            if not l_leaf:
                return compare_share_with_deserved(la, ra)
            level = queue_level(la, ra)
            lp = attrs[la.ancestors[level + 1]] if level + 1 < len(la.ancestors) else la
            rp = attrs[ra.ancestors[level + 1]] if level + 1 < len(ra.ancestors) else ra
            return compare_share_with_deserved(lp, rp)

        def victim_queue_order(left: QueueInfo, right: QueueInfo, preemptor: QueueInfo) -> int:
            own = attrs.get(preemptor.name)
            la, ra = attrs.get(left.name), attrs.get(right.name)
            if own is None or la is None or ra is None:
                return 0
            l_level, r_level = queue_level(la, own), queue_level(ra, own)
            if l_level == r_level:
                return 0
            return -1 if l_level > r_level else 1

        def allocatable(queue: QueueInfo, task: TaskInfo) -> bool:
            if not queue.is_open or not ready or queue.name not in attrs:
                return False
            if hierarchy and not is_leaf(queue.name):
                return False
            for attr in chain(queue.name):
                # the candidate's own reservation is not counted twice
                held = reservations.reserved(attr.name, excluding=f"{attr.name}/{task.uid}")
                future = add(add(attr.allocated, held), task.resreq)
                if insufficient_in_requested_dims(future, attr.real_capability, task.resreq):
                    return False
            return True

        def enqueueable(job: JobInfo) -> Vote:
            if not ready:
                return Vote.REJECT
            if hierarchy and not is_leaf(job.queue):
                return Vote.REJECT
            if not session.queues[job.queue].is_open:
                return Vote.REJECT
            if job.min_resources is None:
                return Vote.PERMIT
            need = job.min_request()
            for attr in chain(job.queue):
                future = subtract(add(add(need, attr.allocated), attr.inqueue), attr.elastic)
                if insufficient_in_requested_dims(future, attr.real_capability, need):
                    return Vote.REJECT
            return Vote.PERMIT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is None or job.queue not in attrs:
                return
            for attr in chain(job.queue):
                attr.inqueue = attr.inqueue + job.min_request()

        level = max(self.arguments.get_int(ANCESTOR_RECLAIM_LEVEL_ARG, 0), 0)
        ancestor_reclaim = hierarchy and level > 0

        def preemptive(queue: QueueInfo, tasks: list[TaskInfo]) -> bool:
            # The queue's own capability and deserved: a full parent does not stop a leaf
            # that is below its deserved from reclaiming (Volcano's PreemptiveFn); with
            # ancestorReclaimLevel, an ancestor below its deserved also lets it reclaim.
            if not ready or not queue.is_open or queue.name not in attrs:
                return False
            attr = attrs[queue.name]
            total = sum_resources(t.resreq for t in tasks)
            future = add(attr.allocated, total)
            if insufficient_in_requested_dims(future, attr.real_capability, total):
                return False
            if less_equal_partly_zero_filtered(future, attr.deserved, total):
                return True
            if ancestor_reclaim:
                for depth in range(1, level + 1):
                    ancestor = ancestor_at_depth(attr, depth)
                    if ancestor is None or ancestor == names.ROOT_QUEUE:
                        continue
                    up = attrs[ancestor]
                    if less_equal_partly_zero_filtered(
                        add(up.allocated, total), up.deserved, total
                    ):
                        return True
            return False

        def ancestor_to_check(
            reclaimer_attr: CapacityAttr, victim_attr: CapacityAttr, depth: int
        ) -> tuple[CapacityAttr | None, bool]:
            """The victim's ancestor at `depth` unless it is root or the reclaimer's too."""
            theirs = ancestor_at_depth(victim_attr, depth)
            if theirs is None or theirs == names.ROOT_QUEUE:
                return None, False
            if ancestor_at_depth(reclaimer_attr, depth) == theirs:
                return None, False
            return attrs.get(theirs), True

        def shares_ancestor(left: CapacityAttr, right: CapacityAttr) -> bool:
            """A common non-root ancestor within `level` levels up."""
            mine = {ancestor_at_depth(left, d) for d in range(1, level + 1)}
            theirs = {ancestor_at_depth(right, d) for d in range(1, level + 1)}
            return bool((mine & theirs) - {None, names.ROOT_QUEUE})

        def reclaimable(reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            if not ready:
                return []
            owner = session.jobs.get(reclaimer.job)
            if owner is None or owner.queue not in attrs:
                return []
            reclaimer_attr = attrs[owner.queue]
            victims: list[TaskInfo] = []
            allocations: dict[str, Resources] = {}
            ordered = session.victims_queue(candidates, reclaimer)
            while not ordered.empty():
                candidate = ordered.pop()
                job = session.jobs.get(candidate.job)
                if job is None or job.queue not in attrs:
                    continue
                attr = attrs[job.queue]
                # a victim must free something the reclaimer asks for
                if not intersection(candidate.resreq, reclaimer.request):
                    continue
                allocated = allocations.setdefault(job.queue, attr.allocated)
                # never below the victim queue's guarantee
                if not less_equal(attr.guarantee, subtract(allocated, candidate.resreq)):
                    continue
                # immediate victim: it holds nothing the queue's deserved names; otherwise
                # the queue must exceed its deserved on a dimension the victim holds
                if not intersection(candidate.resreq, attr.deserved):
                    if (
                        ancestor_reclaim
                        and shares_ancestor(reclaimer_attr, attr)
                        and not intersection(reclaimer.resreq, reclaimer_attr.deserved)
                    ):
                        # no real contention under a shared ancestor
                        continue
                elif not greater_partly_in_relevant_dims(
                    allocated, attr.deserved, candidate.resreq
                ):
                    continue
                held: dict[str, Resources] = {}
                eligible = True
                if ancestor_reclaim:
                    for depth in range(1, level + 1):
                        up, needed = ancestor_to_check(reclaimer_attr, attr, depth)
                        if not needed:
                            continue
                        if up is None:
                            eligible = False
                            break
                        up_allocated = allocations.setdefault(up.name, up.allocated)
                        held[up.name] = up_allocated
                        if not intersection(candidate.resreq, up.deserved):
                            continue
                        if not greater_partly_in_relevant_dims(
                            up_allocated, up.deserved, candidate.resreq
                        ):
                            eligible = False
                            break
                if not eligible:
                    continue
                allocations[job.queue] = subtract(allocated, candidate.resreq)
                for name, amount in held.items():
                    allocations[name] = subtract(amount, candidate.resreq)
                victims.append(candidate)
            return victims

        def gang_evictable(
            context: EvictionContext, candidates: list[TaskInfo]
        ) -> list[TaskInfo] | None:
            """Gang eviction (Volcano's UnifiedEvictableFn): every candidate for gangpreempt;
            for gangreclaim, in the order given, a candidate keeps its queue at or above its
            guarantee and holds nothing its deserved names or the queue exceeds its deserved
            on a dimension it holds (no shouldSkipReclaimee, as in Volcano)."""
            if context.kind != GANG_RECLAIM:
                return list(candidates)
            if not ready:
                return []
            victims: list[TaskInfo] = []
            allocations: dict[str, Resources] = {}
            for candidate in candidates:
                job = session.jobs.get(candidate.job)
                if job is None or job.queue not in attrs:
                    continue
                attr = attrs[job.queue]
                allocated = allocations.setdefault(job.queue, attr.allocated)
                if not less_equal(attr.guarantee, subtract(allocated, candidate.resreq)):
                    continue
                if intersection(candidate.resreq, attr.deserved) and not (
                    greater_partly_in_relevant_dims(allocated, attr.deserved, candidate.resreq)
                ):
                    continue
                allocations[job.queue] = subtract(allocated, candidate.resreq)
                victims.append(candidate)
            return victims

        def on_change(task: TaskInfo, sign: int) -> None:
            job = session.jobs.get(task.job)
            if job is None or job.queue not in attrs:
                return
            for i, attr in enumerate(chain(job.queue)):
                attr.allocated = (
                    add(attr.allocated, task.resreq)
                    if sign > 0
                    else subtract(attr.allocated, task.resreq)
                )
                if i == 0:
                    # Volcano refreshes only the leaf's share on (de)allocate
                    attr.update_share()
                # remove the reservation on allocate, restore it on rollback
                key = f"{attr.name}/{task.uid}"
                if sign > 0:
                    reservations.on_allocate(attr.name, key, task.resreq)
                else:
                    reservations.on_deallocate(attr.name, key, task.resreq)

        session.add_queue_order_fn(self.name, queue_order)
        if hierarchy:
            session.add_victim_queue_order_fn(self.name, victim_queue_order)
        session.add_allocatable_fn(self.name, allocatable)
        session.add_job_enqueueable_fn(self.name, enqueueable)
        session.add_job_enqueued_fn(self.name, enqueued)
        session.add_preemptive_fn(self.name, preemptive)
        session.add_reclaimable_fn(self.name, reclaimable)
        session.add_unified_evictable_fn(self.name, gang_evictable)
        session.add_event_handler(
            self.name, EventHandler(lambda t: on_change(t, 1), lambda t: on_change(t, -1))
        )

    # --- accounting --------------------------------------------------------------------------
    @staticmethod
    def _account(job: JobInfo) -> tuple[Resources, Resources, Resources]:
        """Allocated, request and inqueue+elastic contributions of one job."""
        allocated = job.allocated
        pending = job.task_status_index.get(TaskStatus.PENDING, {}).values()
        request = allocated + sum_resources(t.resreq for t in pending)
        return allocated, request, elastic(job)

    def _foreign_gated(self, job: JobInfo) -> Resources:
        raw_view = self.arguments.get("gateView")
        view = raw_view if isinstance(raw_view, GateView) else GateView()
        pending = job.task_status_index.get(TaskStatus.PENDING, {}).values()
        # gated demand excludes only-our-gate pods: they take part in the capacity check
        return gated_resources(
            (GateState.OURS_ONLY if t.uid in view.candidates else GateState.OTHERS_ONLY, t.resreq)
            for t in pending
            if t.scheduling_gated
        )

    def _build_flat(self, session: Session) -> None:
        """Volcano's buildQueueAttrs: one attr per queue, no tree."""
        total = session.total_resource
        total_guarantee = sum_resources(q.guarantee for q in session.queues.values())
        attrs: dict[str, CapacityAttr] = {}
        for queue in session.queues.values():
            real = exceeded_part(total, total_guarantee) + queue.guarantee
            capability = flat_capability(queue.capability)
            if capability is not None:
                real = min_dims_infinity(real, capability)
            attrs[queue.name] = CapacityAttr(
                queue.name,
                real,
                queue.deserved if queue.deserved is not None else Resources(),
                queue.guarantee,
                capability or {},
            )
        for job in session.jobs.values():
            attr = attrs[job.queue]
            allocated, request, spare = self._account(job)
            attr.allocated = attr.allocated + allocated
            attr.request = attr.request + request
            attr.elastic = attr.elastic + spare
            attr.inqueue = attr.inqueue + inqueue(job, self._foreign_gated(job))
        for attr in attrs.values():
            attr.deserved = min_dims_infinity(
                with_standard(attr.deserved), attr.real_capability
            ).max(attr.guarantee)
            attr.update_share()
        self.attrs = attrs

    def _build_hierarchical(self, session: Session) -> bool:
        """Volcano's buildHierarchicalQueueAttrs; False when the tree is unusable (a missing
        parent, a cycle, a job in an inner queue), which stops all capacity decisions."""
        queues = session.queues
        attrs: dict[str, CapacityAttr] = {}
        for queue in queues.values():
            attrs[queue.name] = CapacityAttr(
                queue.name,
                Resources(),
                queue.deserved if queue.deserved is not None else Resources(),
                queue.guarantee,
                with_standard(queue.capability),
            )
        root_name = names.ROOT_QUEUE
        self.attrs = attrs
        if root_name not in attrs:
            if not self.arguments.get_bool(IMPLICIT_ROOT_ARG, False):
                # Volcano: no root queue, no usable tree (its controller always creates one)
                return False
            # opt-in: stand in an unlimited root, as the queue controller koordqueue does
            # not run would have created
            attrs[root_name] = CapacityAttr(root_name, Resources(), Resources(), Resources())
        ok = True
        for queue in queues.values():
            if queue.name == root_name:
                continue
            path: list[str] = []
            current: str | None = queue.name
            seen: set[str] = set()
            while current is not None and current != root_name:
                if current in seen:
                    ok = False
                    break
                seen.add(current)
                parent = (queues[current].parent if current in queues else None) or root_name
                if parent not in attrs:
                    ok = False
                    break
                path.append(parent)
                current = parent
            if not ok:
                break
            attrs[queue.name].ancestors = list(reversed(path))
            attrs[path[0]].children[queue.name] = attrs[queue.name]
        if not ok:
            return False
        for job in session.jobs.values():
            attr = attrs.get(job.queue)
            if attr is None:
                continue
            if attr.children:
                return False
            allocated, request, spare = self._account(job)
            held = inqueue(job, self._foreign_gated(job))
            for target in (attr, *(attrs[a] for a in attr.ancestors)):
                target.allocated = target.allocated + allocated
                target.request = target.request + request
                target.inqueue = target.inqueue + held
                target.elastic = target.elastic + spare
        root = attrs[root_name]
        if volcano_empty(Resources(root.capability)):
            root.capability = {name: INFINITE for name in session.total_resource}
            for name in STANDARD_RESOURCES:
                root.capability[name] = INFINITE
        root.real_capability = Resources(root.capability)
        self._check_tree(root, root_name)
        for attr in attrs.values():
            attr.update_share()
        return True

    def _check_tree(self, attr: CapacityAttr, root_name: str) -> None:
        """Volcano's checkHierarchicalQueue: children inherit unset capability dimensions
        from the parent; a child's real capability is the parent's minus all its siblings'
        guarantees plus its own, capped by its capability; the root deserves its children's
        sum."""
        total_guarantee = Resources()
        total_deserved = Resources()
        for child in attr.children.values():
            child.deserved = Resources(with_standard(child.deserved)).max(child.guarantee)
            total_deserved = total_deserved + child.deserved
            total_guarantee = total_guarantee + child.guarantee
            for name in STANDARD_RESOURCES:
                if child.capability.get(name, 0) <= 0:
                    child.capability[name] = attr.capability.get(name, 0)
            for name, amount in attr.capability.items():
                if name not in STANDARD_RESOURCES:
                    child.capability.setdefault(name, amount)
        if attr.name == root_name:
            attr.guarantee = total_guarantee
            attr.deserved = total_deserved
        for child in attr.children.values():
            real = exceeded_part(attr.real_capability, total_guarantee) + child.guarantee
            child.real_capability = min_dims_infinity(real, child.capability)
        for child in attr.children.values():
            self._check_tree(child, root_name)

    def _reservations(self, session: Session) -> None:
        """SPEC 3.5: reserved capacity of un-gated, still-pending opt-in pods, kept per queue
        of the chain (key "<queue>/<uid>") so parents see their subtree's reservations."""
        raw_view = self.arguments.get("gateView")
        view = raw_view if isinstance(raw_view, GateView) else GateView()
        reservations = ReservationLedger({})
        reservations.rebuild((), ())
        attrs = self.attrs
        for job in session.jobs.values():
            if job.queue not in attrs:
                continue
            pending = job.task_status_index.get(TaskStatus.PENDING, {}).values()
            links = [attrs[job.queue]]
            if self.hierarchy:
                links.extend(attrs[a] for a in reversed(attrs[job.queue].ancestors))
            for attr in links:
                for task in pending:
                    if task.uid in view.reserved:
                        reservations.add(attr.name, f"{attr.name}/{task.uid}", task.resreq)
        self.reservations = reservations


__all__ = [
    "ANCESTOR_RECLAIM_LEVEL_ARG",
    "IMPLICIT_ROOT_ARG",
    "CapacityAttr",
    "CapacityPlugin",
    "compare_share_with_deserved",
]
