"""A snapshot a cache keeps up to date, with the aggregates a session opens from.

Why: a session that clones every node, re-accounts every bound task and visits every job
costs O(cluster) even when ten pods are new. An `IndexedSnapshot` promises that its nodes
already account every placed task of its jobs (the very same task objects) and carries a
`SnapshotIndex`: jobs by uid, the jobs a session may write (`active`), and per-queue and
per-cluster sums kept incrementally, job by job and node by node, so they always equal a sum
from scratch (dimension names included: a zero amount is kept while anything holds it).
The session then shares nodes and quiet jobs copy-on-write and opens its plugins from the
sums (kube-scheduler's UpdateSnapshot idea). Its `QuietMemo` (quiet.py) keeps, across
sessions, what a session concludes about a job it does not write (its condition and phase
update).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import overload

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api.job_info import JobInfo, PodGroupPhase
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.queue_accounting import elastic, inqueue
from koordqueue.scheduler.api.task_info import TaskInfo, TaskStatus
from koordqueue.scheduler.framework.node_tensor import NodeTensor
from koordqueue.scheduler.framework.quiet import QuietMemo
from koordqueue.scheduler.framework.result import ClusterSnapshot


class KeyedSum:
    """Per-dimension sums that also count how many contributions name each dimension, so
    removing a contribution leaves exactly what summing the rest from scratch would give
    (a dimension disappears when nothing names it any more)."""

    __slots__ = ("amounts", "counts")

    def __init__(self) -> None:
        self.amounts: dict[str, int] = {}
        self.counts: dict[str, int] = {}

    def add(self, items: Mapping[str, int], sign: int = 1) -> None:
        amounts, counts = self.amounts, self.counts
        for name, amount in items.items():
            left = counts.get(name, 0) + sign
            if left:
                counts[name] = left
                amounts[name] = amounts.get(name, 0) + sign * amount
            else:
                del counts[name]
                del amounts[name]

    def resources(self) -> Resources:
        return Resources(self.amounts)

    def __bool__(self) -> bool:
        return bool(self.counts)


def may_change(job: JobInfo) -> bool:
    """Can a session write this job other than by evicting its tasks (place, pipeline, bind
    or enqueue it)? Such jobs are copied at open; the rest are shared until evicted from."""
    index = job.task_status_index
    return (
        job.phase is PodGroupPhase.PENDING
        or bool(index.get(TaskStatus.PENDING))
        or bool(index.get(TaskStatus.ALLOCATED))
        or bool(index.get(TaskStatus.PIPELINED))
    )


@dataclass(slots=True)
class JobShare:
    """What one job adds to its queue's sums (kept to take exactly that away again)."""

    uid: str
    queue: str
    allocated: dict[str, int]
    request: dict[str, int]
    dims: dict[str, int]
    """Dimension names its tasks request (value 0: only the names count)."""
    no_min_elastic: dict[str, int] | None
    """Jobs without minResources: allocated, each amount at least 0 (proportion's elastic)."""
    min_inqueue: Resources | None
    min_elastic: Resources | None
    overcommit_inqueue: Resources | None
    """Inqueue jobs with minResources: minResources not covered by the allocation."""
    overcommit_dims: dict[str, int] | None
    """Inqueue jobs without minResources: their allocated dimensions at 0."""

    @staticmethod
    def of(job: JobInfo) -> JobShare:
        allocated = dict(job.allocated_amounts())
        request = dict(allocated)
        dims: dict[str, int] = {}
        for task in job.tasks.values():
            dims.update(dict.fromkeys(task.request, 0))
            dims.update(dict.fromkeys(task.resreq, 0))
            if task.status is TaskStatus.PENDING:
                for name, amount in task.resreq.items():
                    request[name] = request.get(name, 0) + amount
        has_min = job.min_resources is not None
        inqueue_phase = job.phase is PodGroupPhase.INQUEUE
        return JobShare(
            job.uid,
            job.queue,
            allocated,
            request,
            dims,
            None if has_min else {k: max(v, 0) for k, v in allocated.items()},
            inqueue(job) if has_min else None,
            elastic(job) if has_min else None,
            (job.min_request() - job.allocated).clamp_nonnegative()
            if has_min and inqueue_phase
            else None,
            dict.fromkeys(allocated, 0) if inqueue_phase and not has_min else None,
        )


