"""Why is my pod pending: a dry scheduling session over the adapter's own cache and snapshot.

Read-only. The cluster is read into a `SchedulerCache` (the scheduler's own relisting), the
snapshot is built by `SchedulerCache.build` and a session runs the configured actions
exactly as the scheduler would; nothing is bound, patched or un-gated. The verdict is then
read, not worked out again: the pod's job and queue are the snapshot's (the cache's pod ->
job rules), its bind or reservation the session's, and otherwise the rule the actions
recorded when they left it unplaced (`scheduler/framework/skips.py`); the message is the
text the scheduler writes into its `PodScheduled=False` condition and `FailedScheduling`
event (`SessionResult.pod_cause`). Before the session, what only the pod says: its scheduler
name, whether it finished or is bound, its gates. The per-node rows show the cluster as it
is now (a probe session's predicates), the reasons the session recorded where it has them.

`explain_pod` takes the pod and a filled cache, so it is tested without a cluster;
`read_cluster` is the only part that talks to the API server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from koordqueue.kube.api import EVENT, POD, KubeApi
from koordqueue.kube.scheduler import convert, names
from koordqueue.kube.scheduler.cache import SchedulerCache
from koordqueue.kube.scheduler.scheduler import (
    Scheduler,
    unschedulable_message,
    with_gate_plugin,
)
from koordqueue.kube.scheduler.store import CachedKind
from koordqueue.kube.settings import SchedulerSettings
from koordqueue.scheduler import SchedulerConfig
from koordqueue.scheduler.api import FitErrors, JobInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api import names as api_names
from koordqueue.scheduler.framework import Session, open_session, run_actions
from koordqueue.scheduler.framework.result import SessionResult
from koordqueue.scheduler.framework.skips import Skip, TaskSkip, cause_text
from koordqueue.scheduler.gates import (
    GATE_NAME,
    OPT_IN_ANNOTATION,
    GateState,
    GateView,
    classify_gates,
)
from koordqueue.scheduler.gates import names as gate_consts
from koordqueue.scheduler.gates import opted_in as has_opt_in
from koordqueue.scheduler.gates.plugin import QueueAllocationGatePlugin
from koordqueue.scheduler.plugins.sla import SlaPlugin, not_yet_due

DEFAULT_POD_SCHEDULER = "default-scheduler"
"""What Kubernetes puts into an unset `spec.schedulerName`."""


class PodVerdict(StrEnum):
    """The one answer to "why is my pod pending": a fact of the pod before the session (the
    first that applies, in this order), or what the session decided for it."""

    OTHER_SCHEDULER = "OtherScheduler"
    FINISHED = "Finished"
    TERMINATING = "Terminating"
    BOUND = "Bound"
    FOREIGN_GATES = "ForeignSchedulingGates"
    GATE_WITHOUT_OPT_IN = "GateWithoutOptIn"
    GATE_RELEASE = "GateWouldBeRemoved"
    WAITING_FOR_QUEUE = "GatedWaitingForQueueCapacity"
    GATED = "Gated"
    POD_GROUP_NOT_FOUND = "PodGroupNotFound"
    QUEUE_NOT_FOUND = "QueueNotFound"
    JOB_INVALID = "GangNotEnoughTasks"
    NOT_ENQUEUED = "PodGroupNotEnqueued"
    WOULD_BIND = "WouldBind"
    PIPELINED = "WaitingForReleasingResources"
    BEST_EFFORT = "BestEffortBackfill"
    PRE_PREDICATE = "PrePredicateFailed"
    UNSCHEDULABLE = "Unschedulable"
    GANG_NOT_READY = "GangMinAvailable"
    QUEUE_OVERUSED = "QueueOverused"
    QUEUE_REFUSED = "QueueNotAllocatable"
    PLUGIN_REFUSED = "PluginRefused"
    UNKNOWN = "NotPlaced"


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """One node: does the pod fit, and if not, why (a node fitting only future-idle
    resources, i.e. resources of pods being evicted, is `fits` with `future_only`)."""

    node: str
    fits: bool
    reasons: tuple[str, ...] = ()
    future_only: bool = False


@dataclass(frozen=True, slots=True)
class GangInfo:
    """The pod's job as the gang plugin sees it."""

    min_available: int
    tasks: int
    ready: int
    """Bound, Binding, Running, Allocated and Succeeded tasks (before the dry session)."""
    placed_in_dry_run: int
    """Tasks the dry session bound or pipelined."""
    condition: str | None = None
    """The job condition the scheduler writes (gang unschedulable / not enough tasks)."""


