"""drf: dominant resource fairness (Volcano's `drf` plugin).

Always: jobs ordered by dominant share (lower first) and a preemptable rule (a victim's job
keeps at least the preemptor's share after the eviction).

`enableHierarchy: true` (off by default, as in Volcano): hierarchical DRF. Queues are placed in
a tree by their `volcano.sh/hierarchy` annotation ("root/eng/dev") with one weight per level
in `volcano.sh/hierarchy-weights` ("100/50/50"); jobs are the leaves. Queues are ordered by
the tree's weighted shares and reclaim takes a task only when the reclaimer's queue would
still come first afterwards.

`enableNamespaceOrder: true` (off by default; Volcano removed it in v1.8): namespace fair
ordering of Volcano <= v1.7, applied inside drf's job order and preemptable rule (jobs of the
namespace with the lower weighted share first; weight from the namespace label
`volcano.sh/namespace.weight`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo
from koordqueue.scheduler.api.names import (
    DRF_BAD_HIERARCHY_WARNING,
    DRF_BAD_NAMESPACE_WEIGHT_WARNING,
    NAMESPACE_WEIGHT_LABEL,
)
from koordqueue.scheduler.api.resource import EPSILON_NANOS, add, subtract
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.session import EventHandler, Session

_SHARE_DELTA = 1e-6
NAMESPACE_ORDER_SWITCH = "enableNamespaceOrder"
"""The Volcano <= v1.7 plugin switch that turns namespace fair ordering on."""

Amounts = dict[str, float]


@dataclass(frozen=True, slots=True)
class HierarchyPath:
    """A queue's place in the tree: the path below the root and each level's weight."""

    segments: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()
    problems: tuple[str, ...] = ()


def parse_hierarchy(hierarchy: str, weights: str) -> HierarchyPath:
    """Volcano's reading of the two annotations: the first path element stands for the root
    (its name is not checked), each later one is a child; a weight below 1 counts as 1.

    Where Volcano would panic (fewer weights than path elements) or silently read 0 (a
    non-numeric weight), the weight is 1 and a problem is reported; a path with an empty
    element is unusable and the queue's jobs sit directly under the root.
    """
    if not hierarchy:
        return HierarchyPath()
    paths = hierarchy.split("/")
    if any(not p.strip() for p in paths):
        return HierarchyPath(
            problems=(f"hierarchy {hierarchy!r} has an empty path element; ignored",)
        )
    raw = weights.split("/") if weights else []
    problems: list[str] = []
    if len(raw) != len(paths):
        problems.append(
            f"hierarchy {hierarchy!r} has {len(paths)} elements but hierarchy-weights"
            f" {weights!r} has {len(raw)}; a missing weight is 1"
        )
    parsed: list[float] = []
    for i in range(1, len(paths)):
        value = 1.0
        if i < len(raw):
            try:
                value = float(raw[i])
            except ValueError:
                problems.append(f"hierarchy weight {raw[i]!r} is not a number; 1 is used")
                value = 1.0
            if not math.isfinite(value):
                problems.append(f"hierarchy weight {raw[i]!r} is not finite; 1 is used")
                value = 1.0
        parsed.append(max(value, 1.0))
    return HierarchyPath(tuple(paths[1:]), tuple(parsed), tuple(problems))


def share(allocated: Mapping[str, int], total: Mapping[str, int]) -> float:
    """Volcano's calculateShare over Resources: max of allocated / total over the resources
    the cluster offers. A resource no node offers (a device plugin gone, a node removed) is
    not counted, as in Volcano; it does not make the job's share 1."""
    best = 0.0
    held = allocated.get
    for name, whole in total.items():
        if whole > 0:
            ratio = held(name, 0) / whole
            best = max(best, ratio)
    return best


def offered_dims(total: Mapping[str, int]) -> list[tuple[str, int]]:
    """The (resource, amount) pairs `share` divides by: those the cluster offers (> 0)."""
    return [(name, whole) for name, whole in total.items() if whole > 0]


def share_in(allocated: Mapping[str, int], offered: list[tuple[str, int]]) -> float:
    """`share(allocated, total)` with total's offered dimensions listed once (`offered_dims`):
    the same ratios in the same order, so the same float; asked once per placement."""
    best = 0.0
    held = allocated.get
    for name, whole in offered:
        ratio = held(name, 0) / whole
        if ratio > best:  # noqa: PLR1730 - max(): a call per dimension, per placement
            best = ratio
    return best