@dataclass(slots=True)
class QueueSums:
    """Sums over a queue's jobs, as proportion and overcommit compute them at open."""

    jobs: set[str] = field(default_factory=set)
    allocated: KeyedSum = field(default_factory=KeyedSum)
    request: KeyedSum = field(default_factory=KeyedSum)
    dims: KeyedSum = field(default_factory=KeyedSum)
    no_min_elastic: KeyedSum = field(default_factory=KeyedSum)
    no_min_jobs: int = 0
    min_inqueue: KeyedSum = field(default_factory=KeyedSum)
    min_elastic: KeyedSum = field(default_factory=KeyedSum)
    overcommit_inqueue: KeyedSum = field(default_factory=KeyedSum)
    overcommit_dims: KeyedSum = field(default_factory=KeyedSum)

    def apply(self, share: JobShare, sign: int) -> None:
        if sign > 0:
            self.jobs.add(share.uid)
        else:
            self.jobs.discard(share.uid)
        self.allocated.add(share.allocated, sign)
        self.request.add(share.request, sign)
        self.dims.add(share.dims, sign)
        if share.no_min_elastic is not None:
            self.no_min_elastic.add(share.no_min_elastic, sign)
            self.no_min_jobs += sign
        if share.min_inqueue is not None:
            self.min_inqueue.add(share.min_inqueue, sign)
        if share.min_elastic is not None:
            self.min_elastic.add(share.min_elastic, sign)
        if share.overcommit_inqueue is not None:
            self.overcommit_inqueue.add(share.overcommit_inqueue, sign)
        if share.overcommit_dims is not None:
            self.overcommit_dims.add(share.overcommit_dims, sign)


