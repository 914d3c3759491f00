"""nodegroup: Volcano's queue affinity to node groups (its plugin of that name).

As in Volcano:
- a node's group is its `volcano.sh/nodegroup-name` label; a Queue's `spec.affinity` names
  groups in `nodeGroupAffinity` / `nodeGroupAntiAffinity`, each required and preferred;
- the **predicate** lets a queue's pods on a node whose group the queue's affinity names
  (required or preferred), unless anti-affinity requires it away (a preferred anti-affinity
  lets it back in); a node without the label passes only with `strict: false` and a queue
  without affinity; a labelled node refuses a queue without affinity. Every refusal is
  UnschedulableAndUnresolvable, so preempt does not try such a node either;
- the **score** is 100 for a required group, plus 50 for a preferred one (with
  `enablePreferredOrder`, 50 x (n - i) / n for the i-th of n preferred groups), and -1 for
  a group the anti-affinity prefers against;
- with `enableHierarchy`, a queue without affinity takes its nearest ancestor's (the parent
  chain through `spec.parent`, "root" when unset);
- the Queue annotation `volcano.sh/nodegroup-resource-limits` ({group: resources}) caps
  what the queue's pods may hold in each group (only the resources named); an annotation
  that does not parse refuses every node to the queue's pods.

The predicate and score depend on the task's queue and, with limits, on what the session
has placed: they are query-time callbacks (`PlacementEngine.add_dynamic_*`), not cached
by placement key. The per-queue node masks and scores are built once per session.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import NodeInfo, QueueInfo, TaskInfo
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.api.queue_info import NodeGroupAffinity
from koordqueue.scheduler.api.resource import EPSILON_NANOS
from koordqueue.scheduler.api.task_info import ALLOCATED_STATUSES
from koordqueue.scheduler.framework.interface import Arguments, ExtensionPoint, Plugin
from koordqueue.scheduler.framework.placement import BoolArray, FloatArray, Scorer
from koordqueue.scheduler.framework.session import EventHandler, Session
from koordqueue.scheduler.interpod import plugin_enabled

_HALF: Final = 0.5 * vn.NODEGROUP_BASE_SCORE


def admits(affinity: NodeGroupAffinity, group: str) -> bool:
    """Volcano's queueGroupAffinity.predicate: anti-affinity required outweighs affinity,
    and a preferred anti-affinity lets the group back in."""
    allowed = group in affinity.required or group in affinity.preferred
    if group in affinity.anti_required:
        allowed = False
    if group in affinity.anti_preferred:
        allowed = True
    return allowed


def group_score(affinity: NodeGroupAffinity, group: str, preferred_order: bool) -> float:
    """Volcano's queueGroupAffinity.score."""
    score = vn.NODEGROUP_BASE_SCORE if group in affinity.required else 0.0
    if group in affinity.preferred:
        if preferred_order:
            n = len(affinity.preferred)
            score += _HALF * (n - affinity.preferred.index(group)) / n
        else:
            score += _HALF
    if group in affinity.anti_preferred:
        score = -1.0
    return score


def _unset(affinity: NodeGroupAffinity | None) -> bool:
    return affinity is None or not (
        affinity.required or affinity.preferred or affinity.anti_required
        or affinity.anti_preferred
    )


def parse_limits(raw: str | None) -> dict[str, Resources]:
    """The `volcano.sh/nodegroup-resource-limits` annotation: group -> the resources capped
    (ValueError naming the annotation when it is not a JSON map of resource lists)."""
    if not raw:
        return {}
    try:
        decoded = json.loads(raw)
        if not isinstance(decoded, dict):
            raise ValueError("not a JSON object")
        limits: dict[str, Resources] = {}
        for group, amounts in decoded.items():
            if not isinstance(amounts, dict):
                raise ValueError(f"group {group!r} is not a resource list")
            limits[str(group)] = Resources.of({str(k): str(v) for k, v in amounts.items()})
        return limits
    except ValueError as exc:  # JSONDecodeError and bad quantities are ValueErrors
        raise ValueError(f"parse annotation {vn.NODE_GROUP_LIMITS_ANNOTATION}: {exc}") from exc


