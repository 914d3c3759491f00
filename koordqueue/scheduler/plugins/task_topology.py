"""task-topology: Volcano's affinity between a job's tasks (its plugin of that name).

A PodGroup's annotations name its tasks (the pods' `volcano.sh/task-spec`, `TaskInfo.role`):
- `volcano.sh/task-topology-affinity`: groups of tasks to put together ("ps,worker;ps,chief";
  a group of one: that task's pods together);
- `volcano.sh/task-topology-anti-affinity`: groups to keep apart ("ps" alone: its pods
  apart);
- `volcano.sh/task-topology-task-order`: which task's pods go first.
A name that is not a task of the job, or twice in one group, makes the job's topology
invalid (ignored, as Volcano ignores it); empty names are kept as Volcano keeps them.

As in Volcano, the job's pods with a topology are put in **buckets** (pods meant to share a
node) when the session opens: bound pods first, each bucket of a node's pods, then pending
pods in task order, each to the bucket it has most affinity with (anti-affinity counts
against), ties to the bucket with the smaller request, a new bucket when every one repels it.
- **task order**: pods in a bucket before pods in none; bigger buckets (more pending pods)
  first, then older buckets; in a bucket, the task order, then the affinity priority
  (self anti-affinity, inter affinity, self affinity, inter anti-affinity);
- **node order**: a node scores the bucket's pods bound there, less the anti-affine pods of
  the job there, plus the bucket's pending pods that would fit the node with this one,
  x `task-topology.weight` (1) x 100 / the largest bucket;
- **allocate**: a placed pod counts as bound to its node for its bucket.
The score reads what the session placed: it is a query-time score (`add_dynamic_score`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from koordqueue.domain.resources import Missing, Resources
from koordqueue.scheduler.api import JobInfo, NodeInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.framework.interface import Arguments, ExtensionPoint, Plugin
from koordqueue.scheduler.framework.placement import FloatArray, Scorer
from koordqueue.scheduler.framework.session import EventHandler, Session
from koordqueue.scheduler.interpod import plugin_enabled

MAX_NODE_SCORE: Final = 100.0
SELF_ANTI, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI = 4, 3, 2, 1
"""Volcano's affinity priorities: the larger goes first."""
_MEBI: Final = 1024 * 1024


class TopologyError(ValueError):
    """A task-topology annotation naming a task the job lacks, or one twice in a group."""


@dataclass
class TaskTopology:
    """The three annotations, split as Volcano splits them."""

    affinity: list[list[str]] | None = None
    anti_affinity: list[list[str]] | None = None
    task_order: list[str] | None = None


def _check(job: JobInfo, groups: list[list[str]]) -> None:
    roles = {t.role for t in job.tasks.values()}
    for group in groups:
        seen: set[str] = set()
        for name in group:
            if not name:
                continue
            if name not in roles:
                raise TopologyError(vn.TASK_TOPOLOGY_UNKNOWN_TASK.format(
                    task=name, namespace=job.namespace, job=job.name))
            if name in seen:
                raise TopologyError(vn.TASK_TOPOLOGY_DUPLICATE_TASK.format(
                    task=name, namespace=job.namespace, job=job.name))
            seen.add(name)


def _split(job: JobInfo, value: str) -> list[list[str]]:
    groups = [part.split(",") for part in value.split(";")]
    _check(job, groups)
    return groups


def read_topology(job: JobInfo) -> TaskTopology | None:
    """Volcano's readTopologyFromPgAnnotations: None without any of the annotations;
    TopologyError naming the first bad task."""
    notes = job.annotations
    affinity = notes.get(vn.TASK_TOPOLOGY_AFFINITY)
    anti = notes.get(vn.TASK_TOPOLOGY_ANTI_AFFINITY)
    order = notes.get(vn.TASK_TOPOLOGY_TASK_ORDER)
    if affinity is None and anti is None and order is None:
        return None
    topology = TaskTopology()
    if affinity is not None:
        topology.affinity = _split(job, affinity)
    if anti is not None:
        topology.anti_affinity = _split(job, anti)
    if order is not None:
        topology.task_order = order.split(",")
        _check(job, [topology.task_order])
    return topology