@dataclass(slots=True)
class PodExplanation:
    """Everything `koordqueue explain pod/NAME` reports; `to_dict` is the JSON form."""

    pod: str
    verdict: PodVerdict
    summary: str
    uid: str = ""
    phase: str = "Pending"
    scheduler_name: str = ""
    expected_scheduler: str = ""
    node_name: str | None = None
    gates: list[str] = field(default_factory=list)
    our_gate: bool = False
    foreign_gates: list[str] = field(default_factory=list)
    opted_in: bool = False
    gates_feature: bool = False
    pod_group: str | None = None
    pod_group_exists: bool | None = None
    pod_group_phase: str | None = None
    queue: str | None = None
    queue_exists: bool | None = None
    request: dict[str, str] = field(default_factory=dict)
    message: str | None = None
    """The aggregated "0/N nodes are available: ..." message (when nodes were evaluated)."""
    nodes: list[NodeVerdict] = field(default_factory=list)
    gang: GangInfo | None = None
    dry_run_node: str | None = None
    condition: dict[str, str] | None = None
    """The pod's current PodScheduled condition (status, reason, message)."""
    reservation: str | None = None
    """For a pod let through the gate and not yet placed: what holds its queue reservation
    and when --gate-reservation-timeout releases (or released) it."""
    notes: list[str] = field(default_factory=list)

    @property
    def fitting_nodes(self) -> list[str]:
        return [n.node for n in self.nodes if n.fits]

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["verdict"] = self.verdict.value
        doc["nodes"] = [
            {"node": n.node, "fits": n.fits, "reasons": list(n.reasons),
             "future_only": n.future_only}
            for n in self.nodes
        ]
        return doc


# --- reading the cluster ----------------------------------------------------------------


def read_cluster(
    api: KubeApi, namespace: str, name: str, scheduler_name: str
) -> tuple[dict[str, Any] | None, SchedulerCache]:
    """The pod (None when it does not exist) and a cache filled the way the scheduler fills
    its own (the scheduler's `relist`: nodes, queues, PodGroups, pods; unserved kinds are
    empty). Only GET/LIST requests are sent. ApiError propagates."""
    pod = api.get(POD, name, namespace)
    cache = SchedulerCache(scheduler_name)
    if pod is None:
        return None, cache
    scheduler = Scheduler(api, SchedulerSettings(scheduler_name=scheduler_name), cache=cache)
    try:
        scheduler.relist()
    finally:
        scheduler.close()
    return pod, cache


def reservation_expired_at(api: KubeApi, pod: Mapping[str, Any]) -> str | None:
    """When the scheduler last released the pod's gate reservation by its timeout (the
    newest `ReservationExpired` event on the pod), or None. One LIST request."""
    m = convert.meta(pod)
    reason = gate_consts.REASON_RESERVATION_EXPIRED
    selector = f"involvedObject.uid={m.get('uid', '')},reason={reason}"
    events = api.list_objects(
        EVENT, str(m.get("namespace", "default")), field_selector=selector
    )
    times = [
        str(e.get("lastTimestamp") or e.get("eventTime")
            or convert.meta(e).get("creationTimestamp") or "")
        for e in events
    ]
    return max(times) if times else None


# --- the explanation --------------------------------------------------------------------


def _quantities(task: TaskInfo) -> dict[str, str]:
    return task.resreq.to_quantities()


def node_verdicts(
    session: Session, task: TaskInfo, decided: FitErrors | None = None
) -> tuple[list[NodeVerdict], FitErrors]:
    """Every node of the session for `task`: fits (idle or only future idle) or the reasons.

    Uses the session's own predicates through the placement engine (`fit_errors`,
    `candidates`) and the pre-predicates, so the reasons are those the scheduler reports.
    `decided`, the fit errors a session's actions recorded for the task, takes precedence:
    it also reflects room other jobs took earlier in that session.
    """
    reason = session.pre_predicate(task)
    if decided is not None:
        errors = decided
    elif reason is not None:
        errors = FitErrors.all_nodes(session.nodes, reason)
    else:
        errors = session.placement.fit_errors(task)
    idle = {session.node_list[i].name for i in session.placement.candidates(task)[0].tolist()}
    out: list[NodeVerdict] = []
    for node in session.node_list:
        reasons = errors.node_reasons.get(node.name)
        if reasons:
            out.append(NodeVerdict(node.name, False, tuple(reasons)))
        else:
            out.append(NodeVerdict(node.name, True, (), future_only=node.name not in idle))
    return out, errors


