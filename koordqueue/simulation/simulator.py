"""Replay a scenario through the real admission engine, step by step, in-process.

Each step: units arriving now join their queues, admitted units whose duration has elapsed
finish (releasing quota), then one admission round runs. The round's record goes through the
same `effects()` the live controller executes, and the simulator records those effects, so its
events and status messages are the controller's by construction. A workload's unit (given as
`workload:`) gets, as it arrives, the first status its creator writes (`created_effects`).
Admission checks go the controller's way too (reservations.py): an admission on a queue with
checks is Reserved, and a Reserved unit's check states release it or back it off as it arrives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from koordqueue.domain.activation import active_from
from koordqueue.domain.effects import (
    Effect,
    QueueEvent,
    SetUnitStatus,
    UnitEvent,
    created_effects,
    effects,
    queue_effects,
)
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import (
    EVENT_NORMAL,
    EVENT_WARNING,
    MSG_UNIT_SUCCEEDED,
    QUOTA_NAME_LABEL,
    REASON_SCHEDULED,
    REASON_UNSCHEDULABLE,
)
from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.quota import quota_from_object
from koordqueue.domain.quota_tree import QuotaUsage
from koordqueue.domain.reservation import BackOff, fate_effects
from koordqueue.domain.round import Admit, Preempted, Reclaimed
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api.names import DEFAULT_QUEUE
from koordqueue.scheduler.api.numa import CpuSet
from koordqueue.scheduler.framework import ClusterSnapshot, run_session
from koordqueue.simulation import numa
from koordqueue.simulation.reservations import Reservations
from koordqueue.simulation.scenario import Scenario, UnitDef


@dataclass(frozen=True, slots=True)
class StepEvent:
    """One observable outcome, shaped like a Kubernetes event."""

    step: int
    unit: str
    reason: str
    message: str
    type: str = EVENT_NORMAL


@dataclass(slots=True)
class StepRecord:
    step: int
    events: list[StepEvent] = field(default_factory=list)
    usage: list[QuotaUsage] = field(default_factory=list)
    admitted: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    """Units whose every pod the scheduler bound this step (scenarios with nodes)."""
    placements: dict[str, dict[str, str]] = field(default_factory=dict)
    """Unit -> pod -> node, for pods bound this step."""
    waiting: list[str] = field(default_factory=list)
    decided: dict[str, str] = field(default_factory=dict)
    """Reserved units released or backed off on arrival by their check states (unit ->
    phase), before the round."""
    reserved: dict[str, str] = field(default_factory=dict)
    """Units the round admitted on a queue with admission checks: Reserved, not Dequeued."""
    effects: list[Effect] = field(default_factory=list)
    """The round's effects as the controller would execute them (status writes included)."""


@dataclass(slots=True)
class SimulationResult:
    scenario: Scenario
    steps: list[StepRecord] = field(default_factory=list)
    queue_errors: dict[str, str] = field(default_factory=dict)
    engine: AdmissionEngine | None = None
    """The engine after the last step run, policy state included (explain's dry round)."""

    def final_messages(self) -> dict[str, str]:
        """Each unit's last status message as the controller would have written it."""
        messages = {
            f"{u.namespace}/{u.name}": u.message for u in self.scenario.units if u.message
        }
        for record in self.steps:
            for key in record.finished:
                messages[key] = MSG_UNIT_SUCCEEDED
            for effect in record.effects:
                if isinstance(effect, SetUnitStatus):
                    messages[effect.unit.key] = effect.message
        return messages

    def final_phases(self) -> dict[str, str]:
        phases: dict[str, str] = {}
        for (
            record
        ) in self.steps:  # in a step: finishes first, then the round's preemptions/admissions
            for key in record.finished:
                phases[key] = Phase.SUCCEED.value
            phases.update(record.decided)
            for key in record.preempted:
                phases[key] = Phase.ENQUEUED.value
            for key in record.admitted:
                phases[key] = Phase.DEQUEUED.value
            phases.update(record.reserved)
            for key in record.running:
                phases[key] = Phase.RUNNING.value
        for unit in self.scenario.units:  # as it arrived (a snapshot's admitted units)
            phases.setdefault(f"{unit.namespace}/{unit.name}", unit.phase)
        return phases


def simulate(
    scenario: Scenario, progress: Callable[[int, int], None] | None = None
) -> SimulationResult:
    """Run every step of the scenario; `progress(step, total)` is called after each step."""
    result = SimulationResult(scenario)
    for record in iter_simulation(scenario, result):
        result.steps.append(record)
        if progress:
            progress(record.step + 1, scenario.steps)
    return result