def dominant_share(allocated: Mapping[str, float], total: Mapping[str, float]) -> float:
    """Volcano's calculateShare: max over the cluster's resources of allocated / total
    (resources the cluster lacks are not counted)."""
    best = 0.0
    for name, whole in total.items():
        ratio = allocated.get(name, 0) / whole
        best = max(best, ratio)
    return best


def resource_saturated(
    allocated: Mapping[str, float], request: Mapping[str, float], demanding: frozenset[str]
) -> bool:
    """Volcano's resourceSaturated: the job got all it asked of some resource, or asks for
    one the cluster has fully handed out."""
    for name, amount in allocated.items():
        if amount < EPSILON_NANOS:
            continue
        wanted = request.get(name, 0)
        if wanted != 0 and amount >= wanted:
            return True
        if name not in demanding and wanted != 0:
            return True
    return False


@dataclass(eq=False, slots=True)
class _Node:
    """A tree node: an inner node (a hierarchy level) or a leaf (a job, `children` None)."""

    name: str
    weight: float
    parent: _Node | None
    children: dict[str, _Node] | None
    allocated: Amounts = field(default_factory=dict)
    request: Amounts = field(default_factory=dict)
    share: float = 0.0
    saturated: bool = False


_EMPTY = _Node("", 1.0, None, {}, saturated=True)
"""Stands for a node the tree lacks: an inner node without jobs (saturated, share 0)."""


def _leaf_key(uid: str) -> str:
    # a job uid may look like a path element; leaves get their own key space
    return "\x00" + uid


class HdrfTree:
    """Volcano's hierarchical DRF tree, kept up to date incrementally.

    Why incremental: Volcano recomputes the whole tree on every allocate; here a change
    recomputes the changed leaf's ancestors only, and the whole tree only when the set of
    demanding resources (not yet fully allocated) changes, which gives the same values
    (children are summed in insertion order, so the floats are identical too).
    """

    def __init__(self, total: Mapping[str, int]) -> None:
        self.total: Amounts = {k: float(v) for k, v in total.items() if v >= EPSILON_NANOS}
        self.total_allocated: dict[str, int] = {}
        self.root = _Node("root", 1.0, None, {})
        self.leaves: dict[str, _Node] = {}
        self._demanding: frozenset[str] | None = None

    # --- building -----------------------------------------------------------------------
    def add_path(self, path: HierarchyPath) -> _Node:
        """The inner node at `path`, created (with its level's weight) where missing: the
        first queue to name a node sets its weight, as in Volcano."""
        node = self.root
        for name, weight in zip(path.segments, path.weights, strict=True):
            assert node.children is not None
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = _Node(name, weight, node, {})
            node = child
        return node

    def add_job(
        self,
        uid: str,
        path: HierarchyPath,
        allocated: Mapping[str, int],
        request: Mapping[str, int],
    ) -> None:
        """Place a job as a leaf under its queue's node (shares are not updated: call
        `recompute` once every job is in)."""
        parent = self.add_path(path)
        assert parent.children is not None
        leaf = _Node(uid, 1.0, parent, None, dict(allocated), dict(request))
        parent.children[_leaf_key(uid)] = leaf
        self.leaves[uid] = leaf
        _accumulate_exact(self.total_allocated, allocated, 1)

    # --- updating -----------------------------------------------------------------------
    def demanding(self) -> frozenset[str]:
        """Resources the jobs have not yet fully taken."""
        used = self.total_allocated
        return frozenset(k for k, v in self.total.items() if used.get(k, 0) < v)

    def recompute(self) -> None:
        """Every node's share and saturation from the leaves up (Volcano's
        updateHierarchicalShare)."""
        self._demanding = self.demanding()
        self._update_subtree(self.root, self._demanding)

    def change(self, uid: str, delta: Mapping[str, int], sign: int) -> bool:
        """A job's allocation grew (sign 1) or shrank (-1) by `delta`; False for a job not
        in the tree."""
        leaf = self.leaves.get(uid)
        if leaf is None:
            return False
        _accumulate(leaf.allocated, delta, sign)
        _accumulate_exact(self.total_allocated, delta, sign)
        demanding = self.demanding()
        if demanding != self._demanding:
            self._demanding = demanding
            self._update_subtree(self.root, demanding)
            return True
        node: _Node | None = leaf
        while node is not None:
            self._update_node(node, demanding)
            node = node.parent
        return True

    def _update_subtree(self, node: _Node, demanding: frozenset[str]) -> None:
        if node.children is not None:
            for child in node.children.values():
                self._update_subtree(child, demanding)
        self._update_node(node, demanding)

    def _update_node(self, node: _Node, demanding: frozenset[str]) -> None:
        total = self.total
        if node.children is None:
            node.share = dominant_share(node.allocated, total)
            node.saturated = resource_saturated(node.allocated, node.request, demanding)
            return
        children = node.children.values()  # insertion order: fixed for the session
        # the smallest dominant share among children that still demand: the others are
        # scaled down to it, so a greedy child does not inflate its parent's share
        floor = 1.0
        for child in children:
            # Volcano recomputes the child's share here: the same function of the same amounts
            if child.share != 0 and not child.saturated and child.share < floor:
                floor = child.share
        allocated: Amounts = {}
        saturated = True
        for child in children:
            if not child.saturated:
                saturated = False
            if child.share == 0:
                continue
            factor = 1.0 if child.saturated else floor / child.share
            for name, amount in child.allocated.items():
                allocated[name] = allocated.get(name, 0.0) + amount * factor
        node.allocated = allocated
        node.share = dominant_share(allocated, total)
        node.saturated = saturated

    # --- reading ------------------------------------------------------------------------
    def compare(self, left: HierarchyPath, right: HierarchyPath) -> float:
        """Volcano's compareQueues: walk both paths from the root; at the first level where
        they differ, a demanding node beats a saturated one, then the lower share / weight
        wins (negative: left first)."""
        lnode = rnode = self.root
        depth = 1 + min(len(left.segments), len(right.segments))
        for i in range(depth):
            if not lnode.saturated and rnode.saturated:
                return -1.0
            if lnode.saturated and not rnode.saturated:
                return 1.0
            lv, rv = lnode.share / lnode.weight, rnode.share / rnode.weight
            if lv != rv:
                return lv - rv
            if i < depth - 1:
                lnode = _child(lnode, left.segments[i])
                rnode = _child(rnode, right.segments[i])
        return 0.0

    def snapshot(self) -> dict[tuple[str, ...], tuple[float, bool, tuple[tuple[str, float], ...]]]:
        """Every node's (share, saturated, allocated) by path; for tests."""
        out: dict[tuple[str, ...], tuple[float, bool, tuple[tuple[str, float], ...]]] = {}

        def walk(node: _Node, path: tuple[str, ...]) -> None:
            out[path] = (node.share, node.saturated, tuple(sorted(node.allocated.items())))
            for key, child in (node.children or {}).items():
                walk(child, (*path, key))

        walk(self.root, ("root",))
        return out


