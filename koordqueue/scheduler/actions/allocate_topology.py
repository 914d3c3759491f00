"""allocate's HyperNode-aware path (Volcano v1.14.1's allocateForJob / allocateForSubJob, and
the soft-mode bookkeeping of allocateResourcesForTasks), kept apart from allocate.py.

A job whose networkTopology is hard (mode hard with a highest tier, given or named) is tried
in the HyperNodes the gradient plugin offers, one group (tier) at a time: in each HyperNode
of the group its tasks are placed on that HyperNode's nodes alone, as a dry run undone at
once; of the HyperNodes where the gang became ready (or pipelined) the best-scored one wins
(HyperNode scores, e.g. network-topology-aware's binpacking) and its placements are made
again for real. A later group is tried only when no HyperNode of this one worked.

Any job with a networkTopology (hard or soft) keeps, while its pods are placed, the HyperNode
they span so far (the lowest common ancestor of their nodes' lowest-tier HyperNodes): the
plugin's node scores pull the next pod towards it. A soft job's span is kept when it ends its
turn ready; a hard job's becomes the lowest common ancestor of what it spanned and the
HyperNode chosen.

Where a topology stops a job, the reason is recorded for `explain` and the PodGroup's
condition (framework/skips.py, kind PluginRefused, naming network-topology-aware).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final, Protocol

import numpy as np

from koordqueue.scheduler.api import FitErrors, JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api import topology_names as tn
from koordqueue.scheduler.api.task_info import PlacementKey
from koordqueue.scheduler.framework.placement import BoolArray
from koordqueue.scheduler.framework.session import JobQueue, Session
from koordqueue.scheduler.framework.skips import Skip, TaskSkip
from koordqueue.scheduler.framework.statement import Operation, OpKind, Statement
from koordqueue.scheduler.framework.topology import CLUSTER_TOP

PLUGIN: Final = "network-topology-aware"
"""The plugin the refusals are attributed to (its gradients and scores decide them)."""

Placed = Callable[[TaskInfo, NodeInfo], None]


class AllocateTasks(Protocol):
    """allocate's per-task loop (`AllocateAction._allocate_tasks`)."""

    def __call__(
        self,
        session: Session,
        statement: Statement,
        *,
        queue: QueueInfo,
        job: JobInfo,
        tasks: list[TaskInfo],
        jobs: JobQueue,
        shapes: dict[PlacementKey, FitErrors | None],
        within: BoolArray | None = None,
        placed: Placed | None = None,
    ) -> None: ...


class HyperNodeFitErrors(FitErrors):
    """Fit errors of a task tried within one HyperNode: "In hyperNode X: ..." (Volcano's
    FitErrors.SetHyperNode), after the refusal they led to when there is one ("network-
    topology-aware: the job fits in no hyperNode ...: In hyperNode X: ...")."""

    __slots__ = ("hypernode", "refusal")

    def __init__(self, hypernode: str, errors: FitErrors, refusal: str = "") -> None:
        super().__init__(errors.total_nodes, errors.node_reasons)
        self.hypernode = hypernode
        self.refusal = refusal

    def message(self) -> str:
        inside = tn.IN_HYPERNODE.format(hypernode=self.hypernode, message=super().message())
        return f"{self.refusal}: {inside}" if self.refusal else inside


def refuse(session: Session, job: JobInfo, detail: str) -> None:
    """Record why the topology stops `job`: the job's skip entry names the plugin and the
    rule (its gang condition ends with it); each of its tasks tried in a HyperNode gets
    that refusal ahead of its per-node summary there."""
    message = f"{PLUGIN}: {detail}"
    skips = session.skips
    skips.job(job.uid, TaskSkip(Skip.PLUGIN, None, message))
    for uid, task in job.tasks.items():
        if task.status is not TaskStatus.PENDING:
            continue
        errors = session.fit_errors.get(uid)
        if isinstance(errors, HyperNodeFitErrors):
            refused = HyperNodeFitErrors(errors.hypernode, errors, message)
            session.fit_errors[uid] = refused
            skips.task(uid, job.uid, TaskSkip(Skip.PLUGIN, refused, message))


def waits(session: Session, job: JobInfo) -> bool:
    """A job with a networkTopology waits while the HyperNode tree is not ready (a cycle, a
    HyperNode with two parents): Volcano's allocate skips it then."""
    if job.network_topology is None or not session.hypernodes:
        return False
    topo = session.topology
    if topo.ready:
        return False
    errors = "; ".join(topo.layout.tree.errors)
    refuse(session, job, tn.NOT_READY.format(errors=errors))
    warning = tn.NOT_READY.format(errors=errors)
    if warning not in session.warnings:
        session.warnings.append(warning)
    return True


class Span:
    """The HyperNode a job's placements span while it is being placed (the plugin's node
    scores read it: `SessionTopology.scoring`)."""

    def __init__(self, session: Session, job: JobInfo) -> None:
        self.session = session
        self.job = job
        self.topo = session.topology
        self.current = self.topo.job_hypernode(job)
        self.topo.scoring[job.uid] = self.current

    def __call__(self, task: TaskInfo, node: NodeInfo) -> None:
        leaf = self.topo.leaf_of(node)
        if leaf:
            self.current = self.topo.lca(leaf, self.current) if self.current else leaf
            self.topo.scoring[self.job.uid] = self.current
        job = self.job
        if (
            job.network_topology is not None
            and job.network_topology.soft
            and self.session.job_ready(job)
        ):
            self.topo.set_job_hypernode(job, self.current)