def iter_simulation(scenario: Scenario, result: SimulationResult) -> Iterator[StepRecord]:
    engine = AdmissionEngine(oversell_rate=scenario.oversell_rate)
    result.engine = engine
    for quota in scenario.quotas:
        obj = quota.as_object()
        engine.upsert_quota(quota_from_object(obj))
        desired = derive_queue(obj)
        error = engine.upsert_queue(desired.name, desired.policy, dict(desired.annotations))
        if error:
            result.queue_errors[desired.name] = error
    reservations = Reservations(scenario)
    admitted_at: dict[str, int] = {}
    durations = {f"{u.namespace}/{u.name}": u.duration for u in scenario.units}
    unit_defs = {f"{u.namespace}/{u.name}": u for u in scenario.units}
    placed: dict[str, dict[str, str]] = {}  # unit -> pod -> node, pods bound so far
    numa_given: dict[str, tuple[str, Mapping[str, CpuSet]]] = {}  # pod -> cpus numa-aware gave
    reported: dict[str, str] = {}  # uid -> last status message written (as the controller)
    scheduler_message: dict[str, str] = {}
    for step in range(scenario.steps):
        record = StepRecord(step)
        if step == 0:
            for queue, error in sorted(result.queue_errors.items()):
                for queue_event in queue_effects(queue, error):
                    _record(queue_event, record, reported)
        for key, at in sorted(admitted_at.items()):
            duration = durations[key]
            if duration is not None and step - at >= duration:
                unit = engine.unit(key)
                if unit is not None:
                    engine.upsert_unit(replace(unit, phase=Phase.SUCCEED))
                record.finished.append(key)
                del admitted_at[key]
                placed.pop(key, None)
        for u in scenario.units:
            if u.arrive == step:
                labels = dict(u.labels)  # (those a check's labelSelector reads)
                if u.quota is not None:
                    labels[QUOTA_NAME_LABEL] = u.quota
                arrived = QueueUnit(
                    namespace=u.namespace,
                    name=u.name,
                    uid=f"{u.namespace}/{u.name}",
                    resource=u.resource,
                    priority=u.priority,
                    labels=labels,
                    annotations=dict(u.annotations),
                    created=float(u.arrive) if u.created is None else u.created,
                    consumer_kind=u.consumer_kind,
                    # spec.active as a snapshot caught it, else the annotation a Job carries
                    # (issue 35): born inactive, never admitted
                    active=(
                        u.active if u.active is not None
                        else active_from(u.annotations) is not False
                    ),
                    phase=Phase(u.phase),
                    admissions=u.admissions,
                    reclaiming=any(a.reclaim > 0 for a in u.admissions),
                )
                engine.upsert_unit(arrived)  # an admitted phase: counted, as at a restart
                if arrived.admitted:
                    admitted_at[arrived.uid] = step
                    if u.running_pods:  # its workload runs already: bound where it runs
                        placed[arrived.uid] = {p.name: p.node for p in u.running_pods}
                if u.message is not None:  # a snapshot's: its status says it already
                    reported[arrived.uid] = u.message
                else:  # a workload's unit says what its creator writes before any round
                    for effect in created_effects(arrived):
                        _record(effect, record, reported)
                fate = reservations.arrived(arrived, u, float(step))
                if fate is not None:  # a Reserved unit's checks decide, as live
                    engine.upsert_unit(replace(arrived, phase=fate.phase))
                    if isinstance(fate, BackOff):
                        engine.requeue(arrived.uid, fate.until)  # its quota goes back
                        admitted_at.pop(arrived.uid, None)
                    for effect in fate_effects(arrived, fate):
                        _record(effect, record, reported)
                    record.decided[arrived.key] = fate.phase.value
        outcome = engine.run_round(float(step))
        planned, reserved = reservations.reserve(effects(outcome, reported))
        for effect in planned:
            _record(effect, record, reported)
        for uid, phase in reserved.items():
            held = engine.unit(uid)
            if held is not None:  # its workload stays suspended until the checks answer
                engine.upsert_unit(replace(held, phase=phase))
                record.reserved[held.key] = phase.value
        for decided in outcome.outcomes:
            if isinstance(decided, Admit):
                admitted_at[decided.unit.uid] = step
                record.admitted.append(decided.unit.key)
            elif isinstance(decided, Preempted):
                record.preempted.append(decided.unit.key)
            elif isinstance(decided, Reclaimed) and not engine.is_admitted(decided.unit.uid):
                admitted_at.pop(decided.unit.uid, None)
                placed.pop(decided.unit.uid, None)
        if scenario.nodes:
            _place(scenario, engine, unit_defs, placed, record, scheduler_message, numa_given)
        record.waiting = sorted(
            u.key
            for u in engine.units()
            if not engine.is_admitted(u.uid) and u.phase is not Phase.SUCCEED
        )
        record.usage = engine.tree.report()
        yield record


