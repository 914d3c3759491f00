"""PodGroup status writes (phase and gang condition), with or without a status subresource.

Why its own module: Volcano's own podgroups CRD (config/crd/volcano/bases) has no status
subresource while ours has. A patch of `/status` then answers 404, which the scheduler took
for "the PodGroup is gone" and dropped without a word: no phase ever showed, and a job moved
to Inqueue by enqueue (overcommit) lost that on the next session. Now the shape is read once
from API discovery (`StatusSubresources`), the object itself is patched when there is no
subresource, and a write that fails is logged and written again at the next session
(the memo of what was written is kept only for successful writes).

What is written follows Volcano's session close (framework/job_updater.go and the gang
plugin's OnSessionClose): the phase, and for a job with pods one condition merged by type
into the others: `Scheduled` once minAvailable tasks are placed, else `Unschedulable` with
reason NotEnoughResources and the gang's message. A condition that no longer holds is left
as it is (Volcano never clears one either); only a change other than its time is written.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from koordqueue.kube.api import POD_GROUP, ApiError, Kind, KubeApi
from koordqueue.kube.scheduler import convert, names
from koordqueue.scheduler import SessionResult
from koordqueue.scheduler.api import JobInfo, PodGroupPhase
from koordqueue.scheduler.api import names as api_names

log = structlog.get_logger(__name__)
STATUS = "status"
_SCHEDULED_PHASES = frozenset({PodGroupPhase.RUNNING, PodGroupPhase.COMPLETED})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StatusSubresources:
    """Whether the API server serves `<plural>/status` for a kind, from discovery.

    Asked once per kind (a GET of the group version's resource list, which every
    authenticated user may read) and again by `refresh` when a write contradicts it. A
    discovery failure other than 404 is not remembered (asked again next time) and reads as
    "served", the shape of our own CRDs.
    """

    def __init__(self, api: KubeApi) -> None:
        self._api = api
        self._known: dict[Kind, bool] = {}
        self._lock = threading.Lock()

    def has_status(self, kind: Kind) -> bool:
        with self._lock:
            known = self._known.get(kind)
        return self.refresh(kind) if known is None else known

    def refresh(self, kind: Kind) -> bool:
        """Ask discovery again; the answer is remembered (unless discovery failed)."""
        base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
        try:
            listing = self._api.request("GET", base)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("API discovery failed; assuming a status subresource",
                            resource=kind.plural, error=str(exc))
                return True
            listing = {}
        served = served_status(listing, kind.plural)
        with self._lock:
            before = self._known.get(kind)
            self._known[kind] = served
        if before is not served:
            log.info("status subresource detected" if served else
                     "no status subresource: status is written on the object itself",
                     resource=f"{kind.plural}.{kind.group}")
        return served


def served_status(listing: Mapping[str, Any], plural: str) -> bool:
    """Whether an APIResourceList serves `<plural>/status`: False only when it lists the
    resource without it (a listing that does not name the resource says nothing: our shape)."""
    listed = {str(r.get("name")) for r in listing.get("resources") or () if isinstance(r, Mapping)}
    return plural not in listed or f"{plural}/{STATUS}" in listed


@dataclass(frozen=True, slots=True)
class Condition:
    """A PodGroup condition, as compared (its time is not part of it)."""

    type: str
    status: str
    reason: str
    message: str

    def shown_in(self, conditions: object) -> bool:
        """Whether a status.conditions list holds this condition (time aside)."""
        if not isinstance(conditions, list):
            return False
        return any(
            isinstance(c, Mapping) and c.get("type") == self.type
            and c.get("status") == self.status and (c.get("reason") or "") == self.reason
            and (c.get("message") or "") == self.message
            for c in conditions
        )


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """What the scheduler means a PodGroup's status to show."""

    phase: str
    condition: Condition | None

    def shown_in(self, group: Mapping[str, Any]) -> bool:
        status = group.get("status") or {}
        if status.get("phase") != self.phase:  # none yet is not Pending: it is written
            return False
        return self.condition is None or self.condition.shown_in(status.get("conditions"))


def gang_condition(job: JobInfo, phase: PodGroupPhase, message: str | None) -> Condition | None:
    """The condition Volcano's gang plugin writes at session close: none for a job without
    pods, `Scheduled` for a ready one, else `Unschedulable` (the session's message, or the
    gang's own wording for a job the session left waiting)."""
    if not job.tasks:
        return None
    if phase in _SCHEDULED_PHASES:
        return Condition(names.CONDITION_SCHEDULED, "True", names.REASON_GANG_READY, "")
    if message is None:
        detail = api_names.POD_GROUP_NOT_READY.format(
            histogram=f"{job.status_histogram()}, {job.min_available} minAvailable"
        )
        message = api_names.GANG_UNSCHEDULABLE.format(
            missing=max(job.min_available - job.ready_task_num(), 0), total=len(job.tasks),
            detail=detail,
        )
    return Condition(
        names.CONDITION_UNSCHEDULABLE, "True", names.REASON_NOT_ENOUGH_RESOURCES, message
    )