@dataclass(eq=False)
class Bucket:
    """Pods of a job meant to share a node: pending ones, and bound ones by node."""

    index: int
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    names: dict[str, int] = field(default_factory=dict)
    req_score: float = 0.0
    request: Resources = field(default_factory=Resources)
    bound: int = 0
    node: dict[str, int] = field(default_factory=dict)

    def _request(self, req: Resources, sign: int) -> None:
        score = req.milli("cpu") + req.milli("memory") / 1000 / _MEBI  # 1Mi counts as 1m cpu
        score += sum(req.milli(n) for n in req if n not in ("cpu", "memory"))
        self.req_score += sign * score
        self.request = self.request + req if sign > 0 else self.request - req

    def add(self, name: str, task: TaskInfo) -> None:
        self.names[name] = self.names.get(name, 0) + 1
        if task.node_name:
            self.node[task.node_name] = self.node.get(task.node_name, 0) + 1
            self.bound += 1
            return
        self.tasks[task.uid] = task
        self._request(task.resreq, 1)

    def task_bound(self, task: TaskInfo) -> None:
        node = task.node_name or ""
        self.node[node] = self.node.get(node, 0) + 1
        self.bound += 1
        if self.tasks.pop(task.uid, None) is not None:
            self._request(task.resreq, -1)


class JobManager:
    """One job's task affinities and buckets (Volcano's JobManager)."""

    def __init__(self, uid: str) -> None:
        self.uid = uid
        self.buckets: list[Bucket] = []
        self.in_bucket: dict[str, int] = {}
        self.task_of: dict[str, str] = {}
        self.priority: dict[str, int] = {}
        self.order: dict[str, int] = {}
        self.inter: dict[str, set[str]] = {}
        self.self_aff: set[str] = set()
        self.inter_anti: dict[str, set[str]] = {}
        self.self_anti: set[str] = set()
        self.max_size = 0
        self.node_tasks: dict[str, dict[str, int]] = {}

    def _mark(self, name: str, priority: int) -> None:
        if priority > self.priority.get(name, 0):
            self.priority[name] = priority

    def apply(self, topology: TaskTopology) -> None:
        for groups, alone, between, single, pair in (
            (topology.affinity, self.self_aff, self.inter, SELF_AFFINITY, INTER_AFFINITY),
            (topology.anti_affinity, self.self_anti, self.inter_anti, SELF_ANTI, INTER_ANTI),
        ):
            for group in groups or ():
                if len(group) == 1:
                    alone.add(group[0])
                    self._mark(group[0], single)
                    continue
                for i, src in enumerate(group):
                    for dst in group[:i]:
                        between.setdefault(src, set()).add(dst)
                        between.setdefault(dst, set()).add(src)
                    self._mark(src, pair)
        order = topology.task_order or []
        for i, name in enumerate(order):
            self.order[name] = len(order) - i

    def affinity_order(self, left: TaskInfo, right: TaskInfo) -> int:
        """-1 when left's task ranks lower than right's, 1 higher, 0 the same."""
        ln, rn = self.task_of.get(left.uid, ""), self.task_of.get(right.uid, "")
        if ln == rn:
            return 0
        lo, ro = self.order.get(ln, 0), self.order.get(rn, 0)
        if lo != ro:
            return 1 if lo > ro else -1
        lp, rp = self.priority.get(ln, 0), self.priority.get(rn, 0)
        if lp != rp:
            return 1 if lp > rp else -1
        return 0

    def task_set_affinity(self, name: str, names: dict[str, int], only_anti: bool) -> int:
        score = 0
        if not name:
            return score
        for other, count in names.items():
            same = other == name
            if not only_anti and (
                name in self.self_aff if same else other in self.inter.get(name, ())
            ):
                score += count
            if name in self.self_anti if same else other in self.inter_anti.get(name, ()):
                score -= count
        return score

    def _less(self, left: TaskInfo, right: TaskInfo) -> bool:
        """Volcano's TaskOrder.Less (bucket building)."""
        lb, rb = bool(left.node_name), bool(right.node_name)
        if lb or rb:
            if lb != rb:
                return not lb
            return (left.node_name or "") > (right.node_name or "")
        result = self.affinity_order(left, right)
        if result == 0:
            return left.name > right.name
        return result < 0

    def construct(self, job: JobInfo) -> None:
        """Volcano's ConstructBucket."""
        tasks: list[TaskInfo] = []
        for task in job.tasks.values():
            name = task.role
            if not name or name not in self.priority:
                self.in_bucket[task.uid] = -1
                continue
            self.task_of[task.uid] = name
            tasks.append(task)

        def reverse(a: TaskInfo, b: TaskInfo) -> int:
            return -1 if self._less(b, a) else (1 if self._less(a, b) else 0)

        tasks.sort(key=functools.cmp_to_key(reverse))
        by_node: dict[str, Bucket] = {}
        for task in tasks:
            selected: Bucket | None = None
            best = -(2**31)
            if task.node_name:
                best = 0
                selected = by_node.get(task.node_name)
            else:
                for bucket in self.buckets:
                    aff = self.task_set_affinity(task.role, bucket.names, False)
                    if aff > best:
                        best, selected = aff, bucket
                    elif aff == best and selected is not None and (
                        bucket.req_score < selected.req_score
                    ):
                        selected = bucket
            if best < 0 or selected is None:
                selected = Bucket(len(self.buckets))
                self.buckets.append(selected)
                if task.node_name:
                    by_node[task.node_name] = selected
            self.in_bucket[task.uid] = selected.index
            selected.add(task.role, task)
            self.max_size = max(self.max_size, len(selected.tasks) + selected.bound)

    def bucket(self, task: TaskInfo) -> Bucket | None:
        index = self.in_bucket.get(task.uid, -1)
        return None if index < 0 else self.buckets[index]

    def task_bound(self, task: TaskInfo) -> None:
        if task.role:
            counts = self.node_tasks.setdefault(task.node_name or "", {})
            counts[task.role] = counts.get(task.role, 0) + 1
        bucket = self.bucket(task)
        if bucket is not None:
            bucket.task_bound(task)


