"""A session's view of the HyperNode tree (Volcano's session fields HyperNodes,
HyperNodesSetByTier, HyperNodesTiers, RealNodesList and the jobs' allocated HyperNodes).

A virtual HyperNode, `CLUSTER_TOP`, sits one tier above the highest and holds every node of
the session, so a job without a topology is placed "in" it like any other (Volcano's
addClusterTopHyperNode).

What depends only on the HyperNodes and the nodes' names and labels (the tree, each
HyperNode's nodes as session node indices, the per-tier membership arrays the plugin's
scores gather through) is a `Layout`, cached between sessions while those are the same
objects: matching patterns and labels costs O(hypernodes x nodes).

A job's allocated HyperNode (the lowest one holding every pod it has placed) is recovered
from where its pods run the first time it is asked, as Volcano recovers it when it has none
(its cache keeps the value between sessions; koordqueue's sessions start from the cluster
alone, so recovery is the only source). Allocate updates it as it places the job's pods.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from koordqueue.scheduler.api.hypernode import (
    CLUSTER_TOP,
    HyperNode,
    HyperNodeTree,
    build_tree,
)
from koordqueue.scheduler.api.job_info import JobInfo
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.task_info import ALLOCATED_STATUSES, TaskInfo

IntArray = npt.NDArray[np.intp]

_CACHE_LOCK = threading.Lock()
_CACHE: list[tuple[tuple[object, ...], Layout, tuple[object, ...]]] = []
"""The last layout built: (identity key, layout, the objects the key's ids belong to)."""


class Layout:
    """The tree over one node order: everything a session needs that the HyperNodes and the
    nodes' names and labels decide."""

    def __init__(self, tree: HyperNodeTree, nodes: Sequence[NodeInfo]) -> None:
        self.tree = tree
        self.ready = tree.ready
        position = {n.name: i for i, n in enumerate(nodes)}
        self.top_tier = max(tree.by_tier, default=0) + 1
        self.names: list[str] = [*sorted(tree.infos), CLUSTER_TOP]
        """Every HyperNode, by name, the cluster top last (its index: `index`)."""
        self.index = {name: i for i, name in enumerate(self.names)}
        self.tier_of: dict[str, int] = {n: i.tier for n, i in tree.infos.items()}
        self.tier_of[CLUSTER_TOP] = self.top_tier
        self.parent: dict[str, str] = {}
        self.children: dict[str, list[str]] = {CLUSTER_TOP: []}
        for name in self.names[:-1]:
            info = tree.infos[name]
            self.children[name] = list(info.children)
            self.parent[name] = info.parent or CLUSTER_TOP
            if not info.parent:
                self.children[CLUSTER_TOP].append(name)
        self.by_tier: dict[int, list[str]] = {t: list(v) for t, v in tree.by_tier.items()}
        self.by_tier[self.top_tier] = [CLUSTER_TOP]
        self.tiers: list[int] = sorted(self.by_tier)
        """Every tier with a HyperNode, lowest first (the top's included)."""
        everything = np.arange(len(nodes), dtype=np.intp)
        self.nodes_of: dict[str, IntArray] = {CLUSTER_TOP: everything}
        """HyperNode -> positions of the session's nodes under it (RealNodesList)."""
        self.names_of: dict[str, frozenset[str]] = {CLUSTER_TOP: frozenset(position)}
        for name, real in tree.real_nodes.items():
            here = sorted(position[n] for n in real if n in position)
            self.nodes_of[name] = np.asarray(here, dtype=np.intp)
            self.names_of[name] = frozenset(n for n in real if n in position)
        self.containing: list[list[int]] = [[] for _ in nodes]
        """Node position -> indices of every HyperNode holding it (the top included)."""
        for h, name in enumerate(self.names):
            for i in self.nodes_of[name].tolist():
                self.containing[i].append(h)
        self.tier_member: dict[int, IntArray] = {}
        """Tier (below the top) -> per node position, the index of the first HyperNode of
        that tier (by name) holding it, -1 for none."""
        for tier, names in self.by_tier.items():
            if tier == self.top_tier:
                continue
            member = np.full(len(nodes), -1, dtype=np.intp)
            for name in reversed(names):  # the first by name wins
                member[self.nodes_of[name]] = self.index[name]
            self.tier_member[tier] = member
        lowest = self.tiers[0]
        self.leaf = (
            self.tier_member[lowest]
            if lowest in self.tier_member
            else np.full(len(nodes), -1, dtype=np.intp)
        )
        """Per node position, the index of its HyperNode of the lowest tier, -1 for none
        (Volcano's FindHyperNodeForNode, which looks at the lowest tier only)."""
        flat: list[int] = []
        offsets: list[int] = []
        for name in self.names:
            offsets.append(len(flat))
            flat.extend(self.nodes_of[name].tolist())
        self.flat = np.asarray(flat, dtype=np.intp)
        self.offsets = np.asarray(offsets, dtype=np.intp)
        self.sizes = np.asarray([len(self.nodes_of[n]) for n in self.names], dtype=np.intp)

    def sums(self, matrix: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """(dims x nodes) -> (dims x hypernodes): each HyperNode's sum over its nodes."""
        out = np.zeros((matrix.shape[0], len(self.names)), dtype=np.float64)
        if len(self.flat):
            nonempty = self.sizes > 0
            summed = np.add.reduceat(matrix[:, self.flat], self.offsets[nonempty], axis=1)
            out[:, nonempty] = summed
        return out


def _layout_for(hypernodes: Sequence[HyperNode], nodes: Sequence[NodeInfo]) -> Layout:
    """The layout of `hypernodes` over `nodes`, reused while the HyperNode list, the node
    order and every node's labels object are the ones it was built from."""
    labels = tuple(n.labels for n in nodes)
    key: tuple[Any, ...] = (
        id(hypernodes), tuple(n.name for n in nodes), tuple(id(x) for x in labels)
    )
    with _CACHE_LOCK:
        if _CACHE and _CACHE[0][0] == key:
            return _CACHE[0][1]
    tree = build_tree(hypernodes, [(n.name, n.labels) for n in nodes])
    layout = Layout(tree, nodes)
    with _CACHE_LOCK:
        _CACHE[:] = [(key, layout, (hypernodes, labels))]  # keeps the ids' objects alive
    return layout


class SessionTopology:
    """The HyperNodes of one session, the cluster top included, over its nodes, and the
    HyperNode each job with a topology has been placed in."""

    def __init__(self, hypernodes: Sequence[HyperNode], nodes: Sequence[NodeInfo]) -> None:
        self.layout = (
            _layout_for(hypernodes, nodes) if hypernodes else Layout(HyperNodeTree(), nodes)
        )
        layout = self.layout
        self.ready = layout.ready
        """False with a cycle or a HyperNode claimed twice: jobs with a topology wait."""
        self.tiers = layout.tiers
        self.by_tier = layout.by_tier
        self.nodes_of = layout.nodes_of
        self.names_of = layout.names_of
        self.tier_names = layout.tree.tier_names()
        self.allocated: dict[str, str] = {}
        """Job uid -> its allocated HyperNode ("" for none), once asked or set."""
        self.scoring: dict[str, str] = {}
        """Job uid -> the HyperNode its placements so far in this allocate turn span
        (Volcano's task.JobAllocatedHyperNode): what the plugin's node scores compare to."""

    # --- the tree ------------------------------------------------------------------------
    def tier(self, name: str) -> int:
        return self.layout.tier_of.get(name, 0)

    def known(self, name: str) -> bool:
        return name in self.layout.tier_of

    def children(self, name: str) -> list[str]:
        return self.layout.children.get(name, [])

    def ancestors(self, name: str) -> list[str]:
        """`name` and its ancestors up to the cluster top, closest first."""
        parent = self.layout.parent
        out = [name]
        current = name
        while True:
            up = parent.get(current, "")
            if not up or up in out:
                return out
            out.append(up)
            current = up

    def lca(self, left: str, right: str) -> str:
        """Lowest common ancestor ("" when none; the other when one is empty)."""
        if not left:
            return right
        if not right:
            return left
        mine = set(self.ancestors(left))
        for ancestor in self.ancestors(right):
            if ancestor in mine:
                return ancestor
        return ""

    def leaf_of(self, node: NodeInfo) -> str:
        """The HyperNode of the lowest tier holding `node` ("" when none)."""
        i = int(self.layout.leaf[node.index]) if len(self.layout.leaf) else -1
        return self.layout.names[i] if i >= 0 else ""

    def task_count(self, hypernode: str, tasks: Iterable[TaskInfo]) -> int:
        """How many of `tasks` sit on a node of `hypernode` (FindJobTaskNumOfHyperNode)."""
        names = self.names_of.get(hypernode, frozenset())
        return sum(1 for t in tasks if t.node_name in names)

    # --- jobs ----------------------------------------------------------------------------
    def job_hypernode(self, job: JobInfo) -> str:
        """The job's allocated HyperNode: the lowest-tier HyperNode (the cluster top
        included) holding every node its allocated pods are on, "" when none is placed or
        the tree is not ready (Volcano's recoverAllocatedHyperNode)."""
        found = self.allocated.get(job.uid)
        if found is None:
            found = self.allocated[job.uid] = self._recover(job)
        return found

    def set_job_hypernode(self, job: JobInfo, hypernode: str) -> None:
        self.allocated[job.uid] = hypernode

    def _recover(self, job: JobInfo) -> str:
        if not self.ready or job.network_topology is None:
            return ""
        hosts = {
            t.node_name
            for status in ALLOCATED_STATUSES
            for t in job.task_status_index.get(status, {}).values()
            if t.node_name
        }
        if not hosts:
            return ""
        best = ""
        for name in self.layout.names:
            if hosts <= self.names_of[name] and (not best or self.tier(name) < self.tier(best)):
                best = name
        return best


__all__ = ["CLUSTER_TOP", "Layout", "SessionTopology"]