class SnapshotIndex:
    """Jobs by uid, the active ones, per-queue sums and cluster totals, kept by a cache.

    The cache calls `put_job`/`drop_job` for every job it (re)makes and `put_node`/
    `drop_node` for every ready node it replaces; nothing here walks the cluster.
    """

    def __init__(self) -> None:
        self.jobs: dict[str, JobInfo] = {}
        self.active: set[str] = set()
        self.queues: dict[str, QueueSums] = {}
        self.allocatable = KeyedSum()
        self.used = KeyedSum()
        self.memo = QuietMemo()
        self._shares: dict[str, JobShare] = {}
        self._nodes: dict[str, NodeInfo] = {}
        self._tensor: NodeTensor | None = None
        """The node tensor of the last layout (same nodes in the same order) a session used."""
        self._positions: dict[str, int] = {}
        self._by_name: dict[str, NodeInfo] = {}
        """The kept tensor's nodes by name, in its order."""
        self._replaced: dict[str, NodeInfo] = {}
        """Nodes put since `_tensor` was brought up to date, by name."""
        self._lent: NodeTensor | None = None
        """`_tensor` while a session writes it (see `tensor_for`)."""
        self._build = 0
        self._lent_build = 0
        self._affine: dict[str, int] = {}
        self.affinity_pods = 0
        """Tasks on the nodes carrying inter-pod (anti-)affinity terms: a session whose
        cluster has none skips walking every task for them (symmetry of existing pods)."""

    def put_job(self, job: JobInfo) -> None:
        self.drop_job(job.uid)
        share = JobShare.of(job)
        self.jobs[job.uid] = job
        self._shares[job.uid] = share
        self.queues.setdefault(job.queue, QueueSums()).apply(share, 1)
        if may_change(job):
            self.active.add(job.uid)
        self.memo.missing.add(job.uid)

    def drop_job(self, uid: str) -> None:
        share = self._shares.pop(uid, None)
        if share is None:
            return
        del self.jobs[uid]
        self.active.discard(uid)
        sums = self.queues[share.queue]
        sums.apply(share, -1)
        if not sums.jobs:
            del self.queues[share.queue]
        self.memo.drop(uid)
        self.memo.missing.discard(uid)

    def put_node(self, node: NodeInfo) -> None:
        old = self._unaccount(node.name)
        self._nodes[node.name] = node
        self.allocatable.add(node.allocatable)
        self.used.add(node.accounting()[1])
        affine = affinity_pods(node)
        if affine:
            self._affine[node.name] = affine
            self.affinity_pods += affine
        if old is not None and old.allocatable is node.allocatable:
            self._replaced[node.name] = node  # same layout: one column to refresh
        else:
            self._tensor = None

    def drop_node(self, name: str) -> None:
        if self._unaccount(name) is not None:
            self._tensor = None
            self._replaced.pop(name, None)

    def _unaccount(self, name: str) -> NodeInfo | None:
        node = self._nodes.pop(name, None)
        if node is not None:
            self.allocatable.add(node.allocatable, -1)
            self.used.add(node.accounting()[1], -1)
            self.affinity_pods -= self._affine.pop(name, 0)
        return node

    def new_build(self) -> None:
        """The cache made a new snapshot: a session of an earlier one is over."""
        self._build += 1

    def tensor_for(
        self, nodes: list[NodeInfo], dims: list[str], *, lend: bool = False
    ) -> NodeTensor:
        """A tensor of `nodes` for a session to write: the one kept for this layout, its
        replaced nodes' columns refreshed, instead of reading every node again; built anew
        when nodes came, went or changed allocatable, or the dimensions moved.

        With `lend` the session gets the kept tensor itself (no copy: copying its arrays
        and mirrors, and the collector walking the young copies, cost about 1 ms a session
        at 5,000 nodes) until it gives it back (`give_back`, at close) or the cache's next
        build; the columns it wrote (its `changes` log) are refreshed from the index's own
        nodes before the tensor is used again. While it is out, others get a copy with
        those columns refreshed likewise.
        """
        base = self._tensor
        if base is not None and base is self._lent:
            if self._lent_build == self._build:  # its session may still be open
                if base.dims == dims and base.size == len(nodes) and not self._replaced:
                    return self._undo(base.copy(), list(base.changes))
                return NodeTensor(nodes, dims)
            self._lent = None  # a new snapshot ended the lease
        if base is not None and base.changes:
            self._undo(base, list(base.changes))  # what the last borrower wrote
        if base is not None and base.dims == dims and base.size == len(nodes):
            for name, node in self._replaced.items():
                at = self._positions.get(name)
                if at is None:
                    base = None
                    break
                node.index = at
                if not same_static(base.nodes[at], node):
                    base.static.clear()
                base.nodes[at] = node
                self._by_name[name] = node
                base.refresh(node)
            if base is not None:
                base.changes.clear()
                if not all(map(operator.is_, nodes, base.nodes)):
                    base = None
        self._replaced.clear()
        if base is None:
            base = NodeTensor(nodes, dims)
            self._positions = {n.name: i for i, n in enumerate(nodes)}
            self._by_name = {n.name: n for n in nodes}
        self._tensor = base
        if lend:
            self._lent, self._lent_build = base, self._build
            return base
        return base.copy()

    def give_back(self, tensor: NodeTensor) -> None:
        """A session is done with the tensor `tensor_for` lent it."""
        if tensor is self._lent:
            self._lent = None

    def _undo(self, tensor: NodeTensor, changed: list[int]) -> NodeTensor:
        """Put the index's own node back at every position a session wrote and refresh
        its column (a session writes only through `NodeTensor.refresh`)."""
        by_name = self._by_name
        for i in set(changed):
            node = by_name[tensor.nodes[i].name]
            tensor.nodes[i] = node
            tensor.refresh(node)
        tensor.changes.clear()
        return tensor

    def nodes_by_name(self) -> Mapping[str, NodeInfo]:
        """The kept tensor's nodes by name (what `tensor_for` just returned), read-only:
        valid until the next `tensor_for` that refreshes a replaced node."""
        return self._by_name


