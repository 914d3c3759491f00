"""One reconciler for every workload kind (Kueue's jobframework shape; SPEC 2.6, issue 25).

A `WorkloadReconciler` serves one `Integration` (batch/v1 Job, PyTorchJob, MPIJob, JobSet,
Pod, ...): a held workload gets a QueueUnit, and the workload follows its unit (resumed when
admitted, suspended on preemption or running timeout; Running, Succeed, Failed written from
its state). It decides on the owner thread from what the controller holds (the unit object,
the engine's phase and admission) with the pure rules of domain/integrations/reconcile.py and
domain/job_extension.reconcile_job, and hands every API call to the writer as a typed write
(workload_writes.py). One workload is reconciled at a time: an event that arrives while its
writes are in flight waits for them (the latest one is kept). A unit it made gets its first
status from new_unit.py (admitted at once on an idle queue, else Enqueued).

Registering a kind is one `Integration` module and its entry in
koordqueue.domain.integrations.INTEGRATIONS; `serve` (integrations.py) makes one of these per
enabled kind. docs/integrations.md, "Wiring", says how.

Just past 600 lines on purpose: every step of a workload's turn (look, read, decide, create,
delete, resync) shares the turn's bookkeeping here; the pure rules already live elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cachetools import TTLCache

from koordqueue.domain import activation, names
from koordqueue.domain.integrations import Integration, InvalidJobError
from koordqueue.domain.integrations.reconcile import (
    Target,
    creation_skip,
    effective_status,
    enqueue_mark,
    hold_again,
    is_stale,
    made_for,
    owned_by,
    target_of,
    target_of_unit,
)
from koordqueue.domain.integrations.workload_gate import outside_quota, unit_label_patch
from koordqueue.domain.job_extension import JobAction, reconcile_job
from koordqueue.domain.queue_unit import (
    FINISHED_PHASES,
    Phase,
    QueueUnit,
)
from koordqueue.kube.api import QUEUE_UNIT, Kind, ObjectApi
from koordqueue.kube.controller.base import (
    ADDED,
    DELETED,
    MODIFIED,
    NORMAL,
    WARNING,
    epoch,
    log,
    meta,
    object_key,
)
from koordqueue.kube.controller.new_unit import Execute, OnUnit, first_status
from koordqueue.kube.controller.quiet_looks import QuietLooks, is_metadata, read_whole
from koordqueue.kube.controller.reclaim import sync_reclaimable
from koordqueue.kube.controller.state import ControllerState
from koordqueue.kube.controller.status import backoff_after
from koordqueue.kube.controller.workload_writes import (
    RETRY,
    CreateOutcome,
    CreateRefused,
    CreateUnit,
    Generations,
    PodsRunning,
    PriorityClasses,
    ReadMembers,
    UnitCreated,
    WorkloadInvalid,
    WorkloadWrite,
)
from koordqueue.kube.controller.writes import Delete, MergePatch, RecordEvent, Write

PhaseWriter = Callable[[QueueUnit, Phase, str, Callable[[bool], None]], None]
"""UnitHandlers.write_unit_phase: write a unit's phase, then call back whether it landed."""
Members = list[dict[str, Any]]
CREATING_TTL: Final = 30.0
"""Seconds a unit creation in flight holds its key against a second one."""


def kind_of(integration: Integration) -> Kind:
    """The REST kind of an integration's objects."""
    w = integration.workload
    return Kind(w.group, w.version, w.plural, w.kind)


@dataclass(frozen=True, slots=True)
class Reactions:
    """What a workload reconciler asks of the controller's other components (wiring.py)."""

    on_unit: OnUnit
    write_unit_phase: PhaseWriter
    execute: Execute


