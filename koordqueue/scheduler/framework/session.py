"""Session: one scheduling cycle's state over a snapshot (Volcano's session.go).

Opening copies (or, over an indexed snapshot, shares copy-on-write: `views.py`) the jobs and
nodes, and opens the configured plugins; their callbacks and the dispatchers actions ask
live in `SessionPlugins` (session_plugins.py), which `Session` extends. All mutation of tasks
and nodes goes through the `*_task` methods used by `Statement`, which keep the job index,
node accounting, numpy mirror and event handlers in step. Jobs a session does not write are
answered from the quiet memo (`quiet.py`).
"""

from __future__ import annotations

import gc
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from functools import cached_property
from typing import Final

import numpy as np

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import names
from koordqueue.scheduler.api.fit_errors import FitErrors
from koordqueue.scheduler.api.job_info import JobInfo, PodGroupPhase
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.queue_info import QueueInfo
from koordqueue.scheduler.api.resource import sum_resources
from koordqueue.scheduler.api.task_info import TaskInfo, TaskStatus
from koordqueue.scheduler.framework.callbacks import EventHandler, EvictableFn
from koordqueue.scheduler.framework.config import SchedulerConfig
from koordqueue.scheduler.framework.indexed import (
    IndexedSnapshot,
    QueueSums,
    SnapshotIndex,
    may_change,
    placed,
)
from koordqueue.scheduler.framework.interface import Action, ExtensionPoint
from koordqueue.scheduler.framework.node_tensor import NodeTensor
from koordqueue.scheduler.framework.placement import BoolArray, PlacementEngine
from koordqueue.scheduler.framework.quiet import fill_memo, merge_updates, quiet_allowed
from koordqueue.scheduler.framework.registry import get_action, get_plugin_builder
from koordqueue.scheduler.framework.result import (
    Bind,
    ClusterSnapshot,
    Eviction,
    PhaseUpdate,
    PluginTiming,
    Reservation,
    SessionResult,
)
from koordqueue.scheduler.framework.session_plugins import SessionPlugins
from koordqueue.scheduler.framework.skips import GANG_NOT_READY, SkipRecord
from koordqueue.scheduler.framework.topology import SessionTopology
from koordqueue.scheduler.framework.util import JobQueue, KeyedJobQueue
from koordqueue.scheduler.framework.views import JobView, NodeView

__all__ = [
    "EventHandler",
    "EvictableFn",
    "JobQueue",
    "KeyedJobQueue",
    "Session",
    "gc_paused",
    "open_session",
    "run_actions",
    "run_session",
]
# (EventHandler and EvictableFn are callbacks.py's names, JobQueue and KeyedJobQueue
# util.py's, re-exported: plugins and actions import everything of the session from here)

_BEST_NODE: Final = ExtensionPoint.BEST_NODE
_ALLOCATED: Final = TaskStatus.ALLOCATED
_PENDING: Final = TaskStatus.PENDING