def merged_conditions(existing: object, condition: Condition) -> list[dict[str, Any]]:
    """`existing` with the condition of the same type replaced (or the new one appended);
    its time moves only when its status changed."""
    out: list[dict[str, Any]] = []
    placed = False
    entry = {"type": condition.type, "status": condition.status, "reason": condition.reason,
             "message": condition.message, "lastTransitionTime": _now()}
    for old in existing if isinstance(existing, list) else ():
        if not isinstance(old, Mapping):
            continue
        if old.get("type") == condition.type and not placed:
            if old.get("status") == condition.status and old.get("lastTransitionTime"):
                entry["lastTransitionTime"] = old["lastTransitionTime"]
            out.append(entry)
            placed = True
        else:
            out.append(dict(old))
    if not placed:
        out.append(entry)
    return out


@dataclass(frozen=True, slots=True)
class StatusWrite:
    """One PodGroup status to write: its key, what to show, and the object it was read from."""

    key: str
    namespace: str
    name: str
    status: GroupStatus
    group: Mapping[str, Any]


@dataclass(slots=True)
class _Written:
    status: GroupStatus
    base_version: str
    """resourceVersion of the object the write was computed from."""
    conditions: object
    """status.conditions as the write left them (the base of the next merge)."""


class PodGroupStatusWriter:
    """Decides which PodGroup statuses a session changed and writes them."""

    def __init__(self, api: KubeApi, subresources: StatusSubresources | None = None) -> None:
        self._api = api
        self.subresources = subresources or StatusSubresources(api)
        self._written: dict[str, _Written] = {}
        self._lock = threading.Lock()

    def due(
        self,
        groups: Mapping[str, Mapping[str, Any]],
        jobs: Mapping[str, JobInfo],
        result: SessionResult,
    ) -> list[StatusWrite]:
        """The writes this session calls for: every PodGroup whose meant status is neither
        shown by its object nor already written from this version of it.

        `groups` maps namespace/name to the PodGroup object, `jobs` job uid to the session's
        input job."""
        new_phase = {u.job: u.new for u in result.phase_updates}
        out: list[StatusWrite] = []
        with self._lock:
            for key in [k for k in self._written if k not in groups]:
                del self._written[key]
            for key, group in groups.items():
                m = convert.meta(group)
                job = jobs.get(str(m.get("uid", "")))
                if job is None:
                    continue
                phase = new_phase.get(job.uid, job.phase)
                status = GroupStatus(
                    phase.value, gang_condition(job, phase, result.job_cause(job.uid))
                )
                version = str(m.get("resourceVersion", ""))
                written = self._written.get(key)
                if written is not None and written.status == status and (
                    written.base_version == version or status.shown_in(group)
                ):
                    continue
                if written is None and status.shown_in(group):
                    continue
                out.append(StatusWrite(key, str(m.get("namespace", "")), str(m.get("name", "")),
                                       status, group))
        return out

    def write(self, write: StatusWrite, still_cached: bool) -> bool:
        """Patch one PodGroup's status; False (logged) when it was not written.

        `still_cached`: the scheduler cache still holds the PodGroup. A 404 then is not "it
        is gone": discovery is asked again (the CRD may have been replaced by one of the
        other shape) and, when that changes the answer, the write is made again at once;
        otherwise it is logged and written again at the next session."""
        base = write.group.get("status") or {}
        with self._lock:
            written = self._written.pop(write.key, None)
        existing = written.conditions if written is not None else base.get("conditions")
        body: dict[str, Any] = {"phase": write.status.phase}
        if write.status.condition is not None:
            body["conditions"] = merged_conditions(existing, write.status.condition)
        sub = STATUS if self.subresources.has_status(POD_GROUP) else None
        try:
            self._patch(write, body, sub)
        except ApiError as exc:
            if not exc.not_found:
                log.warning("PodGroup status not written; writing it again next session",
                            podgroup=write.key, error=str(exc))
                return False
            if not still_cached:
                log.debug("PodGroup gone before its status was written", podgroup=write.key)
                return False
            retry = STATUS if self.subresources.refresh(POD_GROUP) else None
            if retry == sub:
                log.warning("PodGroup status not written: 404 though the cache holds the "
                            "PodGroup; writing it again next session",
                            podgroup=write.key, subresource=sub or "", error=str(exc))
                return False
            try:
                self._patch(write, body, retry)
            except ApiError as again:
                log.warning("PodGroup status not written; writing it again next session",
                            podgroup=write.key, error=str(again))
                return False
        with self._lock:
            self._written[write.key] = _Written(
                write.status, str(convert.meta(write.group).get("resourceVersion", "")),
                body.get("conditions", base.get("conditions")),
            )
        return True

    def _patch(self, write: StatusWrite, body: Mapping[str, Any], sub: str | None) -> None:
        self._api.merge_patch(POD_GROUP, write.name, {"status": body}, write.namespace,
                              subresource=sub)
