"""The quota-to-queue controller: watch events in, admission engine in the middle, writes out.

Handlers stay thin and level-triggered: every event carries the whole object, which is folded
into the pure AdmissionEngine; the admission round decides; this class persists the decisions
(guarded by resourceVersion), records events, and keeps Jobs' `suspend` in line with their
units. A periodic resync re-lists everything so a missed event is repaired within one period.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import structlog
from cachetools import TTLCache

from koordqueue.domain import names
from koordqueue.domain.effects import (
    Effect,
    QueueEvent,
    ResumeConsumer,
    SetUnitStatus,
    SuspendConsumer,
    UnitEvent,
    effects,
    per_unit,
    queue_effects,
)
from koordqueue.domain.engine import AdmissionEngine, RoundResult
from koordqueue.domain.job_extension import (
    InvalidJobError,
    JobStatus,
    backoff_delay,
    enqueue_patch,
    go_time_string,
    is_managed,
    job_status,
    queue_unit_for_job,
    reconcile_job,
    resume_patch,
    suspend_patch,
)
from koordqueue.domain.mapping import QuotaName, queue_name_for
from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.domain.queue_unit import (
    ADMITTED_PHASES,
    FINISHED_PHASES,
    WAITING_PHASES,
    InvalidQueueUnitError,
    Phase,
    QueueUnit,
    queue_unit_from_object,
)
from koordqueue.domain.quota import InvalidQuotaError, QuotaSpec, quota_from_object
from koordqueue.domain.round import Admit, Reject
from koordqueue.kube import metrics
from koordqueue.kube.api import (
    ELASTIC_QUOTA,
    JOB,
    POD,
    PRIORITY_CLASS,
    QUEUE,
    QUEUE_UNIT,
    ApiError,
    Kind,
    Listing,
    ObjectApi,
    with_retries,
)
from koordqueue.kube.events import EventRecorder
from koordqueue.kube.queue_sync import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    apply_queue,
    delete_queue,
    queue_drifted,
)
from koordqueue.kube.quota_status import QueueUsageWriter
from koordqueue.kube.settings import ControllerSettings

log = structlog.get_logger(__name__)
WARNING = names.EVENT_WARNING
NORMAL = names.EVENT_NORMAL
STATUS_RETRY_SECONDS = 1.0
"""After a Job-extension write (unit status, unit creation) was refused past its retries,
when to try again (instead of waiting for the next resync)."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _queue_label(unit: QueueUnit) -> str:
    """The unit's queue for metric labels ("" when it has none or an unusable one)."""
    resolution = queue_name_for(unit.labels)
    return resolution.name if isinstance(resolution, QuotaName) else ""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _epoch(timestamp: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 time as the API writes it (None if unreadable)."""
    if not isinstance(timestamp, str) or not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _admissions(unit_obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """status.admissions of a unit admitted whole: each pod set with all its replicas."""
    pod_sets = (unit_obj.get("spec") or {}).get("podSet") or []
    return [{"name": ps.get("name"), "replicas": int(ps.get("count") or 0)} for ps in pod_sets]


class Controller:
    """State and reactions of the controller; kopf handlers call the `on_*` methods."""

    def __init__(
        self,
        api: ObjectApi,
        settings: ControllerSettings | None = None,
        recorder: EventRecorder | None = None,
        clock: Callable[[], float] = time.time,
        writers: int = 16,
    ) -> None:
        self.api = api
        self.settings = settings or ControllerSettings()
        self.recorder = recorder or EventRecorder(api)
        self.clock = clock
        self.lock = threading.RLock()
        self.engine = AdmissionEngine(self.settings.oversell_rate, self._on_duplicate_quota)
        self.ready = threading.Event()
        self.wake = threading.Event()
        """Set when something happened that may let a unit in (new unit, release, quota change)."""
        self._units: dict[str, dict[str, Any]] = {}  # uid -> last seen QueueUnit object
        self._unit_by_key: dict[str, str] = {}  # namespace/name -> uid
        self._quotas: dict[tuple[str, str], dict[str, Any]] = {}  # (namespace, name) -> object
        self._reported: dict[str, str] = {}  # uid -> last status message written
        self._queue_errors: dict[str, str] = {}
        self._creating: TTLCache[str, bool] = TTLCache(maxsize=100_000, ttl=30)
        self._priorities: TTLCache[str, int | None] = TTLCache(maxsize=1000, ttl=60)
        self._known_metric_queues: set[str] = set()
        self._queue_usage = QueueUsageWriter(api, self.settings.namespace)
        self._job_timers: dict[str, float] = {}  # Job namespace/name -> when to look again
        self._timed_out: set[str] = set()  # unit uids backed off by the running timeout
        self._pool = ThreadPoolExecutor(max_workers=writers, thread_name_prefix="kq-write")
        self._events = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kq-event")

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._events.shutdown(wait=True)

    # --- ElasticQuota -------------------------------------------------------------------
    def _on_duplicate_quota(self, previous: QuotaSpec, winner: QuotaSpec) -> None:
        log.warning(
            "two ElasticQuotas share a name; the last reconciled wins",
            quota=winner.name,
            previous=f"{previous.namespace}/{previous.name}",
            winner=f"{winner.namespace}/{winner.name}",
        )
        obj = self._quotas.get((winner.namespace, winner.name))
        if obj is not None:
            self.recorder.record(
                obj,
                WARNING,
                names.REASON_DUPLICATE_QUOTA,
                names.MSG_DUPLICATE_QUOTA.format(
                    name=winner.name, previous=previous.namespace, winner=winner.namespace
                ),
            )

    def on_quota(self, event_type: str | None, obj: dict[str, Any], apply: bool = True) -> None:
        """Fold a quota in and (unless a resync batches it) apply its Queue."""
        meta = _meta(obj)
        name, namespace = meta.get("name", ""), meta.get("namespace", "default")
        if event_type == "DELETED":
            self._quotas.pop((namespace, name), None)
            with self.lock:
                self.engine.remove_quota(name, namespace)
                survivor = self.engine.tree.get(name)
            if survivor is None:
                self._safely(
                    "delete queue", lambda: delete_queue(self.api, name, self.settings.namespace)
                )
                with self.lock:
                    self.engine.remove_queue(name)
            else:
                remaining = self._quotas.get((survivor.namespace, name))
                if remaining is not None:
                    self._safely(
                        "apply queue",
                        lambda: apply_queue(self.api, remaining, self.settings.namespace),
                    )
            return
        self._quotas[(namespace, name)] = obj
        try:
            spec = quota_from_object(obj)
        except InvalidQuotaError as exc:
            log.warning("invalid ElasticQuota", quota=f"{namespace}/{name}", error=str(exc))
            self.recorder.record(obj, WARNING, names.REASON_INVALID_QUOTA, str(exc))
            return
        with self.lock:
            self.engine.upsert_quota(spec)
        self.wake.set()
        if apply:
            self._safely("apply queue", lambda: apply_queue(self.api, obj, self.settings.namespace))

    # --- Queue --------------------------------------------------------------------------
    def _quota_object(self, name: str) -> dict[str, Any] | None:
        with self.lock:
            live = self.engine.tree.get(name)
        return None if live is None else self._quotas.get((live.namespace, name))

    def on_queue(self, event_type: str | None, obj: dict[str, Any]) -> None:
        meta = _meta(obj)
        if meta.get("namespace") != self.settings.namespace:
            return
        name = meta.get("name", "")
        quota = self._quota_object(name)
        if event_type == "DELETED":
            if quota is not None:  # deleted by hand while its quota lives: put it back
                self._safely(
                    "apply queue", lambda: apply_queue(self.api, quota, self.settings.namespace)
                )
            else:
                with self.lock:
                    self.engine.remove_queue(name)
            return
        if quota is not None and queue_drifted(obj, derive_queue(quota, self.settings.namespace)):
            log.info("queue drifted from its quota; reverting", queue=name)
            applied = self._safely(
                "apply queue", lambda: apply_queue(self.api, quota, self.settings.namespace)
            )
            if applied is not None:
                obj = applied
        spec = obj.get("spec") or {}
        policy = str(spec.get("queuePolicy") or names.DEFAULT_POLICY)
        annotations = {k: str(v) for k, v in (_meta(obj).get("annotations") or {}).items()}
        with self.lock:
            error = self.engine.upsert_queue(name, policy, annotations)
        self.wake.set()
        planned = queue_effects(name, error, self._queue_errors.get(name))
        if error is None:
            self._queue_errors.pop(name, None)
        else:
            self._queue_errors[name] = error
        for effect in planned:
            log.warning("queue not served", queue=name, error=error)
            self._record_event(obj, effect)

    # --- QueueUnit ----------------------------------------------------------------------
    def on_unit(self, event_type: str | None, obj: dict[str, Any]) -> None:
        meta = _meta(obj)
        uid = meta.get("uid", "")
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        if event_type == "DELETED":
            with self.lock:
                self.engine.remove_unit(uid)
                self._units.pop(uid, None)
                self._reported.pop(uid, None)
                if self._unit_by_key.get(key) == uid:
                    del self._unit_by_key[key]
            self.wake.set()
            return
        try:
            unit = queue_unit_from_object(obj)
        except InvalidQueueUnitError as exc:
            if self._reported.get(uid) != str(exc):
                self._reported[uid] = str(exc)
                self.recorder.record(obj, WARNING, names.REASON_INVALID_QUEUE_UNIT, str(exc))
            return
        if unit.phase is Phase.SCHED_FAILED:
            self._back_off(unit, obj)
            return
        with self.lock:
            known = self.engine.unit(uid)
            if known is not None and self.engine.is_admitted(uid) and unit.phase in WAITING_PHASES:
                # A stale event from before our own admission write: our decision stands.
                unit = replace(unit, phase=known.phase)
            self.engine.upsert_unit(unit)
            message = (obj.get("status") or {}).get("message")
            if unit.phase is Phase.BACKOFF and (
                uid in self._timed_out or (known is None and message == names.MSG_RUNNING_TIMEOUT)
            ):
                # backed off by the running timeout (seen first after a restart, or a stale
                # earlier version counted it again): its quota stays free until the Job's
                # back-off ends and the Job reconcile enqueues it
                self._timed_out.add(uid)
                self.engine.requeue(uid, math.inf)
            self._units[uid] = obj
            self._unit_by_key[key] = uid
        if known is None or unit.phase in FINISHED_PHASES:
            self.wake.set()
        if unit.phase is Phase.SCHED_SUCCEED and (known is None or known.phase != unit.phase):
            self._reconcile_consumer(obj)

    def _back_off(self, unit: QueueUnit, obj: dict[str, Any]) -> None:
        """SchedFailed: release the quota, suspend the Job, retry after an exponential back-off."""
        attempts = int((obj.get("status") or {}).get("attempts") or 0) + 1
        delay = backoff_delay(attempts)
        with self.lock:
            self.engine.upsert_unit(replace(unit, phase=Phase.BACKOFF))
            self.engine.requeue(unit.uid, self.clock() + delay)
            self._units[unit.uid] = obj
        message = names.MSG_SCHED_FAILED_BACKOFF.format(attempts=attempts, delay=delay)
        patch = {
            "status": {
                "phase": Phase.BACKOFF.value,
                "attempts": attempts,
                "message": message,
                "lastUpdateTime": _now(),
                "admissions": [],
            }
        }
        updated = self._patch_unit_status(unit, patch)
        ref = (obj.get("spec") or {}).get("consumerRef") or {}
        if ref.get("kind") == "Job" and ref.get("name"):
            job_name = str(ref["name"])
            self._safely("suspend job", lambda: self._suspend_job(unit.namespace, job_name))
        if updated is not None:
            self.recorder.record(updated, WARNING, names.REASON_BACKOFF, message)
        self.wake.set()

    # --- Job extension ------------------------------------------------------------------
    def _priority_of_class(self, name: str) -> int | None:
        if name in self._priorities:
            return self._priorities[name]
        try:
            pc = self.api.get(PRIORITY_CLASS, name)
        except ApiError:
            return None
        value = None if pc is None else int(pc.get("value") or 0)
        self._priorities[name] = value
        return value

    def on_job(self, event_type: str | None, obj: dict[str, Any]) -> None:
        meta = _meta(obj)
        namespace, name, job_uid = (
            meta.get("namespace", "default"),
            meta.get("name", ""),
            meta.get("uid"),
        )
        key = f"{namespace}/{name}"
        with self.lock:
            unit_uid = self._unit_by_key.get(key)
            unit_obj = self._units.get(unit_uid) if unit_uid else None
        owned = unit_obj is not None and any(
            ref.get("uid") == job_uid for ref in _meta(unit_obj).get("ownerReferences") or []
        )
        if event_type == "DELETED":
            if unit_obj is not None and owned and unit_uid:
                # Garbage collection would do this too; doing it here releases quota at once
                # and works on clusters (and test planes) without kube-controller-manager.
                self._safely(
                    "delete unit", lambda: self.api.delete(QUEUE_UNIT, name, namespace, unit_uid)
                )
                with self.lock:
                    self.engine.remove_unit(unit_uid)
                    self._timed_out.discard(unit_uid)
            self._job_timers.pop(key, None)
            return
        if unit_obj is None or not unit_uid:
            self._maybe_create_unit(obj, key)
            return
        if not owned:
            return
        self._reconcile_job(obj, unit_uid)

    def _reconcile_job(self, job: dict[str, Any], unit_uid: str) -> None:
        """Koord-Queue's job reconcile for one Job and its unit (SPEC 2.6, issue 18 item 11)."""
        meta = _meta(job)
        namespace, name = meta.get("namespace", "default"), meta.get("name", "")
        key = f"{namespace}/{name}"
        with self.lock:
            unit = self.engine.unit(unit_uid)
            unit_obj = self._units.get(unit_uid)
            admitted = self.engine.is_admitted(unit_uid)
            timed_out = unit_uid in self._timed_out
        if unit is None or unit_obj is None:
            return
        if unit.phase is Phase.BACKOFF and not timed_out:
            return  # a SchedFailed back-off runs on its own exponential clock
        status = job_status(job, self._pod_running(job, unit.phase))
        updated = _epoch((unit_obj.get("status") or {}).get("lastUpdateTime"))
        now = self.clock()
        since = now - updated if updated is not None else 0.0
        action = reconcile_job(
            status,
            unit.phase,
            since,
            self.settings.job_running_timeout,
            self.settings.job_backoff_time,
        )
        suspended = bool((job.get("spec") or {}).get("suspend"))
        if action.phase is not None:
            if not self._set_unit_phase(unit, action.phase, action.message):
                # refused past its retries: look again soon (the engine still has the old
                # phase, as the API does), not at the next resync
                self._job_timers[key] = now + STATUS_RETRY_SECONDS
                return
            with self.lock:
                if action.phase is Phase.BACKOFF:
                    self.engine.requeue(unit_uid, math.inf)  # gives its quota back
                    self._timed_out.add(unit_uid)
                elif action.phase is Phase.ENQUEUED:
                    self.engine.defer(unit_uid, 0.0)
                    self._timed_out.discard(unit_uid)
            self.wake.set()
        if action.suspend and not suspended:
            self._safely("suspend job", lambda: self._suspend_job(namespace, name))
        if action.resume and suspended and admitted:
            resumed = self._safely("resume job", lambda: self._resume_job(namespace, name))
            if resumed is not None and action.resume_event:
                self.recorder.record(job, NORMAL, names.REASON_RESUME, names.MSG_RESUME)
        if action.recheck_after is None:
            self._job_timers.pop(key, None)
        else:
            self._job_timers[key] = now + max(action.recheck_after, 0.0)

    def _pod_running(self, job: Mapping[str, Any], phase: Phase) -> bool:
        """Whether one of the Job's pods is Running (the reference lists them; so do we, rarely).

        `status.ready` answers without a call; the pods are listed only while the Job has
        active pods none of which is ready and its unit does not already say Running.
        """
        status = job.get("status") or {}
        if int(status.get("ready") or 0) > 0:
            return True
        if int(status.get("active") or 0) == 0 or phase in (Phase.RUNNING, *FINISHED_PHASES):
            return False
        meta = _meta(job)
        selector = f"batch.kubernetes.io/controller-uid={meta.get('uid')}"
        pods = self._safely(
            "list pods", lambda: self.api.list_objects(POD, meta.get("namespace"), selector)
        )
        return any((pod.get("status") or {}).get("phase") == "Running" for pod in pods or [])

    def _reconcile_consumer(self, unit_obj: Mapping[str, Any]) -> None:
        """A unit event the Job must follow (SchedSucceed): look at its Job now."""
        ref = (unit_obj.get("spec") or {}).get("consumerRef") or {}
        if ref.get("kind") != "Job" or not ref.get("name"):
            return
        namespace = str(ref.get("namespace") or _meta(unit_obj).get("namespace"))
        job = self._safely("get job", lambda: self.api.get(JOB, str(ref["name"]), namespace))
        uid = _meta(unit_obj).get("uid")
        if job is not None and uid:
            self._reconcile_job(job, str(uid))

    def fire_job_timers(self) -> None:
        """Look again at Jobs whose running timeout or back-off may have expired, or whose
        last write was refused."""
        now = self.clock()
        due = [key for key, at in list(self._job_timers.items()) if at <= now]
        for key in due:
            self._job_timers.pop(key, None)
            namespace, _, name = key.partition("/")
            job = self._safely("get job", lambda: self.api.get(JOB, name, namespace))  # noqa: B023
            with self.lock:
                unit_uid = self._unit_by_key.get(key)
            if job is not None and unit_uid:
                self._reconcile_job(job, unit_uid)
            elif job is not None:  # its unit could not be created: try again
                self._maybe_create_unit(job, key)

    def _maybe_create_unit(self, job: dict[str, Any], key: str) -> None:
        if not self.settings.manage_jobs or not is_managed(job) or key in self._creating:
            return  # not ours (started before it was suspended), or creation is in flight
        if job_status(job) not in (JobStatus.CREATED, JobStatus.QUEUING):
            return  # enqueued before and resumed since, but its unit is gone: left alone
        self._creating[key] = True
        try:
            body = queue_unit_for_job(job, self._priority_of_class)
        except InvalidJobError as exc:
            self.recorder.record(job, WARNING, names.REASON_INVALID_JOB, str(exc))
            return
        patch = enqueue_patch(job, go_time_string())
        if patch is not None:  # mark the Job enqueued first; the unit copies its annotations
            meta = _meta(job)
            marked = self._safely(
                "enqueue job",
                lambda: with_retries(
                    lambda: self.api.merge_patch(
                        JOB, meta.get("name", ""), patch, meta.get("namespace")
                    )
                ),
            )
            if marked is None:
                self._creating.pop(key, None)
                self._job_timers[key] = self.clock() + STATUS_RETRY_SECONDS
                return
            body["metadata"]["annotations"] = dict(_meta(marked).get("annotations") or {})
        try:
            created = with_retries(
                lambda: self.api.create(QUEUE_UNIT, body, _meta(job).get("namespace"))
            )
        except ApiError as exc:
            if exc.status == 409:  # AlreadyExists: a previous run made it; its event will come
                return
            self._creating.pop(key, None)
            self._job_timers[key] = self.clock() + STATUS_RETRY_SECONDS  # not at the resync
            metrics.API_ERRORS.labels("create unit").inc()
            log.warning("could not create QueueUnit", job=key, error=str(exc))
            return
        log.info("queue unit created", unit=key, resource=body["spec"]["resource"])
        # Fast path: nothing waits in its queue, so admit now and write the status once.
        try:
            fresh = queue_unit_from_object(created)
        except InvalidQueueUnitError:
            fresh = None
        if fresh is not None:
            with self.lock:
                self._units[fresh.uid] = created
                self._unit_by_key[key] = fresh.uid
                self.engine.upsert_unit(fresh)
                decision = self.engine.admit_if_queue_idle(fresh.uid, self.clock())
            if decision is not None:
                admitted = replace(fresh, phase=Phase.DEQUEUED)
                self._execute(effects([Admit(admitted, decision)], self._reported))
                return
        # status is a subresource: the create ignored it, so the initial phase is a second write
        # (guarded by the created resourceVersion: if an admission already wrote the status,
        # that write wins and this one is dropped)
        initial = {
            "metadata": {"resourceVersion": _meta(created).get("resourceVersion")},
            "status": {
                "phase": Phase.ENQUEUED.value,
                "message": names.MSG_UNIT_ENQUEUED,
                "lastUpdateTime": _now(),
            },
        }
        namespace, name = _meta(created).get("namespace"), _meta(created).get("name", "")
        try:
            enqueued = self.api.merge_patch(QUEUE_UNIT, name, initial, namespace, "status")
        except ApiError as exc:
            if not exc.conflict:
                metrics.API_ERRORS.labels("patch unit status").inc()
                log.warning("initial unit status not written", unit=key, error=str(exc))
            return
        self.on_unit("ADDED", enqueued)

    def _resume_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        """suspend: false and the dequeue timestamp; None if the Job is gone."""
        patch = resume_patch(go_time_string()) or {}  # (no Job given: always a patch)
        try:
            return with_retries(lambda: self.api.merge_patch(JOB, name, patch, namespace))
        except ApiError as exc:
            if not exc.not_found:
                raise
            return None

    def _suspend_job(self, namespace: str, name: str) -> None:
        try:
            with_retries(lambda: self.api.merge_patch(JOB, name, suspend_patch() or {}, namespace))
        except ApiError as exc:
            if not exc.not_found:
                raise

    def _set_unit_phase(self, unit: QueueUnit, phase: Phase, message: str) -> bool:
        """Write the phase, then record it in the engine; False (and nothing recorded) if the
        API refused the write, so the quota stays held as long as the API says it is."""
        status: dict[str, Any] = {
            "phase": phase.value,
            "message": message,
            "lastUpdateTime": _now(),
        }
        if phase not in ADMITTED_PHASES:  # finished or back in the queue: it holds nothing
            status["admissions"] = []
        patch = {"status": status}
        if self._patch_unit_status(unit, patch, retry=True) is None:
            return False
        with self.lock:
            self.engine.upsert_unit(replace(unit, phase=phase))
        return True

    def _patch_unit_status(
        self, unit: QueueUnit, patch: dict[str, Any], *, retry: bool = False
    ) -> dict[str, Any] | None:
        """Unconditional status merge patch; remembers the result (None if the API refused)."""

        def call() -> dict[str, Any]:
            return self.api.merge_patch(QUEUE_UNIT, unit.name, patch, unit.namespace, "status")

        updated: dict[str, Any] | None = self._safely(
            "patch unit status", (lambda: with_retries(call)) if retry else call
        )
        if updated is not None:
            with self.lock:
                self._units[unit.uid] = updated
                message = (patch.get("status") or {}).get("message")
                if message is not None:
                    self._reported[unit.uid] = message
        return updated

    # --- start-up and resync ------------------------------------------------------------
    def resync(self) -> dict[Kind, Listing]:
        """List everything and fold it in; fixes whatever changed while we were not watching.

        Returns the QueueUnit and Job listings, so that the watches started after the first
        resync continue from them instead of listing again.
        """
        quotas = self.api.list_objects(ELASTIC_QUOTA)
        queues = self.api.list_objects(QUEUE, self.settings.namespace)
        by_name = {str(_meta(q).get("name")): q for q in queues}
        for quota in quotas:
            self.on_quota("ADDED", quota, apply=False)
        live = {_meta(q).get("name") for q in quotas}
        ns = self.settings.namespace
        for name in sorted(str(n) for n in live):
            # only the live (last reconciled) definition of a name; skip Queues that match
            winner = self._quota_object(name)
            current = by_name.get(name)
            if winner is not None and (
                current is None or queue_drifted(current, derive_queue(winner, ns))
            ):
                applied = self._safely(
                    "apply queue",
                    lambda w=winner: apply_queue(self.api, w, ns),  # type: ignore[misc]
                )
                if applied is not None:
                    by_name[name] = applied
        for queue in list(by_name.values()):
            qmeta = _meta(queue)
            managed = (qmeta.get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY
            if managed and qmeta.get("name") not in live:
                log.info("deleting queue whose quota is gone", queue=qmeta.get("name"))
                queue_name = str(qmeta.get("name"))
                self._safely(
                    "delete queue",
                    lambda n=queue_name: delete_queue(self.api, n, self.settings.namespace),  # type: ignore[misc]
                )
            else:
                self.on_queue("ADDED", queue)
        listings = {QUEUE_UNIT: self.api.list_with_version(QUEUE_UNIT)}
        seen_units = set()
        for unit in listings[QUEUE_UNIT][0]:
            seen_units.add(_meta(unit).get("uid"))
            self.on_unit("ADDED", unit)
        with self.lock:
            for gone in [u.uid for u in self.engine.units() if u.uid not in seen_units]:
                self.engine.remove_unit(gone)
                self._units.pop(gone, None)
        if self.settings.manage_jobs:
            listings[JOB] = self.api.list_with_version(JOB)
            for job in listings[JOB][0]:
                self.on_job("ADDED", job)
        self.ready.set()
        return listings

    # --- admission ----------------------------------------------------------------------
    def admission_round(self) -> RoundResult:
        """One round: decide under the lock, then execute its effects in parallel outside it."""
        started = time.monotonic()
        if self._job_timers:
            self.fire_job_timers()
        with self.lock:
            result = self.engine.run_round(self.clock())
            planned = effects(result, self._reported)
        futures = [self._pool.submit(self._execute, group) for group in per_unit(planned)]
        for future in futures:
            try:
                future.result()
            except Exception as exc:  # one failed write must not stop the others or the loop
                log.warning("admission write failed", error=str(exc))
        self._export_metrics(result)
        metrics.ROUND_DURATION.observe(time.monotonic() - started)
        return result

    def _execute(self, group: list[Effect]) -> None:
        """Run one object's effects (from `effects()`) in order through the API.

        A phase write that fails drops the rest of the unit's effects (no event or Job change
        for a decision that was not persisted); an admission that cannot be written is rolled
        back in the engine.
        """
        obj: dict[str, Any] | None = None
        for effect in group:
            if isinstance(effect, SetUnitStatus):
                obj = self._write_status(effect)
                if obj is None and effect.phase is not None:
                    return
            elif isinstance(effect, UnitEvent):
                target = obj or self._units.get(effect.unit.uid)
                if target is not None:
                    self._record_event(target, effect)
            elif isinstance(effect, ResumeConsumer):
                if obj is not None:
                    self._resume_consumer(obj)
            elif isinstance(effect, SuspendConsumer):
                self._suspend_consumer(obj or self._units.get(effect.unit.uid) or {})
            # (QueueEvents come from on_queue, which records them on the Queue it holds)

    def _record_event(self, obj: Mapping[str, Any], effect: UnitEvent | QueueEvent) -> None:
        if isinstance(effect, UnitEvent) and isinstance(effect.cause, Reject):
            kind = type(effect.cause.decision).__name__
            metrics.REJECTIONS.labels(_queue_label(effect.unit), kind).inc()
        if effect.type == NORMAL:
            # a Normal event is for humans; it must not delay the next admission's writes
            self._events.submit(self.recorder.record, obj, effect.type, effect.reason,
                                effect.message)
        else:
            self.recorder.record(obj, effect.type, effect.reason, effect.message)

    def _write_status(self, effect: SetUnitStatus) -> dict[str, Any] | None:
        """The status write of one effect; the written object, or None if it failed."""
        unit = effect.unit
        if effect.admission is not None:
            return self._persist_admission(effect)
        if effect.phase is None:
            self._reported[unit.uid] = effect.message
            patch = {"status": {"message": effect.message, "lastUpdateTime": _now()}}
            return self._patch_unit_status(unit, patch) or self._units.get(unit.uid)
        status: dict[str, Any] = {
            "phase": effect.phase.value,
            "message": effect.message,
            "lastUpdateTime": _now(),
        }
        if effect.phase not in ADMITTED_PHASES:
            status["admissions"] = []
        try:
            updated = self.api.merge_patch(
                QUEUE_UNIT, unit.name, {"status": status}, unit.namespace, "status"
            )
        except ApiError as exc:
            metrics.API_ERRORS.labels("preempt").inc()
            log.warning("unit status not persisted", unit=unit.key, error=str(exc))
            return None
        with self.lock:
            self._units[unit.uid] = updated
            self._reported[unit.uid] = effect.message
        return updated

    def _persist_admission(self, effect: SetUnitStatus) -> dict[str, Any] | None:
        """Write an admission, guarded by resourceVersion; roll it back if it cannot be."""
        unit, decision = effect.unit, effect.admission
        assert decision is not None
        now = _now()
        for _ in range(3):
            current = self._units.get(unit.uid) or {}
            rv = _meta(current).get("resourceVersion")
            patch: dict[str, Any] = {
                "status": {
                    "phase": Phase.DEQUEUED.value,
                    "message": effect.message,
                    "lastUpdateTime": now,
                    "admissionTime": now,
                    "admissions": _admissions(current),
                }
            }
            if rv:
                patch["metadata"] = {"resourceVersion": rv}
            try:
                updated = self.api.merge_patch(
                    QUEUE_UNIT, unit.name, patch, unit.namespace, "status"
                )
            except ApiError as exc:
                if exc.conflict:
                    fresh = self.api.get(QUEUE_UNIT, unit.name, unit.namespace)
                    if fresh is None or _meta(fresh).get("uid") != unit.uid:
                        break
                    fresh_phase = (fresh.get("status") or {}).get("phase") or Phase.ENQUEUED.value
                    if Phase(fresh_phase) in FINISHED_PHASES:
                        break
                    self._units[unit.uid] = fresh
                    continue
                landed = self._admission_landed(unit, now) if exc.retryable else None
                if landed is None:
                    if not exc.not_found:
                        metrics.API_ERRORS.labels("admit").inc()
                        log.warning("admission not persisted", unit=unit.key, error=str(exc))
                    break
                updated = landed  # the answer was lost, not the write
            with self.lock:
                self._units[unit.uid] = updated
                self._reported[unit.uid] = effect.message
            metrics.ADMISSIONS.labels(decision.quota).inc()
            if unit.created:
                metrics.ADMISSION_LATENCY.observe(max(self.clock() - unit.created, 0.0))
            log.info("admitted", unit=unit.key, quota=decision.quota, path=",".join(decision.path))
            return updated
        with self.lock:
            self.engine.rollback(unit.uid)
        return None

    def _admission_landed(self, unit: QueueUnit, admitted_at: str) -> dict[str, Any] | None:
        """After a write whose outcome is unknown (connection lost, timeout, 5xx): the unit
        if our admission is what the API holds now, else None. Rolling back an admission
        that did land would leave the Job suspended and its quota counted twice."""
        fresh = self._safely(
            "get unit", lambda: self.api.get(QUEUE_UNIT, unit.name, unit.namespace)
        )
        if fresh is None or _meta(fresh).get("uid") != unit.uid:
            return None
        status = fresh.get("status") or {}
        ours = status.get("admissionTime") == admitted_at
        return dict(fresh) if ours and status.get("phase") == Phase.DEQUEUED.value else None

    def _resume_consumer(self, unit_obj: Mapping[str, Any]) -> None:
        ref = (unit_obj.get("spec") or {}).get("consumerRef") or {}
        if ref.get("kind") == "Job" and ref.get("name"):
            self._safely(
                "resume job",
                lambda: self._resume_job(
                    str(ref.get("namespace") or _meta(unit_obj).get("namespace")), ref["name"]
                ),
            )

    def _suspend_consumer(self, unit_obj: Mapping[str, Any]) -> None:
        ref = (unit_obj.get("spec") or {}).get("consumerRef") or {}
        if ref.get("kind") == "Job" and ref.get("name"):
            namespace = str(ref.get("namespace") or _meta(unit_obj).get("namespace"))
            job_name = str(ref["name"])
            self._safely("suspend job", lambda: self._suspend_job(namespace, job_name))

    def _export_metrics(self, result: RoundResult) -> None:
        with self.lock:
            units = self.engine.units()
            pending: dict[str, int] = {}
            admitted: dict[str, int] = {}
            for unit in units:
                queue = _queue_label(unit)
                if not queue or unit.phase in FINISHED_PHASES:
                    continue
                target = admitted if self.engine.is_admitted(unit.uid) else pending
                target[queue] = target.get(queue, 0) + 1
            usage = self.engine.tree.report() if metrics.QUOTA_USAGE.due() else None
        if usage is not None:  # per-quota usage split (issue 18, item 8), throttled
            metrics.QUOTA_USAGE.export(usage)
            self._pool.submit(self._safely, "queue usage", lambda: self._queue_usage.sync(usage))
        for queue in set(pending) | set(admitted) | self._known_metric_queues:
            metrics.UNITS_PENDING.labels(queue).set(pending.get(queue, 0))
            metrics.UNITS_ADMITTED.labels(queue).set(admitted.get(queue, 0))
        self._known_metric_queues |= set(pending) | set(admitted)
        reasons: dict[str, int] = {}
        for _, unresolved in result.unmapped:
            reasons[unresolved.reason.value] = reasons.get(unresolved.reason.value, 0) + 1
        for reason in (
            "no quota label",
            "empty quota label",
            "quota label is not a string",
            "quota label is not a valid name",
        ):
            metrics.UNITS_UNMAPPED.labels(reason).set(reasons.get(reason, 0))
        metrics.UNITS_QUEUE_NOT_FOUND.set(len(result.queue_not_found))

    # --- helpers ------------------------------------------------------------------------
    def _safely(self, operation: str, call: Callable[[], Any]) -> Any:
        """Run one API write; log and count failures instead of crashing the handler."""
        try:
            return call()
        except ApiError as exc:
            metrics.API_ERRORS.labels(operation).inc()
            log.warning("api call failed", operation=operation, error=str(exc))
            return None
