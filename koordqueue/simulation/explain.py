"""Why is my job pending: one explanation, read from a dry round of the real engine.

Explain does not re-derive the queue rules: it runs `AdmissionEngine.dry_round` (the round
the controller would run next, on a copy) and reports the outcome the round recorded for the
unit, with the numbers behind it: the verdict is the unit's entry (finished and admitted
units included), the position its place in the round's `waiting`, and each level of the
chain carries CheckUsage's own verdict (`QuotaTree.levels`). For a replayed scenario the
engine is the simulator's own, policy state included (which unit blocks a quota and since
when). For a live cluster the engine is rebuilt from the API objects exactly as the
controller folds them, so what lives only in the controller's memory is not visible:
Block/Intelligent blocks (a rebuilt engine has none, as after a controller restart) and
back-off deadlines; the output says so.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from koordqueue.domain.admission import (
    EmptyQuotaSpec,
    QuotaCycle,
    QuotaExceeded,
    QuotaMissing,
    Rejection,
)
from koordqueue.domain.engine import RoundResult
from koordqueue.domain.mapping import QuotaName, UnresolvedReason, queue_name_for
from koordqueue.domain.names import (
    BLOCK_TIMEOUT_ANNOTATION,
    DEFAULT_POLICY,
    QUOTA_NAME_LABEL,
)
from koordqueue.domain.policies import QueueSettings
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.quota import is_oversold
from koordqueue.domain.quota_tree import QuotaTree
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import (
    Admit,
    BackingOff,
    BeyondMaxDepth,
    BlockedByHead,
    BudgetSpent,
    Deactivated,
    Finished,
    HighPriorityWaiting,
    Holding,
    Inactive,
    Outcome,
    Preempted,
    QueueHeld,
    QueueNotFound,
    QueueUnserved,
    Reclaimed,
    Reject,
    Unmapped,
    WaitingForPodsRunning,
    outcome_of,
)
from koordqueue.domain.verdict import Reason, verdict_message, verdict_of
from koordqueue.simulation.cluster_view import ClusterView, QueueInfo, view_from_scenario


@dataclass(frozen=True, slots=True)
class LevelCheck:
    """One `max × oversellrate − used < request` comparison on the parent chain."""

    quota: str
    resource: str
    limit: int
    used: int
    request: int
    fits: bool
    """CheckUsage's own comparison (`QuotaTree.levels`)."""

    @property
    def free(self) -> int:
        return self.limit - self.used


@dataclass(frozen=True, slots=True)
class Level:
    """One quota on the path from the unit's quota up to (not including) the root."""

    quota: str
    parent: str
    checks: tuple[LevelCheck, ...]
    empty_max: bool = False
    fits: bool = True
    """CheckUsage's verdict at this level: False where it refuses (no room for a resource,
    or an empty max and a non-empty request)."""


