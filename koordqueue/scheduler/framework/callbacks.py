"""What a plugin's callbacks look like: one signature per extension point (Volcano's
api/types.go function types), and the small records some of them take.

Kept apart from session_plugins.py, which registers and dispatches them, so that plugins
and actions can name a signature or a record without the dispatch machinery.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api.job_info import JobInfo
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.queue_info import QueueInfo
from koordqueue.scheduler.api.task_info import TaskInfo
from koordqueue.scheduler.framework.interface import ValidateResult, Vote

JobOrderFn = Callable[[JobInfo, JobInfo], int]
QueueOrderFn = Callable[[QueueInfo, QueueInfo], int]
TaskOrderFn = Callable[[TaskInfo, TaskInfo], int]
TaskOrderKey = Callable[[TaskInfo], Any]
"""A sort key that orders tasks exactly like a plugin's task order function."""
JobOrderKey = Callable[[JobInfo], Any]
"""A sort key that orders jobs exactly like a plugin's job order function and changes only
when the job's own tasks change status."""
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
VictimTasksFn = Callable[[list[TaskInfo]], list[TaskInfo] | None]
"""(running tasks) -> the ones the plugin wants evicted (shuffle), or None to abstain."""
TaskEventFn = Callable[[TaskInfo], None]
HyperNodeOrderFn = Callable[[JobInfo, list[str]], Mapping[str, float]]
"""(job, candidate HyperNodes) -> score per HyperNode; summed over plugins."""
HyperNodeGradientFn = Callable[[JobInfo, str, str, Resources | None], list[list[str]]]
"""(job, HyperNode to search under, purpose, minimum) -> HyperNodes to try, in groups tried in
order. `minimum`: what a HyperNode must hold, None for the job's minResources (Volcano's
HyperNodeGradientForJobFn); a sub-job's pending requests for HyperNodeGradientForSubJobFn."""
GANG_PREEMPT: Final = "gangpreempt"
GANG_RECLAIM: Final = "gangreclaim"
"""Kinds of gang-aware eviction (`EvictionContext.kind`: the action's name)."""
PURPOSE_ALLOCATE: Final = "allocate"
PURPOSE_EVICT: Final = "evict"
"""Why gradients are asked: to place a job, or to find where evictions could make room."""


@dataclass(frozen=True, slots=True)
class EvictionContext:
    """Who evicts, for whom and where (Volcano v1.15's EvictionContext): `kind` is the
    action (gangpreempt or gangreclaim), `job` the starving job, `hypernode` the domain
    searched."""

    kind: str
    job: JobInfo
    hypernode: str


UnifiedEvictableFn = Callable[[EvictionContext, list[TaskInfo]], list[TaskInfo] | None]
"""(context, candidates) -> victims for gang-aware eviction, or None to abstain."""


@dataclass(frozen=True, slots=True)
class EventHandler:
    """Callbacks fired when a task takes (allocate) or gives back (deallocate) resources."""

    allocate: TaskEventFn | None = None
    deallocate: TaskEventFn | None = None


__all__ = [
    "GANG_PREEMPT",
    "GANG_RECLAIM",
    "PURPOSE_ALLOCATE",
    "PURPOSE_EVICT",
    "AllocatableFn",
    "BestNodeFn",
    "EventHandler",
    "EvictableFn",
    "EvictionContext",
    "HyperNodeGradientFn",
    "HyperNodeOrderFn",
    "JobEnqueuedFn",
    "JobOrderFn",
    "JobOrderKey",
    "JobReadyFn",
    "JobStarvingFn",
    "JobValidFn",
    "OverusedFn",
    "PrePredicateFn",
    "PreemptiveFn",
    "QueueOrderFn",
    "TaskEventFn",
    "TaskOrderFn",
    "TaskOrderKey",
    "UnifiedEvictableFn",
    "VictimQueueOrderFn",
    "VictimTasksFn",
    "VoteFn",
]
