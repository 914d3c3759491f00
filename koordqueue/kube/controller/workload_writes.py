"""The typed writes of the workload reconciler (workloads.py), run by the controller's writer.

Each is a small dataclass with `run(apis)`, as writes.py's are: the reconciler decides on the
owner thread and hands these to `Writer.submit`; they never touch the controller's state and
never raise (a refusal is their outcome). The kind's own rules (what a resume or a mark
writes) come from its `Integration`; nothing here knows one kind from another.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from cachetools import TTLCache

from koordqueue.domain import activation
from koordqueue.domain.backoff import Backoff
from koordqueue.domain.features import DEFAULT as DEFAULT_GATES
from koordqueue.domain.features import FeatureGates
from koordqueue.domain.integrations import (
    DeleteWorkload,
    Integration,
    InvalidJobError,
    Mutation,
    Reference,
    WorkloadPatch,
    queue_unit_for,
)
from koordqueue.domain.integrations.reconcile import (
    Generation,
    Target,
    generation_of,
    plan_enqueue,
    with_mark,
)
from koordqueue.domain.job_extension import go_time_string
from koordqueue.domain.queue_unit import Phase
from koordqueue.kube import metrics
from koordqueue.kube.api import (
    POD,
    PRIORITY_CLASS,
    QUEUE_UNIT,
    ApiError,
    Kind,
    ObjectApi,
    now_rfc3339,
    with_retries,
)
from koordqueue.kube.controller.base import log, meta, object_key
from koordqueue.kube.controller.writes import Apis, Priority

RETRY: Final = Backoff(1.0, cap=30.0)
"""After a workload's write was refused past its retries (its unit's creation, a phase, a read
before them), when to look again instead of waiting for the next resync: 1 s, doubling per
refusal in a row, at most 30 s."""
POD_RUNNING: Final = "Running"


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


def operation(verb: str, kind: Kind) -> str:
    """The koordqueue_api_errors_total operation of a workload write ("resume job", ...)."""
    return f"{verb} {kind.kind.lower()}"


def apply_mutation(
    apis: Apis, kind: Kind, obj: Mapping[str, Any], mutation: Mutation, verb: str
) -> tuple[dict[str, Any] | None, str]:
    """Run one write on `obj`: (its answer, "") or (None, the refusal; "" when it is gone)."""
    m = meta(obj)
    name, namespace = str(m.get("name", "")), m.get("namespace")
    api = apis.api
    try:
        if isinstance(mutation, DeleteWorkload):
            gone = api.delete(kind, name, namespace, m.get("uid"))
            return {"deleted": gone}, ""
        patch: WorkloadPatch = mutation
        guarded = bool((patch.body.get("metadata") or {}).get("resourceVersion"))
        answer = with_retries(
            lambda: api.merge_patch(kind, name, dict(patch.body), namespace, patch.subresource),
            retry_conflicts=not guarded,  # a guarded patch must be decided again
        )
        return answer, ""
    except ApiError as exc:
        if exc.not_found:
            return None, ""
        metrics.API_ERRORS.labels(operation(verb, kind)).inc()
        log.warning(
            "workload write refused", kind=kind.kind, object=f"{namespace}/{name}", error=str(exc)
        )
        return None, str(exc) or "refused"


def read_members(
    api: ObjectApi, kind: Kind, integration: Integration, target: Target
) -> list[dict[str, Any]]:
    """The workload's objects as the API has them now (a group's, by name; none: gone)."""
    if not target.group:
        obj = api.get(kind, target.name, target.namespace)
        return [] if obj is None else [obj]
    label = integration.group_label() or ""
    listed = api.list_objects(kind, target.namespace, f"{label}={target.name}")
    chosen = [o for o in listed if (meta(o).get("labels") or {}).get(label) == target.name]
    return sorted(chosen, key=lambda o: str(meta(o).get("name")))


@dataclass(frozen=True, slots=True)
class ReadMembers:
    """Read a workload's objects (None: the read was refused, logged)."""

    kind: Kind
    integration: Integration
    target: Target

    def run(self, apis: Apis) -> list[dict[str, Any]] | None:
        try:
            return read_members(apis.api, self.kind, self.integration, self.target)
        except ApiError as exc:
            metrics.API_ERRORS.labels(operation("get", self.kind)).inc()
            log.warning("could not read workload", kind=self.kind.kind, error=str(exc))
            return None