@dataclass(slots=True)
class Explanation:
    """Everything `koordqueue explain` prints; `to_dict` is the JSON form."""

    unit: str
    reason: Reason
    summary: str
    phase: str | None = None
    message: str | None = None
    """The verbatim event/status message the controller writes for this reason."""
    resolution: str = ""
    quota: str | None = None
    quota_exists: bool = False
    quota_namespace: str | None = None
    """The namespace of the copy in force (names are cluster-wide; the oldest copy counts)."""
    quota_refused: list[dict[str, Any]] = field(default_factory=list)
    quota_copies: int = 0
    """How many namespaces define the quota (more than one: only the oldest counts)."""
    """This quota's objects the controller refuses: namespace, problems, whether an earlier
    definition stays in force."""
    queue: str | None = None
    queue_exists: bool = False
    policy: str | None = None
    queue_error: str | None = None
    position: int | None = None
    queue_length: int = 0
    ahead: list[str] = field(default_factory=list)
    request: Resources = field(default_factory=Resources)
    chain: list[Level] = field(default_factory=list)
    blocking_quota: str | None = None
    status_message: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def admitted(self) -> bool:
        return self.reason is Reason.ADMITTED

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "reason": self.reason.value,
            "summary": self.summary,
            "phase": self.phase,
            "message": self.message,
            "resolution": self.resolution,
            "quota": {"name": self.quota, "exists": self.quota_exists,
                      "namespace": self.quota_namespace, "refused": list(self.quota_refused)},
            "queue": {
                "name": self.queue,
                "exists": self.queue_exists,
                "policy": self.policy,
                "error": self.queue_error,
                "position": self.position,
                "length": self.queue_length,
                "ahead": list(self.ahead),
            },
            "request": self.request.to_quantities(),
            "chain": [
                {
                    "quota": level.quota,
                    "parent": level.parent,
                    "fits": level.fits,
                    "emptyMax": level.empty_max,
                    "resources": {
                        c.resource: {
                            "limit": fmt(c.resource, c.limit),
                            "used": fmt(c.resource, c.used),
                            "request": fmt(c.resource, c.request),
                            "free": fmt(c.resource, c.free),
                            "fits": c.fits,
                        }
                        for c in level.checks
                    },
                }
                for level in self.chain
            ],
            "blockingQuota": self.blocking_quota,
            "statusMessage": self.status_message,
            "notes": list(self.notes),
        }


def fmt(resource: str, nanos: int) -> str:
    """One amount as a Kubernetes quantity (binary suffixes for memory)."""
    return Resources({resource: nanos}).to_quantities()[resource]


# --- the explanation ----------------------------------------------------------------------


def _tree_as_tried(tree: QuotaTree, record: Sequence[Outcome], uid: str) -> QuotaTree:
    """The quota tree as the round found it when it tried `uid`: what it admitted and
    preempted before counted. Read before the round, the chain would show room the round had
    already given to a unit ahead (hypothesis found "refused at a" with a shown to fit)."""
    earlier: list[Admit | Reclaimed] = []
    for outcome in record:
        if outcome.unit.uid == uid:
            break
        if isinstance(outcome, Admit | Reclaimed):  # (a preemption's mark releases nothing)
            earlier.append(outcome)
    if not earlier:
        return tree
    callback = tree._on_duplicate
    memo: dict[int, object] = {} if callback is None else {id(callback): callback}
    twin: QuotaTree = copy.deepcopy(tree, memo)
    for outcome in earlier:
        unit = outcome.unit
        if isinstance(outcome, Admit):
            twin.try_admit(unit.uid, unit.key, outcome.decision.quota, unit.resource,
                           oversold=is_oversold(unit.annotations))
        else:
            quota = twin.reserved_quota(unit.uid)
            twin.release(unit.uid)
            total = sum(a.replicas for a in unit.admissions)
            if quota is not None and total and outcome.replicas < total:  # keeps a share
                kept = {k: v * (total - outcome.replicas) // total
                        for k, v in unit.resource.items()}
                twin.try_admit(unit.uid, unit.key, quota, Resources(kept),
                               oversold=is_oversold(unit.annotations))
    return twin


def _levels(tree: QuotaTree, quota: str, request: Resources) -> list[Level]:
    """The unit's chain with CheckUsage's own verdict at every level (`QuotaTree.levels`)."""
    return [
        Level(
            state.quota,
            state.parent,
            tuple(
                LevelCheck(state.quota, r.resource, r.limit, r.used, r.request, r.fits)
                for r in state.resources
            ),
            empty_max=state.empty_max,
            fits=not state.refuses,
        )
        for state in tree.levels(quota, request)
    ]