class Session(SessionPlugins):
    """Mutable scheduling state for one cycle, with its plugins' callbacks (the base)."""

    def __init__(
        self, snapshot: ClusterSnapshot, config: SchedulerConfig, *, profile_callbacks: bool = False
    ) -> None:
        super().__init__(config, profile_callbacks=profile_callbacks)
        self.uid = uuid.uuid4().hex
        self.started = time.perf_counter()
        self.warnings: list[str] = []
        self.queues: dict[str, QueueInfo] = {q.name: q for q in snapshot.queues}
        self.namespace_labels = snapshot.namespace_labels
        self.pdbs = snapshot.pdbs
        self.resource_quotas, self.hypernodes = snapshot.resource_quotas, snapshot.hypernodes
        self.numatopologies, self.node_usage = snapshot.numatopologies, snapshot.node_usage
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
        self.skips = SkipRecord()
        """Why the actions left each task unplaced (framework/skips.py)."""
        self.binds: list[Bind] = []
        self.evictions: list[Eviction] = []
        self.action_durations: dict[str, float] = {}
        self._open_plugins()
        actions = self._configured_actions() if self._index is not None else None
        self._quiet = actions is not None and quiet_allowed(actions, self.plugins.values())
        """Skip jobs the session does not write in its scans (their verdicts are memoised)."""
        if self._index is not None:
            if self._quiet:
                assert actions is not None
                self._fill_memo(self._index, scans=any(a.scans_valid for a in actions))
                self.job_conditions.update(self._index.memo.valid)
            else:
                self._own_all()

    @cached_property
    def topology(self) -> SessionTopology:
        """The session's HyperNode tree (framework/topology.py), built on first use."""
        return SessionTopology(self.hypernodes, self.node_list)

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
        dropped: list[JobInfo] = []
        for original in sorted(snapshot.jobs, key=lambda j: j.uid):
            if original.queue not in self.queues:
                self.warnings.append(
                    names.QUEUE_NOT_FOUND_WARNING.format(job=original.uid, queue=original.queue)
                )
                dropped.append(original)
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
        for job in dropped:  # not scheduled, but their placed pods still hold their nodes
            for task in placed(job):
                host = nodes.get(task.node_name or "")
                if host is not None and task.uid not in host.tasks:
                    host.add_task(task.clone())
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
        # read-only (the index's tensor hands out the session's list: __init__)
        self.node_list = nodes if isinstance(nodes, list) else list(nodes)
        for uid in missing:  # dropped; their placed pods stay on their nodes (as in Volcano)
            job = index.jobs[uid]
            self.warnings.append(names.QUEUE_NOT_FOUND_WARNING.format(job=uid, queue=job.queue))
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

    def _configured_actions(self) -> list[Action] | None:
        """The configured actions, or None when one is not registered (`run_actions` says
        so; the session just does not skip quiet jobs)."""
        try:
            return [get_action(name) for name in self.config.actions]
        except LookupError:
            return None

    def _fill_memo(self, index: SnapshotIndex, *, scans: bool) -> None:
        """The memo's verdicts on every quiet job it lacks (see `quiet.fill_memo`); `scans`:
        an action records job-valid messages."""
        fill_memo(
            index.memo, key=(self.config, frozenset(self.queues)), jobs=index.jobs,
            own=self._own, queues=self.queues, job_valid=self.job_valid if scans else None,
            close_conditions=self._close_conditions,
        )

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

    # --- placement helpers used by actions --------------------------------------------------
    def select_node(
        self, task: TaskInfo, within: BoolArray | None = None
    ) -> tuple[NodeInfo, bool] | FitErrors:
        """The node to use for `task` and whether it is a pipeline placement, or why none
        (among the nodes `within` marks, when given: one HyperNode's)."""
        best_fns = self._flat_cache.get(_BEST_NODE)  # asked per placement
        if best_fns is None:
            best_fns = self._flat(_BEST_NODE)
        if best_fns:
            for future in (False, True):
                idx, scores = self.placement.candidates(task, future=future, within=within)
                if len(idx):
                    scored = [
                        (self.node_list[i], float(s))
                        for i, s in zip(idx.tolist(), scores.tolist(), strict=True)
                    ]
                    chosen = self.best_node(task, scored) or scored[int(np.argmax(scores))][0]
                    return chosen, future
        else:
            choice = self.placement.select(task, within)
            if choice is not None:
                return self.node_list[choice[0]], choice[1]
        return self.placement.fit_errors(task, within)

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
                    if status is TaskStatus.ALLOCATED:
                        # placed, kept for a gang only pipelined (its pending best-effort
                        # members count, as Volcano's IsPipelined), never bound: it waits
                        # for the gang, whatever an earlier action said (backfill's task
                        # was "BestEffort" in allocate's entry)
                        self.skips.task(task.uid, job.uid, GANG_NOT_READY)
            for task in job.task_status_index.get(TaskStatus.PENDING, {}).values():
                errors = self.fit_errors.get(task.uid)
                if errors is not None:
                    fit_errors[task.uid] = errors
        if self._quiet and self._index is not None:
            updates = merge_updates(self._index.memo, self._own, updates)
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
            skips=self.skips,
            bind_annotations=self.bind_annotations,
            numa_assigned=self.numa_assigned,
        )


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
