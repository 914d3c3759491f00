"""Session: one scheduling cycle over a snapshot, with the extension-point dispatchers.

Plugins register callbacks in `on_session_open`; actions ask the dispatchers, which apply
the tier rules of SPEC 3.6. All mutation of tasks and nodes goes through the `*_task`
methods used by `Statement`, which keep the job index, node accounting, numpy mirror and
event handlers in step.
"""

from __future__ import annotations

import gc
import heapq
import time
import uuid
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import numpy as np

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import names
from koordqueue.scheduler.api.fit_errors import FitErrors
from koordqueue.scheduler.api.job_info import JobInfo, PodGroupPhase
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.queue_info import QueueInfo
from koordqueue.scheduler.api.resource import sum_resources
from koordqueue.scheduler.api.task_info import TaskInfo, TaskStatus
from koordqueue.scheduler.framework.config import PluginOption, SchedulerConfig
from koordqueue.scheduler.framework.indexed import (
    IndexedSnapshot,
    QueueSums,
    SnapshotIndex,
    may_change,
)
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
TaskOrderKey = Callable[[TaskInfo], Any]
JobOrderKey = Callable[[JobInfo], Any]
"""A sort key that orders jobs exactly like a plugin's job order function and changes only
when the job's own tasks change status."""
"""A sort key that orders tasks exactly like a plugin's task order function."""
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

# Enum members read in per-placement dispatchers, as module constants: on CPython 3.11 a
# member read off its enum class costs ~0.13 us against ~0.02 us for a module global.
_JOB_ORDER: Final = ExtensionPoint.JOB_ORDER
_QUEUE_ORDER: Final = ExtensionPoint.QUEUE_ORDER
_TASK_ORDER: Final = ExtensionPoint.TASK_ORDER
_PRE_PREDICATE: Final = ExtensionPoint.PRE_PREDICATE
_JOB_READY: Final = ExtensionPoint.JOB_READY
_ALLOCATABLE: Final = ExtensionPoint.ALLOCATABLE
_BEST_NODE: Final = ExtensionPoint.BEST_NODE
_ALLOCATED: Final = TaskStatus.ALLOCATED
_PENDING: Final = TaskStatus.PENDING


@dataclass(frozen=True, slots=True)
class EventHandler:
    """Callbacks fired when a task takes (allocate) or gives back (deallocate) resources."""

    allocate: TaskEventFn | None = None
    deallocate: TaskEventFn | None = None


_QUIET_ACTIONS: frozenset[str] = frozenset(
    {"enqueue", "allocate", "backfill", "preempt", "reclaim"}
)
"""Built-in actions: on a job they do not write they only ask job-valid (see `_fill_memo`)."""
_VALID_ACTIONS: frozenset[str] = frozenset({"allocate", "preempt", "reclaim"})
"""Actions that record the job-valid message of every job they scan."""
_QUIET_PLUGINS: frozenset[str] = frozenset(
    {
        "priority", "gang", "conformance", "overcommit", "drf", "predicates", "proportion",
        "nodeorder", "binpack", "capacity", "pdb",
    }
)
"""Built-in plugins whose job-valid and close answers depend on the job alone."""
_BUILTIN_PLUGINS = "koordqueue.scheduler.plugins."


class JobView(MutableMapping[str, JobInfo]):
    """The session's jobs over an indexed snapshot: its own copies over the snapshot's
    shared jobs, without the jobs of queues the session does not know.

    Why a view: copying a mapping of every job in the cluster at open is what made a
    session grow with the cluster; lookups by uid stay O(1), full iteration (for plugins
    that want every job) sorts once.
    """

    __slots__ = ("_base", "_order", "_own", "_queues")

    def __init__(
        self, base: Mapping[str, JobInfo], queues: Mapping[str, QueueInfo], own: dict[str, JobInfo]
    ) -> None:
        self._base = base
        self._queues = queues
        self._own = own
        self._order: list[str] | None = None

    def __getitem__(self, uid: str) -> JobInfo:
        job = self._own.get(uid)
        if job is not None:
            return job
        job = self._base[uid]
        if job.queue not in self._queues:
            raise KeyError(uid)
        return job

    def get(self, uid: str, default: Any = None) -> Any:
        job = self._own.get(uid)
        if job is not None:
            return job
        job = self._base.get(uid)
        return job if job is not None and job.queue in self._queues else default

    def __contains__(self, uid: object) -> bool:
        return self.get(uid) is not None  # type: ignore[arg-type]

    def __setitem__(self, uid: str, job: JobInfo) -> None:
        self._own[uid] = job

    def __delitem__(self, uid: str) -> None:
        raise TypeError("a session never drops a job")

    def _uids(self) -> list[str]:
        if self._order is None:
            queues = self._queues
            self._order = sorted(u for u, j in self._base.items() if j.queue in queues)
        return self._order

    def __iter__(self) -> Iterator[str]:
        return iter(self._uids())

    def __len__(self) -> int:
        return len(self._uids())


