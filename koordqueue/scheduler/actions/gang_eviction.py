"""What gangpreempt and gangreclaim share (Volcano v1.15's actions/utils): victim bundles,
eviction domains, and the dry run that decides whether evicting a set of victims lets a
starving job in.

A **bundle** is a victim job's candidates on one domain, split in two: the *safe* tasks,
whose eviction leaves the victim gang ready (its ready count, and each role minimum, stays
at or above its minimum), and the *whole* tasks, whose eviction would break it (whole
bundles cost the victim job all of its tasks: their "global" resources are the job's). A
job already below its minimum is all safe (it cannot break further). Bundles are ordered
safe first, then by the victims' job (preempt: reverse job order) or queue (reclaim: victim
queue order), then by return on investment (how much of the need a bundle covers, over what
it costs), then by job and task uid.

A **domain** is a HyperNode the starving job may run in: the network-topology-aware
plugin's eviction gradients (widest first, capped), or the cluster top for a job without a
hard topology.

The **nomination plan** evicts the chosen victims and pipelines every pending task of the
job onto the domain's nodes (each task on its best node: idle room first, else future idle);
it stands only when the job becomes pipelined, and the session is left as it was either way
(the caller redoes the plan in its own statement).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

import numpy as np

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api.resource import fits
from koordqueue.scheduler.api.task_info import ALLOCATED_STATUSES
from koordqueue.scheduler.framework.callbacks import PURPOSE_EVICT
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.statement import Operation, OpKind, Statement
from koordqueue.scheduler.framework.topology import CLUSTER_TOP

DEFAULT_MAX_DOMAINS: Final = 8
DEFAULT_WHOLE_BUNDLE: Final = True


class BundleType(IntEnum):
    SAFE = 0
    WHOLE = 1


@dataclass(slots=True)
class Bundle:
    """One victim job's candidates of one kind; `local` what they free, `global_` what
    evicting them costs (the whole job for a whole bundle, nothing for a safe one)."""

    type: BundleType
    job: JobInfo
    tasks: list[TaskInfo]
    local: Resources = field(default_factory=Resources)
    global_: Resources = field(default_factory=Resources)


BundleLess = Callable[[Bundle, Bundle], bool]
"""Should the first bundle's victims go before the second's (victim job or queue order)."""


def requests(tasks: Iterable[TaskInfo]) -> Resources:
    """The tasks' requests summed (SumResreq)."""
    total: dict[str, int] = {}
    for task in tasks:
        for name, amount in task.resreq.items():
            total[name] = total.get(name, 0) + amount
    return Resources(total)


def init_requests(tasks: Iterable[TaskInfo]) -> Resources:
    """What the tasks need to fit, summed (SumInitResreq)."""
    total: dict[str, int] = {}
    for task in tasks:
        for name, amount in task.request.items():
            total[name] = total.get(name, 0) + amount
    return Resources(total)


_sum = requests


def create_job_bundles(job: JobInfo, local: list[TaskInfo]) -> list[Bundle]:
    """A victim job's candidates split into a safe and a whole bundle (Volcano's
    CreateJobBundles, without sub-groups: koordqueue has none)."""
    if not local:
        return []
    local = sorted(local, key=lambda t: (t.priority, t.uid))
    surplus = job.ready_task_num() - job.min_available
    if surplus < 0:
        return [Bundle(BundleType.SAFE, job, local, _sum(local), Resources())]
    roles = job.task_min_available
    enforce_roles = bool(roles) and job.min_available >= sum(roles.values())
    role_surplus: dict[str, int] = {}
    if enforce_roles:
        ready: dict[str, int] = {}
        for status, bucket in job.task_status_index.items():
            for task in bucket.values():
                if status in ALLOCATED_STATUSES or status is TaskStatus.SUCCEEDED or (
                    status is TaskStatus.PENDING and task.request.is_zero()
                ):
                    ready[task.role] = ready.get(task.role, 0) + 1
        role_surplus = {role: ready.get(role, 0) - need for role, need in roles.items()}
    safe: list[TaskInfo] = []
    whole: list[TaskInfo] = []
    for task in local:
        limited = enforce_roles and task.role in roles
        role_safe = role_surplus[task.role] > 0 if limited else True
        if surplus > 0 and role_safe:
            safe.append(task)
            surplus -= 1
            if limited:
                role_surplus[task.role] -= 1
        else:
            whole.append(task)
    out: list[Bundle] = []
    if safe:
        out.append(Bundle(BundleType.SAFE, job, safe, _sum(safe), Resources()))
    if whole:
        out.append(Bundle(BundleType.WHOLE, job, whole, _sum(whole), _sum(job.tasks.values())))
    return out


