"""The batch/v1 Job extension (SPEC 2.6): a unit per suspended Job, the Job kept in line with it.

The only module of the controller that knows what a Job is. The rules are the pure functions
of koordqueue.domain.job_extension; this reconciler reads the Job, decides on the owner
thread, and leaves every API call to the writer. One Job is reconciled at a time: an event
that arrives while the Job's writes are in flight waits for them (the latest one is kept),
as the informer's keyed queue guaranteed when handlers wrote inline.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Final

from cachetools import TTLCache

from koordqueue.domain import names
from koordqueue.domain.backoff import Backoff
from koordqueue.domain.effects import CREATED_STATUS, JOB_KIND, effects
from koordqueue.domain.job_extension import (
    InvalidJobError,
    JobStatus,
    enqueue_mark,
    enqueue_patch,
    go_time_string,
    is_managed,
    job_status,
    queue_unit_for_job,
    reconcile_job,
    resume_patch,
    suspend_patch,
)
from koordqueue.domain.queue_unit import (
    FINISHED_PHASES,
    InvalidQueueUnitError,
    Phase,
    QueueUnit,
    queue_unit_from_object,
)
from koordqueue.domain.round import Admit
from koordqueue.kube import metrics
from koordqueue.kube.api import (
    JOB,
    POD,
    PRIORITY_CLASS,
    QUEUE_UNIT,
    ApiError,
    ObjectApi,
    with_retries,
)
from koordqueue.kube.controller.base import (
    ADDED,
    DELETED,
    MODIFIED,
    NORMAL,
    WARNING,
    ControllerBase,
    epoch,
    log,
    meta,
    object_key,
)
from koordqueue.kube.controller.status import unit_status_patch
from koordqueue.kube.controller.writes import (
    Apis,
    Delete,
    MergePatch,
    Priority,
    Read,
    RecordEvent,
    Write,
)

STATUS_RETRY: Final = Backoff(1.0, cap=30.0)
"""After a Job-extension write (unit status, unit creation) was refused past its retries, when
to look again (instead of waiting for the next resync): 1 s, doubling per refusal, at most 30 s."""
STATUS_RETRY_SECONDS: Final = STATUS_RETRY.base
POD_RUNNING: Final = "Running"
CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"

PhaseWriter = Callable[[QueueUnit, Phase, str, Callable[[bool], None]], None]
"""UnitHandlers.write_unit_phase: write a unit's phase, then call back whether it landed."""


class PriorityClasses:
    """PriorityClass values by name, cached for a minute; read from the writer's threads."""

    def __init__(self, api: ObjectApi) -> None:
        self._api = api
        self._lock = threading.Lock()
        self._cache: TTLCache[str, int | None] = TTLCache(maxsize=1000, ttl=60)

    def value(self, name: str) -> int | None:
        with self._lock:
            if name in self._cache:
                return self._cache[name]
        try:
            pc = self._api.get(PRIORITY_CLASS, name)
        except ApiError:
            return None
        value = None if pc is None else int(pc.get("value") or 0)
        with self._lock:
            self._cache[name] = value
        return value


@dataclass(frozen=True, slots=True)
class UnitCreated:
    obj: dict[str, Any]
    resource: Any
    mark: Mapping[str, Any] | None = None
    """The enqueue patch the Job still needs (None: it carries the mark already)."""


@dataclass(frozen=True, slots=True)
class CreateRefused:
    """Creating the Job's unit was refused past its retries."""


@dataclass(frozen=True, slots=True)
class UnitExists:
    """AlreadyExists: an earlier run made the unit; its watch event will come."""


@dataclass(frozen=True, slots=True)
class JobInvalid:
    error: InvalidJobError


CreateOutcome = UnitCreated | CreateRefused | UnitExists | JobInvalid