def _reservation(queue: str | None, timeout: float, expired_at: str | None) -> str:
    """What holds the queue reservation of a pod let through the gate, and its end."""
    if expired_at is not None:
        return gate_consts.EXPLAIN_RESERVATION_EXPIRED.format(queue=queue, at=expired_at)
    if timeout > 0:
        return gate_consts.EXPLAIN_RESERVATION_TIMEOUT.format(queue=queue, timeout=timeout)
    return gate_consts.EXPLAIN_RESERVATION_HELD.format(queue=queue)


def _gang(job: JobInfo, before: JobInfo | None, placed: int, condition: str | None) -> GangInfo:
    ready = (before or job).ready_task_num()
    return GangInfo(job.min_available, len(job.tasks), ready, placed, condition)


def explain_pod(
    pod: Mapping[str, Any],
    cache: SchedulerCache,
    config: SchedulerConfig,
    *,
    gates_enabled: bool = False,
    reservation_timeout: float = 0.0,
    expired_at: str | None = None,
) -> PodExplanation:
    """Explain one pod against the cache's contents with a dry session of `config`.

    `reservation_timeout` is the scheduler's --gate-reservation-timeout and `expired_at` when
    it last released this pod's reservation (`reservation_expired_at`): a released pod
    reserves nothing in the dry session, as in the scheduler's."""
    m = convert.meta(pod)
    spec = pod.get("spec") or {}
    key = convert.pod_key(pod)
    uid = str(m.get("uid", ""))
    annotations = m.get("annotations") or {}
    gates = convert.gate_names(pod)
    state = classify_gates(gates)
    ex = PodExplanation(
        pod=key,
        verdict=PodVerdict.UNKNOWN,
        summary="",
        uid=uid,
        phase=str((pod.get("status") or {}).get("phase") or "Pending"),
        scheduler_name=str(spec.get("schedulerName") or DEFAULT_POD_SCHEDULER),
        expected_scheduler=cache.scheduler_name,
        node_name=spec.get("nodeName") or None,
        gates=gates,
        our_gate=GATE_NAME in gates,
        foreign_gates=[g for g in gates if g != GATE_NAME],
        opted_in=has_opt_in(annotations),
        gates_feature=gates_enabled,
    )
    current = unschedulable_message(dict(pod))
    if current is not None:
        ex.condition = dict(zip(("status", "reason", "message"), current, strict=True))
    ex.request = _quantities(convert.task_info(pod))

    def done(verdict: PodVerdict, summary: str) -> PodExplanation:
        ex.verdict, ex.summary = verdict, summary
        return ex

    if ex.scheduler_name != cache.scheduler_name:
        return done(PodVerdict.OTHER_SCHEDULER, (
            f"spec.schedulerName is {ex.scheduler_name!r}, not {cache.scheduler_name!r}: "
            "koordqueue does not schedule this pod (ask that scheduler, or set "
            "--scheduler-name if koordqueue runs under another name)"
        ))
    status = convert.pod_status(pod)
    if status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED):
        return done(PodVerdict.FINISHED, f"the pod has finished (phase {ex.phase})")
    if status is TaskStatus.RELEASING:
        return done(PodVerdict.TERMINATING, "the pod is being deleted")
    if ex.node_name:
        return done(PodVerdict.BOUND, (
            f"already bound to node {ex.node_name} (phase {ex.phase}); scheduling is done, "
            "anything left is the kubelet's"
        ))

    # --- the dry session, on the scheduler's own snapshot -------------------------------------
    built = cache.build(gates_enabled=gates_enabled)
    job_uid = built.pending.get(uid)  # the cache's pod -> job rule, as the scheduler reads it
    snapshot_job = next((j for j in built.snapshot.jobs if j.uid == job_uid), None)
    group_name = convert.group_name(pod)
    if group_name is not None:
        ex.pod_group = f"{m.get('namespace', 'default')}/{group_name}"
        group = built.groups.get(ex.pod_group)
        ex.pod_group_exists = group is not None
        if group is not None:
            ex.pod_group_phase = str((group.get("status") or {}).get("phase") or "Pending")
    if snapshot_job is not None:
        ex.queue = snapshot_job.queue
        ex.queue_exists = cache.get(CachedKind.QUEUE, ex.queue) is not None
    if state is GateState.OURS_AND_OTHERS and not ex.opted_in:
        ex.notes.append(gate_consts.WARN_GATE_WITHOUT_OPT_IN.format(pod=key))
    view = built.view
    if gates_enabled and uid in view.reserved:
        ex.reservation = _reservation(ex.queue, reservation_timeout, expired_at)
        ex.notes.append(ex.reservation)
        if expired_at is not None:
            view = GateView(view.candidates, view.reserved - {uid})
    effective = with_gate_plugin(config, view) if gates_enabled else config
    # Two sessions on the same snapshot: `probe` stays as the cluster is now (per-node
    # reasons for the table), `session` runs the actions (what the scheduler would decide,
    # and why: its skip record). Neither is applied: a session only changes its own copies.
    probe = open_session(built.snapshot, effective)
    session = open_session(built.snapshot, effective)
    run_actions(session)
    result = session.close()
    plugin = session.plugins.get(gate_consts.PLUGIN_NAME)
    released = (
        set(plugin.released) if isinstance(plugin, QueueAllocationGatePlugin) else set[str]()
    )
    job = session.jobs.get(job_uid) if job_uid is not None else None
    task = job.tasks.get(uid) if job is not None else None
    probe_job = probe.jobs.get(job_uid) if job_uid is not None else None
    probe_task = probe_job.tasks.get(uid) if probe_job is not None else None
    if job is not None and task is not None and probe_task is not None:
        ex.nodes, _ = node_verdicts(probe, probe_task, result.fit_errors.get(uid))
        placed = sum(1 for b in result.binds if b.job == job_uid) + sum(
            1 for r in result.pipelined if r.job == job_uid
        )
        ex.gang = _gang(job, snapshot_job, placed, result.job_cause(job.uid))
        if ex.pod_group is not None and ex.pod_group_phase is None:
            ex.pod_group_phase = job.phase.value

    # --- gates ----------------------------------------------------------------------------------
    if state in (GateState.OTHERS_ONLY, GateState.OURS_AND_OTHERS):
        return done(PodVerdict.FOREIGN_GATES, (
            f"waits for scheduling gate(s) {', '.join(ex.foreign_gates)} that koordqueue never "
            "removes; whoever added them must remove them"
        ))
    if state is GateState.OURS_ONLY:
        if not ex.opted_in:
            return done(PodVerdict.GATE_WITHOUT_OPT_IN, (
                f"carries gate {GATE_NAME} without the opt-in annotation "
                f'{OPT_IN_ANNOTATION}="true": the scheduler never removes it (add the '
                "annotation, or remove the gate)"
            ))
        if not gates_enabled:
            return done(PodVerdict.GATED, (
                f"gated by {GATE_NAME}; the gate is removed only by a scheduler running with "
                f"--feature-gates {gate_consts.FEATURE_GATE}=true (evaluate that with "
                "--feature-gates here)"
            ))
        if uid in released:
            return done(PodVerdict.GATE_RELEASE, (
                f"gated by {GATE_NAME} and its queue {ex.queue} has room now: the scheduler "
                "removes the gate, then places the pod in a later session"
            ))
        if job is not None:
            return done(PodVerdict.WAITING_FOR_QUEUE, (
                f"gated by {GATE_NAME}: waits until queue {ex.queue} has capacity for its "
                "request (it stays gated and gets no Unschedulable condition meanwhile)"
            ))

    if job_uid is None or snapshot_job is None:
        if ex.pod_group_exists is False:
            return done(PodVerdict.POD_GROUP_NOT_FOUND, (
                f"its PodGroup {ex.pod_group} (annotation {names.GROUP_NAME_ANNOTATION}) does "
                "not exist: the scheduler ignores the pod until it does"
            ))
        return done(PodVerdict.UNKNOWN, "the pod is not part of the scheduling snapshot")
    if job is None or task is None:  # the session dropped the job (its warning says so)
        return done(PodVerdict.QUEUE_NOT_FOUND, (
            f"queue {ex.queue} does not exist: the job is dropped from every session "
            "(create the Queue, or fix the PodGroup's spec.queue / the pod's "
            f"{names.QUEUE_NAME_ANNOTATION} annotation)"
        ))
    ex = _decided(ex, result, task, job, cache.scheduler_name)
    if ex.verdict is PodVerdict.NOT_ENQUEUED:  # sla may let it in later: say when
        note = not_yet_due(config, job, SlaPlugin.clock())
        if note is not None:
            ex.notes.append(note)
    return ex


