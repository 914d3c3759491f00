"""The plugins' side of a session (Volcano's session_plugins.go): callback registration,
resolution by tiers and switches, and the dispatchers that apply the tier rules of SPEC 3.6.

Plugins register callbacks in `on_session_open` (`add_*_fn`); actions ask the dispatchers.
`Session` (session.py) is a `SessionPlugins` with the state the callbacks read and write.
The callbacks' signatures live in callbacks.py, the job queues in util.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any, Final, TypeVar

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api.job_info import JobInfo
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.queue_info import QueueInfo
from koordqueue.scheduler.api.task_info import TaskInfo
from koordqueue.scheduler.framework.callbacks import (
    PURPOSE_ALLOCATE,
    AllocatableFn,
    BestNodeFn,
    EventHandler,
    EvictableFn,
    HyperNodeGradientFn,
    HyperNodeOrderFn,
    JobEnqueuedFn,
    JobOrderFn,
    JobOrderKey,
    JobReadyFn,
    JobStarvingFn,
    JobValidFn,
    OverusedFn,
    PreemptiveFn,
    PrePredicateFn,
    QueueOrderFn,
    TaskEventFn,
    TaskOrderFn,
    TaskOrderKey,
    VictimQueueOrderFn,
    VictimTasksFn,
    VoteFn,
)
from koordqueue.scheduler.framework.config import PluginOption, SchedulerConfig
from koordqueue.scheduler.framework.interface import ExtensionPoint, Plugin, ValidateResult
from koordqueue.scheduler.framework.placement import (
    BatchNodeOrderFn,
    BatchPredicateFn,
    NodeOrderFn,
    PlacementEngine,
    PredicateFn,
)
from koordqueue.scheduler.framework.quiet import CloseCondition
from koordqueue.scheduler.framework.session_victims import VictimDispatch
from koordqueue.scheduler.framework.util import JobQueue, KeyedJobQueue, PriorityQueue

F = TypeVar("F", bound=Callable[..., Any])

# Enum members read in per-placement dispatchers, as module constants: on CPython 3.11 a
# member read off its enum class costs ~0.13 us against ~0.02 us for a module global.
_JOB_ORDER: Final = ExtensionPoint.JOB_ORDER
_QUEUE_ORDER: Final = ExtensionPoint.QUEUE_ORDER
_TASK_ORDER: Final = ExtensionPoint.TASK_ORDER
_PRE_PREDICATE: Final = ExtensionPoint.PRE_PREDICATE
_JOB_READY: Final = ExtensionPoint.JOB_READY
_ALLOCATABLE: Final = ExtensionPoint.ALLOCATABLE


class SessionPlugins(VictimDispatch):
    """The callbacks registered by a session's plugins and the dispatchers over them.

    The state the dispatchers read (`config`, `jobs`, `queues`, `placement`) is the
    session's: `Session` sets it before its plugins open.
    """

    config: SchedulerConfig
    jobs: MutableMapping[str, JobInfo]
    queues: dict[str, QueueInfo]
    placement: PlacementEngine

    def __init__(self, config: SchedulerConfig, *, profile_callbacks: bool) -> None:
        super().__init__()
        self.config = config
        self.profile_callbacks = profile_callbacks
        self.plugins: dict[str, Plugin] = {}
        self._fns: dict[ExtensionPoint, dict[str, Callable[..., Any]]] = {
            p: {} for p in ExtensionPoint
        }
        self._batch_predicates: dict[str, tuple[BatchPredicateFn, PredicateFn | None]] = {}
        self._batch_scores: dict[str, BatchNodeOrderFn] = {}
        self._handlers: list[EventHandler] = []
        self._on_allocate: list[TaskEventFn] = []
        self._on_deallocate: list[TaskEventFn] = []
        """The handlers' allocate / deallocate callbacks in registration order (fired once per
        placement: no per-event walk over the handlers and their None slots)."""
        self._victim_queue_order: dict[str, VictimQueueOrderFn] = {}
        self._enqueued: list[JobEnqueuedFn] = []
        self._resolved: dict[ExtensionPoint, list[list[tuple[str, Callable[..., Any]]]]] = {}
        self._flat_cache: dict[ExtensionPoint, list[Callable[..., Any]]] = {}
        self._task_order_keys: dict[str, TaskOrderKey] = {}
        self._job_order_keys: dict[str, JobOrderKey] = {}
        self._options: dict[str, PluginOption] = {}
        self._plugin_time: dict[str, list[float]] = {}
        """Plugin name -> [open, close, callbacks] seconds."""
        self._close_conditions: list[CloseCondition] = []
        self.bind_annotations: dict[str, dict[str, str]] = {}
        self.numa_assigned: dict[str, tuple[str, dict[str, frozenset[int]]]] = {}
        """numa-aware's cpus of each pod bound: task uid -> (node, resource -> cpus)."""
        """Task uid -> annotations a plugin wants written on the pod with its bind
        (deviceshare's device ids); only the tasks bound reach the result."""

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

    def add_job_order_fn(self, plugin: str, fn: JobOrderFn, key: JobOrderKey | None = None) -> None:
        """Compare two jobs: negative = left first, 0 = no opinion.

        `key`, when given, must order exactly like `fn` and change only when the job's own
        tasks change status (allocate then keeps its job queues by keys taken at push time,
        see `job_order_key`).
        """
        self._add(ExtensionPoint.JOB_ORDER, plugin, fn)
        if key is None:
            self._job_order_keys.pop(plugin, None)
        else:
            self._job_order_keys[plugin] = key

    def add_queue_order_fn(self, plugin: str, fn: QueueOrderFn) -> None:
        """Compare two queues: negative = left first."""
        self._add(ExtensionPoint.QUEUE_ORDER, plugin, fn)

    def add_task_order_fn(
        self, plugin: str, fn: TaskOrderFn, key: TaskOrderKey | None = None
    ) -> None:
        """Compare two tasks of one job: negative = left first.

        `key`, when given, must order exactly like `fn` (fn(a, b) < 0 iff key(a) < key(b),
        0 iff equal): a sort by keys then replaces the comparisons (`task_order_key`).
        """
        self._add(ExtensionPoint.TASK_ORDER, plugin, fn)
        if key is None:
            self._task_order_keys.pop(plugin, None)
        else:
            self._task_order_keys[plugin] = key

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

    def add_victim_tasks_fn(self, plugin: str, fn: VictimTasksFn) -> None:
        """Tasks a plugin wants evicted regardless of a preemptor (None abstains)."""
        self._add(ExtensionPoint.VICTIM_TASKS, plugin, fn)

    def add_hypernode_order_fn(self, plugin: str, fn: HyperNodeOrderFn) -> None:
        """Score candidate HyperNodes for a job (`enableHyperNodeOrder`); summed."""
        self._add(ExtensionPoint.HYPERNODE_ORDER, plugin, fn)

    def add_hypernode_gradient_fn(self, plugin: str, fn: HyperNodeGradientFn) -> None:
        """Which HyperNodes a job may be tried in, in groups (`enableHyperNodeGradient`);
        the first enabled plugin's answer is taken."""
        self._add(ExtensionPoint.HYPERNODE_GRADIENT, plugin, fn)

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
        timed = EventHandler(
            self._timed(plugin, handler.allocate) if handler.allocate else None,
            self._timed(plugin, handler.deallocate) if handler.deallocate else None,
        )
        self._handlers.append(timed)
        if timed.allocate is not None:
            self._on_allocate.append(timed.allocate)
        if timed.deallocate is not None:
            self._on_deallocate.append(timed.deallocate)

    def add_job_close_condition_fn(
        self, plugin: str, fn: CloseCondition
    ) -> None:
        """A close hook's per-job condition: (job, has a condition already) -> condition or
        None. The plugin applies it to `scan_jobs()` at close; the session applies it to
        quiet jobs through its memo."""
        self._close_conditions.append(fn)

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
        fns = self._flat_cache.get(point)  # asked per comparison: the cache read inline
        for fn in fns if fns is not None else self._flat(point):
            answer: int = fn(left, right)
            if answer != 0:
                return answer
        return 0

    def job_order_less(self, left: JobInfo, right: JobInfo) -> bool:
        """First plugin with an opinion decides; then creation time, then uid."""
        answer = self._order(_JOB_ORDER, left, right)
        if answer != 0:
            return answer < 0
        return (left.creation, left.uid) < (right.creation, right.uid)

    def job_order_compare(self, left: JobInfo, right: JobInfo) -> int:
        """The plugins' job order only (0 when none has an opinion; no fallback)."""
        return self._order(_JOB_ORDER, left, right)

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
        answer = self._order(_QUEUE_ORDER, left, right)
        if answer != 0:
            return answer < 0
        return (left.creation, left.name) < (right.creation, right.name)

    def task_order_less(self, left: TaskInfo, right: TaskInfo) -> bool:
        """First plugin with an opinion decides; then creation time, then uid."""
        answer = self._order(_TASK_ORDER, left, right)
        if answer != 0:
            return answer < 0
        return (left.creation, left.uid) < (right.creation, right.uid)

    def job_order_key(self) -> Callable[[JobInfo], tuple[Any, ...]] | None:
        """A sort key giving the order of `job_order_less` (the enabled plugins' keys in
        tier order, then creation time and uid), or None when an enabled job order function
        has no key. A job's key holds while its tasks keep their statuses: allocate, which
        changes only the tasks of the job it popped, may take it once per push."""
        keys: list[JobOrderKey] = []
        for tier in self._tiers(ExtensionPoint.JOB_ORDER):
            for name, _fn in tier:
                key = self._job_order_keys.get(name)
                if key is None:
                    return None
                keys.append(key)
        return lambda job: (*(key(job) for key in keys), job.creation, job.uid)

    def job_queue(self) -> JobQueue:
        """An empty queue of jobs in the job order, for actions that change only the job
        they popped: keyed when every enabled job order plugin has a key, else a heap of
        the comparisons."""
        key = self.job_order_key()
        if key is not None:
            return KeyedJobQueue(key)
        return PriorityQueue(self.job_order_less)

    def task_order_key(self) -> Callable[[TaskInfo], tuple[Any, ...]] | None:
        """A sort key giving the order of `task_order_less` (the enabled plugins' keys in
        tier order, then creation time and uid), or None when an enabled task order
        function has no key. Why: a job's tasks are sorted once per session; keys are
        computed once per task instead of a chain of callbacks per comparison."""
        keys: list[TaskOrderKey] = []
        for tier in self._tiers(ExtensionPoint.TASK_ORDER):
            for name, _fn in tier:
                key = self._task_order_keys.get(name)
                if key is None:
                    return None
                keys.append(key)
        if len(keys) == 1:
            only = keys[0]
            return lambda task: (only(task), task.creation, task.uid)
        return lambda task: (*(key(task) for key in keys), task.creation, task.uid)

    def pre_predicate(self, task: TaskInfo) -> str | None:
        """The first failure reason of any pre-predicate, else None."""
        fns = self._flat_cache.get(_PRE_PREDICATE)  # asked for every task
        for fn in fns if fns is not None else self._flat(_PRE_PREDICATE):
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

    def job_ready(self, job: JobInfo) -> bool:
        """AND over all plugins (no plugin = ready)."""
        fns = self._flat_cache.get(_JOB_READY)  # asked after every placement
        for fn in fns if fns is not None else self._flat(_JOB_READY):  # noqa: SIM110 (no generator per call)
            if not fn(job):
                return False
        return True

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

    def hypernode_scores(self, job: JobInfo, hypernodes: list[str]) -> dict[str, float]:
        """Every HyperNode's summed score for `job` (0 when no plugin scores it)."""
        total = dict.fromkeys(hypernodes, 0.0)
        for fn in self._flat(ExtensionPoint.HYPERNODE_ORDER):
            for name, score in fn(job, hypernodes).items():
                if name in total:
                    total[name] += score
        return total

    def hypernode_gradients(
        self, job: JobInfo, hypernode: str, purpose: str = PURPOSE_ALLOCATE,
        minimum: Resources | None = None,
    ) -> list[list[str]]:
        """The first enabled gradient plugin's groups of HyperNodes under `hypernode` to try
        `job` in; without one, `hypernode` alone. `minimum`: as HyperNodeGradientFn's (the
        sub-job form passes `JobInfo.pending_request()`)."""
        fns = self._flat(ExtensionPoint.HYPERNODE_GRADIENT)
        if not fns:
            return [[hypernode]]
        answer: list[list[str]] = fns[0](job, hypernode, purpose, minimum)
        return answer

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """All plugins must allow the queue to take the task."""
        fns = self._flat_cache.get(_ALLOCATABLE)  # asked for every task
        for fn in fns if fns is not None else self._flat(_ALLOCATABLE):  # noqa: SIM110 (no generator per call)
            if not fn(queue, task):
                return False
        return True

    def preemptive(self, queue: QueueInfo, tasks: list[TaskInfo]) -> bool:
        """All plugins must allow the queue to reclaim for `tasks` (no plugin = allowed)."""
        return all(fn(queue, tasks) for fn in self._flat(ExtensionPoint.PREEMPTIVE))

    def overused(self, queue: QueueInfo) -> bool:
        """Any plugin saying the queue is overused makes it so."""
        return any(fn(queue) for fn in self._flat(ExtensionPoint.OVERUSED))