def _child(node: _Node, name: str) -> _Node:
    child = (node.children or {}).get(name)
    return child if child is not None and child.children is not None else _EMPTY


def _accumulate(into: Amounts, delta: Mapping[str, int], sign: int) -> None:
    for name, amount in delta.items():
        into[name] = into.get(name, 0) + sign * amount


def _accumulate_exact(into: dict[str, int], delta: Mapping[str, int], sign: int) -> None:
    # integers, so that an undo restores the amounts exactly
    for name, amount in delta.items():
        into[name] = into.get(name, 0) + sign * amount


def total_request(job: JobInfo) -> dict[str, int]:
    """Volcano's JobInfo.TotalRequest: the requests of all the job's tasks."""
    out: dict[str, int] = {}
    for task in job.tasks.values():
        _accumulate_exact(out, task.resreq.as_dict(), 1)
    return out


def _namespace_of(session: Session) -> Callable[[TaskInfo], str | None]:
    """A task's namespace is its job's (the same in a cluster; the job is what drf counts)."""

    def namespace_of(task: TaskInfo) -> str | None:
        job = session.jobs.get(task.job)
        return job.namespace if job is not None else None

    return namespace_of


def namespace_weight(labels: Mapping[str, str] | None) -> tuple[int, str | None]:
    """The namespace's weight (default 1) and the bad label value, if any."""
    raw = (labels or {}).get(NAMESPACE_WEIGHT_LABEL)
    if raw is None:
        return 1, None
    try:
        value = int(raw)
    except ValueError:
        return 1, raw
    return (value, None) if value >= 1 else (1, raw)