class NodeView(MutableMapping[str, NodeInfo]):
    """The session's nodes by name over an indexed snapshot: its own copies over the
    index's shared nodes. Why: copying a 5,000-entry mapping at every open (and having the
    collector walk the young copy) cost as much as the lookups it served."""

    __slots__ = ("_base", "_own")

    def __init__(self, base: Mapping[str, NodeInfo]) -> None:
        self._base = base
        self._own: dict[str, NodeInfo] = {}

    def __getitem__(self, name: str) -> NodeInfo:
        node = self._own.get(name)
        return node if node is not None else self._base[name]

    def get(self, name: str, default: Any = None) -> Any:
        node = self._own.get(name)
        return node if node is not None else self._base.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._base or name in self._own

    def __setitem__(self, name: str, node: NodeInfo) -> None:
        if name not in self._base:
            raise KeyError(name)  # a session never adds a node
        self._own[name] = node

    def __delitem__(self, name: str) -> None:
        raise TypeError("a session never drops a node")

    def __iter__(self) -> Iterator[str]:
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)


class KeyedJobQueue:
    """A job queue ordered by keys taken at push time (`Session.job_order_key`).

    Why: a heap of comparisons asks every job order plugin twice per comparison, ~16
    comparisons per pop; a key is computed once per push. The same pops as the session's
    comparisons while a queued job's tasks keep their statuses (enqueue changes only the
    phase of the job it popped, allocate only the tasks of the job it popped, which it
    pushes again with a fresh key); the keys end with creation time and uid, a total
    order, so the minimum is unique.
    """

    __slots__ = ("_count", "_heap", "_key")

    def __init__(self, key: Callable[[JobInfo], tuple[Any, ...]]) -> None:
        self._key = key
        self._heap: list[tuple[tuple[Any, ...], int, JobInfo]] = []
        self._count = 0  # a tie-break that never reaches the job (uids make keys unique)

    def push(self, job: JobInfo) -> None:
        """Insert a job under its current key."""
        self._count += 1
        heapq.heappush(self._heap, (self._key(job), self._count, job))

    def pop(self) -> JobInfo:
        """Remove and return the first job."""
        return heapq.heappop(self._heap)[2]

    def empty(self) -> bool:
        """True when nothing is queued."""
        return not self._heap