def flatten(bundles: Iterable[Bundle]) -> list[TaskInfo]:
    return [t for b in bundles for t in b.tasks]


def apply_allowed(bundles: Iterable[Bundle], allowed: set[str]) -> list[Bundle]:
    """Bundles cut down to the allowed tasks: a whole bundle stays only if every task of it
    is allowed, a safe one keeps its allowed tasks (ApplyAllowedTasks)."""
    out: list[Bundle] = []
    for bundle in bundles:
        if not bundle.tasks:
            continue
        kept = [t for t in bundle.tasks if t.uid in allowed]
        if bundle.type is BundleType.WHOLE:
            if len(kept) == len(bundle.tasks):
                out.append(bundle)
        elif kept:
            out.append(Bundle(bundle.type, bundle.job, kept, _sum(kept), bundle.global_))
    return out


def select_bundles(bundles: Iterable[Bundle], need: Resources, allow_whole: bool) -> list[Bundle]:
    """Bundles in order until they free `need` (whole ones skipped unless allowed)."""
    out: list[Bundle] = []
    freed = Resources()
    for bundle in bundles:
        if bundle.type is BundleType.WHOLE and not allow_whole:
            continue
        out.append(bundle)
        freed = freed + bundle.local
        if fits(need, freed):
            break
    return out


def _score(res: Resources, need: Resources, cap: bool) -> float:
    score = 0.0
    for name, wanted in need.items():
        if wanted <= 0:
            continue
        have = res.get(name, 0)
        if cap and have > wanted:
            have = wanted
        score += have / wanted
    return score


def roi(bundle: Bundle, need: Resources) -> float:
    """What a bundle gives towards `need` over what it costs (inf for a safe bundle)."""
    global_score = _score(bundle.global_, need, False)
    if global_score == 0:
        return math.inf
    return _score(bundle.local, need, True) / global_score


def _stable(bundle: Bundle) -> tuple[str, str, int]:
    first = bundle.tasks[0].uid if bundle.tasks else ""
    return (bundle.job.uid, first, len(bundle.tasks))


def sort_bundles(
    bundles: list[Bundle],
    need: Resources,
    less: BundleLess | None,
) -> None:
    """SortBundlesForPreempt / SortBundlesForReclaim: type, then `less` where it tells the
    two apart, then return on investment (higher first), then job and task uid."""

    def compare(a: Bundle, b: Bundle) -> int:
        if a.type != b.type:
            return -1 if a.type < b.type else 1
        if less is not None and a.job.uid != b.job.uid:
            ab, ba = less(a, b), less(b, a)
            if ab != ba:
                return -1 if ab else 1
        ra, rb = roi(a, need), roi(b, need)
        if ra != rb:
            return -1 if ra > rb else 1
        sa, sb = _stable(a), _stable(b)
        return -1 if sa < sb else (1 if sa > sb else 0)

    bundles.sort(key=functools.cmp_to_key(compare))


def job_evictable(job: JobInfo) -> bool:
    """May gang eviction take this job's tasks: unless its PodGroup says
    `volcano.sh/preemptable: "false"` (IsJobPreemptableForGangEviction)."""
    return job.preemptable


def pick_domains(gradients: list[list[str]], max_domains: int, fallback: str) -> list[str]:
    """Gradients flattened in order, without repeats, at most `max_domains`; `fallback`
    when there is none (PickDomainsFromGradients)."""
    seen: set[str] = set()
    out: list[str] = []
    for row in gradients:
        for name in row:
            if not name or name in seen:
                continue
            seen.add(name)
            out.append(name)
            if max_domains > 0 and len(out) >= max_domains:
                return out
    if not out and fallback:
        out.append(fallback)
    return out


def candidate_domains(session: Session, job: JobInfo, max_domains: int, hard: bool) -> list[str]:
    """The HyperNodes the job may be evicted for, widest first (GetCandidateDomains): a
    job without a hard topology falls back to the cluster top."""
    gradients = session.hypernode_gradients(job, CLUSTER_TOP, PURPOSE_EVICT)
    return pick_domains(gradients, max_domains, "" if hard else CLUSTER_TOP)