def exceeded(used: Mapping[str, int], limit: Resources) -> list[str]:
    """The resources `limit` names that `used` goes over (by more than Volcano's epsilon)."""
    return [
        name for name, cap in limit.items()
        if used.get(name, 0) > cap and used.get(name, 0) - cap >= EPSILON_NANOS
    ]


@dataclass
class QueueAttr:
    """One queue's affinity (its own, or inherited) and its use of each limited group."""

    affinity: NodeGroupAffinity | None
    limits: dict[str, Resources] = field(default_factory=dict)
    limit_error: str | None = None
    allocated: dict[str, Resources] = field(default_factory=dict)
    mask: BoolArray | None = None
    """Nodes the affinity admits (limits aside), built on first use."""
    scores: FloatArray | None = None


class NodeGroupPlugin(Plugin):
    """Filters and scores nodes by their group against the task's queue's affinity."""

    name = vn.NODEGROUP
    quiet = True

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        self.strict = self.arguments.get_bool(vn.NODEGROUP_STRICT, True)
        self.preferred_order = self.arguments.get_bool(vn.NODEGROUP_PREFERRED_ORDER, False)
        self.attrs: dict[str, QueueAttr] = {}

    # --- session open ----------------------------------------------------------------------
    def on_session_open(self, session: Session) -> None:
        self.session = session
        self.attrs = {name: self._attr(q) for name, q in session.queues.items()}
        for name, attr in sorted(self.attrs.items()):
            if attr.limit_error is not None:
                session.warnings.append(vn.NODE_GROUP_LIMITS_WARNING.format(
                    queue=name, key=vn.NODE_GROUP_LIMITS_ANNOTATION, error=attr.limit_error))
        if session.hierarchy_enabled(self.name):
            self._inherit(session.queues)
        self.groups = [node.labels.get(vn.NODE_GROUP_NAME_LABEL) for node in session.node_list]
        self.size = len(self.groups)
        for job in session.jobs.values():
            held = self.attrs.get(job.queue)
            if held is None or not held.limits:
                continue
            for status, tasks in job.task_status_index.items():
                if status in ALLOCATED_STATUSES:
                    for task in tasks.values():
                        self._account(held, task, 1)
        if plugin_enabled(session, self.name, ExtensionPoint.PREDICATE):
            session.placement.add_dynamic_predicate(self.predicate, self.explain)
        if plugin_enabled(session, self.name, ExtensionPoint.NODE_ORDER):
            session.placement.add_dynamic_score(self.scorer)
        session.add_event_handler(
            self.name, EventHandler(allocate=self._allocate, deallocate=self._deallocate)
        )

    @staticmethod
    def _attr(queue: QueueInfo) -> QueueAttr:
        try:
            limits = parse_limits(queue.node_group_limits)
        except ValueError as exc:
            return QueueAttr(queue.node_group_affinity, limit_error=str(exc))
        return QueueAttr(queue.node_group_affinity, limits)

    def _inherit(self, queues: Mapping[str, QueueInfo]) -> None:
        """A queue without affinity takes its nearest ancestor's (a cycle stops the walk)."""
        for name, attr in self.attrs.items():
            if attr.affinity is not None:
                continue
            seen = {name}
            current = name
            while current != vn.NODEGROUP_ROOT_QUEUE:
                parent = queues[current].parent or vn.NODEGROUP_ROOT_QUEUE
                if parent in seen or parent not in queues:
                    break
                seen.add(parent)
                ancestor = self.attrs[parent].affinity
                if ancestor is not None:
                    attr.affinity = ancestor
                    break
                current = parent

    # --- accounting ------------------------------------------------------------------------
    def _group_of(self, task: TaskInfo) -> str | None:
        node = self.session.nodes.get(task.node_name or "")
        return None if node is None else node.labels.get(vn.NODE_GROUP_NAME_LABEL)

    def _account(self, attr: QueueAttr, task: TaskInfo, sign: int) -> None:
        group = self._group_of(task)
        if group is None or group not in attr.limits:
            return
        held = attr.allocated.get(group, Resources())
        attr.allocated[group] = held + task.resreq if sign > 0 else held - task.resreq

    def _queue_attr(self, task: TaskInfo) -> QueueAttr | None:
        job = self.session.jobs.get(task.job)
        return None if job is None else self.attrs.get(job.queue)

    def _allocate(self, task: TaskInfo) -> None:
        attr = self._queue_attr(task)
        if attr is not None and attr.limits:
            self._account(attr, task, 1)

    def _deallocate(self, task: TaskInfo) -> None:
        attr = self._queue_attr(task)
        if attr is not None and attr.limits:
            self._account(attr, task, -1)

    # --- predicate -------------------------------------------------------------------------
    def refusal(self, task: TaskInfo, node: NodeInfo) -> str | None:
        """Volcano's predicateFn: why the node is refused to the task's queue, or None."""
        attr = self._queue_attr(task)
        if attr is not None and attr.limit_error is not None:
            return vn.ERR_NODE_GROUP_LIMIT_INVALID
        affinity = None if attr is None else attr.affinity
        unset = _unset(affinity)
        group = node.labels.get(vn.NODE_GROUP_NAME_LABEL)
        if group is None:
            return None if not self.strict and unset else vn.ERR_NODE_GROUP_LABEL_NOT_FOUND
        if unset or affinity is None:
            return vn.ERR_NODE_GROUP_AFFINITY_NOT_FOUND
        if not admits(affinity, group):
            return vn.ERR_NODE_GROUP_UNSATISFIED
        assert attr is not None
        limit = attr.limits.get(group)
        if limit is not None and exceeded(attr.allocated.get(group, Resources()) + task.resreq,
                                          limit):
            return vn.ERR_NODE_GROUP_LIMIT_EXCEEDED
        return None

    def _static_mask(self, attr: QueueAttr | None) -> BoolArray:
        """The nodes the queue's affinity admits, limits aside (per queue, per session)."""
        if attr is not None and attr.mask is not None:
            return attr.mask
        affinity = None if attr is None else attr.affinity
        unset = _unset(affinity)
        mask = np.zeros(self.size, dtype=np.bool_)
        for i, group in enumerate(self.groups):
            if group is None:
                mask[i] = not self.strict and unset
            elif not unset and affinity is not None:
                mask[i] = admits(affinity, group)
        if attr is not None:
            attr.mask = mask
        return mask

    def predicate(self, task: TaskInfo) -> BoolArray | None:
        attr = self._queue_attr(task)
        if attr is not None and attr.limit_error is not None:
            return np.zeros(self.size, dtype=np.bool_)
        mask = self._static_mask(attr)
        if attr is None or not attr.limits:
            return mask
        over = [group for group, limit in attr.limits.items()
                if exceeded(attr.allocated.get(group, Resources()) + task.resreq, limit)]
        if not over:
            return mask
        mask = mask.copy()
        for i, group in enumerate(self.groups):
            if group in over:
                mask[i] = False
        return mask

    def explain(self, task: TaskInfo, node: NodeInfo) -> str | None:
        return self.refusal(task, node)

    # --- score -----------------------------------------------------------------------------
    def node_scores(self, task: TaskInfo) -> FloatArray:
        """Volcano's nodeOrderFn on every node (0 for unlabelled nodes and queues without
        affinity)."""
        attr = self._queue_attr(task)
        if attr is None or attr.affinity is None:
            return np.zeros(self.size, dtype=np.float64)
        if attr.scores is None:
            affinity = attr.affinity
            attr.scores = np.array(
                [0.0 if g is None else group_score(affinity, g, self.preferred_order)
                 for g in self.groups],
                dtype=np.float64,
            )
        return attr.scores

    def scorer(self, task: TaskInfo) -> Scorer | None:
        attr = self._queue_attr(task)
        if attr is None or attr.affinity is None:
            return None
        scores = self.node_scores(task)
        return lambda _eff: scores
