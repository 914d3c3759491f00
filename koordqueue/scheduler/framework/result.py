"""The session's input (a cluster snapshot) and output (decisions), as plain data.

Why frozen dataclasses (and an immutable tuple for `Bind`): the adapter applies decisions
asynchronously and the simulator compares them between runs; neither must be able to alter
what the session decided.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from koordqueue.scheduler.api import FitErrors, JobInfo, NodeInfo, PodGroupPhase, QueueInfo
from koordqueue.scheduler.api.hypernode import HyperNode
from koordqueue.scheduler.api.node_usage import NodeUsage
from koordqueue.scheduler.api.numa import Assigned, NumaTopology
from koordqueue.scheduler.api.pdb import PodDisruptionBudget
from koordqueue.scheduler.api.resource_quota import ResourceQuotaStatus
from koordqueue.scheduler.framework.skips import SkipRecord, cause_text


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Queues, jobs (with their tasks) and nodes at the start of a session.

    Tasks carry their own status and node; the session accounts them on the nodes. Tasks
    set on a NodeInfo that belong to no job (other schedulers' pods, daemons) are accounted
    too but never scheduled. The snapshot is never mutated: the session works on copies.
    """

    nodes: Sequence[NodeInfo] = ()
    jobs: Sequence[JobInfo] = ()
    queues: Sequence[QueueInfo] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Namespace name -> labels, for pod affinity terms' namespaceSelector (a namespace
    missing here has no labels)."""
    pdbs: Sequence[PodDisruptionBudget] = ()
    """PodDisruptionBudgets, read only by the opt-in `pdb` plugin (preempt/reclaim victims)."""
    hypernodes: Sequence[HyperNode] = ()
    """topology.volcano.sh HyperNodes (network-topology-aware; `Session.topology`)."""
    resource_quotas: Sequence[ResourceQuotaStatus] = ()
    """Namespaces' ResourceQuotas (status hard and used), read only by resourcequota."""
    numatopologies: Mapping[str, NumaTopology] = field(default_factory=dict)
    """Node name -> its nodeinfo.volcano.sh Numatopology, as the scheduler sees it (numa-aware)."""
    node_usage: Mapping[str, NodeUsage] = field(default_factory=dict)
    """Node name -> its measured load (the conf's `metrics` source; usage, rescheduling)."""


class Bind(NamedTuple):
    """Bind a pod to a node (binding subresource).

    A tuple, not a frozen dataclass: one is built per placed pod, and a tuple's
    construction costs ~0.35 us against ~0.8 us for the frozen dataclass's five
    `object.__setattr__` calls. Still immutable; equal only to another `Bind` with the
    same fields (as the dataclass was), so a `Reservation` with the same fields differs.
    """

    task: str
    namespace: str
    name: str
    job: str
    node: str

    def __eq__(self, other: object) -> bool:
        return type(other) is Bind and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return tuple.__hash__(self)


@dataclass(frozen=True, slots=True)
class Eviction:
    """Evict a pod (delete) for a reason: preempt or reclaim."""

    task: str
    namespace: str
    name: str
    job: str
    node: str
    reason: str


@dataclass(frozen=True, slots=True)
class Reservation:
    """A task pipelined onto future-idle resources of a node; session-only, not applied."""

    task: str
    namespace: str
    name: str
    job: str
    node: str


@dataclass(frozen=True, slots=True)
class PhaseUpdate:
    """A PodGroup phase change."""

    job: str
    namespace: str
    name: str
    old: PodGroupPhase
    new: PodGroupPhase


@dataclass(frozen=True, slots=True)
class PluginTiming:
    """Seconds a plugin spent opening, closing and inside its callbacks."""

    open: float = 0.0
    close: float = 0.0
    callbacks: float = 0.0

    @property
    def total(self) -> float:
        """All time attributed to the plugin."""
        return self.open + self.close + self.callbacks


@dataclass(frozen=True, slots=True)
class SessionResult:
    """Everything one session decided, plus timings for the metrics exporter."""

    binds: tuple[Bind, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    pipelined: tuple[Reservation, ...] = ()
    phase_updates: tuple[PhaseUpdate, ...] = ()
    fit_errors: Mapping[str, FitErrors] = field(default_factory=dict)
    """Task uid -> why it was not placed (only tasks still pending at close)."""
    job_conditions: Mapping[str, str] = field(default_factory=dict)
    """Job uid -> Unschedulable message for jobs that did not become ready."""
    warnings: tuple[str, ...] = ()
    duration: float = 0.0
    action_durations: Mapping[str, float] = field(default_factory=dict)
    plugin_durations: Mapping[str, PluginTiming] = field(default_factory=dict)
    skips: SkipRecord = field(default_factory=SkipRecord)
    """Why the actions left each task unplaced, as they decided it (framework/skips.py)."""
    bind_annotations: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Task uid -> annotations to write on the pod before its bind (deviceshare's GPU ids);
    tasks placed but not bound may be here too: only a bind's are written."""
    numa_assigned: Assigned = field(default_factory=dict)
    """Task uid -> (node, resource -> cpus) numa-aware gave each pod bound (the cache keeps
    them taken; `api.numa.by_node` sums them per node)."""

    def job_cause(self, job: str) -> str | None:
        """What the job's PodGroup condition and event say: its Unschedulable message, and,
        after "; ", the first cause a person can act on that its tasks met (a task's per-node
        summary, or its queue's refusal)."""
        condition = self.job_conditions.get(job)
        if condition is None:
            return None
        first = self.skips.first_failure.get(job)
        if first is None:
            return condition
        task, entry = first
        cause = cause_text(entry, self.fit_errors.get(task))
        return condition if cause == condition else f"{condition}; {cause}"

    def pod_cause(self, task: str, job: str | None) -> str | None:
        """What a pending pod's PodScheduled condition and FailedScheduling event say (and
        `explain pod/NAME`): its own per-node summary when it was tried (or is identical to a
        task that was), else its job's cause."""
        errors = self.fit_errors.get(task)
        if errors is not None:
            return errors.message()
        return self.job_cause(job) if job is not None else None