JobQueue = PriorityQueue[JobInfo] | KeyedJobQueue
"""A queue of jobs in the session's job order (`Session.job_queue`)."""


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
        self.pdbs = snapshot.pdbs
        self._index: SnapshotIndex | None = (
            snapshot.index if isinstance(snapshot, IndexedSnapshot) else None
        )
        self._own_nodes: set[str] | None = None
        """Indexed: names of the nodes this session copied (the rest are the snapshot's)."""
        self.node_list: list[NodeInfo] = []
        self.nodes: MutableMapping[str, NodeInfo] = {}
        dims: set[str] = set()
        if self._index is None:
            self._open_plain(snapshot, dims)
        else:
            self._open_indexed(snapshot, self._index, dims)
        if self._index is not None and not self._own_nodes:
            self.tensor = self._index.tensor_for(self.node_list, sorted(dims), lend=True)
            self.node_list = self.tensor.nodes  # one list: a node copied replaces its entry
            self.nodes = NodeView(self._index.nodes_by_name())
        else:
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
        self.action_durations: dict[str, float] = {}
        self.plugins: dict[str, Plugin] = {}
        self._close_conditions: list[Callable[[JobInfo, bool], str | None]] = []
        self._open_plugins()
        self._quiet = self._index is not None and self._quiet_allowed()
        """Skip jobs the session does not write in its scans (their verdicts are memoised)."""
        if self._index is not None:
            if self._quiet:
                self._fill_memo(self._index)
                self.job_conditions.update(self._index.memo.valid)
            else:
                self._own_all()

    # --- opening ------------------------------------------------------------------------------
    def _open_plain(self, snapshot: ClusterSnapshot, dims: set[str]) -> None:
        """Copy jobs that may change and every node, and account every placed task."""
        jobs: dict[str, JobInfo] = {}
        self.jobs: MutableMapping[str, JobInfo] = jobs
        self._shared: set[str] = set()
        """Jobs still the snapshot's own objects (copy-on-write: see `_private`)."""
        self._originals: Mapping[str, JobInfo] = {}
        originals: dict[str, JobInfo] = {}
        self._originals = originals
        self._own: dict[str, JobInfo] = {}
        for original in sorted(snapshot.jobs, key=lambda j: j.uid):
            if original.queue not in self.queues:
                self.warnings.append(
                    names.QUEUE_NOT_FOUND_WARNING.format(job=original.uid, queue=original.queue)
                )
                continue
            originals[original.uid] = original
            if _may_change(original):
                jobs[original.uid] = original.clone()
            else:
                jobs[original.uid] = original
                self._shared.add(original.uid)
        self._original_phase = {uid: job.phase for uid, job in jobs.items()}
        ready = sorted((n for n in snapshot.nodes if n.ready), key=lambda n: n.name)
        self.nodes = {}
        job_tasks = {t for job in jobs.values() for t in job.tasks}
        for original_node in ready:
            node = original_node.clone()
            self.nodes[node.name] = node
            for foreign in original_node.tasks.values():
                if foreign.uid not in job_tasks:
                    node.add_task(foreign.clone())
        seen: set[int] = set()  # pods share request objects: each one's names read once
        nodes = self.nodes
        for job in jobs.values():  # one pass: place the placed tasks, read the request names
            for task in job.tasks.values():
                request, resreq = task.request, task.resreq
                if id(request) not in seen:
                    seen.add(id(request))
                    dims.update(request)
                if id(resreq) not in seen:
                    seen.add(id(resreq))
                    dims.update(resreq)
                if task.status is _PENDING or task.node_name is None:
                    continue
                host = nodes.get(task.node_name)
                if host is not None:
                    host.add_task(task)
        self.node_list = list(self.nodes.values())
        self.total_resource: Resources = sum_resources(n.allocatable for n in self.node_list)
        for node in self.node_list:
            dims.update(node.allocatable)

    def _open_indexed(
        self, snapshot: ClusterSnapshot, index: SnapshotIndex, dims: set[str]
    ) -> None:
        """Share the snapshot's nodes and quiet jobs (copy-on-write); copy the active jobs.

        The snapshot's nodes already account every placed task of its jobs, so nothing is
        re-accounted; totals and dimensions come from the index's sums.
        """
        queues = self.queues
        self._shared = set()
        self._originals = index.jobs
        own: dict[str, JobInfo] = {}
        self._own = own
        self.jobs = JobView(index.jobs, queues, own)
        self._own_nodes = set()
        missing = sorted(
            uid for name, sums in index.queues.items() if name not in queues for uid in sums.jobs
        )
        nodes = snapshot.nodes
        # read-only unless jobs of missing queues come off their nodes below (else the
        # index's tensor hands out the session's list: __init__)
        self.node_list = nodes if isinstance(nodes, list) and not missing else list(nodes)
        if missing:
            self.nodes = {n.name: n for n in self.node_list}
        for uid in missing:
            job = index.jobs[uid]
            self.warnings.append(names.QUEUE_NOT_FOUND_WARNING.format(job=uid, queue=job.queue))
        for uid in missing:  # their tasks are not the session's: off (copied) nodes
            for task in index.jobs[uid].tasks.values():
                if task.status is TaskStatus.PENDING or task.node_name is None:
                    continue
                if task.node_name in self.nodes:
                    self._writable(task.node_name).remove_task(task)
        for uid in sorted(index.active):
            job = index.jobs[uid]
            if job.queue in queues:
                own[uid] = job.clone()
        self._original_phase = {uid: job.phase for uid, job in own.items()}
        self.total_resource = index.allocatable.resources()
        dims.update(self.total_resource)
        for name, sums in index.queues.items():
            if name in queues:
                dims.update(sums.dims.counts)

    def existing_affinity_pods(self) -> int | None:
        """How many tasks on the nodes carry inter-pod (anti-)affinity terms, per the index
        (at least the true number while the session has placed none), or None when unknown
        (a plain snapshot): lets the counts skip walking every task when it is 0."""
        return self._index.affinity_pods if self._index is not None else None

    def _own_all(self) -> None:
        """Indexed but not quiet (a plugin or action outside the built-in set): every job
        is scanned, as with a plain snapshot; quiet jobs stay shared until written."""
        for uid in self.jobs:
            self._original_phase.setdefault(uid, self.jobs[uid].phase)

    def _quiet_allowed(self) -> bool:
        """Quiet jobs may be skipped only when every plugin and action is a built-in one
        whose view of a job it does not write depends on that job alone."""
        if not set(self.config.actions) <= _QUIET_ACTIONS:
            return False
        for name, plugin in self.plugins.items():
            module = type(plugin).__module__
            if name not in _QUIET_PLUGINS or not module.startswith(_BUILTIN_PLUGINS):
                return False
        return True

    def _fill_memo(self, index: SnapshotIndex) -> None:
        """Work out the verdict of every quiet job the memo lacks (all of them when the
        configuration or the set of queues changed)."""
        memo = index.memo
        key = (self.config, frozenset(self.queues))
        if memo.key != key:
            memo.reset(key, index.jobs)
        scans = bool(_VALID_ACTIONS & set(self.config.actions))
        own, queues = self._own, self.queues
        for uid in memo.missing:
            job = index.jobs.get(uid)
            if job is None or uid in own or job.queue not in queues:
                memo.drop(uid)
                continue
            valid: str | None = None
            if scans:
                invalid = self.job_valid(job)
                if invalid is not None:
                    valid = invalid.message
            closing: str | None = None
            for fn in self._close_conditions:
                answer = fn(job, valid is not None or closing is not None)
                if answer is not None:
                    closing = answer
            new = self._phase_of(job, valid is not None or closing is not None)
            update = (
                PhaseUpdate(uid, job.namespace, job.name, job.phase, new)
                if new is not job.phase
                else None
            )
            memo.put(job, valid, closing, update)
        memo.missing = set()

    def scan_jobs(self) -> list[JobInfo]:
        """The jobs an action or close hook must visit, by uid: every job, or with an indexed
        snapshot only the jobs this session may write (active or evicted from); the others'
        verdicts are memoised (`QuietMemo`)."""
        if not self._quiet:
            return list(self.jobs.values())
        own = self._own
        return [own[uid] for uid in sorted(own)]

    def original_job(self, uid: str) -> JobInfo:
        """The snapshot's (unwritten) job: its state when the session opened."""
        return self._originals[uid]

    def add_job_close_condition_fn(
        self, plugin: str, fn: Callable[[JobInfo, bool], str | None]
    ) -> None:
        """A close hook's per-job condition: (job, has a condition already) -> condition or
        None. The plugin applies it to `scan_jobs()` at close; the session applies it to
        quiet jobs through its memo."""
        self._close_conditions.append(fn)

    def nodes_used(self) -> Resources:
        """Sum of every node's used resources (from the index when no node was copied)."""
        if self._index is not None and not self._own_nodes:
            return self._index.used.resources()
        return sum_resources(n.accounting()[1] for n in self.node_list)

    def queue_sums(self) -> Mapping[str, QueueSums] | None:
        """The index's per-queue sums over every job (None with a plain snapshot)."""
        return self._index.queues if self._index is not None else None

    def _writable(self, name: str) -> NodeInfo:
        """The session's own copy of node `name` (copy-on-write), with this session's copies
        of its jobs' tasks swapped in."""
        node = self.nodes[name]
        own_nodes = self._own_nodes
        if own_nodes is None or name in own_nodes:
            return node
        own_nodes.add(name)
        copy = node.copy()
        own = self._own
        for uid, task in copy.tasks.items():
            job = own.get(task.job)
            if job is not None:
                mine = job.tasks.get(uid)
                if mine is not None and mine is not task:
                    copy.tasks[uid] = mine  # same uid and request: accounting unchanged
        self.nodes[name] = copy
        i = node.index
        tensor: NodeTensor | None = getattr(self, "tensor", None)
        if tensor is not None and 0 <= i < len(self.node_list) and self.node_list[i] is node:
            self.node_list[i] = copy
            tensor.nodes[i] = copy
        else:  # before the tensor numbered the nodes
            self.node_list[self.node_list.index(node)] = copy
        return copy

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
        """Run the plugins' close hooks and render the decisions (the index's tensor, if
        lent, is given back: the session must not place anything after)."""
        if self._quiet and self._index is not None:
            # close-hook conditions of the jobs left quiet (memoised; the hooks visit only
            # `scan_jobs()`)
            own = self._own
            for uid, message in self._index.memo.closing.items():
                if uid not in own:
                    self.job_conditions[uid] = message
        for name, plugin in self.plugins.items():
            start = time.perf_counter()
            plugin.on_session_close(self)
            self._plugin_time[name][1] += time.perf_counter() - start
        result = self._result()
        if self._index is not None:
            self._index.give_back(self.tensor)
        return result

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
        timed = EventHandler(
            self._timed(plugin, handler.allocate) if handler.allocate else None,
            self._timed(plugin, handler.deallocate) if handler.deallocate else None,
        )
        self._handlers.append(timed)
        if timed.allocate is not None:
            self._on_allocate.append(timed.allocate)
        if timed.deallocate is not None:
            self._on_deallocate.append(timed.deallocate)

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

    def has_best_node_fns(self) -> bool:
        """Whether any enabled plugin picks nodes itself (disables the argmax fast path)."""
        return bool(self._flat(ExtensionPoint.BEST_NODE))

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

    # --- placement helpers used by actions --------------------------------------------------
    def select_node(self, task: TaskInfo) -> tuple[NodeInfo, bool] | FitErrors:
        """The node to use for `task` and whether it is a pipeline placement, or why none."""
        best_fns = self._flat_cache.get(_BEST_NODE)  # asked per placement
        if best_fns is None:
            best_fns = self._flat(_BEST_NODE)
        if best_fns:
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
        for fn in self._on_allocate if allocate else self._on_deallocate:
            fn(task)

    def allocate_task(self, task: TaskInfo, node: NodeInfo) -> None:
        """Task takes idle resources on node (Allocated)."""
        name = node.name
        own_nodes = self._own_nodes
        # `_writable(name)`, inline for the nodes it would not copy (once per placement)
        node = self.nodes[name] if own_nodes is None or name in own_nodes else self._writable(name)
        self.jobs[task.job].allocate_pending(task)
        node.add_task(task)
        self.tensor.refresh(node, task.resreq)
        if self.fit_errors:
            self.fit_errors.pop(task.uid, None)
        for fn in self._on_allocate:  # `_fire(True, task)`, inline: once per placement
            fn(task)

    def pipeline_task(self, task: TaskInfo, node: NodeInfo) -> None:
        """Task reserves future-idle resources on node (Pipelined)."""
        node = self._writable(node.name)
        self.jobs[task.job].update_task_status(task, TaskStatus.PIPELINED)
        node.add_task(task)
        self.tensor.refresh(node)
        self.fit_errors.pop(task.uid, None)
        self._fire(True, task)

    def unallocate_task(self, task: TaskInfo) -> None:
        """Undo allocate/pipeline: back to Pending, resources returned."""
        node = self._writable(task.node_name or "")
        node.remove_task(task)
        self.jobs[task.job].update_task_status(task, TaskStatus.PENDING)
        task.node_name = None
        self.tensor.refresh(node)
        self._fire(False, task)

    def _private(self, task: TaskInfo) -> TaskInfo:
        """The session's own copy of `task`, copying its job first if it is still shared.

        Why: jobs with nothing to place (no pending, allocated or pipelined task, already
        enqueued) are not cloned at open; only eviction writes them, so the job is copied
        then and its tasks swapped in on the nodes the session already copied (the others
        swap them in when copied). A caller may still hold the shared task (a victim list):
        it is resolved by uid.
        """
        uid = task.job
        if self._index is not None:
            if uid not in self._own and uid in self.jobs:
                original = self.jobs[uid]
                job = self._own[uid] = original.clone()
                self._original_phase.setdefault(uid, original.phase)
                self._swap_in(job)
        elif uid in self._shared:
            self._shared.discard(uid)
            job = self.jobs[uid].clone()
            self.jobs[uid] = job
            self._swap_in(job)
        owner = self.jobs.get(uid)
        return owner.tasks.get(task.uid, task) if owner is not None else task

    def _swap_in(self, job: JobInfo) -> None:
        """Put a newly copied job's tasks on the session's own nodes in place of the old."""
        own_nodes = self._own_nodes
        for copy in job.tasks.values():
            name = copy.node_name or ""
            if own_nodes is not None and name not in own_nodes:
                continue
            node = self.nodes.get(name)
            if node is not None and copy.uid in node.tasks:
                node.tasks[copy.uid] = copy

    def evict_task(self, task: TaskInfo) -> None:
        """Task becomes Releasing: its resources turn into future idle."""
        task = self._private(task)
        node = self._writable(task.node_name or "")
        self.jobs[task.job].update_task_status(task, TaskStatus.RELEASING)
        node.update_task(task)
        self.tensor.refresh(node)
        self._fire(False, task)

    def unevict_task(self, task: TaskInfo, previous: TaskStatus) -> None:
        """Undo evict: restore the previous status."""
        task = self._private(task)
        node = self._writable(task.node_name or "")
        self.jobs[task.job].update_task_status(task, previous)
        node.update_task(task)
        self.tensor.refresh(node)
        self._fire(True, task)

    def dispatch_bind(self, task: TaskInfo) -> None:
        """Commit of an allocation: the task is Binding and a bind decision is recorded."""
        self.jobs[task.job].bind_allocated(task)
        # `Bind(...)` without the generated `__new__`'s frame (~0.2 vs ~0.37 us, per pod)
        fields = (task.uid, task.namespace, task.name, task.job, task.node_name or "")
        self.binds.append(tuple.__new__(Bind, fields))

    def dispatch_allocated(self, job_uid: str) -> None:
        """Bind every still-Allocated task of a job that is ready."""
        job = self.jobs[job_uid]
        leftover = job.task_status_index.get(_ALLOCATED)
        if leftover and self.job_ready(job):
            for task in list(leftover.values()):
                self.dispatch_bind(task)

    def record_eviction(self, task: TaskInfo, node: str, reason: str) -> None:
        """Commit of an eviction."""
        self.evictions.append(Eviction(task.uid, task.namespace, task.name, task.job, node, reason))

    # --- results -----------------------------------------------------------------------------
    def _phase(self, job: JobInfo) -> PodGroupPhase:
        return self._phase_of(job, job.uid in self.job_conditions)

    @staticmethod
    def _phase_of(job: JobInfo, unschedulable: bool) -> PodGroupPhase:
        return job.session_phase(unschedulable)

    def _result(self) -> SessionResult:
        updates: list[PhaseUpdate] = []
        reservations: list[Reservation] = []
        fit_errors: dict[str, FitErrors] = {}
        for job in self.scan_jobs():
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
        if self._quiet and self._index is not None:
            updates = self._with_quiet_updates(updates)
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

    def _with_quiet_updates(self, scanned: list[PhaseUpdate]) -> list[PhaseUpdate]:
        """The memoised phase updates of the jobs left quiet merged, by uid, with the scanned
        jobs' ones: a handful of bisections, then one copy of the memo's list in slices
        (nothing to merge: the memo's list itself; callers copy it into the result)."""
        assert self._index is not None
        memo = self._index.memo
        order, memoised = memo.order, memo.updates
        size = len(order)
        # (position, 0, k): scanned update k goes before memo entry `position`;
        # (position, 1, 0): memo entry `position` is dropped (its job was written this
        # session: its own update, if any, is among the scanned ones).
        events: list[tuple[int, int, int]] = []
        for uid in self._own:
            i = bisect_left(order, uid)
            if i < size and order[i] == uid:
                events.append((i, 1, 0))
        for k, update in enumerate(scanned):
            events.append((bisect_left(order, update.job), 0, k))
        if not events:
            return memoised
        events.sort()
        out: list[PhaseUpdate] = []
        at = 0
        for position, drop, k in events:
            if position > at:
                out += memoised[at:position]
                at = position
            if drop:
                at = position + 1
            else:
                out.append(scanned[k])
        out += memoised[at:]
        return out


_may_change = may_change
"""Which jobs a session copies at open (a module attribute: tests swap it to copy all)."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (if it was on), back on after.

    Why: a session's open (job clones, plugin state) and its placements (statuses, resource
    lists, operations, binds) allocate ~10^5 short-lived objects among the ~10^5 long-lived
    ones of the snapshot; the allocation count triggers young collections every few hundred
    objects and, now and then, a full one that walks every object (10-20 % of a session's
    CPU on bench_allocate's headline). Reference counting still frees everything acyclic at
    once; cycles made meanwhile are collected at the next collection after the block.
    Decisions do not depend on it.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def open_session(
    snapshot: ClusterSnapshot, config: SchedulerConfig, *, profile_callbacks: bool = False
) -> Session:
    """Clone the snapshot into session state and open every configured plugin (with the
    cyclic collector paused, see `gc_paused`)."""
    with gc_paused():
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