def _record(effect: Effect, record: StepRecord, reported: dict[str, str]) -> None:
    """Execute one effect the simulator's way: write it down (and remember status messages)."""
    record.effects.append(effect)
    if isinstance(effect, SetUnitStatus):
        reported[effect.unit.uid] = effect.message
    elif isinstance(effect, UnitEvent):
        record.events.append(
            StepEvent(record.step, effect.unit.key, effect.reason, effect.message, effect.type)
        )
    elif isinstance(effect, QueueEvent):
        record.events.append(
            StepEvent(record.step, f"queue/{effect.queue}", effect.reason, effect.message,
                      effect.type)
        )


def _place(  # noqa: PLR0917 - private helper threading the step's state through
    scenario: Scenario,
    engine: AdmissionEngine,
    unit_defs: dict[str, UnitDef],
    placed: dict[str, dict[str, str]],
    record: StepRecord,
    last_message: dict[str, str],
    numa_given: dict[str, tuple[str, Mapping[str, CpuSet]]],
) -> None:
    """Admitted units' pods through one scheduler session (gang: a unit's pods all or none)."""
    for uid in [u for u in numa_given if u.rsplit("/", 1)[-1] not in
                placed.get(u.rsplit("/", 1)[0], {})]:
        del numa_given[uid]  # the pod is gone: its cpus are free again
    jobs: list[JobInfo] = []
    for unit in engine.units():
        if not engine.is_admitted(unit.uid) or unit.phase is Phase.RESERVED:
            continue  # (a Reserved unit's workload is suspended: no pods yet)
        spec = unit_defs[unit.uid]
        bound = placed.get(unit.uid, {})
        tasks = []
        for pod, request in spec.pod_requests():  # (running pods', each pod set's own)
            node = bound.get(pod)
            tasks.append(
                TaskInfo(
                    uid=f"{unit.uid}/{pod}",
                    name=pod,
                    namespace=spec.namespace,
                    resreq=request,
                    priority=spec.priority,
                    status=TaskStatus.RUNNING if node else TaskStatus.PENDING,
                    node_name=node,
                    node_selector=dict(spec.node_selector),
                    tolerations=spec.tolerations,
                    creation=float(spec.arrive),
                    numa=numa.task_numa(spec.annotations, request.get("cpu", 0)),
                )
            )
        jobs.append(
            JobInfo(
                unit.uid,
                spec.name,
                namespace=spec.namespace,
                priority=spec.priority,
                min_available=spec.pods,
                creation=float(spec.arrive),
                tasks=tasks,
                annotations=dict(spec.annotations),
            )
        )
    if not jobs:
        return
    nodes = [n.node_info() for n in scenario.nodes]  # (taints, pods of no unit on it)
    topologies = numa.topologies({n.name: n.numatopology for n in scenario.nodes}, numa_given)
    result = run_session(
        ClusterSnapshot(nodes=nodes, jobs=jobs, queues=[QueueInfo(DEFAULT_QUEUE)],
                        numatopologies=topologies,
                        node_usage={n.name: n.usage for n in scenario.nodes if n.usage}),
        scenario.scheduler_config,
    )
    numa_given.update(result.numa_assigned)
    for bind in result.binds:
        placed.setdefault(bind.job, {})[bind.name] = bind.node
        record.placements.setdefault(bind.job, {})[bind.name] = bind.node
    for job_uid, pods in sorted(record.placements.items()):
        spec = unit_defs[job_uid]
        where = ", ".join(f"{pod}->{node}" for pod, node in sorted(pods.items()))
        record.events.append(
            StepEvent(
                record.step, job_uid, REASON_SCHEDULED, f"bound {len(pods)} pod(s): {where}"
            )
        )
        if len(placed.get(job_uid, {})) == len(spec.pod_requests()):
            admitted_unit = engine.unit(job_uid)
            if admitted_unit is not None:
                engine.upsert_unit(replace(admitted_unit, phase=Phase.RUNNING))
            record.running.append(job_uid)
    for job_uid, condition in sorted(result.job_conditions.items()):
        if job_uid in record.placements:
            continue
        reasons = sorted(
            {
                str(errs.message())
                for uid, errs in result.fit_errors.items()
                if uid.startswith(job_uid + "/")
            }
        )
        message = f"{condition}; {' '.join(reasons)}" if reasons else condition
        if last_message.get(job_uid) == message:
            continue
        last_message[job_uid] = message
        record.events.append(
            StepEvent(record.step, job_uid, REASON_UNSCHEDULABLE, message, EVENT_WARNING)
        )