def pending_for_eviction(session: Session, job: JobInfo) -> list[TaskInfo]:
    """The job's pending tasks gang eviction places, in task order (not gated, requesting
    something: CollectPendingTasksForGangEviction, one sub-job)."""
    tasks = [t for t in job.pending_tasks() if not t.scheduling_gated and not t.best_effort]
    key = session.task_order_key()
    if key is not None:
        return sorted(tasks, key=key)
    less = session.task_order_less

    def compare(a: TaskInfo, b: TaskInfo) -> int:
        return -1 if less(a, b) else 1

    return sorted(tasks, key=functools.cmp_to_key(compare))


def domain_future(session: Session, domain: str) -> Resources:
    """Idle plus releasing over the domain's nodes (SumIdleAndReleasing)."""
    total: dict[str, int] = {}
    for i in session.topology.nodes_of.get(domain, np.zeros(0, dtype=np.intp)).tolist():
        node = session.nodes[session.node_list[i].name]
        idle, _used, releasing, _pipelined = node.accounting()
        for res in (idle, releasing):
            for name, amount in res.items():
                total[name] = total.get(name, 0) + amount
    return Resources(total)


def nomination_plan(
    session: Session,
    *,
    queue: QueueInfo | None,
    job: JobInfo,
    domain: str,
    victims: list[TaskInfo],
    reason: str,
) -> list[Operation] | None:
    """Evict `victims` and pipeline the job's pending tasks within `domain` (for a hard job,
    in the first HyperNode under it, widest first, where they all go); the operations when
    the job then is pipelined, else None. The session is left as it was."""
    tasks = pending_for_eviction(session, job)
    if not tasks or not len(session.topology.nodes_of.get(domain, ())):
        return None
    chain: list[Statement] = []
    try:
        if victims:
            evict = Statement(session)
            for victim in victims:
                evict.evict(victim, reason)
            chain.append(evict)
        if job.network_topology is not None and job.network_topology.hard_tier(
            session.topology.tier_names
        ) is not None:
            # the sub-job form (simulate.go): a HyperNode must hold the pending requests
            gradients = session.hypernode_gradients(job, domain, PURPOSE_EVICT,
                                                    job.pending_request())  # fmt: skip
            places = [h for row in gradients for h in row]
        else:
            places = [domain]
        trial = None
        for place in places:
            trial = _trial(session, queue, job, tasks, place)
            if trial is not None:
                break
        if trial is None:
            return None
        chain.append(trial)
        if not session.job_pipelined(job):
            return None
        return [op for statement in chain for op in statement.operations]
    finally:
        for statement in reversed(chain):
            statement.discard()


def _trial(
    session: Session, queue: QueueInfo | None, job: JobInfo, tasks: list[TaskInfo], place: str
) -> Statement | None:
    """Pipeline every task in `place`'s nodes (runSimulateTrialAtHyperNode); None, with
    nothing left applied, when one does not fit or the job is neither ready nor
    pipelined after."""
    nodes = session.topology.nodes_of.get(place)
    if nodes is None or not len(nodes):
        return None
    within = np.zeros(len(session.node_list), dtype=np.bool_)
    within[nodes] = True
    trial = Statement(session)
    for task in tasks:
        if queue is not None and not session.allocatable(queue, task):
            trial.discard()
            return None
        if session.pre_predicate(task) is not None:
            trial.discard()
            return None
        choice = session.select_node(task, within)
        if not isinstance(choice, tuple):
            trial.discard()
            return None
        trial.pipeline(task, choice[0])
    if not trial.operations or not (session.job_ready(job) or session.job_pipelined(job)):
        trial.discard()
        return None
    return trial


def replay(statement: Statement, operations: list[Operation]) -> None:
    """Redo a plan's operations in `statement` (Volcano's RecoverOperations)."""
    session = statement.session
    for op in operations:
        if op.kind is OpKind.EVICT:
            statement.evict(op.task, op.reason)
        elif op.kind is OpKind.PIPELINE:
            statement.pipeline(op.task, session.nodes[op.node])
        else:
            statement.allocate(op.task, session.nodes[op.node])


__all__ = [
    "DEFAULT_MAX_DOMAINS",
    "DEFAULT_WHOLE_BUNDLE",
    "Bundle",
    "BundleLess",
    "BundleType",
    "apply_allowed",
    "candidate_domains",
    "create_job_bundles",
    "domain_future",
    "flatten",
    "init_requests",
    "job_evictable",
    "nomination_plan",
    "pending_for_eviction",
    "pick_domains",
    "replay",
    "requests",
    "roi",
    "select_bundles",
    "sort_bundles",
]
