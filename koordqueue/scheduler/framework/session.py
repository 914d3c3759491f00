"""Session: one scheduling cycle over a snapshot, with the extension-point dispatchers.

Plugins register callbacks in `on_session_open`; actions ask the dispatchers, which apply
the tier rules of SPEC 3.6. All mutation of tasks and nodes goes through the `*_task`
methods used by `Statement`, which keep the job index, node accounting, numpy mirror and
event handlers in step.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import names
from koordqueue.scheduler.api.fit_errors import FitErrors
from koordqueue.scheduler.api.job_info import JobInfo, PodGroupPhase
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.queue_info import QueueInfo
from koordqueue.scheduler.api.resource import sum_resources
from koordqueue.scheduler.api.task_info import ALLOCATED_STATUSES, TaskInfo, TaskStatus
from koordqueue.scheduler.framework.config import PluginOption, SchedulerConfig
from koordqueue.scheduler.framework.interface import (
    ExtensionPoint,
    Plugin,
    ValidateResult,
    Vote,
)
from koordqueue.scheduler.framework.placement import (
    BatchNodeOrderFn,
    BatchPredicateFn,
    NodeOrderFn,
    NodeTensor,
    PlacementEngine,
    PredicateFn,
)
from koordqueue.scheduler.framework.registry import get_plugin_builder
from koordqueue.scheduler.framework.result import (
    Bind,
    ClusterSnapshot,
    Eviction,
    PhaseUpdate,
    PluginTiming,
    Reservation,
    SessionResult,
)
from koordqueue.scheduler.framework.util import PriorityQueue

JobOrderFn = Callable[[JobInfo, JobInfo], int]
QueueOrderFn = Callable[[QueueInfo, QueueInfo], int]
TaskOrderFn = Callable[[TaskInfo, TaskInfo], int]
PrePredicateFn = Callable[[TaskInfo], str | None]
BestNodeFn = Callable[[TaskInfo, list[tuple[NodeInfo, float]]], NodeInfo | None]
JobReadyFn = Callable[[JobInfo], bool]
JobValidFn = Callable[[JobInfo], ValidateResult | None]
VoteFn = Callable[[JobInfo], Vote]
JobEnqueuedFn = Callable[[JobInfo], None]
EvictableFn = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo] | None]
"""(preemptor, candidates) -> victims, or None to abstain."""
AllocatableFn = Callable[[QueueInfo, TaskInfo], bool]
OverusedFn = Callable[[QueueInfo], bool]
PreemptiveFn = Callable[[QueueInfo, list[TaskInfo]], bool]
"""May the queue reclaim for these tasks (its own capability and deserved)."""
VictimQueueOrderFn = Callable[[QueueInfo, QueueInfo, QueueInfo], int]
"""(left, right, preemptor's queue) -> negative when left's tasks are evicted first."""
JobStarvingFn = Callable[[JobInfo], bool]
TaskEventFn = Callable[[TaskInfo], None]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class EventHandler:
    """Callbacks fired when a task takes (allocate) or gives back (deallocate) resources."""

    allocate: TaskEventFn | None = None
    deallocate: TaskEventFn | None = None


class Session:
    """Mutable scheduling state for one cycle plus the plugin callback registry."""

    def __init__(
        self, snapshot: ClusterSnapshot, config: SchedulerConfig, *, profile_callbacks: bool = False
    ) -> None:
        self.uid = uuid.uuid4().hex
        self.profile_callbacks = profile_callbacks
        self.config = config
        self.started = time.perf_counter()
        self.warnings: list[str] = []
        self.queues: dict[str, QueueInfo] = {q.name: q for q in snapshot.queues}
        self.namespace_labels = snapshot.namespace_labels
        self.jobs: dict[str, JobInfo] = {}
        self._shared: set[str] = set()
        """Jobs still the snapshot's own objects (copy-on-write: see `_private`)."""
        for original in sorted(snapshot.jobs, key=lambda j: j.uid):
            if original.queue not in self.queues:
                self.warnings.append(
                    names.QUEUE_NOT_FOUND_WARNING.format(job=original.uid, queue=original.queue)
                )
                continue
            if _may_change(original):
                self.jobs[original.uid] = original.clone()
            else:
                self.jobs[original.uid] = original
                self._shared.add(original.uid)
        self._original_phase = {uid: job.phase for uid, job in self.jobs.items()}
        ready = sorted((n for n in snapshot.nodes if n.ready), key=lambda n: n.name)
        self.nodes: dict[str, NodeInfo] = {}
        job_tasks = {t for job in self.jobs.values() for t in job.tasks}
        for original_node in ready:
            node = original_node.clone()
            self.nodes[node.name] = node
            for foreign in original_node.tasks.values():
                if foreign.uid not in job_tasks:
                    node.add_task(foreign.clone())
        for job in self.jobs.values():
            for task in job.tasks.values():
                if task.status is TaskStatus.PENDING or task.node_name is None:
                    continue
                host = self.nodes.get(task.node_name)
                if host is not None:
                    host.add_task(task)
        self.node_list: list[NodeInfo] = list(self.nodes.values())
        self.total_resource: Resources = sum_resources(n.allocatable for n in self.node_list)
        dims: set[str] = set()
        for node in self.node_list:
            dims.update(node.allocatable)
        for job in self.jobs.values():
            for task in job.tasks.values():
                dims.update(task.request)
                dims.update(task.resreq)
        self.tensor = NodeTensor(self.node_list, sorted(dims))
        self.placement = PlacementEngine(self.tensor)

        self.fit_errors: dict[str, FitErrors] = {}
        self.job_conditions: dict[str, str] = {}
        self.binds: list[Bind] = []
        self.evictions: list[Eviction] = []
        self._fns: dict[ExtensionPoint, dict[str, Callable[..., Any]]] = {
            p: {} for p in ExtensionPoint
        }
        self._batch_predicates: dict[str, tuple[BatchPredicateFn, PredicateFn | None]] = {}
        self._batch_scores: dict[str, BatchNodeOrderFn] = {}
        self._handlers: list[EventHandler] = []
        self._victim_queue_order: dict[str, VictimQueueOrderFn] = {}
        self._enqueued: list[JobEnqueuedFn] = []
        self._resolved: dict[ExtensionPoint, list[list[tuple[str, Callable[..., Any]]]]] = {}
        self._flat_cache: dict[ExtensionPoint, list[Callable[..., Any]]] = {}
        self._options: dict[str, PluginOption] = {}
        self._plugin_time: dict[str, list[float]] = {}
        self.action_durations: dict[str, float] = {}
        self.plugins: dict[str, Plugin] = {}
        self._open_plugins()

    # --- plugin lifecycle -------------------------------------------------------------------
    def _open_plugins(self) -> None:
        for tier in self.config.tiers:
            for option in tier.plugins:
                self._options[option.name] = option
                timing = self._plugin_time.setdefault(option.name, [0.0, 0.0, 0.0])
                start = time.perf_counter()
                plugin = get_plugin_builder(option.name)(option.arguments)
                self.plugins[option.name] = plugin
                plugin.on_session_open(self)
                timing[0] += time.perf_counter() - start
        self._sync_placement()

    def close(self) -> SessionResult:
        """Run the plugins' close hooks and render the decisions."""
        for name, plugin in self.plugins.items():
            start = time.perf_counter()
            plugin.on_session_close(self)
            self._plugin_time[name][1] += time.perf_counter() - start
        return self._result()

    # --- registration ------------------------------------------------------------------------
    def _timed(self, plugin: str, fn: F) -> F:
        """Wrap a callback to accumulate its time, when callback profiling is on.

        Off by default: the wrapper costs ~0.3 us per call and callbacks run ~10^5 times per
        session; open/close durations are always recorded.
        """
        if not self.profile_callbacks:
            return fn
        acc = self._plugin_time.setdefault(plugin, [0.0, 0.0, 0.0])
        clock = time.perf_counter

        def timed(*args: Any) -> Any:
            start = clock()
            try:
                return fn(*args)
            finally:
                acc[2] += clock() - start

        return timed  # type: ignore[return-value]

    def _add(self, point: ExtensionPoint, plugin: str, fn: Callable[..., Any]) -> None:
        self._fns[point][plugin] = self._timed(plugin, fn)
        self._resolved.clear()
        self._flat_cache.clear()

    def add_job_order_fn(self, plugin: str, fn: JobOrderFn) -> None:
        """Compare two jobs: negative = left first, 0 = no opinion."""
        self._add(ExtensionPoint.JOB_ORDER, plugin, fn)

    def add_queue_order_fn(self, plugin: str, fn: QueueOrderFn) -> None:
        """Compare two queues: negative = left first."""
        self._add(ExtensionPoint.QUEUE_ORDER, plugin, fn)

    def add_task_order_fn(self, plugin: str, fn: TaskOrderFn) -> None:
        """Compare two tasks of one job: negative = left first."""
        self._add(ExtensionPoint.TASK_ORDER, plugin, fn)

    def add_pre_predicate_fn(self, plugin: str, fn: PrePredicateFn) -> None:
        """Per-task check before any node is looked at; a reason string rejects the task."""
        self._add(ExtensionPoint.PRE_PREDICATE, plugin, fn)

    def add_predicate_fn(self, plugin: str, fn: PredicateFn) -> None:
        """Per-node check (scalar); a reason string rejects the node."""
        self._add(ExtensionPoint.PREDICATE, plugin, fn)

    def add_batch_predicate_fn(
        self, plugin: str, fn: BatchPredicateFn, explain: PredicateFn | None = None
    ) -> None:
        """Vectorised per-node check; `explain` gives the reason for one failing node."""
        self._batch_predicates[plugin] = (self._timed(plugin, fn), explain)
        self._resolved.clear()
        self._flat_cache.clear()

    def add_node_order_fn(self, plugin: str, fn: NodeOrderFn) -> None:
        """Per-node score (scalar); scores of all plugins are summed."""
        self._add(ExtensionPoint.NODE_ORDER, plugin, fn)

    def add_batch_node_order_fn(self, plugin: str, fn: BatchNodeOrderFn) -> None:
        """Vectorised per-node score; summed with all others."""
        self._batch_scores[plugin] = self._timed(plugin, fn)
        self._resolved.clear()
        self._flat_cache.clear()

    def add_best_node_fn(self, plugin: str, fn: BestNodeFn) -> None:
        """Pick the node from scored candidates; the first non-None answer wins."""
        self._add(ExtensionPoint.BEST_NODE, plugin, fn)

    def add_job_ready_fn(self, plugin: str, fn: JobReadyFn) -> None:
        """Is the job ready to be bound (all plugins must agree)."""
        self._add(ExtensionPoint.JOB_READY, plugin, fn)

    def add_job_pipelined_fn(self, plugin: str, fn: VoteFn) -> None:
        """Vote whether the job is pipelined."""
        self._add(ExtensionPoint.JOB_PIPELINED, plugin, fn)

    def add_job_valid_fn(self, plugin: str, fn: JobValidFn) -> None:
        """None when the job may be scheduled at all, else why not."""
        self._add(ExtensionPoint.JOB_VALID, plugin, fn)

    def add_job_enqueueable_fn(self, plugin: str, fn: VoteFn) -> None:
        """Vote whether a Pending PodGroup may become Inqueue."""
        self._add(ExtensionPoint.JOB_ENQUEUEABLE, plugin, fn)

    def add_job_enqueued_fn(self, plugin: str, fn: JobEnqueuedFn) -> None:
        """Told when a job became Inqueue (to account its minResources)."""
        option = self._options.get(plugin)
        if option is None or option.enabled(ExtensionPoint.JOB_ENQUEUEABLE):
            self._enqueued.append(self._timed(plugin, fn))

    def add_preemptable_fn(self, plugin: str, fn: EvictableFn) -> None:
        """Which candidates the preemptor may evict (None abstains)."""
        self._add(ExtensionPoint.PREEMPTABLE, plugin, fn)

    def add_reclaimable_fn(self, plugin: str, fn: EvictableFn) -> None:
        """Which candidates of other queues the reclaimer may evict (None abstains)."""
        self._add(ExtensionPoint.RECLAIMABLE, plugin, fn)

    def add_victim_tasks_fn(
        self, plugin: str, fn: Callable[[list[TaskInfo]], list[TaskInfo] | None]
    ) -> None:
        """Tasks a plugin wants evicted regardless of a preemptor (None abstains)."""
        self._add(ExtensionPoint.VICTIM_TASKS, plugin, fn)

    def add_allocatable_fn(self, plugin: str, fn: AllocatableFn) -> None:
        """May the queue take this task now (all must agree)."""
        self._add(ExtensionPoint.ALLOCATABLE, plugin, fn)

    def add_overused_fn(self, plugin: str, fn: OverusedFn) -> None:
        """Is the queue over its share (any plugin saying so skips it)."""
        self._add(ExtensionPoint.OVERUSED, plugin, fn)

    def add_preemptive_fn(self, plugin: str, fn: PreemptiveFn) -> None:
        """May the queue reclaim for these tasks (all must agree; `enablePreemptive`)."""
        self._add(ExtensionPoint.PREEMPTIVE, plugin, fn)

    def add_victim_queue_order_fn(self, plugin: str, fn: VictimQueueOrderFn) -> None:
        """Order victims' queues for a preemptor's queue (no switch, as in Volcano)."""
        self._victim_queue_order[plugin] = self._timed(plugin, fn)

    def add_job_starving_fn(self, plugin: str, fn: JobStarvingFn) -> None:
        """Does the job still need resources (preempt considers only starving jobs)."""
        self._add(ExtensionPoint.JOB_STARVING, plugin, fn)

    def add_event_handler(self, plugin: str, handler: EventHandler) -> None:
        """Register allocate/deallocate callbacks (always enabled)."""
        self._handlers.append(
            EventHandler(
                self._timed(plugin, handler.allocate) if handler.allocate else None,
                self._timed(plugin, handler.deallocate) if handler.deallocate else None,
            )
        )

    # --- resolution -------------------------------------------------------------------------
    def _tiers(self, point: ExtensionPoint) -> list[list[tuple[str, Callable[..., Any]]]]:
        resolved = self._resolved.get(point)
        if resolved is None:
            fns = self._fns[point]
            resolved = [
                [
                    (opt.name, fns[opt.name])
                    for opt in tier.plugins
                    if opt.name in fns and opt.enabled(point)
                ]
                for tier in self.config.tiers
            ]
            self._resolved[point] = resolved
        return resolved

    def _flat(self, point: ExtensionPoint) -> list[Callable[..., Any]]:
        flat = self._flat_cache.get(point)
        if flat is None:
            flat = self._flat_cache[point] = [
                fn for tier in self._tiers(point) for _name, fn in tier
            ]
        return flat

    def _sync_placement(self) -> None:
        engine = self.placement
        enabled = [opt for tier in self.config.tiers for opt in tier.plugins]
        engine.batch_predicates = [
            self._batch_predicates[o.name]
            for o in enabled
            if o.name in self._batch_predicates and o.enabled(ExtensionPoint.PREDICATE)
        ]
        engine.predicates = self._flat(ExtensionPoint.PREDICATE)
        engine.batch_scores = [
            self._batch_scores[o.name]
            for o in enabled
            if o.name in self._batch_scores and o.enabled(ExtensionPoint.NODE_ORDER)
        ]
        engine.scores = self._flat(ExtensionPoint.NODE_ORDER)
        engine.invalidate()

    def hierarchy_enabled(self, plugin: str) -> bool:
        """The `enableHierarchy` switch of a plugin (off unless set)."""
        option = self._options.get(plugin)
        return option is not None and option.enabled(ExtensionPoint.HIERARCHY)

    # --- dispatchers (SPEC 3.6 tier rules) -------------------------------------------------
    def _order(self, point: ExtensionPoint, left: Any, right: Any) -> int:
        for fn in self._flat(point):
            answer: int = fn(left, right)
            if answer != 0:
                return answer
        return 0

    def job_order_less(self, left: JobInfo, right: JobInfo) -> bool:
        """First plugin with an opinion decides; then creation time, then uid."""
        answer = self._order(ExtensionPoint.JOB_ORDER, left, right)
        if answer != 0:
            return answer < 0
        return (left.creation, left.uid) < (right.creation, right.uid)

    def job_order_compare(self, left: JobInfo, right: JobInfo) -> int:
        """The plugins' job order only (0 when none has an opinion; no fallback)."""
        return self._order(ExtensionPoint.JOB_ORDER, left, right)

    def victim_queue_order_less(
        self, left: QueueInfo, right: QueueInfo, preemptor: QueueInfo
    ) -> bool:
        """Should left's tasks be evicted before right's: the first victim-queue-order
        plugin with an opinion decides, else the reverse of the queue order."""
        for tier in self.config.tiers:
            for option in tier.plugins:
                fn = self._victim_queue_order.get(option.name)
                if fn is not None:
                    answer = fn(left, right, preemptor)
                    if answer != 0:
                        return answer < 0
        return not self.queue_order_less(left, right)

    def victims_queue(
        self, victims: Iterable[TaskInfo], preemptor: TaskInfo
    ) -> PriorityQueue[TaskInfo]:
        """Victims in eviction order (Volcano's BuildVictimsPriorityQueue): within a job,
        reverse task order; across queues, the victim queue order; else reverse job order,
        then reverse task order."""
        jobs = self.jobs
        owner = jobs.get(preemptor.job)

        def first(left: TaskInfo, right: TaskInfo) -> bool:
            if left.job == right.job:
                return not self.task_order_less(left, right)
            lj, rj = jobs.get(left.job), jobs.get(right.job)
            if lj is None or rj is None:
                if lj is None and rj is None:
                    return not self.task_order_less(left, right)
                return lj is None
            if owner is not None and lj.queue != rj.queue:
                return self.victim_queue_order_less(
                    self.queues[lj.queue], self.queues[rj.queue], self.queues[owner.queue]
                )
            cmp = self.job_order_compare(lj, rj)
            if cmp != 0:
                return cmp > 0
            return not self.task_order_less(left, right)

        return PriorityQueue(first, victims)

    def queue_order_less(self, left: QueueInfo, right: QueueInfo) -> bool:
        """First plugin with an opinion decides; then creation time, then name."""
        answer = self._order(ExtensionPoint.QUEUE_ORDER, left, right)
        if answer != 0:
            return answer < 0
        return (left.creation, left.name) < (right.creation, right.name)

    def task_order_less(self, left: TaskInfo, right: TaskInfo) -> bool:
        """First plugin with an opinion decides; then creation time, then uid."""
        answer = self._order(ExtensionPoint.TASK_ORDER, left, right)
        if answer != 0:
            return answer < 0
        return (left.creation, left.uid) < (right.creation, right.uid)

    def pre_predicate(self, task: TaskInfo) -> str | None:
        """The first failure reason of any pre-predicate, else None."""
        for fn in self._flat(ExtensionPoint.PRE_PREDICATE):
            reason: str | None = fn(task)
            if reason is not None:
                return reason
        return None

    def best_node(self, task: TaskInfo, scored: list[tuple[NodeInfo, float]]) -> NodeInfo | None:
        """A best-node plugin's choice, or None when no plugin chooses."""
        for fn in self._flat(ExtensionPoint.BEST_NODE):
            node: NodeInfo | None = fn(task, scored)
            if node is not None:
                return node
        return None

    def has_best_node_fns(self) -> bool:
        """Whether any enabled plugin picks nodes itself (disables the argmax fast path)."""
        return bool(self._flat(ExtensionPoint.BEST_NODE))

    def job_ready(self, job: JobInfo) -> bool:
        """AND over all plugins (no plugin = ready)."""
        return all(fn(job) for fn in self._flat(ExtensionPoint.JOB_READY))

    def job_valid(self, job: JobInfo) -> ValidateResult | None:
        """The first plugin's objection, else None."""
        for fn in self._flat(ExtensionPoint.JOB_VALID):
            result: ValidateResult | None = fn(job)
            if result is not None:
                return result
        return None

    def _vote(self, point: ExtensionPoint, job: JobInfo) -> bool:
        for tier in self._tiers(point):
            permitted = False
            for _name, fn in tier:
                vote = fn(job)
                if vote < 0:
                    return False
                if vote > 0:
                    permitted = True
            if permitted:
                return True
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        """Any reject fails; a permit settles its tier; no votes = pipelined."""
        return self._vote(ExtensionPoint.JOB_PIPELINED, job)

    def job_enqueueable(self, job: JobInfo) -> bool:
        """Any reject fails; a permit settles its tier; no votes = enqueueable."""
        return self._vote(ExtensionPoint.JOB_ENQUEUEABLE, job)

    def job_enqueued(self, job: JobInfo) -> None:
        """Tell the plugins a job became Inqueue."""
        for fn in self._enqueued:
            fn(job)

    def job_starving(self, job: JobInfo) -> bool:
        """AND within the first tier that has an answer; False when no plugin answers."""
        for tier in self._tiers(ExtensionPoint.JOB_STARVING):
            if not tier:
                continue
            return all(fn(job) for _name, fn in tier)
        return False

    def _victims(
        self, point: ExtensionPoint, preemptor: TaskInfo, candidates: list[TaskInfo]
    ) -> list[TaskInfo]:
        for tier in self._tiers(point):
            chosen: list[TaskInfo] | None = None
            for _name, fn in tier:
                answer: list[TaskInfo] | None = fn(preemptor, candidates)
                if answer is None:
                    continue
                if not answer:
                    chosen = []
                    break
                if chosen is None:
                    chosen = list(answer)
                else:
                    keep = {t.uid for t in answer}
                    chosen = [t for t in chosen if t.uid in keep]
            if chosen is not None:
                return chosen
        return []

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Victims: intersected within the first tier whose plugins answer."""
        return self._victims(ExtensionPoint.PREEMPTABLE, preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Victims for reclaim: intersected within the first tier whose plugins answer."""
        return self._victims(ExtensionPoint.RECLAIMABLE, reclaimer, candidates)

    def victim_tasks(self, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Tasks plugins want evicted: intersected within the first tier that answers."""
        for tier in self._tiers(ExtensionPoint.VICTIM_TASKS):
            chosen: list[TaskInfo] | None = None
            for _name, fn in tier:
                answer: list[TaskInfo] | None = fn(candidates)
                if answer is None:
                    continue
                keep = {t.uid for t in answer}
                chosen = list(answer) if chosen is None else [t for t in chosen if t.uid in keep]
            if chosen is not None:
                return chosen
        return []

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """All plugins must allow the queue to take the task."""
        return all(fn(queue, task) for fn in self._flat(ExtensionPoint.ALLOCATABLE))

    def preemptive(self, queue: QueueInfo, tasks: list[TaskInfo]) -> bool:
        """All plugins must allow the queue to reclaim for `tasks` (no plugin = allowed)."""
        return all(fn(queue, tasks) for fn in self._flat(ExtensionPoint.PREEMPTIVE))

    def overused(self, queue: QueueInfo) -> bool:
        """Any plugin saying the queue is overused makes it so."""
        return any(fn(queue) for fn in self._flat(ExtensionPoint.OVERUSED))

    # --- placement helpers used by actions --------------------------------------------------
    def select_node(self, task: TaskInfo) -> tuple[NodeInfo, bool] | FitErrors:
        """The node to use for `task` and whether it is a pipeline placement, or why none."""
        if self.has_best_node_fns():
            for future in (False, True):
                idx, scores = self.placement.candidates(task, future=future)
                if len(idx):
                    scored = [
                        (self.node_list[i], float(s))
                        for i, s in zip(idx.tolist(), scores.tolist(), strict=True)
                    ]
                    chosen = self.best_node(task, scored) or scored[int(np.argmax(scores))][0]
                    return chosen, future
        else:
            choice = self.placement.select(task)
            if choice is not None:
                return self.node_list[choice[0]], choice[1]
        return self.placement.fit_errors(task)

    # --- state changes (via Statement) -----------------------------------------------------------
    def _fire(self, allocate: bool, task: TaskInfo) -> None:
        for handler in self._handlers:
            fn = handler.allocate if allocate else handler.deallocate
            if fn is not None:
                fn(task)

    def allocate_task(self, task: TaskInfo, node: NodeInfo) -> None:
        """Task takes idle resources on node (Allocated)."""
        self.jobs[task.job].update_task_status(task, TaskStatus.ALLOCATED)
        node.add_task(task)
        self.tensor.refresh(node, task.resreq)
        self.fit_errors.pop(task.uid, None)
        self._fire(True, task)

    def pipeline_task(self, task: TaskInfo, node: NodeInfo) -> None:
        """Task reserves future-idle resources on node (Pipelined)."""
        self.jobs[task.job].update_task_status(task, TaskStatus.PIPELINED)
        node.add_task(task)
        self.tensor.refresh(node)
        self.fit_errors.pop(task.uid, None)
        self._fire(True, task)

    def unallocate_task(self, task: TaskInfo) -> None:
        """Undo allocate/pipeline: back to Pending, resources returned."""
        node = self.nodes[task.node_name or ""]
        node.remove_task(task)
        self.jobs[task.job].update_task_status(task, TaskStatus.PENDING)
        task.node_name = None
        self.tensor.refresh(node)
        self._fire(False, task)

    def _private(self, task: TaskInfo) -> TaskInfo:
        """The session's own copy of `task`, copying its job first if it is still shared.

        Why: jobs with nothing to place (no pending, allocated or pipelined task, already
        enqueued) are not cloned at open; only eviction writes them, so the job is copied
        then and its tasks swapped in on their nodes. A caller may still hold the shared
        task (a victim list): it is resolved by uid.
        """
        uid = task.job
        if uid in self._shared:
            self._shared.discard(uid)
            job = self.jobs[uid].clone()
            self.jobs[uid] = job
            for copy in job.tasks.values():
                node = self.nodes.get(copy.node_name or "")
                if node is not None and copy.uid in node.tasks:
                    node.tasks[copy.uid] = copy
        owner = self.jobs.get(uid)
        return owner.tasks.get(task.uid, task) if owner is not None else task

    def evict_task(self, task: TaskInfo) -> None:
        """Task becomes Releasing: its resources turn into future idle."""
        task = self._private(task)
        node = self.nodes[task.node_name or ""]
        self.jobs[task.job].update_task_status(task, TaskStatus.RELEASING)
        node.update_task(task)
        self.tensor.refresh(node)
        self._fire(False, task)

    def unevict_task(self, task: TaskInfo, previous: TaskStatus) -> None:
        """Undo evict: restore the previous status."""
        task = self._private(task)
        node = self.nodes[task.node_name or ""]
        self.jobs[task.job].update_task_status(task, previous)
        node.update_task(task)
        self.tensor.refresh(node)
        self._fire(True, task)

    def dispatch_bind(self, task: TaskInfo) -> None:
        """Commit of an allocation: the task is Binding and a bind decision is recorded."""
        self.jobs[task.job].update_task_status(task, TaskStatus.BINDING)
        self.binds.append(Bind(task.uid, task.namespace, task.name, task.job, task.node_name or ""))

    def dispatch_allocated(self, job_uid: str) -> None:
        """Bind every still-Allocated task of a job that is ready."""
        job = self.jobs[job_uid]
        leftover = job.task_status_index.get(TaskStatus.ALLOCATED)
        if leftover and self.job_ready(job):
            for task in list(leftover.values()):
                self.dispatch_bind(task)

    def record_eviction(self, task: TaskInfo, node: str, reason: str) -> None:
        """Commit of an eviction."""
        self.evictions.append(Eviction(task.uid, task.namespace, task.name, task.job, node, reason))

    # --- results -----------------------------------------------------------------------------
    def _phase(self, job: JobInfo) -> PodGroupPhase:
        if job.tasks and job.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED) == len(job.tasks):
            return PodGroupPhase.COMPLETED
        unschedulable = job.uid in self.job_conditions
        if unschedulable and job.count(TaskStatus.RUNNING):
            return PodGroupPhase.UNKNOWN
        allocated = job.count(*ALLOCATED_STATUSES, TaskStatus.SUCCEEDED)
        if allocated >= job.min_available:
            return PodGroupPhase.RUNNING
        if job.phase is not PodGroupPhase.INQUEUE:
            return PodGroupPhase.PENDING
        return job.phase

    def _result(self) -> SessionResult:
        updates: list[PhaseUpdate] = []
        reservations: list[Reservation] = []
        fit_errors: dict[str, FitErrors] = {}
        for job in self.jobs.values():
            new = self._phase(job)
            old = self._original_phase[job.uid]
            if new is not old:
                updates.append(PhaseUpdate(job.uid, job.namespace, job.name, old, new))
            for status in (TaskStatus.PIPELINED, TaskStatus.ALLOCATED):
                for task in job.task_status_index.get(status, {}).values():
                    reservations.append(
                        Reservation(
                            task.uid, task.namespace, task.name, job.uid, task.node_name or ""
                        )
                    )
            for task in job.task_status_index.get(TaskStatus.PENDING, {}).values():
                errors = self.fit_errors.get(task.uid)
                if errors is not None:
                    fit_errors[task.uid] = errors
        timings = {
            name: PluginTiming(acc[0], acc[1], acc[2]) for name, acc in self._plugin_time.items()
        }
        return SessionResult(
            binds=tuple(self.binds),
            evictions=tuple(self.evictions),
            pipelined=tuple(reservations),
            phase_updates=tuple(updates),
            fit_errors=fit_errors,
            job_conditions=dict(self.job_conditions),
            warnings=tuple(self.warnings),
            duration=time.perf_counter() - self.started,
            action_durations=dict(self.action_durations),
            plugin_durations=timings,
        )


def _may_change(job: JobInfo) -> bool:
    """Can a session write this job other than by evicting its tasks (place, pipeline, bind
    or enqueue it)? Such jobs are copied at open; the rest are shared until evicted from."""
    index = job.task_status_index
    return (
        job.phase is PodGroupPhase.PENDING
        or bool(index.get(TaskStatus.PENDING))
        or bool(index.get(TaskStatus.ALLOCATED))
        or bool(index.get(TaskStatus.PIPELINED))
    )


def open_session(
    snapshot: ClusterSnapshot, config: SchedulerConfig, *, profile_callbacks: bool = False
) -> Session:
    """Clone the snapshot into session state and open every configured plugin."""
    return Session(snapshot, config, profile_callbacks=profile_callbacks)


def run_actions(session: Session, actions: Iterable[str] | None = None) -> None:
    """Run the configured actions (or `actions`) in order, timing each."""
    from koordqueue.scheduler.framework.registry import get_action

    for name in actions if actions is not None else session.config.actions:
        action = get_action(name)
        start = time.perf_counter()
        action.execute(session)
        session.action_durations[name] = (
            session.action_durations.get(name, 0.0) + time.perf_counter() - start
        )


def run_session(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig | None = None,
    *,
    profile_callbacks: bool = False,
) -> SessionResult:
    """One scheduling cycle: open on the snapshot, run the actions, close; the decisions.

    `profile_callbacks` also attributes time spent inside plugin callbacks to each plugin
    (PluginTiming.callbacks); it slows the session by a few percent.
    """
    from koordqueue.scheduler.framework.config import default_config

    session = open_session(
        snapshot,
        config if config is not None else default_config(),
        profile_callbacks=profile_callbacks,
    )
    run_actions(session)
    return session.close()