@dataclass(frozen=True, slots=True)
class CreateUnitForJob:
    """Create the Job's QueueUnit, with the Job's annotations and its enqueue mark.

    The Job itself is marked afterwards (`UnitCreated.mark`): in the admission's resume
    patch when the unit is admitted as it is made (one Job write instead of two), else in
    its own patch before the unit's first status (jobs.py `_created`). The unit holds the
    same annotations either way, as when it copied them from the marked Job.
    """

    job: Mapping[str, Any]
    priorities: PriorityClasses
    priority: ClassVar[Priority] = Priority.START  # after the writes of Jobs already started

    def run(self, apis: Apis) -> CreateOutcome:
        job, api = self.job, apis.api
        try:
            body = queue_unit_for_job(job, self.priorities.value)
        except InvalidJobError as exc:
            return JobInvalid(exc)
        m = meta(job)
        patch = enqueue_patch(job, go_time_string())
        if patch is not None:
            notes = body["metadata"].get("annotations") or {}
            body["metadata"]["annotations"] = {**notes, **patch["metadata"]["annotations"]}
        try:
            created = with_retries(  # (409 is AlreadyExists here: an answer, not a conflict)
                lambda: api.create(QUEUE_UNIT, body, m.get("namespace")), retry_conflicts=False
            )
        except ApiError as exc:
            if exc.status == 409:
                return UnitExists()
            metrics.API_ERRORS.labels("create unit").inc()
            log.warning("could not create QueueUnit", job=object_key(job), error=str(exc))
            return CreateRefused()
        return UnitCreated(created, body["spec"]["resource"], patch)