def explain_missing(
    view: ClusterView, key: str, job: Mapping[str, Any] | None = None
) -> Explanation | None:
    """No QueueUnit under `key`: explain an invalid one or a Job that never got one, else None."""
    if key in view.invalid_units:
        return Explanation(
            key, Reason.INVALID_QUEUE_UNIT,
            "the QueueUnit cannot be read, so the controller ignores it",
            message=view.invalid_units[key],
        )
    if job is None:
        return None
    spec = job.get("spec") or {}
    labels = (job.get("metadata") or {}).get("labels") or {}
    notes = []
    if not spec.get("suspend"):
        notes.append(
            "the Job is not suspended: only Jobs created with spec.suspend: true are queued"
        )
    else:
        notes.append(
            "the Job is suspended but has no QueueUnit: is the controller running "
            "(with --manage-jobs) and was the Job created suspended?"
        )
    if QUOTA_NAME_LABEL not in labels:
        notes.append(f"the Job has no label {QUOTA_NAME_LABEL}")
    return Explanation(
        key, Reason.NO_QUEUE_UNIT, "the Job has no QueueUnit, so it is not queued", notes=notes
    )


def add_job_notes(ex: Explanation, job: Mapping[str, Any] | None) -> Explanation:
    """Add what the unit's Job shows: an admitted unit whose Job is still suspended is a fault."""
    if job is None or ex.reason is Reason.NO_QUEUE_UNIT:
        return ex
    suspended = bool((job.get("spec") or {}).get("suspend"))
    if ex.reason is Reason.ADMITTED and suspended:
        ex.notes.append(
            "the Job is still suspended although its unit is admitted: the controller could not "
            'resume it (see koordqueue_api_errors_total{operation="resume job"}); it retries on '
            "the next Job event or resync"
        )
    elif ex.reason not in (Reason.ADMITTED, Reason.FINISHED) and not suspended:
        ex.notes.append("the Job is not suspended: it runs without waiting for admission")
    return ex


NOTE_RESERVED = (
    "phase Reserved: it holds its quota and waits for the admission checks its Queue asks for "
    "(status.admissionChecks, set by each check's controller): all Ready releases it, Retry "
    "or Rejected backs it off until status.requeueState.requeueAt"
)


def explain(view: ClusterView, key: str) -> Explanation | None:
    """Why the unit `namespace/name` is (not) admitted; None when there is no such unit.

    The verdict is the entry the dry round recorded for the unit (`verdict_of` maps it);
    what is added around it (quota, queue, position, chain, notes) only presents state."""
    engine = view.engine
    unit = view.find(key)
    if unit is None:
        return None
    round_ = view.dry_round()
    outcome = outcome_of(round_.outcomes, unit.uid)
    ex = Explanation(
        key,
        verdict_of(outcome),
        "",
        phase=unit.phase.value,
        request=unit.resource,
        status_message=view.status_messages.get(key),
    )
    resolution = queue_name_for(unit.labels)
    if isinstance(resolution, QuotaName):
        quota = resolution.name
        ex.resolution = f"label {QUOTA_NAME_LABEL}={quota} names quota {quota}"
        ex.quota = ex.queue = quota
        ex.quota_exists = quota in engine.tree
        _quota_notes(view, ex, quota)
        ex.queue_exists = engine.has_queue(quota)
        info = view.queues.get(quota)
        if info is not None:
            ex.policy, ex.queue_error = info.policy, info.error
        waiting = round_.waiting.get(quota, [])
        index = next((i for i, u in enumerate(waiting) if u.uid == unit.uid), None)
        if index is not None:
            ex.position, ex.queue_length = index + 1, len(waiting)
            ex.ahead = [u.key for u in waiting[:index]]
        if isinstance(outcome, Holding | Preempted):  # counted in USED already
            ex.chain = _levels(engine.tree, quota, Resources())
        elif not isinstance(outcome, Finished | QueueNotFound | QueueUnserved | None):
            tree = _tree_as_tried(engine.tree, round_.outcomes, unit.uid)
            ex.chain = _levels(tree, quota, unit.resource)
    elif resolution.reason is UnresolvedReason.NO_LABEL:
        ex.resolution = f"no label {QUOTA_NAME_LABEL}"
    else:
        ex.resolution = resolution.message
    _explain_outcome(view, unit, outcome, round_.outcomes, ex)
    return ex


