"""Typed API writes, and the one writer that runs them off the owner thread.

The owner (loop.py) decides and never waits on the API: every call it wants is one of the
small dataclasses here, handed to `Writer.submit` with a continuation. The writer runs it on
a bounded pool and posts the outcome back onto the owner's queue, where the continuation runs
with the engine and every map to itself. Writes with the same key (a unit's uid, a Job's
namespace/name) run one after another in submission order, so two rounds' writes to one
object never cross. Without a loop (unit tests, one-shot use) `submit` runs the write and its
continuation at once on the caller's thread: the same code, in the same order.

A write never raises: a refusal comes back as its outcome (None or False), logged and counted
in koordqueue_api_errors_total under the write's operation name.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from functools import partial
from typing import Any, ClassVar, Protocol, TypeVar, cast

import structlog

from koordqueue.domain.admission_checks import CHECKS_FIELD, pending_states
from koordqueue.domain.queue_unit import FINISHED_PHASES, Phase, QueueUnit
from koordqueue.domain.quota_tree import QuotaUsage
from koordqueue.kube import metrics
from koordqueue.kube.api import QUEUE, QUEUE_UNIT, ApiError, Kind, ObjectApi, with_retries
from koordqueue.kube.controller.status import unit_status_patch
from koordqueue.kube.controller.work_queue import WorkQueue
from koordqueue.kube.events import EventRecorder
from koordqueue.kube.queue_sync import apply_queue
from koordqueue.kube.quota_status import QueueUsageWriter

log = structlog.get_logger(__name__)

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

Post = Callable[[Callable[[], None]], None]
"""Hands a continuation to the owner thread (OwnerLoop.post)."""


@dataclass(frozen=True, slots=True)
class Apis:
    """What a write may use: the API and the event recorder (never the controller's state)."""

    api: ObjectApi
    recorder: EventRecorder


class Write(Protocol[R_co]):
    """One API call (or a short fixed sequence of them) and its outcome."""

    def run(self, apis: Apis) -> R_co: ...


def safely(operation: str, call: Callable[[], R]) -> R | None:
    """Run one API call; log and count a refusal instead of raising it."""
    try:
        return call()
    except ApiError as exc:
        metrics.API_ERRORS.labels(operation).inc()
        log.warning("api call failed", operation=operation, error=str(exc))
        return None


def _missing_ok(call: Callable[[], R]) -> Callable[[], R | None]:
    """`call`, where 404 (the object is gone) is an answer, not a failure."""

    def run() -> R | None:
        try:
            return call()
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    return run


# --- the writes -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ApplyQueue:
    """Server-side apply the Queue of `quota` (queue_sync.apply_queue)."""

    quota: Mapping[str, Any]
    namespace: str

    def run(self, apis: Apis) -> dict[str, Any] | None:
        return safely("apply queue", lambda: apply_queue(apis.api, self.quota, self.namespace))


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete one object (with `uid` as a precondition when given)."""

    kind: Kind
    name: str
    namespace: str | None
    operation: str
    uid: str | None = None
    retry: bool = False

    def run(self, apis: Apis) -> bool | None:
        def call() -> bool:
            return apis.api.delete(self.kind, self.name, self.namespace, self.uid)

        return safely(self.operation, (lambda: with_retries(call)) if self.retry else call)


def delete_queue(name: str, namespace: str) -> Delete:
    return Delete(QUEUE, name, namespace, "delete queue", retry=True)


@dataclass(frozen=True, slots=True)
class MergePatch:
    """A merge patch of one object, retried on transient errors; None if gone or refused."""

    kind: Kind
    name: str
    namespace: str | None
    patch: Mapping[str, Any]
    operation: str
    missing_ok: bool = True

    def run(self, apis: Apis) -> dict[str, Any] | None:
        def call() -> dict[str, Any]:
            return with_retries(
                lambda: apis.api.merge_patch(self.kind, self.name, dict(self.patch), self.namespace)
            )

        return safely(self.operation, _missing_ok(call) if self.missing_ok else call)


@dataclass(frozen=True, slots=True)
class PatchUnitStatus:
    """An unconditional status merge patch of a unit (built by status.unit_status_patch)."""

    namespace: str
    name: str
    patch: Mapping[str, Any]
    retry: bool = False
    operation: str = "patch unit status"

    def run(self, apis: Apis) -> dict[str, Any] | None:
        def call() -> dict[str, Any]:
            return self.call(apis)

        return safely(self.operation, (lambda: with_retries(call)) if self.retry else call)

    def call(self, apis: Apis) -> dict[str, Any]:
        """One attempt; a refusal raises (for a caller that decides by its kind)."""
        return apis.api.merge_patch(
            QUEUE_UNIT, self.name, dict(self.patch), self.namespace, "status"
        )


@dataclass(frozen=True, slots=True)
class AdmitUnit:
    """Write an admission, guarded by resourceVersion: on a conflict re-read and try again.

    None when it could not be written (the owner rolls the admission back). After an answer
    that was lost (connection, timeout, 5xx), the unit is read back: an admission that did
    land is kept, since rolling it back would leave the Job suspended with its quota counted.
    """

    unit: QueueUnit
    current: Mapping[str, Any]
    message: str
    now: str
    attempts: int = 3
    conditions: bool = True
    """The QueueUnitConditions gate: Admitted and QuotaReserved go True with the phase."""
    checks: tuple[str, ...] = ()
    """Admission checks the queue asks for: written with each Pending (phase Reserved)."""
    check_messages: tuple[str, ...] = ()
    """Each check's Pending message (admission_checks.pending_message)."""
    phase: Phase = Phase.DEQUEUED
    """Dequeued; Reserved while checks are asked for; SchedReady in strict dequeue mode."""

    def run(self, apis: Apis) -> dict[str, Any] | None:
        unit, api, current = self.unit, apis.api, self.current
        for _ in range(self.attempts):
            rv = (current.get("metadata") or {}).get("resourceVersion")
            seen = (current.get("status") or {}).get("conditions") or []
            patch = unit_status_patch(
                self.message,
                self.phase,
                now=self.now,
                admitted=current,
                resource_version=rv,
                conditions=list(seen) if self.conditions else None,
            )
            if self.checks:
                patch["status"][CHECKS_FIELD] = pending_states(
                    self.checks, self.now, self.check_messages
                )
            try:
                return api.merge_patch(QUEUE_UNIT, unit.name, patch, unit.namespace, "status")
            except ApiError as exc:
                if exc.conflict:
                    fresh = safely(
                        "get unit", lambda: api.get(QUEUE_UNIT, unit.name, unit.namespace)
                    )
                    if fresh is None or not self._same_unit(fresh) or self._finished(fresh):
                        return None
                    current = fresh
                    continue
                landed = self._landed(api) if exc.retryable else None
                if landed is None and not exc.not_found:
                    metrics.API_ERRORS.labels("admit").inc()
                    log.warning("admission not persisted", unit=unit.key, error=str(exc))
                return landed  # the answer was lost, not the write
        return None

    def _same_unit(self, obj: Mapping[str, Any]) -> bool:
        return (obj.get("metadata") or {}).get("uid") == self.unit.uid

    @staticmethod
    def _finished(obj: Mapping[str, Any]) -> bool:
        phase = (obj.get("status") or {}).get("phase") or Phase.ENQUEUED.value
        return Phase(phase) in FINISHED_PHASES

    def _landed(self, api: ObjectApi) -> dict[str, Any] | None:
        unit = self.unit
        fresh = safely("get unit", lambda: api.get(QUEUE_UNIT, unit.name, unit.namespace))
        if fresh is None or not self._same_unit(fresh):
            return None
        status = fresh.get("status") or {}
        ours = status.get("admissionTime") == self.now
        return dict(fresh) if ours and status.get("phase") == self.phase.value else None


@dataclass(frozen=True, slots=True)
class RecordEvent:
    """A Kubernetes Event on `obj` (the recorder aggregates repeats; False if refused)."""

    obj: Mapping[str, Any]
    type: str
    reason: str
    message: str
    priority: ClassVar[Priority]  # (set below: BACKGROUND)

    def run(self, apis: Apis) -> bool:
        return apis.recorder.record(self.obj, self.type, self.reason, self.message)


@dataclass(frozen=True, slots=True)
class Read:
    """A read the owner needs before it can decide (a Job, a unit, a Job's pods)."""

    call: Callable[[ObjectApi], Any]
    operation: str

    def run(self, apis: Apis) -> Any:
        return safely(self.operation, lambda: self.call(apis.api))


@dataclass(frozen=True, slots=True)
class SyncQueueUsage:
    """The usage annotations of every quota's Queue (quota_status.QueueUsageWriter)."""

    writer: QueueUsageWriter
    rows: tuple[QuotaUsage, ...]
    priority: ClassVar[Priority]  # (set below: BACKGROUND)

    def run(self, apis: Apis) -> int | None:
        return safely("queue usage", lambda: self.writer.sync(self.rows))


# --- the writer -----------------------------------------------------------------------------
_fence_hits = threading.local()
"""Per writer thread: whether the write it is running was refused by the fence (NotLeader)."""


class FenceWatch:
    """An ObjectApi that notes on the calling thread when the fence refused a write.

    Writes swallow refusals (`safely`), so the writer could not tell a NotLeader refusal from
    any other; this lets it hold such a write until the fence reopens instead of reporting a
    failure that would send the object through a back-off or wait for the resync.
    """

    def __init__(self, api: ObjectApi) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._api, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except ApiError as exc:
                if exc.fenced:
                    _fence_hits.hit = True
                raise

        return call


class Priority(IntEnum):
    """Which queued write a free writer thread takes first.

    FINISH (work already started: an admission, a resume, a unit's first status, a phase)
    before START (a new Job's unit) before BACKGROUND (events, usage annotations): under a
    burst, a Job whose unit exists is admitted and resumed before the next Job is started,
    as when each Job's handler wrote its writes in sequence, instead of every admission
    waiting behind the whole burst's unit creations.
    """

    FINISH = 0
    START = 1
    BACKGROUND = 2


@dataclass(frozen=True, slots=True, eq=False)
class _Task:
    """One submitted write as the pool runs it.

    An object, not a closure: a closure that parks itself refers to itself, and every write
    then left a reference cycle (~12 objects, the write and its continuation with them) that
    only the collector's full pass frees. The freezer (kube/gcfreeze.py) freezes whatever is
    queued or in flight each second, so under a burst those cycles stayed until the next full
    pass, minutes later (issue 36: peak RSS on the 15,000-Job shape).
    """

    writer: Writer
    write: Write[Any]
    then: Callable[[Any], None] | None
    key: str | None
    priority: Priority
    fence: Callable[[], bool] | None
    post: Post

    def __call__(self) -> None:
        writer, fence = self.writer, self.fence
        if fence is not None and not fence():
            writer._park(self.priority, self)  # not the leader (yet again): hold it
            return
        _fence_hits.hit = False
        try:
            outcome = self.write.run(writer.apis)
        except Exception:  # a bug in a write must not kill the writer thread
            log.exception("write failed", write=type(self.write).__name__)
        else:
            if _fence_hits.hit:  # refused as NotLeader: run it again once we may write
                writer._park(self.priority, self)
                return  # the key stays held
            then = self.then
            if then is not None:
                self.post(partial(then, outcome))
        finally:
            _fence_hits.hit = False
        if self.key is not None:
            writer._next(self.key)


class Writer:
    """Runs writes on a bounded pool once `use_pool` is called; at once on the caller before."""

    def __init__(self, apis: Apis) -> None:
        self.apis = apis
        self._post: Post | None = None
        self._queue: WorkQueue[Callable[[], None] | None] = WorkQueue(len(Priority) + 1)
        self._threads: list[threading.Thread] = []
        self._workers = 0
        self._idle = 0
        """Threads waiting for a task (counted under `_spawning`)."""
        self._spawning = threading.Lock()
        self._lock = threading.Lock()
        self._keyed: dict[str, deque[tuple[Priority, Callable[[], None]]]] = {}
        self._fence: Callable[[], bool] | None = None
        self._parked: list[tuple[Priority, Callable[[], None]]] = []

    def use_pool(
        self, workers: int, post: Post, fence: Callable[[], bool] | None = None
    ) -> None:
        """From now on run writes on up to `workers` threads; outcomes go through `post`.

        A thread is started when a write is queued and none is idle, so the pool holds as
        many threads as writes were ever in flight at once, not `workers`: each thread keeps
        a kept-alive TLS connection of its own (~210 KB with libcurl and OpenSSL 3), and the
        64 threads started at once, woken in turn, had each opened one whatever the load
        (issue 36: peak RSS).

        With a `fence` (leader election), a write is held while the fence is shut, and one
        the fence refused midway is held and run again: `reopen()` releases them, in order.
        """
        self._post = post
        if fence is not None:
            self._fence = fence
            self.apis = Apis(cast(ObjectApi, FenceWatch(self.apis.api)), self.apis.recorder)
        self._workers = workers
        self._spawn()  # the rest as the writes in flight need them (`_put`)

    def close(self, timeout: float = 10.0) -> None:
        """Finish the queued writes (their outcomes go to a loop that may be gone), then stop."""
        for _ in self._threads:
            self._queue.put(len(Priority), None)  # after everything
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def backlog(self) -> int:
        """Writes queued and not yet started."""
        return len(self._queue)

    def parked(self) -> int:
        """Writes held until the fence reopens."""
        with self._lock:
            return len(self._parked)

    def reopen(self) -> int:
        """The fence is open again: queue the held writes (their keys still hold their
        objects' later writes back, so the order per object is kept). Returns how many."""
        with self._lock:
            parked, self._parked = self._parked, []
        for priority, task in parked:
            self._put(priority, task)
        return len(parked)

    def _park(self, priority: Priority, task: Callable[[], None]) -> None:
        with self._lock:
            self._parked.append((priority, task))
        if self._post is not None:
            self._post(lambda: None)  # the owner looks at the fence and may reopen at once

    def submit(
        self,
        write: Write[R],
        then: Callable[[R], None] | None = None,
        key: str | None = None,
        priority: Priority | None = None,
    ) -> None:
        """Run `write`, then `then(outcome)` on the owner; after earlier writes of `key`.

        `priority`: default the write's own (its `priority` attribute), else FINISH.
        """
        if priority is None:
            priority = getattr(write, "priority", Priority.FINISH)
        post = self._post
        if post is None:
            outcome = write.run(self.apis)
            if then is not None:
                then(outcome)
            return

        task = _Task(
            self, write, then=then, key=key, priority=priority, fence=self._fence, post=post
        )
        if key is not None:
            with self._lock:
                waiting = self._keyed.get(key)
                if waiting is not None:
                    waiting.append((priority, task))
                    return
                self._keyed[key] = deque()
        self._put(priority, task)

    def _next(self, key: str) -> None:
        with self._lock:
            waiting = self._keyed[key]
            if not waiting:
                del self._keyed[key]
                return
            priority, task = waiting.popleft()
        self._put(priority, task)

    def _put(self, priority: Priority, task: Callable[[], None]) -> None:
        self._queue.put(priority, task)
        if len(self._threads) < self._workers and len(self._queue) > self._idle:
            self._spawn()

    def _spawn(self) -> None:
        """One more writer thread, if the pool is below its size and no thread is idle for
        what is queued (checked again under the lock: two callers may race here)."""
        with self._spawning:
            full = len(self._threads) >= self._workers
            served = bool(self._threads) and len(self._queue) <= self._idle
            if full or served:
                return
            thread = threading.Thread(
                target=self._work, name=f"kq-write-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
        thread.start()

    def threads(self) -> int:
        """Writer threads started so far."""
        return len(self._threads)

    def idle(self) -> int:
        """Writer threads waiting for a task."""
        return self._idle

    def _work(self) -> None:
        spawning = self._spawning
        while True:
            with spawning:
                self._idle += 1
            task = self._queue.take()
            with spawning:
                self._idle -= 1
            if task is None:
                return
            task()


RecordEvent.priority = Priority.BACKGROUND  # an event is for humans: after the writes
SyncQueueUsage.priority = Priority.BACKGROUND