def _decided(
    ex: PodExplanation, result: SessionResult, task: TaskInfo, job: JobInfo, scheduler: str
) -> PodExplanation:
    """The verdict the dry session recorded for the task: its bind or reservation, else the
    entry its actions left in the skip record; `message` is the very text the scheduler
    writes into the pod's condition and FailedScheduling event (`SessionResult.pod_cause`)."""
    uid = task.uid
    bound = {b.task: b.node for b in result.binds}
    piped = {r.task: r.node for r in result.pipelined}
    if uid in bound:
        ex.dry_run_node = bound[uid]
        ex.verdict, ex.summary = PodVerdict.WOULD_BIND, (
            f"a scheduling session now binds it to node {bound[uid]}: if it stays pending, "
            f"check that koordqueue's scheduler runs (with --scheduler-name {scheduler}) "
            "and its logs"
        )
        return ex
    if uid in piped:
        ex.dry_run_node = piped[uid]
    if uid in piped and task.status is TaskStatus.PIPELINED:
        ex.verdict, ex.summary = PodVerdict.PIPELINED, (
            f"reserved on node {piped[uid]} whose resources are being released (evicted pods); "
            "it binds once they are gone"
        )
        return ex
    ex.message = result.pod_cause(uid, job.uid)
    entry = result.skips.of(uid, job.uid)
    ex.verdict, ex.summary = _verdict(entry, ex, job)
    return ex