def span(session: Session, job: JobInfo) -> Span | None:
    """The span tracker of a job with a networkTopology (None for any other job)."""
    if job.network_topology is None or not session.hypernodes:
        return None
    return Span(session, job)


def hard_tier(session: Session, job: JobInfo) -> int | None:
    """The highest tier a hard-mode job may span, None for any other job."""
    if job.network_topology is None:
        return None
    topo = session.topology
    tier = job.network_topology.hard_tier(topo.tier_names)
    if tier is None and job.network_topology.highest_tier_name and not job.network_topology.soft:
        session.warnings.append(
            tn.UNKNOWN_TIER_NAME.format(name=job.network_topology.highest_tier_name)
        )
    return tier


class _Sink:
    """Stands for the queue's job queue during a dry run: the job is put back once a
    HyperNode is chosen, while tasks are left."""

    def push(self, job: JobInfo) -> None:
        """Ignored (see the class)."""


def allocate_hard(
    session: Session,
    *,
    queue: QueueInfo,
    job: JobInfo,
    tasks: list[TaskInfo],
    jobs: JobQueue,
    shapes: dict[PlacementKey, FitErrors | None],
    allocate_tasks: AllocateTasks,
) -> bool:
    """Place a hard-mode job through the HyperNode gradients (True), or do nothing and
    return False for any other job. `tasks` keeps the tasks left, as allocate's list."""
    tier = hard_tier(session, job)
    if tier is None:
        return False
    topo = session.topology
    before = topo.job_hypernode(job)
    gradients = session.hypernode_gradients(job, CLUSTER_TOP)
    size = len(session.node_list)
    tried: list[str] = []
    last: dict[str, FitErrors] = {}
    for group in gradients:
        trials: dict[str, tuple[list[Operation], list[TaskInfo]]] = {}
        scores: dict[str, float] = {}
        for hypernode in group:
            nodes = topo.nodes_of.get(hypernode)
            if nodes is None or not len(nodes):
                continue
            tried.append(hypernode)
            within = np.zeros(size, dtype=np.bool_)
            within[nodes] = True
            _reset_fit_errors(session, job)
            left = list(tasks)
            statement = Statement(session)
            track = Span(session, job)
            allocate_tasks(
                session,
                statement,
                queue=queue,
                job=job,
                tasks=left,
                jobs=_Sink(),  # type: ignore[arg-type]
                shapes=shapes,
                within=within,
                placed=track,
            )
            _label(session, job, hypernode)
            last = {t: e for t in job.tasks if (e := session.fit_errors.get(t)) is not None}
            operations = list(statement.operations)
            ready = session.job_ready(job)
            if operations and (ready or session.job_pipelined(job)):
                trials[hypernode] = (operations, left)
            statement.discard()
            if hypernode in trials:
                # scored one at a time on the state before the dry run (Volcano scores each
                # sub-job's HyperNode alone, so no tie-break by task count applies here)
                scores[hypernode] = session.hypernode_scores(job, [hypernode])[hypernode]
        topo.scoring.pop(job.uid, None)
        if not trials:
            continue
        best = max(trials, key=lambda h: scores[h])  # ties: the first in the group's order
        operations, left = trials[best]
        final = Statement(session)
        for op in operations:
            node = session.nodes[op.node]
            if op.kind is OpKind.PIPELINE:
                final.pipeline(op.task, node)
            else:
                final.allocate(op.task, node)
        tasks[:] = left
        if session.job_ready(job):
            final.commit()
            topo.set_job_hypernode(job, topo.lca(before, best))
            if tasks:  # Volcano puts the job back while its worksheet has tasks
                jobs.push(job)
        elif not session.job_pipelined(job):
            final.discard()
        return True
    for uid, errors in last.items():
        session.fit_errors[uid] = errors
    if not gradients:
        refuse(session, job, _no_gradient(session, job, tier, before))
    else:
        refuse(session, job, tn.NO_HYPERNODE_FITS.format(allowed=tier, tried=", ".join(tried)))
    return True


def _no_gradient(session: Session, job: JobInfo, tier: int, before: str) -> str:
    topo = session.topology
    if before and topo.tier(before) > tier:
        return tn.TIER_TOO_HIGH.format(hypernode=before, tier=topo.tier(before), allowed=tier)
    return tn.NO_HYPERNODE.format(allowed=tier)


def _reset_fit_errors(session: Session, job: JobInfo) -> None:
    """Volcano's job.ResetFitErr before each HyperNode: the job's fit errors (and what the
    skip record says of its tasks) are the last HyperNode's."""
    skips = session.skips
    skips.first_failure.pop(job.uid, None)
    for uid in job.tasks:
        session.fit_errors.pop(uid, None)
        skips.tasks.pop(uid, None)


def _label(session: Session, job: JobInfo, hypernode: str) -> None:
    """Name the HyperNode in the fit errors (and skip entries) a dry run left."""
    if hypernode == CLUSTER_TOP:
        return
    skips = session.skips
    for uid, task in job.tasks.items():
        if task.status is not TaskStatus.PENDING:
            continue
        errors = session.fit_errors.get(uid)
        if errors is not None and not isinstance(errors, HyperNodeFitErrors):
            session.fit_errors[uid] = HyperNodeFitErrors(hypernode, errors)
        entry = skips.tasks.get(uid)
        if entry is not None and entry.errors is not None and not isinstance(
            entry.errors, HyperNodeFitErrors
        ):
            skips.tasks[uid] = replace(entry, errors=HyperNodeFitErrors(hypernode, entry.errors))


__all__ = ["HyperNodeFitErrors", "Span", "allocate_hard", "hard_tier", "span", "waits"]