def _ref_target(unit_obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of the Job a unit's consumerRef names."""
    ref = (unit_obj.get("spec") or {}).get("consumerRef") or {}
    return str(ref.get("namespace") or meta(unit_obj).get("namespace")), str(ref.get("name"))


def resume_job(namespace: str, name: str, mark: Mapping[str, str] | None = None) -> MergePatch:
    """suspend: false and the dequeue timestamp, with the enqueue `mark` (the unit's copy of
    it: a Job whose unit was admitted as it was made is marked here); None outcome if the Job
    is gone."""
    patch = resume_patch(go_time_string(), mark=mark) or {}  # (no Job given: always a patch)
    return MergePatch(JOB, name, namespace, patch, "resume job")


def suspend_job(namespace: str, name: str) -> MergePatch:
    return MergePatch(JOB, name, namespace, suspend_patch() or {}, "suspend job")


Generations = dict[str, tuple[str, int]]
"""Job namespace/name -> (uid, metadata.generation) of the Job as our last spec write left it."""


def note_generation(seen: Generations, job: Mapping[str, Any] | None) -> None:
    """Remember the generation a resume/suspend answered with (see `JobReconciler._stale`)."""
    if job is not None:
        m = meta(job)
        seen[object_key(job)] = (str(m.get("uid")), int(m.get("generation") or 0))


@dataclass(frozen=True, slots=True)
class NotedJobWrite:
    """A resume/suspend of a Job whose answer's generation is noted in `seen`.

    Run from a unit's effect chain on a writer thread; one dict store (atomic under the GIL)
    that happens before the chain's outcome is posted to the owner, who reads `seen`.
    """

    write: MergePatch
    seen: Generations

    def run(self, apis: Apis) -> dict[str, Any] | None:
        job = self.write.run(apis)
        note_generation(self.seen, job)
        return job


class JobReconciler:
    """Koord-Queue's job handle for batch/v1 Jobs (a ConsumerReconciler)."""

    consumer_kind: Final = JOB_KIND
    watched: Final = JOB

    def __init__(self, ctl: ControllerBase, write_unit_phase: PhaseWriter) -> None:
        self.ctl = ctl
        self.write_unit_phase = write_unit_phase
        self.priorities = PriorityClasses(ctl.api)
        self.timers: dict[str, float] = {}  # Job namespace/name -> when to look again
        self.refusals: dict[str, int] = {}  # Job namespace/name -> writes refused in a row
        self.creating: TTLCache[str, bool] = TTLCache(maxsize=100_000, ttl=30)
        self.busy: dict[str, dict[str, Any] | None] = {}
        """Jobs with writes in flight -> the latest event that came meanwhile (None: none)."""
        self.generations: Generations = {}
        """What our last resume/suspend of each Job answered (uid, generation): an event or
        read of an older generation of the same Job is stale (`_stale`)."""

    # --- the seam -------------------------------------------------------------------------
    def resume(self, unit_obj: Mapping[str, Any]) -> Write[Any] | None:
        write = resume_job(*_ref_target(unit_obj), mark=enqueue_mark(unit_obj))
        return NotedJobWrite(write, self.generations)

    def suspend(self, unit_obj: Mapping[str, Any]) -> Write[Any] | None:
        return NotedJobWrite(suspend_job(*_ref_target(unit_obj)), self.generations)

    def _stale(self, job: Mapping[str, Any], key: str) -> bool:
        """The Job as it was before our last resume/suspend of it (a lower generation).

        The watch delivers the newer version after it, so a stale copy is dropped rather than
        reconciled: reconciling a copy from before the resume would resume the Job again (a
        second Job patch per admission, as the enqueue-mark event held while the Job's unit
        was being made and admitted came back after the resume).
        """
        seen = self.generations.get(key)
        if seen is None:
            return False
        m = meta(job)
        return seen[0] == m.get("uid") and int(m.get("generation") or 0) < seen[1]

    def unit_scheduled(self, unit_obj: Mapping[str, Any]) -> None:
        """SchedSucceed: read the Job, then reconcile it."""
        namespace, name = _ref_target(unit_obj)
        uid = meta(unit_obj).get("uid")
        if not uid:
            return
        read = Read(lambda api: api.get(JOB, name, namespace), "get job")
        self.ctl.writer.submit(read, lambda job: self._fetched(job, str(uid)))

    def fire_timers(self) -> None:
        """Look again at Jobs whose running timeout or back-off may have expired, or whose
        last write was refused."""
        if not self.timers:
            return
        now = self.ctl.clock()
        for key in [key for key, at in self.timers.items() if at <= now]:
            self.timers.pop(key, None)
            self._read_job_then(key, self._timer_fired)

    def _read_job_then(
        self, key: str, then: Callable[[dict[str, Any] | None, str], None]
    ) -> None:
        namespace, _, name = key.partition("/")

        def read(api: ObjectApi) -> dict[str, Any] | None:
            return api.get(JOB, name, namespace)

        self.ctl.writer.submit(Read(read, "get job"), lambda job: then(job, key))

    def on_event(self, event_type: str | None, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if event_type == DELETED:
            if self.ctl.resync_window is not None:
                self.ctl.resync_window.deleted_jobs.add(key)
            if key in self.busy:
                self.busy[key] = None  # what waited is older than the deletion
            self._deleted(obj, key)
            return
        if self._stale(obj, key):
            return  # the version our own write made is on its way
        if key in self.busy:
            self.busy[key] = obj
            return
        self._handle(obj, key)

    # --- one Job at a time ----------------------------------------------------------------
    def _begin(self, key: str) -> None:
        self.busy.setdefault(key, None)

    def _end(self, key: str) -> None:
        waiting = self.busy.pop(key, None)
        if waiting is not None:
            self.on_event(MODIFIED, waiting)

    def _fetched(self, job: dict[str, Any] | None, unit_uid: str) -> None:
        if job is None:
            return
        key = object_key(job)
        if self._stale(job, key):
            return
        if key in self.busy:
            self.busy[key] = job
            return
        self._reconcile(job, unit_uid)

    def _timer_fired(self, job: dict[str, Any] | None, key: str) -> None:
        if job is None or self._stale(job, key):
            return
        if key in self.busy:
            self.busy[key] = job
            return
        unit_uid = self.ctl.unit_by_key.get(key)
        if unit_uid:
            self._reconcile(job, unit_uid)
        else:  # its unit could not be created: try again
            self._maybe_create_unit(job, key)

    def _retry_soon(self, key: str) -> None:
        failures = self.refusals.get(key, 0)
        self.refusals[key] = failures + 1
        self.timers[key] = self.ctl.clock() + STATUS_RETRY.delay(failures)

    # --- events ---------------------------------------------------------------------------
    def _owned_unit(self, obj: Mapping[str, Any], key: str) -> tuple[str | None, bool]:
        unit_uid = self.ctl.unit_by_key.get(key)
        unit_obj = self.ctl.unit_objects.get(unit_uid) if unit_uid else None
        if unit_obj is None:
            return None, False
        job_uid = meta(obj).get("uid")
        owners = meta(unit_obj).get("ownerReferences") or []
        owned = any(ref.get("uid") == job_uid for ref in owners)
        return unit_uid, owned

    def _deleted(self, obj: dict[str, Any], key: str) -> None:
        unit_uid, owned = self._owned_unit(obj, key)
        if owned and unit_uid:
            # Garbage collection would do this too; doing it here releases quota at once
            # and works on clusters (and test planes) without kube-controller-manager.
            m = meta(obj)
            self.ctl.writer.submit(
                Delete(QUEUE_UNIT, m.get("name", ""), m.get("namespace"), "delete unit", unit_uid)
            )
            self.ctl.engine.remove_unit(unit_uid)
            self.ctl.timed_out.discard(unit_uid)
        self.timers.pop(key, None)
        self.refusals.pop(key, None)
        self.generations.pop(key, None)

    def _handle(self, obj: dict[str, Any], key: str) -> None:
        unit_uid, owned = self._owned_unit(obj, key)
        if unit_uid is None:
            self._maybe_create_unit(obj, key)
        elif owned:
            self._reconcile(obj, unit_uid)

    # --- reconcile ------------------------------------------------------------------------
    def _reconcile(self, job: dict[str, Any], unit_uid: str) -> None:
        """Koord-Queue's job reconcile for one Job and its unit (SPEC 2.6, issue 18 item 11)."""
        ctl = self.ctl
        unit = ctl.engine.unit(unit_uid)
        if unit is None or unit_uid not in ctl.unit_objects:
            return
        if unit.phase is Phase.BACKOFF and unit_uid not in ctl.timed_out:
            return  # a SchedFailed back-off runs on its own exponential clock
        running = self._pod_running(job, unit.phase)
        key = object_key(job)
        if running is not None:
            self._begin(key)
            self._decide(job, unit_uid, running)
            return
        # active pods, none ready: are any Running? (the reference lists them; so do we, rarely)
        m = meta(job)
        selector = f"{CONTROLLER_UID_LABEL}={m.get('uid')}"
        namespace = m.get("namespace")
        read = Read(lambda api: api.list_objects(POD, namespace, selector), "list pods")

        def listed(pods: list[dict[str, Any]] | None) -> None:
            phases = ((pod.get("status") or {}).get("phase") for pod in pods or [])
            self._decide(job, unit_uid, any(phase == POD_RUNNING for phase in phases))

        self._begin(key)
        self.ctl.writer.submit(read, listed)

    @staticmethod
    def _pod_running(job: Mapping[str, Any], phase: Phase) -> bool | None:
        """Whether one of the Job's pods is Running, when the Job says; None: list its pods.

        `status.ready` answers without a call; the pods are listed only while the Job has
        active pods none of which is ready and its unit does not already say Running.
        """
        status = job.get("status") or {}
        if int(status.get("ready") or 0) > 0:
            return True
        if int(status.get("active") or 0) == 0 or phase in (Phase.RUNNING, *FINISHED_PHASES):
            return False
        return None

    def _decide(self, job: dict[str, Any], unit_uid: str, running: bool) -> None:
        """The reconcile's decision and its writes; ends the Job's turn when they are done."""
        ctl = self.ctl
        key = object_key(job)
        unit = ctl.engine.unit(unit_uid)
        unit_obj = ctl.unit_objects.get(unit_uid)
        if unit is None or unit_obj is None:
            self._end(key)
            return
        admitted = ctl.engine.is_admitted(unit_uid)
        status = job_status(job, running)
        if status is JobStatus.CREATED and enqueue_mark(unit_obj):
            # The unit carries the Job's enqueue mark, which reaches the Job only with its
            # resume or its unit's first status (`CreateUnitForJob`): a Job whose marking write
            # never landed (a leader killed between the unit's admission and the resume, a
            # refused write) is queued as its unit says, else nothing would ever resume it.
            status = JobStatus.QUEUING
        updated = epoch((unit_obj.get("status") or {}).get("lastUpdateTime"))
        now = ctl.clock()
        since = now - updated if updated is not None else 0.0
        settings = ctl.settings
        action = reconcile_job(
            status, unit.phase, since, settings.job_running_timeout, settings.job_backoff_time
        )
        suspended = bool((job.get("spec") or {}).get("suspend"))
        m = meta(job)
        namespace, name = str(m.get("namespace", "default")), str(m.get("name", ""))

        def after_phase(written: bool) -> None:
            if action.phase is not None:
                if not written:
                    # refused past its retries: look again soon (the engine still has the old
                    # phase, as the API does), not at the next resync
                    self._retry_soon(key)
                    self._end(key)
                    return
                self.refusals.pop(key, None)
                if action.phase is Phase.BACKOFF:
                    ctl.engine.requeue(unit_uid, math.inf)  # gives its quota back
                    ctl.timed_out.add(unit_uid)
                elif action.phase is Phase.ENQUEUED:
                    ctl.engine.defer(unit_uid, 0.0)
                    ctl.timed_out.discard(unit_uid)
                ctl.wake.set()
            if action.recheck_after is None:
                self.timers.pop(key, None)
            else:
                self.timers[key] = now + max(action.recheck_after, 0.0)
            if action.suspend and not suspended:
                suspend = NotedJobWrite(suspend_job(namespace, name), self.generations)
                ctl.writer.submit(suspend, lambda _: self._end(key), unit_uid)
            elif action.resume and suspended and admitted:

                def resumed(result: dict[str, Any] | None) -> None:
                    if result is not None and action.resume_event:
                        event = RecordEvent(job, NORMAL, names.REASON_RESUME, names.MSG_RESUME)
                        ctl.writer.submit(event)
                    self._end(key)

                resume = resume_job(namespace, name, mark=enqueue_mark(unit_obj))
                ctl.writer.submit(NotedJobWrite(resume, self.generations), resumed, unit_uid)
            else:
                self._end(key)

        if action.phase is not None:
            self.write_unit_phase(unit, action.phase, action.message, after_phase)
        else:
            after_phase(True)

    # --- a unit for a new Job -------------------------------------------------------------
    def _maybe_create_unit(self, job: dict[str, Any], key: str) -> None:
        if not self.ctl.settings.manage_jobs or not is_managed(job) or key in self.creating:
            return  # not ours (started before it was suspended), or creation is in flight
        if job_status(job) not in (JobStatus.CREATED, JobStatus.QUEUING):
            return  # enqueued before and resumed since, but its unit is gone: left alone
        self.creating[key] = True
        self.ctl.units_being_created[key] = None
        self._begin(key)
        self.ctl.writer.submit(
            CreateUnitForJob(job, self.priorities),
            lambda outcome: self._created(job, key, outcome),
            key,
        )

    def _created(self, job: dict[str, Any], key: str, outcome: CreateOutcome) -> None:
        ctl = self.ctl
        held = ctl.units_being_created.pop(key, None)
        if held is not None and not isinstance(outcome, UnitCreated):
            ctl.on_unit(ADDED, held)  # not the one we made (or we made none): fold it as is
        if isinstance(outcome, JobInvalid):
            error = str(outcome.error)
            ctl.writer.submit(RecordEvent(job, WARNING, names.REASON_INVALID_JOB, error))
        elif isinstance(outcome, CreateRefused):
            self.creating.pop(key, None)
            self._retry_soon(key)  # not at the resync
        if not isinstance(outcome, UnitCreated):
            self._end(key)
            return
        self.refusals.pop(key, None)
        created = outcome.obj
        log.info("queue unit created", unit=key, resource=outcome.resource)
        # Fast path: nothing waits in its queue, so admit now and write the status once.
        try:
            fresh = queue_unit_from_object(created)
        except InvalidQueueUnitError:
            fresh = None
        if fresh is not None:
            ctl.unit_objects[fresh.uid] = created
            ctl.unit_by_key[key] = fresh.uid
            ctl.engine.upsert_unit(fresh)
            decision = ctl.engine.admit_if_queue_idle(fresh.uid, ctl.clock())
            if decision is not None:
                admitted = replace(fresh, phase=Phase.DEQUEUED)
                planned = effects([Admit(admitted, decision)], ctl.reported)
                ctl.execute(planned, lambda: self._end(key))
                return
        # status is a subresource: the create ignored it, so the initial phase is a second write
        # (guarded by the created resourceVersion: if an admission already wrote the status,
        # that write wins and this one is dropped); the Job is marked enqueued first, in the
        # same write, so it carries its mark before any round's message on its unit
        m = meta(created)
        patch = unit_status_patch(
            CREATED_STATUS.message,
            CREATED_STATUS.phase,
            initial=True,
            resource_version=m.get("resourceVersion"),
        )
        mark = None
        if outcome.mark is not None:
            name, namespace = meta(job).get("name", ""), meta(job).get("namespace")
            mark = MergePatch(JOB, name, namespace, outcome.mark, "enqueue job")
        write = InitialUnitStatus(
            str(m.get("namespace")), str(m.get("name", "")), patch, key, mark
        )

        def written(enqueued: dict[str, Any] | None) -> None:
            if enqueued is not None:
                ctl.on_unit(ADDED, enqueued)
            self._end(key)

        uid = str(m.get("uid") or key)
        ctl.writer.submit(write, written, uid)


@dataclass(frozen=True, slots=True)
class InitialUnitStatus:
    """A new unit's first status (Enqueued), unless something already wrote one (409)."""

    namespace: str
    name: str
    patch: Mapping[str, Any]
    job_key: str
    mark: MergePatch | None = None
    """The Job's enqueue patch, written first (its refusal is logged and counted by
    MergePatch; the Job is then marked by its resume, from the unit's copy of the mark)."""

    def run(self, apis: Apis) -> dict[str, Any] | None:
        if self.mark is not None:
            self.mark.run(apis)
        try:
            return apis.api.merge_patch(
                QUEUE_UNIT, self.name, dict(self.patch), self.namespace, "status"
            )
        except ApiError as exc:
            if not exc.conflict:
                metrics.API_ERRORS.labels("patch unit status").inc()
                log.warning("initial unit status not written", unit=self.job_key, error=str(exc))
            return None