def _quota_notes(view: ClusterView, ex: Explanation, quota: str) -> None:
    """Which definition of the unit's quota (and of each on its chain) is in force, as the
    controller folds them: the oldest of same-name copies, a refused object's last valid
    definition (domain/quota_fold.py)."""
    tree = view.engine.tree
    live = tree.get(quota)
    ex.quota_namespace = None if live is None else live.namespace
    ex.quota_refused = [
        {"namespace": r.namespace, "problems": r.problems, "kept": r.kept}
        for r in view.refused_quotas.get(quota, [])
    ]
    copies = tree.copies(quota)
    ex.quota_copies = len(copies)
    if live is not None and len(copies) > 1:
        ignored = ", ".join(q.namespace for q in copies[1:])
        ex.notes.append(
            f"ElasticQuota {quota} is defined in namespaces {live.namespace} (in force: the "
            f"oldest) and {ignored} (ignored: quota names are cluster-wide)"
        )
    for name in (quota, *tree.path(quota)[1:]):
        for refused in view.refused_quotas.get(name, []):
            if refused.kept:
                ex.notes.append(
                    f"ElasticQuota {refused.namespace}/{name} is refused ({refused.problems}); "
                    "its last valid definition stays in force and is what is checked here"
                )


def _explain_rejection(ex: Explanation, decision: Rejection) -> None:
    """CheckUsage refused the unit: say where and why, with the numbers."""
    quota = ex.quota or ""
    ex.message = decision.message
    ex.blocking_quota = decision.quota
    if isinstance(decision, QuotaExceeded):
        check = next(
            c for level in ex.chain if level.quota == decision.quota
            for c in level.checks if c.resource == decision.resource
        )
        numbers = (f"{decision.resource}: {fmt(check.resource, check.used)} of "
                   f"{fmt(check.resource, check.limit)} used, request "
                   f"{fmt(check.resource, check.request)}")
        if ex.reason is Reason.QUOTA_EXCEEDED:
            ex.summary = f"quota {quota} is full ({numbers})"
        else:
            ex.summary = f"ancestor quota {decision.quota} is exhausted ({numbers})"
            if ex.chain and ex.chain[0].fits:
                ex.summary += f" although {quota} itself has room"
    elif isinstance(decision, EmptyQuotaSpec):
        ex.summary = f"quota {decision.quota} has an empty max, so it admits no requests"
    elif isinstance(decision, QuotaCycle):
        ex.summary = (f"the parent chain of {quota} loops back to {decision.quota} "
                      f"({' -> '.join((*decision.visited, decision.quota))})")
    elif isinstance(decision, QuotaMissing):
        ex.summary = (f"the parent chain of {quota} reaches {decision.quota}, which does not "
                      f"exist ({' -> '.join(decision.visited)})")
    else:  # AlreadyReserved: the engine never offers an admitted unit, kept for completeness
        ex.summary = decision.message