def _verdict(entry: TaskSkip | None, ex: PodExplanation, job: JobInfo) -> tuple[PodVerdict, str]:
    """The recorded rule, as a verdict and a sentence."""
    kind = entry.kind if entry is not None else None
    gang = f"minAvailable {job.min_available}, {len(job.tasks)} pod(s)"
    match kind:
        case Skip.NOT_ENQUEUED:
            return PodVerdict.NOT_ENQUEUED, (
                f"its PodGroup is Pending and enqueue does not admit it: queue {job.queue} "
                "cannot take the PodGroup's minResources yet"
            )
        case Skip.JOB_INVALID:
            assert entry is not None
            return PodVerdict.JOB_INVALID, f"the gang cannot start: {entry.detail} ({gang})"
        case Skip.BEST_EFFORT:
            return PodVerdict.BEST_EFFORT, "the pod requests no resources: only backfill places it"
        case Skip.PRE_PREDICATE:
            return PodVerdict.PRE_PREDICATE, f"rejected before any node is tried: {ex.message}"
        case Skip.NO_NODE:
            summary = f"no node fits: {ex.message}"
            if job.min_available > 1:
                summary += f" (and the gang needs {job.min_available} pods placed together)"
            return PodVerdict.UNSCHEDULABLE, summary
        case Skip.GANG_GAVE_UP:
            assert entry is not None and entry.errors is not None
            return PodVerdict.GANG_NOT_READY, (
                f"not tried: another pod of its gang found no node "
                f"({entry.errors.message()}), so the gang cannot reach minAvailable "
                f"{job.min_available} and none of it is placed"
            )
        case Skip.GANG_NOT_READY:
            return PodVerdict.GANG_NOT_READY, (
                f"the pod fits on a node, but its gang needs minAvailable {job.min_available} "
                f"and the other members do not all fit at once, so none is bound ({gang})"
            )
        case Skip.QUEUE_FULL | Skip.QUEUE_OVERUSED if entry is not None and entry.errors:
            why = "cannot take the request" if kind is Skip.QUEUE_FULL else "is overused"
            ex.notes.append(f"queue {job.queue} {why} as well")
            return PodVerdict.UNSCHEDULABLE, f"no node fits: {ex.message}"
        case Skip.QUEUE_OVERUSED:
            return PodVerdict.QUEUE_OVERUSED, (
                api_names.QUEUE_OVERUSED_MESSAGE.format(queue=job.queue)
                + "; allocate skips it this session"
            )
        case Skip.QUEUE_FULL:
            return PodVerdict.QUEUE_REFUSED, api_names.QUEUE_REFUSED_MESSAGE.format(
                queue=job.queue
            )
        case Skip.PLUGIN:
            assert entry is not None
            return PodVerdict.PLUGIN_REFUSED, cause_text(entry, entry.errors)
    return PodVerdict.UNKNOWN, (
        "the pod fits but was not placed in this session (other jobs ran first); it should "
        "be placed in a later one"
    )


__all__ = [
    "DEFAULT_POD_SCHEDULER",
    "GangInfo",
    "NodeVerdict",
    "PodExplanation",
    "PodVerdict",
    "explain_pod",
    "node_verdicts",
    "read_cluster",
    "reservation_expired_at",
]