@dataclass(frozen=True, slots=True)
class PodsRunning:
    """Whether one of the pods a selector names is Running (the workload's status cannot
    tell: active pods, none ready); False when the list is refused."""

    namespace: str | None
    selector: str

    def run(self, apis: Apis) -> bool:
        try:
            pods = apis.api.list_objects(POD, self.namespace, self.selector)
        except ApiError as exc:
            metrics.API_ERRORS.labels("list pods").inc()
            log.warning("could not list pods", error=str(exc))
            return False
        return any((pod.get("status") or {}).get("phase") == POD_RUNNING for pod in pods)


# --- a unit for a held workload ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class UnitCreated:
    obj: dict[str, Any]
    resource: Any
    mark: Mapping[str, str] | None = None
    """The enqueue mark the workload still needs (None: it carries it, or had it written)."""


@dataclass(frozen=True, slots=True)
class CreateRefused:
    """The unit's creation, or a write it needs first, was refused past its retries."""

    error: str = "refused"


@dataclass(frozen=True, slots=True)
class UnitExists:
    """AlreadyExists: an earlier run made the unit; its watch event will come."""


@dataclass(frozen=True, slots=True)
class WorkloadInvalid:
    error: InvalidJobError


CreateOutcome = UnitCreated | CreateRefused | UnitExists | WorkloadInvalid


def read_references(
    api: ObjectApi, integration: Integration, obj: Mapping[str, Any]
) -> Integration | CreateRefused:
    """The integration bound to the objects its workload's pod sets are read from (a
    TrainJob's runtime), each as the API has it now (None: not there; the integration then
    refuses the workload, naming the reference); CreateRefused when a read fails."""
    references = integration.references(obj)
    if not references:
        return integration
    found: dict[Reference, Mapping[str, Any] | None] = {}
    for ref in references:
        w = ref.kind
        kind = Kind(w.group, w.version, w.plural, w.kind, namespaced=ref.namespace is not None)

        def get(kind: Kind = kind, ref: Reference = ref) -> dict[str, Any] | None:
            return api.get(kind, ref.name, ref.namespace)

        try:
            found[ref] = with_retries(get)
        except ApiError as exc:
            metrics.API_ERRORS.labels("get reference").inc()
            log.warning("could not read a workload's reference", ref=str(ref), error=str(exc))
            return CreateRefused(str(exc) or "refused")
    return integration.resolved(found)


@dataclass(frozen=True, slots=True)
class CreateUnit:
    """Create a held workload's QueueUnit, with its enqueue mark.

    What cannot ride on a later write (a condition on a status subresource, a group's
    members) is written first; a single object's annotation mark is copied onto the unit
    and reaches the object with its resume when the unit is admitted as it is made (one
    write instead of two), else just before the unit's first status (`InitialUnitStatus`).
    """

    kind: Kind
    integration: Integration
    members: Sequence[Mapping[str, Any]]
    priorities: PriorityClasses
    features: FeatureGates = DEFAULT_GATES
    priority: ClassVar[Priority] = Priority.START  # after the writes of workloads started

    def run(self, apis: Apis) -> CreateOutcome:
        api = apis.api
        integration = read_references(api, self.integration, self.members[0])
        if isinstance(integration, CreateRefused):
            return integration
        try:
            body = queue_unit_for(integration, self.members, self.priorities.value)
        except InvalidJobError as exc:
            return WorkloadInvalid(exc)
        own = meta(self.members[0])
        body["spec"].update(
            activation.spec_fields(
                own.get("annotations") or {}, own.get("labels") or {}, self.features
            )
        )  # born inactive, or with a budget (issue 35)
        plan = plan_enqueue(integration, self.members, go_time_string(), now_rfc3339())
        for index, patch in plan.before:
            member = self.members[index]
            answer, refused = apply_mutation(apis, self.kind, member, patch, "enqueue")
            if answer is None:
                return CreateRefused(refused) if refused else UnitExists()
        if plan.mark:
            notes = body["metadata"].get("annotations") or {}
            body["metadata"]["annotations"] = {**notes, **plan.mark}
        namespace = body["metadata"]["namespace"]
        try:
            created = with_retries(  # (409 is AlreadyExists here: an answer, not a conflict)
                lambda: api.create(QUEUE_UNIT, body, namespace), retry_conflicts=False
            )
        except ApiError as exc:
            if exc.status == 409:
                return UnitExists()
            metrics.API_ERRORS.labels("create unit").inc()
            log.warning(
                "could not create QueueUnit",
                unit=f"{namespace}/{body['metadata']['name']}",
                error=str(exc),
            )
            return CreateRefused(str(exc) or "refused")
        return UnitCreated(created, body["spec"]["resource"], plan.mark)


