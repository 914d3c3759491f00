"""JobInfo: a PodGroup and its tasks, indexed by status for O(1) gang counts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api.fit_errors import FitErrors
from koordqueue.scheduler.api.hypernode import NetworkTopology
from koordqueue.scheduler.api.names import DEFAULT_QUEUE
from koordqueue.scheduler.api.task_info import (
    ALLOCATED_STATUSES,
    READY_STATUSES,
    TERMINATED_STATUSES,
    VALID_STATUSES,
    TaskInfo,
    TaskStatus,
)

_NO_ANNOTATIONS: Final[Mapping[str, str]] = MappingProxyType({})


class PodGroupPhase(StrEnum):
    """PodGroup `status.phase` (SPEC 1)."""

    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    COMPLETED = "Completed"


_PENDING: Final = TaskStatus.PENDING
_ALLOCATED: Final = TaskStatus.ALLOCATED
_BINDING: Final = TaskStatus.BINDING
"""Module constants: reading an enum member off its class is a slow attribute lookup."""


class JobInfo:
    """A gang: minAvailable, per-role minimums, the queue and the tasks by status."""

    __slots__ = (
        "_allocated",
        "_ready",
        "annotations",
        "creation",
        "min_available",
        "min_resources",
        "name",
        "namespace",
        "network_topology",
        "phase",
        "preemptable",
        "priority",
        "queue",
        "task_min_available",
        "task_status_index",
        "tasks",
        "uid",
    )

    def __init__(
        self,
        uid: str,
        name: str | None = None,
        *,
        namespace: str = "default",
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        min_available: int = 1,
        task_min_available: dict[str, int] | None = None,
        min_resources: Resources | None = None,
        phase: PodGroupPhase = PodGroupPhase.INQUEUE,
        creation: float = 0.0,
        preemptable: bool = True,
        tasks: Iterable[TaskInfo] = (),
        network_topology: NetworkTopology | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        self.uid = uid
        self.name = name if name is not None else uid
        self.namespace = namespace
        self.queue = queue
        self.priority = priority
        self.min_available = min_available
        self.task_min_available = dict(task_min_available or {})
        self.min_resources = min_resources
        self.phase = phase
        self.creation = creation
        self.preemptable = preemptable
        self.network_topology = network_topology
        """The PodGroup's `spec.networkTopology` (network-topology-aware), or None."""
        self.annotations: Mapping[str, str] = annotations or _NO_ANNOTATIONS
        """The PodGroup annotations plugins read (sla's waiting time: `vc_names`), only
        those: never written (shared by every clone)."""
        self.tasks: dict[str, TaskInfo] = {}
        self.task_status_index: dict[TaskStatus, dict[str, TaskInfo]] = {}
        self._allocated: dict[str, int] = {}
        self._ready = 0
        for task in tasks:
            self.add_task(task)

    # --- mutation ------------------------------------------------------------------------
    def add_task(self, task: TaskInfo) -> None:
        """Add a task (its `job` is set to this job)."""
        task.job = self.uid
        self.tasks[task.uid] = task
        self.task_status_index.setdefault(task.status, {})[task.uid] = task
        if task.status in ALLOCATED_STATUSES:
            self._account(task.resreq, 1)
        if task.status in READY_STATUSES:
            self._ready += 1

    def update_task_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """Move a task to another status, keeping the index and allocation in step."""
        old = task.status
        if old is status:
            return
        index = self.task_status_index
        uid = task.uid
        bucket = index.get(old)
        if bucket is not None:
            bucket.pop(uid, None)
        bucket = index.get(status)
        if bucket is None:
            bucket = index[status] = {}
        bucket[uid] = task
        now = status in ALLOCATED_STATUSES
        if (old in ALLOCATED_STATUSES) is not now:
            self._account(task.resreq, 1 if now else -1)
        ready = status in READY_STATUSES
        if ready is not (old in READY_STATUSES):
            self._ready += 1 if ready else -1
        task.status = status

    def allocate_pending(self, task: TaskInfo) -> None:
        """`update_task_status(task, ALLOCATED)`, with the Pending -> Allocated move (the
        one every placement makes) spelled out: it takes resources and counts as ready."""
        if task.status is not _PENDING:
            self.update_task_status(task, _ALLOCATED)
            return
        index = self.task_status_index
        uid = task.uid
        bucket = index.get(_PENDING)
        if bucket is not None:
            bucket.pop(uid, None)
        bucket = index.get(_ALLOCATED)
        if bucket is None:
            bucket = index[_ALLOCATED] = {}
        bucket[uid] = task
        self._account(task.resreq, 1)
        self._ready += 1
        task.status = _ALLOCATED

    def bind_allocated(self, task: TaskInfo) -> None:
        """`update_task_status(task, BINDING)`, with the Allocated -> Binding move (every
        commit) spelled out: both statuses take resources and count as ready, so only the
        index changes."""
        if task.status is not _ALLOCATED:
            self.update_task_status(task, _BINDING)
            return
        index = self.task_status_index
        uid = task.uid
        bucket = index.get(_ALLOCATED)
        if bucket is not None:
            bucket.pop(uid, None)
        bucket = index.get(_BINDING)
        if bucket is None:
            bucket = index[_BINDING] = {}
        bucket[uid] = task
        task.status = _BINDING

    def replace_task(self, old: TaskInfo, new: TaskInfo) -> None:
        """Put `new` (same uid) where `old` is, as a job made from its tasks would hold it:
        same place in `tasks`, its status bucket in `tasks` order, no empty bucket, allocation
        (no amount left that no allocated task names) and ready count in step. Why: a cache
        updates a pod's job in place instead of remaking it (issue 19)."""
        uid = old.uid
        if new.uid != uid or self.tasks.get(uid) is not old:
            raise ValueError(f"task {new.uid} does not replace {uid} of job {self.uid}")
        new.job = self.uid
        self.tasks[uid] = new
        was, now = old.status in ALLOCATED_STATUSES, new.status in ALLOCATED_STATUSES
        if was:
            self._account(old.resreq, -1)
            acc = self._allocated
            for name in old.resreq:
                if not acc.get(name, 1) and not any(
                    name in t.resreq for t in self.tasks.values()
                    if t is not new and t.status in ALLOCATED_STATUSES
                ) and not (now and name in new.resreq):
                    del acc[name]
        if now:
            self._account(new.resreq, 1)
        self._ready += (new.status in READY_STATUSES) - (old.status in READY_STATUSES)
        if old.status is new.status:
            self.task_status_index[new.status][uid] = new  # keeps its place
        else:
            self._unindex(old)
            self._index_in_order(new)

    def move_task(self, task: TaskInfo, status: TaskStatus) -> None:
        """`update_task_status`, with the task put in its new bucket in `tasks` order and the
        bucket it leaves dropped when empty (as a job made from its tasks holds them). For
        moves among allocated statuses (Binding, Bound, Running): leaving them may leave an
        amount at 0 that a fresh job would not name (`replace_task` handles that)."""
        was = task.status
        if was is status:
            return
        self.update_task_status(task, status)
        index = self.task_status_index
        if not index.get(was, True):
            del index[was]
        if len(index[status]) > 1:
            index[status] = {u: t for u, t in self.tasks.items() if t.status is status}

    def _unindex(self, task: TaskInfo) -> None:
        index = self.task_status_index
        bucket = index.get(task.status)
        if bucket is not None:
            bucket.pop(task.uid, None)
            if not bucket:
                del index[task.status]

    def _index_in_order(self, task: TaskInfo) -> None:
        index, status = self.task_status_index, task.status
        if index.get(status):
            index[status] = {u: t for u, t in self.tasks.items() if t.status is status}
        else:
            index[status] = {task.uid: task}

    def _account(self, res: Resources, sign: int) -> None:
        acc = self._allocated
        get = acc.get
        for name, amount in res.items():  # no copy of the request
            acc[name] = get(name, 0) + sign * amount

    # --- counts (SPEC 3.6) ---------------------------------------------------------------
    def count(self, *statuses: TaskStatus) -> int:
        """Number of tasks in any of `statuses`."""
        index = self.task_status_index
        total = 0
        for status in statuses:  # a loop, not sum(genexpr): asked for every job, every session
            bucket = index.get(status)
            if bucket:
                total += len(bucket)
        return total

    def ready_task_num(self) -> int:
        """Bound + Binding + Running + Allocated + Succeeded (kept as a counter: gang asks
        this after every placement)."""
        return self._ready

    def waiting_task_num(self) -> int:
        """Pipelined tasks (reserved on future-idle resources)."""
        return len(self.task_status_index.get(TaskStatus.PIPELINED, ()))

    def pending_best_effort_task_num(self) -> int:
        """Pending tasks with an empty request (backfill will place them)."""
        pending = self.task_status_index.get(TaskStatus.PENDING)
        return sum(1 for t in pending.values() if t.best_effort) if pending else 0

    def valid_task_num(self) -> int:
        """Tasks that can still count toward the gang (not failed, not releasing)."""
        return self.count(*VALID_STATUSES)

    def pending_tasks(self) -> list[TaskInfo]:
        """Pending tasks in a stable order."""
        return list(self.task_status_index.get(TaskStatus.PENDING, {}).values())

    def _role_counts(self, statuses: frozenset[TaskStatus]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for status in statuses:
            for task in self.task_status_index.get(status, {}).values():
                counts[task.role] = counts.get(task.role, 0) + 1
        return counts

    def check_role_minimums(self, *, pipelined: bool = False) -> bool:
        """Per-role minimums, applied only when minAvailable >= their sum (SPEC 3.6)."""
        if not self.task_min_available or self.min_available < sum(
            self.task_min_available.values()
        ):
            return True
        statuses = READY_STATUSES | {TaskStatus.PIPELINED} if pipelined else READY_STATUSES
        counts = self._role_counts(frozenset(statuses))
        return all(counts.get(role, 0) >= need for role, need in self.task_min_available.items())

    def is_ready(self) -> bool:
        """Ready count reached minAvailable (and role minimums)."""
        return self._ready >= self.min_available and self.check_role_minimums()

    def is_pipelined(self) -> bool:
        """Ready + Pipelined + pending best-effort reached minAvailable."""
        waiting = (
            self.ready_task_num() + self.waiting_task_num() + self.pending_best_effort_task_num()
        )
        return waiting >= self.min_available and self.check_role_minimums(pipelined=True)

    def is_pending(self) -> bool:
        """The PodGroup has not been enqueued yet."""
        return self.phase is PodGroupPhase.PENDING

    def session_phase(self, unschedulable: bool) -> PodGroupPhase:
        """The phase a session's close writes for this job (Volcano's `jobStatus`):
        Completed when every task finished, Unknown when it is unschedulable with running
        tasks, Running once minAvailable tasks are placed or succeeded, else Pending (an
        Inqueue job stays Inqueue)."""
        tasks = self.tasks
        if tasks and self.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED) == len(tasks):
            return PodGroupPhase.COMPLETED
        if unschedulable and self.count(TaskStatus.RUNNING):
            return PodGroupPhase.UNKNOWN
        if self.count(*ALLOCATED_STATUSES, TaskStatus.SUCCEEDED) >= self.min_available:
            return PodGroupPhase.RUNNING
        if self.phase is not PodGroupPhase.INQUEUE:
            return PodGroupPhase.PENDING
        return self.phase

    def allocated_amounts(self) -> dict[str, int]:
        """The live allocated amounts; read-only by convention (per-queue sums at session
        open read them without building a Resources per job)."""
        return self._allocated

    @property
    def allocated(self) -> Resources:
        """Sum of the requests of tasks in allocated statuses."""
        return Resources(self._allocated)

    def pending_request(self) -> Resources:
        """What the pending tasks ask in all: the minimum of the job's one sub-job
        (Volcano's SubJobInfo.GetMinResources, gang scheduled: every pending task)."""
        total = Resources()
        for task in self.task_status_index.get(TaskStatus.PENDING, {}).values():
            total = total + task.request
        return total

    def min_request(self) -> Resources:
        """minResources, or an empty list for a job without one."""
        return self.min_resources if self.min_resources is not None else Resources()

    def status_histogram(self) -> str:
        """ "2 Pending, 1 Running" in a stable order, for condition messages."""
        parts = [
            f"{len(bucket)} {status.value}"
            for status, bucket in sorted(self.task_status_index.items(), key=lambda kv: kv[0].value)
            if bucket
        ]
        return ", ".join(parts)

    def clone(self) -> JobInfo:
        """A deep copy of the job and its tasks for one session."""
        job = JobInfo(
            self.uid,
            self.name,
            namespace=self.namespace,
            queue=self.queue,
            priority=self.priority,
            min_available=self.min_available,
            task_min_available=self.task_min_available,
            min_resources=self.min_resources,
            phase=self.phase,
            creation=self.creation,
            preemptable=self.preemptable,
            network_topology=self.network_topology,
            annotations=self.annotations,
        )
        # copy the counters instead of re-accounting every task: a session clones every job
        index = job.task_status_index
        tasks, uid = job.tasks, self.uid
        for task in self.tasks.values():
            copy = task.clone()
            copy.job = uid
            tasks[copy.uid] = copy
            bucket = index.get(copy.status)
            if bucket is None:
                bucket = index[copy.status] = {}
            bucket[copy.uid] = copy
        job._allocated = dict(self._allocated)
        job._ready = self._ready
        return job

    def __repr__(self) -> str:
        return (
            f"JobInfo({self.namespace}/{self.name}, queue={self.queue}, min={self.min_available})"
        )


def standalone_phase(task: TaskInfo) -> PodGroupPhase:
    """The phase of a pod without PodGroup (its own job of minAvailable 1, enqueued from the
    start): what a session's close would make of it, as Volcano's PodGroup for such a pod
    holds after its first session. Why: a job left Inqueue with its pod running made every
    session report the same Inqueue -> Running update for every bound standalone pod."""
    if task.status in TERMINATED_STATUSES:
        return PodGroupPhase.COMPLETED
    if task.status in READY_STATUSES:
        return PodGroupPhase.RUNNING
    return PodGroupPhase.INQUEUE


__all__ = ["FitErrors", "JobInfo", "PodGroupPhase", "standalone_phase"]