class WorkloadReconciler:
    """One integration's side of admission (a ConsumerReconciler); owner thread only."""

    def __init__(
        self,
        state: ControllerState,
        integration: Integration,
        reactions: Reactions,
        priorities: PriorityClasses,
    ) -> None:
        self.state = state
        self.integration = integration
        self.kind: Kind = kind_of(integration)
        self.reactions = reactions
        self.priorities = priorities
        self.timers: dict[str, tuple[float, Target]] = {}
        """unit key -> (when, its workload): look again (running timeout, back-off, a refused
        phase write)."""
        self.refusals: dict[str, int] = {}  # unit key -> writes refused in a row
        self.retries: dict[str, tuple[float, dict[str, Any]]] = {}
        """unit key -> (when, a workload object): try a refused creation again."""
        self.creating: TTLCache[str, bool] = TTLCache(maxsize=100_000, ttl=CREATING_TTL)
        self.busy: dict[str, dict[str, Any] | None] = {}
        """Unit keys with a look in flight -> the latest event that came meanwhile."""
        self.generations: Generations = {}
        """What our last resume/suspend of each object answered: an older copy is stale."""
        self.resync_touched: set[str] | None = None
        """While the periodic resync's lists are read: unit keys whose workloads had watch
        events meanwhile (newer than the listing: the fold leaves them alone)."""
        self.resync_known: frozenset[str] = frozenset()
        """Unit keys of this kind the engine knew when the lists were asked for."""
        self.warned_outside: set[str] = set()
        """uids of workloads told they run outside their quota (once each, not per resync)."""
        self.quiet_looks = QuietLooks(state)
        """The versions of each workload's last look that wrote nothing (quiet_looks.py)."""

    @property
    def consumer_kind(self) -> str:
        return self.integration.workload.kind

    @property
    def watched(self) -> Kind:
        return self.kind

    def unit_key(self, obj: Mapping[str, Any]) -> str:
        """namespace/name of the workload's unit (one per group for a pod group)."""
        namespace = meta(obj).get("namespace") or "default"
        return f"{namespace}/{self.integration.unit_name(obj)}"

    # --- the seam -------------------------------------------------------------------------
    def on_event(self, event_type: str | None, obj: dict[str, Any]) -> None:
        """A watch event of one object (None: an object of a listing)."""
        if not self.integration.may_be_queued(obj):
            return  # (most pods): no API call, no write
        key = self.unit_key(obj)
        if self.resync_touched is not None:
            self.resync_touched.add(key)
        if event_type == DELETED:
            if key in self.busy:
                self.busy[key] = None  # what waited is older than the deletion
            self._deleted(obj, key)
            return
        if self._stale(obj):
            return  # the version our own write made is on its way
        if key in self.busy:
            self.busy[key] = obj
            return
        self._look(key, event_type, obj)

    def resume(self, unit_obj: Mapping[str, Any]) -> Write[Any] | None:
        """Let the admitted unit's workload run, with the unit's copy of the enqueue mark."""
        target = target_of_unit(self.integration, unit_obj)
        mark = enqueue_mark(unit_obj)
        return WorkloadWrite(self.kind, self.integration, target, True, self.generations, mark)

    def suspend(self, unit_obj: Mapping[str, Any]) -> Write[Any] | None:
        target = target_of_unit(self.integration, unit_obj)
        return WorkloadWrite(self.kind, self.integration, target, False, self.generations)

    def unit_scheduled(self, unit_obj: Mapping[str, Any]) -> None:
        """SchedSucceed: read the workload, then reconcile it."""
        m = meta(unit_obj)
        key = f"{m.get('namespace') or 'default'}/{m.get('name', '')}"
        self._read_then(key, target_of_unit(self.integration, unit_obj))

    def fire_timers(self) -> None:
        """Look again at workloads whose timeout, back-off or refused write is due."""
        if not self.timers and not self.retries:
            return
        now = self.state.clock()
        for key in [key for key, (at, _) in self.timers.items() if at <= now]:
            _, target = self.timers.pop(key)
            self._read_then(key, target)
        for key in [key for key, (at, _) in self.retries.items() if at <= now]:
            _, obj = self.retries.pop(key)
            self._read_then(key, target_of(self.integration, obj))

    # --- one workload at a time -------------------------------------------------------------
    def _stale(self, obj: Mapping[str, Any]) -> bool:
        return is_stale(obj, self.generations.get(object_key(obj)))

    def _begin(self, key: str) -> None:
        self.busy.setdefault(key, None)

    def _end(self, key: str) -> None:
        waiting = self.busy.pop(key, None)
        if waiting is not None:
            self.on_event(MODIFIED, waiting)

    def _look(self, key: str, event_type: str | None, obj: dict[str, Any]) -> None:
        """One look at a workload, from an object of it (a group's members read first)."""
        self._begin(key)
        if self.integration.group_name(obj) is None:
            self._with_members(key, [obj])
            return
        name = str(meta(obj).get("name"))
        target = target_of(self.integration, obj)

        def read(members: Members | None) -> None:
            if members is None:
                self._retry_soon(key, target)  # refused: not at the resync
                self._end(key)
                return
            current = [m for m in members if str(meta(m).get("name")) != name]
            self._with_members(key, sorted([*current, obj], key=lambda m: str(meta(m)["name"])))

        reader = ReadMembers(self.kind, self.integration, target)
        self.state.writer.submit(reader, read, self._write_key(key))

    def _read_then(self, key: str, target: Target) -> None:
        """Read the workload as the API has it now, then look at it (a timer, a retry, its
        unit turning SchedSucceed, a resync's unit whose workload was not listed)."""

        def read(members: Members | None) -> None:
            if not members:
                if members is None:
                    self._retry_soon(key, target)  # refused: not at the resync
                return  # gone: its DELETED event (or the resync) handles the unit
            if any(self._stale(m) for m in members):
                return
            if key in self.busy:
                self.busy[key] = members[0]
                return
            self._begin(key)
            self._with_members(key, members, through_unit=True)

        read_members = ReadMembers(self.kind, self.integration, target)
        self.state.writer.submit(read_members, read, self._write_key(key))

    def _write_key(self, key: str) -> str:
        """The unit's uid once known (ordered with its admission writes), else its key."""
        return self.state.unit_by_key.get(key) or key

    def _with_members(self, key: str, members: Members, through_unit: bool = False) -> None:
        """Reconcile the workload with its unit, or make one. `through_unit`: the look came
        from the unit (its consumerRef names the workload), which it follows owned or not."""
        uid = self.state.unit_by_key.get(key)
        unit_obj = self.state.unit_objects.get(uid) if uid else None
        if uid is None or unit_obj is None:
            self._maybe_create(key, members)
        elif through_unit or owned_by(unit_obj, members, self.integration):
            if owned_by(unit_obj, members, self.integration):
                self._sync_labels(uid, unit_obj, members)
                sync_reclaimable(self.state, self.integration, members, uid, unit_obj,
                                 on_unit=self.reactions.on_unit)
            self._reconcile(key, members, uid)
        else:
            self._end(key)  # a unit of the same name belongs to another object

    def _sync_labels(self, uid: str, unit_obj: Mapping[str, Any], members: Members) -> None:
        """The workload's labels onto its unit (issue 33: a Job labelled after it was made
        never reached its unit, which copies the labels only when it is made); the quota
        label only while the unit waits (workload_gate.unit_label_patch); and its
        annotations' say on spec.active and the execution budget (domain/activation.py)."""
        labels, _ = self.integration.copied_metadata(members)
        patch = unit_label_patch(labels, unit_obj) or {}
        spec = activation.unit_spec_patch(members[0], unit_obj, self.state.features)
        if spec is not None:  # spec.active / maximumExecutionTimeSeconds (issue 35)
            patch["spec"] = spec
        if not patch:
            return
        m = meta(unit_obj)
        write = MergePatch(
            QUEUE_UNIT, str(m.get("name", "")), m.get("namespace"), patch, "patch unit"
        )

        def patched(obj: dict[str, Any] | None) -> None:
            if obj is not None:
                self.reactions.on_unit(MODIFIED, obj)  # maps it now (its watch event follows)

        self.state.writer.submit(write, patched, uid)

    def _warn_outside(self, members: Members) -> None:
        """One Warning on a workload that names a quota but runs outside it."""
        uid = str(meta(members[0]).get("uid") or "")
        if not uid or uid in self.warned_outside:
            return
        owners = {
            (c.integration.workload.api_version, c.integration.workload.kind)
            for c in self.state.consumers.values()
            if isinstance(c, WorkloadReconciler)
        }
        message = outside_quota(self.integration, members, owners)
        if message is None:
            return
        self.warned_outside.add(uid)
        log.warning("workload runs outside its quota", kind=self.kind.kind, message=message)
        event = RecordEvent(members[0], WARNING, names.REASON_RUNS_OUTSIDE_QUOTA, message)
        self.state.writer.submit(event)

    def _retry_soon(self, key: str, target: Target) -> None:
        failures = self.refusals.get(key, 0)
        self.refusals[key] = failures + 1
        self.timers[key] = (self.state.clock() + RETRY.delay(failures), target)

    # --- reconcile --------------------------------------------------------------------------
    def _reconcile(self, key: str, members: Members, uid: str) -> None:
        """Koord-Queue's job reconcile for one workload and its unit."""
        state = self.state
        unit = state.engine.unit(uid)
        if unit is None or uid not in state.unit_objects:
            self._end(key)
            return
        if unit.phase is Phase.BACKOFF and uid not in state.timed_out:
            self._end(key)  # a SchedFailed back-off runs on the engine's own clock
            return
        running = self.integration.pod_running(members)
        if running is not None or unit.phase in (Phase.RUNNING, *FINISHED_PHASES):
            self._decide(key, members, uid, bool(running))
            return
        # active pods, none ready: are any Running? (the reference lists them; so do we, rarely)
        selector = self.integration.pod_selector(members[0]) or ""
        pods = PodsRunning(meta(members[0]).get("namespace"), selector)
        state.writer.submit(pods, lambda found: self._decide(key, members, uid, found))

    def _decide(self, key: str, members: Members, uid: str, running: bool) -> None:
        """The reconcile's decision and its writes; ends the workload's turn when done."""
        state, integration = self.state, self.integration
        unit = state.engine.unit(uid)
        unit_obj = state.unit_objects.get(uid)
        if unit is None or unit_obj is None:
            self._end(key)
            return
        admitted = state.engine.is_admitted(uid)
        status = effective_status(integration, members, running, unit_obj)
        updated = epoch((unit_obj.get("status") or {}).get("lastUpdateTime"))
        now = state.clock()
        since = now - updated if updated is not None else 0.0
        settings = state.settings
        backoff = backoff_after(unit_obj, settings.job_backoff_time, state.features.requeue_state)
        action = reconcile_job(status, unit.phase, since, settings.job_running_timeout, backoff)
        if action.phase is Phase.RUNNING and not admitted and (
            state.engine.is_inactive(uid) or all(integration.is_suspended(m) for m in members)
        ):
            # deactivated, or held again (a running timeout) as a pod turned ready: its pods
            # are going, and a unit that holds no quota written Running would be counted
            # over its quota's max, then stay Running with its workload held for good
            action = JobAction()
        elif hold_again(
            integration, members, unit_obj, status, phase=unit.phase, admitted=admitted
        ):
            log.warning("workload released while its unit waits; held again",
                        kind=self.kind.kind, unit=key)
            action = JobAction(suspend=True)
        target = target_of(integration, members[0])

        def after_phase(written: bool) -> None:
            self.quiet_looks.forget(members[0])  # (noted again below if this look is quiet)
            if action.phase is not None:
                if not written:
                    # refused past its retries: look again soon (the engine still has the old
                    # phase, as the API does), not at the next resync
                    self._retry_soon(key, target)
                    self._end(key)
                    return
                self.refusals.pop(key, None)
                if action.phase is Phase.BACKOFF:
                    state.engine.requeue(uid, math.inf)  # gives its quota back
                    state.timed_out.add(uid)
                elif action.phase is Phase.ENQUEUED:
                    state.engine.defer(uid, 0.0)
                    state.timed_out.discard(uid)
                state.wake.set()
            if action.recheck_after is None:
                self.timers.pop(key, None)
            else:
                self.timers[key] = (now + max(action.recheck_after, 0.0), target)
            write: WorkloadWrite | None = None
            if action.suspend and not all(integration.is_suspended(m) for m in members):
                write = WorkloadWrite(
                    self.kind, integration, target, False, self.generations, members=members
                )
            elif (
                (action.resume or integration.admits_late_members(members))
                and admitted
                and any(integration.is_suspended(m) for m in members)
            ):  # (a serving group's pod that came while it is admitted: let go as well)
                mark = enqueue_mark(unit_obj)
                write = WorkloadWrite(
                    self.kind, integration, target, True, self.generations, mark, members
                )
            if write is None:
                if action.phase is None:
                    self.quiet_looks.note(key, target, list(members), uid)
                self._end(key)
                return

            def done(wrote: bool) -> None:
                if wrote and write.resume and action.resume_event:
                    event = RecordEvent(members[0], NORMAL, names.REASON_RESUME, names.MSG_RESUME)
                    state.writer.submit(event)
                self._end(key)

            state.writer.submit(write, done, uid)

        if action.phase is not None:
            self.reactions.write_unit_phase(unit, action.phase, action.message, after_phase)
        else:
            after_phase(True)

    # --- a unit for a held workload ---------------------------------------------------------
    def _maybe_create(self, key: str, members: Members) -> None:
        state = self.state
        if not state.settings.manage_jobs or key in self.creating:
            self._end(key)  # not served, or its creation is in flight
            return
        try:
            skipped = creation_skip(self.integration, members)
        except InvalidJobError as exc:
            self._invalid(members[0], exc)
            self._end(key)
            return
        if skipped:
            self._warn_outside(members)
            self._end(key)
            return
        self.creating[key] = True
        state.units_being_created.setdefault(key, None)  # its watch event waits (units.py)
        create = CreateUnit(
            self.kind, self.integration, members, self.priorities, state.features
        )
        state.writer.submit(create, lambda outcome: self._created(key, members, outcome), key)

    def _invalid(self, obj: Mapping[str, Any], error: InvalidJobError) -> None:
        log.warning("workload cannot be queued", error=str(error))
        self.state.writer.submit(RecordEvent(obj, WARNING, names.REASON_INVALID_JOB, str(error)))

    def _created(self, key: str, members: Members, outcome: CreateOutcome) -> None:
        state = self.state
        held = state.units_being_created.pop(key, None)
        if held is not None and not isinstance(outcome, UnitCreated):
            # not the one we made (or we made none): fold it as is
            self.reactions.on_unit(ADDED, held)
        if isinstance(outcome, WorkloadInvalid):
            self._invalid(members[0], outcome.error)
        elif isinstance(outcome, CreateRefused):
            self.creating.pop(key, None)
            self._refused(key, members[0], outcome.error)  # not at the resync
        if not isinstance(outcome, UnitCreated):
            self._end(key)
            return
        self.refusals.pop(key, None)
        self.retries.pop(key, None)
        log.info("queue unit created", unit=key, kind=self.kind.kind, resource=outcome.resource)
        first_status(
            self.state,
            outcome,
            on_unit=self.reactions.on_unit,
            execute=self.reactions.execute,
            kind=self.kind,
            key=key,
            workload=members[0],
            done=lambda: self._end(key),
        )

    def _refused(self, key: str, obj: Mapping[str, Any], error: str) -> None:
        """A refused creation: try again after the back-off and say why in an event."""
        failures = self.refusals.get(key, 0)
        self.refusals[key] = failures + 1
        delay = RETRY.delay(failures)
        self.retries[key] = (self.state.clock() + delay, dict(obj))
        log.warning(
            "QueueUnit creation refused; trying again after a back-off",
            unit=key,
            kind=self.kind.kind,
            error=error,
            attempt=failures + 1,
            retry_in=delay,
        )
        message = names.MSG_UNIT_CREATE_REFUSED.format(
            unit=key, error=error, attempt=failures + 1, delay=delay
        )
        event = RecordEvent(obj, WARNING, names.REASON_UNIT_CREATE_REFUSED, message)
        self.state.writer.submit(event)

    # --- a workload gone --------------------------------------------------------------------
    def _deleted(self, obj: dict[str, Any], key: str) -> None:
        self.quiet_looks.forget(obj)
        self.retries.pop(key, None)
        self.refusals.pop(key, None)
        self.generations.pop(object_key(obj), None)
        self.warned_outside.discard(str(meta(obj).get("uid") or ""))
        uid = self.state.unit_by_key.get(key)
        unit_obj = self.state.unit_objects.get(uid) if uid else None
        if uid is None or unit_obj is None or not owned_by(unit_obj, [obj], self.integration):
            self.timers.pop(key, None)
            return
        if self.integration.group_name(obj) is None:
            self._delete_unit(key, uid, unit_obj)
            return
        name = str(meta(obj).get("name"))

        def read(members: Members | None) -> None:
            remaining = [m for m in members or [] if str(meta(m).get("name")) != name]
            if remaining and owned_by(unit_obj, remaining, self.integration):
                if key in self.busy:
                    self.busy[key] = remaining[0]
                    return
                self._begin(key)
                self._with_members(key, remaining)  # a group that still has pods
            elif members is not None:
                self._delete_unit(key, uid, unit_obj)

        target = target_of(self.integration, obj)
        reader = ReadMembers(self.kind, self.integration, target)
        self.state.writer.submit(reader, read, uid)

    def _delete_unit(self, key: str, uid: str, unit_obj: Mapping[str, Any]) -> None:
        """Delete the unit of a gone workload (garbage collection would too; doing it here
        works on clusters and test planes without kube-controller-manager).

        An admitted unit's quota is given back once the API has deleted it (or found it
        gone), not when the delete is asked for: until then the API still shows it admitted,
        and a round that admitted into its room made the quota's admitted units exceed max
        (bench/soak.py's 30-minute run, seed 1, on cc30d67: the delete's connection was
        dropped and its retry landed after the next unit's admission). A refused delete
        leaves it counted; the next resync's look at units without a workload tries again."""
        state = self.state
        m = meta(unit_obj)
        held = state.engine.is_admitted(uid)

        def answered(outcome: bool | None) -> None:
            if outcome is not None:  # deleted (True) or gone already (False)
                state.engine.remove_unit(uid)
                state.wake.set()

        state.writer.submit(
            Delete(QUEUE_UNIT, str(m.get("name", "")), m.get("namespace"), "delete unit", uid),
            answered if held else None,
        )
        if not held:
            state.engine.remove_unit(uid)  # (it holds no quota: out of the queue at once)
        state.timed_out.discard(uid)
        self.timers.pop(key, None)
        self.creating.pop(key, None)  # (a pod group scaled to 0 and up again: a new unit)
        state.wake.set()

    # --- the periodic resync's part (resync.py) --------------------------------------------
    def resync_started(self) -> None:
        """The lists are asked for: note the events that come before they are folded."""
        self.resync_touched = set()
        self.resync_known = frozenset(self._unit_keys())

    def _unit_keys(self) -> list[str]:
        state, kind = self.state, self.consumer_kind
        out = []
        for key, uid in state.unit_by_key.items():
            ref = ((state.unit_objects.get(uid) or {}).get("spec") or {}).get("consumerRef") or {}
            if ref.get("kind") == kind:
                out.append(key)
        return out

    def _finished(self, key: str) -> bool:
        """The unit is Succeed or Failed: nothing left to repair (and no API call per
        finished workload per period)."""
        uid = self.state.unit_by_key.get(key)
        unit = self.state.engine.unit(uid) if uid else None
        return unit is not None and unit.phase in FINISHED_PHASES

    def fold(self, listed: Sequence[dict[str, Any]], periodic: bool) -> None:
        """Reconcile each listed workload once (one look per unit: a group's first member)
        as a listing's object; then, periodically, look at this kind's units whose workload
        was not listed (with a narrow list, only those not finished). Workloads that had
        events since the lists were asked for, or wait for a creation retry, are left to
        those."""
        touched, self.resync_touched = self.resync_touched or set(), None
        known, self.resync_known = self.resync_known, frozenset()
        seen: set[str] = set()
        quiet = self.quiet_looks
        skipped = 0
        for obj in listed:
            if is_metadata(obj):  # at a quiet look's version when the pool listed it
                skipped += 1
                self._fold_quiet(obj, seen, touched)
                continue
            if not self.integration.may_be_queued(obj):
                continue
            key = self.unit_key(obj)
            if key in seen:
                continue
            seen.add(key)
            if key not in touched and key not in self.retries and not self._finished(key):
                look = quiet.at_version(obj)
                if look is None or look.unit_key != key or not quiet.still_quiet(look):
                    self.on_event(None, obj)
        if not periodic:
            return
        if listed:
            log.info("resync listed workloads", kind=self.kind.kind, listed=len(listed),
                     read_whole=len(listed) - skipped)  # fmt: skip
        narrow = not self.integration.resync_selector().whole
        for key in sorted(known - seen - touched):
            uid = self.state.unit_by_key.get(key)
            unit_obj = self.state.unit_objects.get(uid) if uid else None
            if uid is None or unit_obj is None or (narrow and self._finished(key)):
                continue  # (a narrow list leaves finished workloads out: nothing to repair)
            self._orphan(key, uid, dict(unit_obj))

    def _fold_quiet(self, item: dict[str, Any], seen: set[str], touched: set[str]) -> None:
        """A listed workload's metadata, at the version of a quiet look when the pool listed
        it: nothing to look at while that holds; read whole if it no longer does."""
        look = self.quiet_looks.looks.get(object_key(item))
        if look is None or look.unit_key in seen:
            return  # (deleted since: its event)
        key = look.unit_key
        seen.add(key)
        if key in touched or key in self.retries or self._finished(key):
            return
        same = look.version == meta(item).get("resourceVersion")
        if not same or not self.quiet_looks.still_quiet(look):
            self._read_then(key, look.target)  # looked at since, or its unit moved on

    def _orphan(self, key: str, uid: str, unit_obj: dict[str, Any]) -> None:
        """A unit whose workload was not listed: read it; still there, it is reconciled;
        gone, the unit is deleted (guarded by its uid) when this integration made it (its
        DELETED event was lost and no garbage collector removed the unit)."""
        target = target_of_unit(self.integration, unit_obj)

        def read(members: Members | None) -> None:
            if members is None:
                return  # refused (logged): the next period looks again
            if members:
                if key not in self.busy and not any(self._stale(m) for m in members):
                    self._begin(key)
                    self._with_members(key, members, through_unit=True)
            elif made_for(unit_obj, self.integration):
                log.info("queue unit of a gone workload deleted", unit=key, kind=self.kind.kind)
                self._delete_unit(key, uid, unit_obj)

        self.state.writer.submit(ReadMembers(self.kind, self.integration, target), read, uid)

    @property
    def listed_whole(self) -> bool:
        return self.integration.resync_selector().whole

    def resync_listing(self, api: ObjectApi) -> tuple[list[dict[str, Any]], str]:
        """The kind's metadata; the workloads not at a quiet look's version read whole
        (quiet_looks.py). On the writer's pool."""
        items, version = api.list_with_version(self.kind, metadata_only=True)
        quiet, wanted = self.quiet_looks.split(items)
        if not wanted:
            return items, version
        return [*quiet, *read_whole(api, self.kind, wanted)], version

    def listing(self, api: ObjectApi) -> list[dict[str, Any]]:
        """What the periodic resync lists of the kind (its `resync_selector`)."""
        selector = self.integration.resync_selector()
        if selector.whole:
            return api.list_objects(self.kind)
        return api.list_objects(self.kind, None, selector.labels, selector.fields)