class TaskTopologyPlugin(Plugin):
    """Buckets each topology job's pods and steers them to the same nodes."""

    name = vn.TASK_TOPOLOGY
    quiet = True

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        self.weight = self.arguments.get_int(vn.TASK_TOPOLOGY_WEIGHT, 1)
        self.managers: dict[str, JobManager] = {}

    def on_session_open(self, session: Session) -> None:
        self.session = session
        self.managers = {}
        self.errors: dict[str, str] = {}
        for job in session.jobs.values():
            if not job.task_status_index.get(TaskStatus.PENDING) or not job.annotations:
                continue
            try:
                topology = read_topology(job)
            except TopologyError as exc:
                self.errors[job.uid] = str(exc)
                continue
            if topology is None:
                continue
            manager = JobManager(job.uid)
            manager.apply(topology)
            manager.construct(job)
            self.managers[job.uid] = manager
        if not self.managers:
            return
        session.add_task_order_fn(self.name, self.task_order)
        if plugin_enabled(session, self.name, ExtensionPoint.NODE_ORDER):
            session.placement.add_dynamic_score(self.scorer)
        session.add_event_handler(self.name, EventHandler(allocate=self._allocate))

    def task_order(self, left: TaskInfo, right: TaskInfo) -> int:
        """Volcano's TaskOrderFn."""
        lm, rm = self.managers.get(left.job), self.managers.get(right.job)
        if lm is None or rm is None:
            return 0
        lb, rb = lm.bucket(left), rm.bucket(right)
        if (lb is None) != (rb is None):
            return -1 if lb is not None else 1
        if left.job != right.job or lb is None or rb is None:
            return 0
        if len(lb.tasks) != len(rb.tasks):
            return -1 if len(lb.tasks) > len(rb.tasks) else 1
        if lb.index == rb.index:
            return -lm.affinity_order(left, right)
        return -1 if lb.index < rb.index else 1

    def bucket_score(self, task: TaskInfo, node: NodeInfo) -> tuple[int, JobManager | None]:
        """Volcano's calcBucketScore."""
        room = node.idle + node.releasing
        if not task.resreq.less_equal(room, Missing.ZERO):
            return 0, None
        manager = self.managers.get(task.job)
        if manager is None:
            return 0, None
        bucket = manager.bucket(task)
        if bucket is None:
            return 0, manager
        score = bucket.node.get(node.name, 0)
        here = manager.node_tasks.get(node.name)
        if here:
            repel = manager.task_set_affinity(task.role, here, True)
            if repel < 0:
                score += repel
        score += len(bucket.tasks)
        if bucket.request.less_equal(room, Missing.ZERO):
            return score, manager
        remains = bucket.request
        for uid, other in bucket.tasks.items():
            if uid == task.uid:
                continue
            remains = remains - other.resreq
            score -= 1
            if remains.less_equal(room, Missing.ZERO):
                break
        return score, manager

    def node_score(self, task: TaskInfo, node: NodeInfo) -> float:
        """Volcano's NodeOrderFn."""
        score, manager = self.bucket_score(task, node)
        value = float(score * self.weight)
        if manager is not None and manager.max_size:
            value = value * MAX_NODE_SCORE / manager.max_size
        return value

    def scorer(self, task: TaskInfo) -> Scorer | None:
        if task.job not in self.managers:
            return None
        nodes = self.session.node_list

        def score(_eff: FloatArray) -> FloatArray:
            return np.array([self.node_score(task, n) for n in nodes], dtype=np.float64)

        return score

    def _allocate(self, task: TaskInfo) -> None:
        manager = self.managers.get(task.job)
        if manager is not None:
            manager.task_bound(task)