class Epoch:
    """A counter an owner moves when what it handed out stops being valid."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


STALE_JOBS = "a snapshot's live jobs were read after its cache's next build"


class LiveJobs(Sequence[JobInfo]):
    """A snapshot's jobs read from its cache's own mapping instead of a copy.

    Why: copying every job of the cluster into a list at every build (and having the
    collector walk that young list during the session) made a session grow with bound pods;
    a session reads jobs through the index. Valid until the cache's next build, as the
    index is: after it any read raises (`STALE_JOBS`) instead of seeing another snapshot.
    """

    __slots__ = ("_at", "_epoch", "_jobs", "_list")

    def __init__(self, jobs: Mapping[str, JobInfo], epoch: Epoch) -> None:
        self._jobs = jobs
        self._epoch = epoch
        self._at = epoch.value
        self._list: list[JobInfo] | None = None

    def _live(self) -> Mapping[str, JobInfo]:
        if self._epoch.value != self._at:
            raise RuntimeError(STALE_JOBS)
        return self._jobs

    def __len__(self) -> int:
        return len(self._live())

    def __iter__(self) -> Iterator[JobInfo]:
        return iter(self._live().values())

    @overload
    def __getitem__(self, i: int) -> JobInfo: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[JobInfo]: ...
    def __getitem__(self, i: int | slice) -> JobInfo | Sequence[JobInfo]:
        jobs = self._live()
        if self._list is None:
            self._list = list(jobs.values())
        return self._list[i]


@dataclass(frozen=True, slots=True)
class IndexedSnapshot(ClusterSnapshot):
    """A ClusterSnapshot whose `nodes` are the ready nodes sorted by name, each already
    accounting every placed (not Pending, with a node) task of `jobs` as the same object,
    with the cache's live index (valid until the cache's next build)."""

    index: SnapshotIndex = field(default_factory=SnapshotIndex)


def index_snapshot(snapshot: ClusterSnapshot) -> IndexedSnapshot:
    """An IndexedSnapshot with the content of a plain one (which is not written): ready
    nodes sorted by name, copied, with the jobs' placed tasks accounted on them after their
    other pods (jobs by uid), and an index built from scratch. What a cache does key by key,
    done at once (tests, one-off callers)."""
    jobs = sorted(snapshot.jobs, key=lambda j: j.uid)
    job_tasks = {uid for job in jobs for uid in job.tasks}
    index = SnapshotIndex()
    ours: dict[str, list[TaskInfo]] = {}
    for job in jobs:
        index.put_job(job)
        for task in placed(job):
            ours.setdefault(task.node_name or "", []).append(task)
    nodes: list[NodeInfo] = []
    for original in sorted((n for n in snapshot.nodes if n.ready), key=lambda n: n.name):
        node = original.clone()
        for foreign in original.tasks.values():
            if foreign.uid not in job_tasks:
                node.add_task(foreign.clone())
        for task in ours.get(node.name, ()):
            node.add_task(task)
        nodes.append(node)
        index.put_node(node)
    return IndexedSnapshot(
        nodes=nodes, jobs=jobs, queues=list(snapshot.queues),
        namespace_labels=snapshot.namespace_labels, pdbs=snapshot.pdbs, index=index,
        hypernodes=snapshot.hypernodes, resource_quotas=snapshot.resource_quotas,
        numatopologies=snapshot.numatopologies,
        node_usage=snapshot.node_usage,
    )


def same_static(old: NodeInfo, new: NodeInfo) -> bool:
    """Whether two versions of a node agree on what static per-node masks read."""
    return (
        old.name == new.name
        and old.unschedulable == new.unschedulable
        and (old.labels is new.labels or old.labels == new.labels)
        and (old.taints is new.taints or old.taints == new.taints)
    )


def affinity_pods(node: NodeInfo) -> int:
    """How many of the node's tasks carry inter-pod (anti-)affinity terms."""
    return sum(1 for t in node.tasks.values() if t.pod_affinity is not None)


def placed(job: JobInfo) -> Iterable[TaskInfo]:
    """The tasks of `job` a session accounts on their nodes."""
    return (
        t for t in job.tasks.values() if t.status is not TaskStatus.PENDING and t.node_name
    )


__all__ = [
    "STALE_JOBS",
    "Epoch",
    "IndexedSnapshot",
    "JobShare",
    "KeyedSum",
    "LiveJobs",
    "QueueSums",
    "SnapshotIndex",
    "affinity_pods",
    "index_snapshot",
    "may_change",
    "placed",
    "same_static",
]
