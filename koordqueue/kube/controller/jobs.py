"""The batch/v1 Job extension: a unit per suspended Job, and the Job kept in line with it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from koordqueue.domain import names
from koordqueue.domain.effects import (
    effects,
)
from koordqueue.domain.job_extension import (
    InvalidJobError,
    JobStatus,
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
    with_retries,
)
from koordqueue.kube.controller.base import (
    NORMAL,
    STATUS_RETRY_SECONDS,
    WARNING,
    ControllerBase,
    _epoch,
    _meta,
    _now,
    log,
)


class JobHandlers(ControllerBase):
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