class DrfPlugin(Plugin):
    """Job share = max over resources of allocated / cluster total; kept current by events."""

    name = "drf"
    quiet = True

    def on_session_open(self, session: Session) -> None:
        total = session.total_resource
        # filled on first use from the job as the session opened it (the snapshot's job is
        # never written): a session no longer walks every job at open
        # (each job's amounts are a dict changed in place by the events: a placement
        # builds no resource list)
        allocated: dict[str, dict[str, int]] = {}
        offered = offered_dims(total)
        shares: dict[str, float] = {}
        self.shares = shares

        def held_of(uid: str) -> dict[str, int]:
            held = allocated.get(uid)
            if held is None:
                held = allocated[uid] = dict(session.original_job(uid).allocated_amounts())
            return held

        def allocated_of(uid: str) -> Resources:
            return Resources(held_of(uid))

        def share_of(uid: str) -> float:
            found = shares.get(uid)
            if found is None:
                if uid not in session.jobs:
                    return 0.0
                found = shares[uid] = share_in(held_of(uid), offered)
            return found

        namespaces = self._open_namespaces(session) if self._namespace_order(session) else None
        self.namespaces = namespaces
        tree: HdrfTree | None = None
        if session.hierarchy_enabled(self.name):
            tree, paths = self._open_tree(session)
            self._register_hierarchy(session, tree, paths)
        self.tree = tree

        def job_order(left: JobInfo, right: JobInfo) -> int:
            if namespaces is not None and left.namespace != right.namespace:
                lw, rw = namespaces.weighted(left.namespace), namespaces.weighted(right.namespace)
                if lw != rw:
                    return -1 if lw < rw else 1
            ls, rs = share_of(left.uid), share_of(right.uid)
            if ls == rs:
                return 0
            return -1 if ls < rs else 1

        def preemptable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            if preemptor.job not in session.jobs:
                return []  # Volcano: no victims from an orphaned preemptor
            victims: list[TaskInfo] = []
            if namespaces is not None:
                candidates = namespaces.preemptable(
                    preemptor, candidates, victims, _namespace_of(session)
                )
            mine = share(allocated_of(preemptor.job) + preemptor.resreq, total)
            # as in Volcano, each victim of a job is judged after the ones before it
            remaining: dict[str, Resources] = {}
            for candidate in candidates:
                if candidate.job not in session.jobs:
                    continue
                left = remaining.get(candidate.job)
                if left is None:
                    left = allocated_of(candidate.job)
                left = remaining[candidate.job] = subtract(left, candidate.resreq)
                theirs = share(left, total)
                if mine < theirs or abs(mine - theirs) <= _SHARE_DELTA:
                    victims.append(candidate)
            return victims

        def on_change(sign: int) -> Callable[[TaskInfo], None]:
            def handle(task: TaskInfo) -> None:
                if task.job not in session.jobs:
                    return
                held = held_of(task.job)
                get = held.get
                for name, amount in task.resreq.items():  # allocated +/- request, in place
                    held[name] = get(name, 0) + sign * amount
                # recomputed from `held` when next asked (`share_of`): a gang's placements
                # change it ~10 times per turn, the job order reads it once per push
                shares.pop(task.job, None)
                if namespaces is not None:
                    namespaces.change(session.jobs[task.job].namespace, task.resreq, sign)
                if tree is not None:
                    tree.change(task.job, task.resreq.as_dict(), sign)

            return handle

        # A job's share changes only with its own tasks' events; the namespace weights
        # change with other jobs' placements, so with namespace order there is no key.
        job_key = (lambda job: share_of(job.uid)) if namespaces is None else None
        session.add_job_order_fn(self.name, job_order, key=job_key)
        session.add_preemptable_fn(self.name, preemptable)
        session.add_event_handler(self.name, EventHandler(on_change(1), on_change(-1)))

    # --- hierarchy ----------------------------------------------------------------------
    def _open_tree(self, session: Session) -> tuple[HdrfTree, dict[str, HierarchyPath]]:
        """Every job of the session as a leaf (in uid order, so the first queue to name a
        node is deterministic), then the paths of queues without jobs."""
        paths: dict[str, HierarchyPath] = {}
        for queue in sorted(session.queues.values(), key=lambda q: q.name):
            path = parse_hierarchy(queue.hierarchy, queue.hierarchy_weights)
            paths[queue.name] = path
            for problem in path.problems:
                session.warnings.append(
                    DRF_BAD_HIERARCHY_WARNING.format(
                        queue=queue.name, detail=problem, action="the queue is still scheduled"
                    )
                )
        tree = HdrfTree(session.total_resource)
        for uid in session.jobs:
            job = session.jobs[uid]
            if job.queue in paths:
                tree.add_job(uid, paths[job.queue], job.allocated_amounts(), total_request(job))
        for name in sorted(paths):
            tree.add_path(paths[name])
        tree.recompute()
        return tree, paths

    def _register_hierarchy(
        self, session: Session, tree: HdrfTree, paths: Mapping[str, HierarchyPath]
    ) -> None:
        none = HierarchyPath()

        def queue_order(left: QueueInfo, right: QueueInfo) -> int:
            ret = tree.compare(paths.get(left.name, none), paths.get(right.name, none))
            return -1 if ret < 0 else 1 if ret > 0 else 0

        def reclaimable(reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo] | None:
            job = session.jobs.get(reclaimer.job)
            if job is None or job.queue not in paths or reclaimer.job not in tree.leaves:
                return []  # Volcano: no victims for an orphaned reclaimer
            mine = paths[job.queue]
            grow = reclaimer.resreq.as_dict()
            victims: list[TaskInfo] = []
            tree.change(reclaimer.job, grow, 1)
            try:
                for candidate in candidates:
                    owner = session.jobs.get(candidate.job)
                    if owner is None or owner.queue not in paths:
                        continue
                    shrink = candidate.resreq.as_dict()
                    if not tree.change(candidate.job, shrink, -1):
                        continue
                    ret = tree.compare(mine, paths[owner.queue])
                    tree.change(candidate.job, shrink, 1)
                    if ret < 0:
                        victims.append(candidate)
            finally:
                tree.change(reclaimer.job, grow, -1)
            return victims

        session.add_queue_order_fn(self.name, queue_order)
        session.add_reclaimable_fn(self.name, reclaimable)

    # --- namespace order ----------------------------------------------------------------
    def _namespace_order(self, session: Session) -> bool:
        for tier in session.config.tiers:
            for option in tier.plugins:
                if option.name == self.name:
                    return option.switches.get(NAMESPACE_ORDER_SWITCH, False)
        return False

    def _open_namespaces(self, session: Session) -> NamespaceShares:
        shares = NamespaceShares(session.total_resource)
        for uid in session.jobs:
            job = session.jobs[uid]
            shares.change(job.namespace, job.allocated, 1)
        for name in sorted(shares.allocated):
            weight, bad = namespace_weight(session.namespace_labels.get(name))
            shares.weights[name] = weight
            if bad is not None:
                session.warnings.append(
                    DRF_BAD_NAMESPACE_WEIGHT_WARNING.format(namespace=name, value=bad)
                )
        return shares


