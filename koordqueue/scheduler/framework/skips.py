"""Why the actions left a task unplaced: a typed record the session keeps, read, not re-derived.

Allocate (and backfill and enqueue where they pass a job or task by) write here the rule that
made them skip it, as they apply it; the scheduler renders the pod's condition and events from
it and `koordqueue explain pod/NAME` prints it, so both say what the session decided instead
of working the rules out again in an order of their own. An entry is per task, or per job
when the rule held for every task of the job (a Pending job, an invalid gang, an overused
queue, a gang whose placements were undone); a task's own entry wins over its job's. The
last writer wins: a later action's answer replaces an earlier one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from koordqueue.scheduler.api import names
from koordqueue.scheduler.api.fit_errors import FitErrors


class Skip(StrEnum):
    """The rule that left a task unplaced."""

    NOT_ENQUEUED = "NotEnqueued"
    """Its PodGroup is Pending and enqueue did not admit it (the queue cannot take the
    PodGroup's minResources): allocate does not look at Pending jobs."""
    JOB_INVALID = "JobInvalid"
    """The job-valid vote refused the job (fewer valid pods than minAvailable)."""
    BEST_EFFORT = "BestEffort"
    """It requests nothing: allocate leaves it to backfill."""
    QUEUE_OVERUSED = "QueueOverused"
    """Its queue is over its deserved share: allocate skips the queue."""
    QUEUE_FULL = "QueueNotAllocatable"
    """Its queue's allocatable vote refused the task (capability reached)."""
    PRE_PREDICATE = "PrePredicate"
    """Rejected before any node was tried (`errors` says why)."""
    NO_NODE = "NoNode"
    """No node passed the predicates and had room (`errors` per node)."""
    GANG_NOT_READY = "GangNotReady"
    """Placed, then undone (or kept unbound for a pipelined gang): the gang did not reach
    minAvailable, so none of it is bound."""
    GANG_GAVE_UP = "GangGaveUp"
    """Not tried: after a task of the gang found no node, the gang could no longer reach
    minAvailable (`errors` are that task's)."""
    PLUGIN = "PluginRefused"
    """A plugin's rule refused the job or task (`detail` names the plugin and says why,
    e.g. network-topology-aware's "no hyperNode of tier <= 1 ..."; `errors`, when the task
    was tried, say it too, ahead of the per-node summary where it was tried)."""


@dataclass(frozen=True, slots=True)
class TaskSkip:
    """One entry: the rule, the fit errors it came with, and a detail (the job-valid
    message, the queue's name)."""

    kind: Skip
    errors: FitErrors | None = None
    detail: str = ""


_CAUSES = frozenset(
    {Skip.PRE_PREDICATE, Skip.NO_NODE, Skip.QUEUE_FULL, Skip.QUEUE_OVERUSED, Skip.PLUGIN}
)
"""The rules a person acts on (room on nodes, room in the queue): the first of them a job
met is the cause its condition names."""


def cause_text(entry: TaskSkip, errors: FitErrors | None = None) -> str:
    """The words of a cause: the per-node summary (`errors`, the task's latest, preemption's
    answer included, else the entry's), or what its queue said."""
    found = errors or entry.errors
    if entry.kind is Skip.PLUGIN and found is None:
        return entry.detail
    if found is not None:
        return found.message()
    if entry.kind is Skip.QUEUE_OVERUSED:
        return names.QUEUE_OVERUSED_MESSAGE.format(queue=entry.detail)
    return names.QUEUE_REFUSED_MESSAGE.format(queue=entry.detail)


NOT_ENQUEUED = TaskSkip(Skip.NOT_ENQUEUED)
BEST_EFFORT = TaskSkip(Skip.BEST_EFFORT)
GANG_NOT_READY = TaskSkip(Skip.GANG_NOT_READY)


class SkipRecord:
    """Per task and per job, the last rule that left it unplaced in one session."""

    __slots__ = ("first_failure", "jobs", "tasks")

    def __init__(self) -> None:
        self.tasks: dict[str, TaskSkip] = {}
        self.jobs: dict[str, TaskSkip] = {}
        self.first_failure: dict[str, tuple[str, TaskSkip]] = {}
        """Per job, the first of its tasks that found no node or that its queue refused,
        with that entry ("" for the whole job): the cause its gang condition carries."""

    def task(self, uid: str, job: str, entry: TaskSkip) -> None:
        self.tasks[uid] = entry
        if job not in self.first_failure and entry.kind in _CAUSES:
            self.first_failure[job] = (uid, entry)

    def job(self, uid: str, entry: TaskSkip) -> None:
        self.jobs[uid] = entry
        if uid not in self.first_failure and entry.kind in _CAUSES:
            self.first_failure[uid] = ("", entry)

    def of(self, task: str, job: str) -> TaskSkip | None:
        """The entry for a task of `job`: its own, else its job's, else None (placed, or
        nothing looked at it)."""
        return self.tasks.get(task) or self.jobs.get(job)


__all__ = [
    "BEST_EFFORT",
    "GANG_NOT_READY",
    "NOT_ENQUEUED",
    "Skip",
    "SkipRecord",
    "TaskSkip",
    "cause_text",
]