@dataclass(frozen=True, slots=True)
class InitialUnitStatus:
    """A new unit's first status (Enqueued), unless something already wrote one (409).

    The workload's enqueue mark (`mark`: a patch of the object) is written first, so it
    carries its mark before any round's message on its unit (its refusal is logged; the
    object is then marked by its resume, from the unit's copy). When a round's message
    landed first (no phase), only the phase is written, guarded by the version read.
    """

    namespace: str
    name: str
    patch: Mapping[str, Any]
    phase: Phase
    mark: tuple[Kind, Mapping[str, Any], WorkloadPatch] | None = None

    def run(self, apis: Apis) -> dict[str, Any] | None:
        if self.mark is not None:
            apply_mutation(apis, *self.mark, "enqueue")
        try:
            return apis.api.merge_patch(
                QUEUE_UNIT, self.name, dict(self.patch), self.namespace, "status"
            )
        except ApiError as exc:
            if not exc.conflict:
                metrics.API_ERRORS.labels("patch unit status").inc()
                log.warning(
                    "initial unit status not written",
                    unit=f"{self.namespace}/{self.name}",
                    error=str(exc),
                )
                return None
        return self._phase_if_none(apis)

    def _phase_if_none(self, apis: Apis) -> dict[str, Any] | None:
        for _ in range(3):
            try:
                fresh = apis.api.get(QUEUE_UNIT, self.name, self.namespace)
            except ApiError:
                return None
            if fresh is None or (fresh.get("status") or {}).get("phase"):
                return None
            rv = meta(fresh).get("resourceVersion")
            patch = {"metadata": {"resourceVersion": rv}, "status": {"phase": self.phase.value}}
            try:
                return apis.api.merge_patch(QUEUE_UNIT, self.name, patch, self.namespace, "status")
            except ApiError as exc:
                if not exc.conflict:
                    log.warning("unit phase not written", unit=self.name, error=str(exc))
                    return None
        return None


# --- holding and releasing a workload ---------------------------------------------------------
Generations = dict[str, Generation]
"""Object namespace/name -> (uid, metadata.generation) as our last resume/suspend left it."""


@dataclass(frozen=True, slots=True)
class WorkloadWrite:
    """Resume (with the unit's copy of the enqueue mark) or suspend a workload's objects.

    `members`: the objects as the reconciler saw them; None: read them first, unless the
    kind's write needs no read (`Integration.resume_unread`). Each answer's generation is
    noted in `seen` (one dict store, atomic under the GIL, before the outcome is posted to
    the owner, who reads it) so an older copy is not reconciled again. True when anything
    was written.
    """

    kind: Kind
    integration: Integration
    target: Target
    resume: bool
    seen: Generations = field(compare=False)
    mark: Mapping[str, str] = field(default_factory=dict)
    members: Sequence[Mapping[str, Any]] | None = None

    def run(self, apis: Apis) -> bool:
        integration = self.integration
        now = go_time_string() if self.resume else ""
        unread = integration.resume_unread(now) if self.resume else integration.suspend_unread()
        writes: list[tuple[Mapping[str, Any], tuple[Mutation, ...]]]
        if self.members is None and unread is not None:
            t = self.target
            ref: Mapping[str, Any] = {"metadata": {"name": t.name, "namespace": t.namespace}}
            writes = [(ref, with_mark(unread, self.mark) if self.resume else unread)]
        else:
            members = self.members
            if members is None:
                members = ReadMembers(self.kind, integration, self.target).run(apis) or []
            writes = [(member, self._mutations(member, now)) for member in members]
        wrote = False
        for target, mutations in writes:
            for mutation in mutations:
                verb = "resume" if self.resume else "suspend"
                answer, _ = apply_mutation(apis, self.kind, target, mutation, verb)
                if answer is None:
                    continue
                wrote = True
                if "metadata" in answer:
                    self.seen[object_key(answer)] = generation_of(answer)
        return wrote

    def _mutations(self, obj: Mapping[str, Any], now: str) -> tuple[Mutation, ...]:
        if not self.resume:
            return self.integration.suspend(obj)
        mutations = self.integration.resume(obj, now, now_rfc3339())
        notes = meta(obj).get("annotations") or {}
        missing = {k: v for k, v in self.mark.items() if notes.get(k) != v}
        if not mutations and not missing:
            return ()
        return with_mark(mutations, missing)