class NamespaceShares:
    """Per-namespace allocation and weighted dominant share (Volcano <= v1.7)."""

    def __init__(self, total: Resources) -> None:
        self.total = total
        self.allocated: dict[str, Resources] = {}
        self.weights: dict[str, int] = {}
        self._shares: dict[str, float] = {}

    def change(self, namespace: str, delta: Resources, sign: int) -> None:
        """A task of `namespace` was allocated (sign 1) or released (-1)."""
        current = self.allocated.get(namespace, Resources())
        res = add(current, delta) if sign > 0 else subtract(current, delta)
        self.allocated[namespace] = res
        self._shares[namespace] = share(res, self.total)

    def weight(self, namespace: str) -> int:
        """The namespace's weight (1 unless its label says otherwise)."""
        return self.weights.get(namespace, 1)

    def weighted(self, namespace: str) -> float:
        """Dominant share / weight."""
        return self._shares.get(namespace, 0.0) / self.weight(namespace)

    def preemptable(
        self,
        preemptor: TaskInfo,
        candidates: Sequence[TaskInfo],
        victims: list[TaskInfo],
        namespace_of: Callable[[TaskInfo], str | None],
    ) -> list[TaskInfo]:
        """Volcano <= v1.7's namespace policy: a task of another namespace is a victim when
        its namespace keeps a higher weighted share than the preemptor's would reach, spared
        when lower; same namespace or (nearly) equal shares are left to the job rule (the
        returned candidates). Tasks of unknown jobs are left to the job rule too."""
        home = namespace_of(preemptor)
        if home is None:
            return list(candidates)
        mine = share(add(self.allocated.get(home, Resources()), preemptor.resreq), self.total)
        mine /= self.weight(home)
        remaining: dict[str, Resources] = {}
        undecided: list[TaskInfo] = []
        for candidate in candidates:
            ns = namespace_of(candidate)
            if ns is None or ns == home:
                undecided.append(candidate)
                continue
            left = remaining.get(ns)
            if left is None:
                left = self.allocated.get(ns, Resources())
            left = remaining[ns] = subtract(left, candidate.resreq)
            theirs = share(left, self.total) / self.weight(ns)
            if mine < theirs:
                victims.append(candidate)
            elif mine - theirs <= _SHARE_DELTA:
                undecided.append(candidate)
        return undecided