def _explain_outcome(
    view: ClusterView,
    unit: QueueUnit,
    outcome: Outcome | None,
    record: Sequence[Outcome],
    ex: Explanation,
) -> None:
    """The summary, message and notes for the dry round's outcome (the reason is set)."""
    quota = ex.quota or ""
    policy = ex.policy or DEFAULT_POLICY
    if unit.phase is Phase.BACKOFF and not isinstance(outcome, BackingOff | Finished):
        ex.notes.append(
            "phase TimeoutBackoff: it failed (SchedFailed), its Job did not start running "
            "in time, or an admission check answered Retry or Rejected, and is retried after "
            "a back-off delay"
        )
    if unit.phase is Phase.RESERVED:
        ex.notes.append(NOTE_RESERVED)
        if view.rebuilt:
            ex.notes.append(
                "read from the cluster: the back-off deadline lives only in the controller's "
                "memory; this is the round a freshly started controller would run, which "
                "does not hold the unit back"
            )
    if (
        view.rebuilt
        and ex.policy in ("Block", "Intelligent")
        and not isinstance(outcome, Finished | Holding)
    ):
        ex.notes.append(
            "read from the cluster: which unit blocks the quota and since when lives only in "
            "the controller's memory; this is the round a freshly started controller would run "
            "(no quota blocked yet)"
        )
    info = view.queues.get(quota)
    if info is not None and info.policy == "Intelligent" and (
        unit.priority < info.settings.priority_threshold
    ) and not isinstance(outcome, Finished | Holding | Preempted):
        ex.notes.append(
            "below koord-queue/priority-threshold: tried only while no unit at or above it "
            "waits, then in queue order from the head of the low units; a low unit that does "
            "not fit does not hold later ones"
        )
    match outcome:
        case Finished():
            ex.summary = f"finished (phase {unit.phase.value}); quota released"
        case Holding(quota=held):
            ex.summary = f"admitted (phase {unit.phase.value}) into quota {held}"
            ex.notes.append("its request is already counted in USED at every level")
        case Preempted(by=by):
            ex.summary = f"admitted (phase {unit.phase.value}) into quota {quota}"
            ex.notes.append("its request is already counted in USED at every level")
            ex.notes.append(
                f"the next round marks it for {by.key} (reclaimState): its replicas not "
                "running are reclaimed in the round after, then it goes back to the queue"
            )
        case Reclaimed(replicas=replicas):
            ex.summary = (
                f"marked by a queue-level preemption: the next round takes back its {replicas} "
                "replica(s) not running and it goes back to the queue"
            )
        case Unmapped(unresolved=unresolved):
            ex.message = unresolved.message
            ex.summary = (
                "the unit names no quota, so it is never admitted (no event is sent; see the "
                "status message and the koordqueue_units_unmapped metric)"
            )
        case QueueNotFound(queue=missing):
            ex.message = RoundResult.queue_not_found_message(unit, missing)
            refused = view.refused_quotas.get(missing)
            if not ex.quota_exists and refused:
                ex.summary = (
                    f"ElasticQuota {refused[0].namespace}/{missing} exists, but the controller "
                    f"refuses it and no earlier definition of it is in force "
                    f"({refused[0].problems})"
                )
            elif not ex.quota_exists:
                ex.summary = f"no ElasticQuota named {missing} exists (in any namespace)"
            else:
                ex.summary = (
                    f"quota {missing} exists but Queue {view.queue_namespace}/{missing} does "
                    "not (the controller creates it: is it running?)"
                )
        case QueueUnserved(queue=served, error=error):
            ex.message = error
            ex.summary = f"queue {served} is not served: its policy {ex.policy} is not registered"
        case QueueHeld(queue=held):
            ex.message = verdict_message(outcome)
            ex.summary = (f"queue {held} is stopped: nothing new is admitted from it until "
                          f"`kubectl koordqueue resume queue {held}`")
        case Reject(decision=decision):
            _explain_rejection(ex, decision)
        case WaitingForPodsRunning(not_running=not_running):
            ex.summary = (
                f"queue {quota} has koord-queue/wait-for-pods-running: it admits nothing "
                f"until these admitted units run: {', '.join(sorted(not_running))}"
            )
        case BeyondMaxDepth(position=position, depth=depth):
            ex.summary = (f"position {position} is beyond koord-queue/max-depth "
                          f"{depth}: the policy scans only the first units")
        case BlockedByHead() | HighPriorityWaiting():
            _explain_block(view, unit, outcome, record, ex)
        case BackingOff(until=until) if unit.requeue_at is not None:
            at = datetime.fromtimestamp(unit.requeue_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            ex.summary = (f"the unit is backing off (status.requeueState: back-off "
                          f"{unit.requeue_count}); it is retried from requeueAt {at}")
        case BackingOff(until=until):
            ex.summary = (f"the unit failed before and is backing off; it is retried at "
                          f"t={until:g}")
        case Inactive():
            ex.message = verdict_message(outcome)
            ex.summary = ("spec.active is false: it keeps its place in the queue and holds no "
                          "quota; set spec.active (or the workload's annotation "
                          "scheduling.x-k8s.io/active) to true to let it be admitted")
        case BudgetSpent(budget=budget):
            ex.message = verdict_message(outcome)
            ex.summary = (f"it ran its execution budget ({budget}s, "
                          "spec.maximumExecutionTimeSeconds): it is deactivated now "
                          "(spec.active false) and evicted by the next round")
        case Deactivated(reclaiming=reclaiming):
            ex.message = verdict_message(outcome)
            ex.summary = (
                "spec.active turned false while it was admitted: "
                + ("a preemption still takes its pods back; it is evicted once that is done"
                   if reclaiming else
                   "the next round evicts it (workload suspended, quota released)")
            )
        case Admit():
            ex.summary = "it fits at current usage; the next admission round admits it"
        case _:
            ex.summary = (f"it fits at current usage, but policy {policy} did not offer it "
                          "this round")


def _head_refusal(view: ClusterView, record: Sequence[Outcome], head: str) -> str | None:
    """Why the unit `head` (a key) does not fit: CheckUsage's refusal in the same record, or,
    for a head the policy holds since an earlier round (not offered in this one), the
    message the controller wrote on it then (its status)."""
    for entry in record:
        if entry.unit.key == head and isinstance(entry, Reject):
            return entry.decision.message
    return view.status_messages.get(head)


def _explain_block(
    view: ClusterView,
    unit: QueueUnit,
    outcome: BlockedByHead | HighPriorityWaiting,
    record: Sequence[Outcome],
    ex: Explanation,
) -> None:
    """Block/Intelligent hold the unit back: name the unit holding it, and why it does not
    fit as the same record says."""
    engine = view.engine
    quota = ex.quota or ""
    policy = ex.policy or DEFAULT_POLICY
    if isinstance(outcome, HighPriorityWaiting):
        why = _head_refusal(view, record, outcome.waiting[0])
        detail = f" ({why})" if why is not None else ""
        ex.summary = (f"policy Intelligent serves no unit below koord-queue/priority-threshold "
                      f"{outcome.threshold} while one at or above it waits: "
                      f"{', '.join(outcome.waiting)}{detail}")
        return
    refusal = _head_refusal(view, record, outcome.head)
    detail = f" ({refusal})" if refusal is not None else ""
    if outcome.head == unit.key:
        ex.summary = (f"policy {policy} blocked quota {outcome.quota} when this unit, its head, "
                      f"did not fit{detail}; it waits for the block to lift")
        ex.message = refusal
    else:
        ex.summary = (f"policy {policy} is head-of-line: {outcome.head} ahead of it does not "
                      f"fit{detail} and blocks quota {outcome.quota}")
    lifted_by = ("a unit of the quota is deleted or releases quota" if policy == "Intelligent"
                 else "a unit of the quota is added, deleted or releases quota")
    ex.notes.append(
        f"the block holds until {lifted_by}; then the head is retried first, and "
        "after 3 minutes with nothing tried it is retried anyway (a head that never "
        "fits holds the quota)"
    )
    settings = engine.queue_settings(quota) or QueueSettings()
    if policy == "Block" and settings.block_timeout > 0:
        ex.notes.append(
            f"{BLOCK_TIMEOUT_ANNOTATION} {settings.block_timeout:g} (opt-in): after "
            "that long blocked, the other units get one round past the head"
        )


__all__ = [
    "ClusterView",
    "Explanation",
    "Level",
    "LevelCheck",
    "QueueInfo",
    "Reason",
    "add_job_notes",
    "explain",
    "explain_missing",
    "fmt",
    "verdict_of",
    "view_from_scenario",
]
