"""Kubernetes Events (core/v1), the way `kubectl describe` and `kubectl get events` show them.

Repeats of the same (object, reason, message) bump `count` and `lastTimestamp` on the existing
Event instead of creating a new one, like client-go's event correlator, so a unit rejected for
the same reason every second does not flood etcd.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

import structlog
from cachetools import TTLCache
from prometheus_client import Counter

from koordqueue.kube.api import EVENT, ApiError, ObjectApi, now_rfc3339
from koordqueue.kube.api_errors import with_retries
from koordqueue.kube.event_correlator import MAX_OBJECTS, EventCorrelator
from koordqueue.kube.metrics import REGISTRY

PostAll = Callable[[list[tuple[str, dict[str, Any]]]], "list[dict[str, Any] | ApiError]"]
"""(path, body) POSTs -> each one's answer or ApiError, in order (the scheduler's BatchWriter)."""
COMPONENT: Final = "koord-queue"
EVENT_LINGER: Final = 0.05
"""Seconds the asynchronous writer waits, once it has emptied its queue, before it sleeps
until the next event: events arriving meanwhile are written in one wake-up. Why: waking an
idle writer thread for each event (a bind's `Scheduled`) cost more CPU than recording it."""
EVENT_ATTEMPTS: Final = 4
EVENT_RETRY_DELAY: Final = 1.0
"""An Event write refused for a passing reason (429, 5xx, a lost connection) is tried again,
after 1, 2 and 4 s, as client-go's recorder retries its sink (12 tries, 10 s apart) rather
than dropping the Event: bench/soak.py's fuzzer waited 25 minutes for a QuotaCycle Event whose
one POST met the api-500 fault. Shorter than client-go's, as a retry holds a writer thread."""
log = structlog.get_logger(__name__)
T = TypeVar("T")
EVENTS: Final = Counter(
    "koordqueue_events_total",
    "Events handed to an asynchronous recorder, by outcome: written, failed (API refused), "
    "spam (dropped by the per-object rate limit), full (dropped: the write queue was full).",
    ["outcome"], registry=REGISTRY,
)


def _now() -> str:
    return now_rfc3339()


class _Stamps:
    """Nanosecond stamps that only go up within the process (two events in the same
    nanosecond, or a clock stepped back, still get different names)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        with self._lock:
            stamp = self._last = max(time.time_ns(), self._last + 1)
        return stamp


_STAMPS: Final = _Stamps()


def event_name(object_name: str) -> str:
    """client-go's Event name, `<object>.<hex of the creation time in Unix ns>` (tools/record
    makeEvent), unique within the process (the reference's scheme; the server's
    generateName, a random suffix, is the fallback when another process took the name)."""
    return f"{object_name[:200]}.{_STAMPS.next():x}"


SeenKey = tuple[str, str, str, str]
"""(object identity, kind, reason, de-duplication key): one Event, whose count moves."""


def _seen_key(ref: Mapping[str, Any], namespace: str, reason: str, same: str) -> SeenKey:
    return (ref["uid"] or f"{namespace}/{ref['name']}", ref["kind"], reason, same)


def object_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """involvedObject for an API object dict."""
    metadata = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": metadata.get("name", ""),
        "namespace": metadata.get("namespace", ""),
        "uid": metadata.get("uid", ""),
    }
    if metadata.get("resourceVersion"):
        ref["resourceVersion"] = metadata["resourceVersion"]
    return ref


class EventRecorder:
    """Creates and aggregates Events; never raises (an event is not worth a failed reconcile)."""

    def __init__(
        self, api: ObjectApi, ttl: float = 3600.0, maxsize: int = MAX_OBJECTS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._api = api
        self._sleep = sleep
        self._attempts = EVENT_ATTEMPTS
        self._seen: TTLCache[SeenKey, tuple[str, str, int]] = TTLCache(
            maxsize=maxsize, ttl=ttl
        )
        self._lock = threading.Lock()
        self._instance = f"{socket.gethostname()}-{os.getpid()}"

    def record(
        self, obj: Mapping[str, Any], event_type: str, reason: str, message: str,
        *, dedup_key: str | None = None,
    ) -> bool:
        """Record an event on `obj`; returns False if the API refused it (logged).

        Events with the same object, reason and `dedup_key` (default: the message) are one
        Event with a count; when the key is not the message, a repeat also updates the message.
        """
        ref = object_reference(obj)
        namespace = ref["namespace"] or "default"
        same = dedup_key if dedup_key is not None else message
        key = _seen_key(ref, namespace, reason, same)
        now = _now()
        with self._lock:
            previous = self._seen.get(key)
        try:
            if previous is not None:
                name, ns, count = previous
                patch: dict[str, Any] = {"count": count + 1, "lastTimestamp": now}
                if same != message:
                    patch["message"] = message[:1024]
                try:
                    self._retried(lambda: self._api.merge_patch(EVENT, name, patch, ns))
                    with self._lock:
                        self._seen[key] = (name, ns, count + 1)
                    return True
                except ApiError as exc:
                    if not exc.not_found:
                        raise
            body = self._body(ref, namespace, event_type, reason, message, now=now)
            try:
                created = self._retried(lambda: self._api.create(EVENT, body, namespace))
            except ApiError as exc:
                if not exc.conflict:
                    raise
                # another process named one the same: let the server draw a name instead
                body["metadata"] = {"generateName": f"{ref['name'][:200]}.",
                                    "namespace": namespace}
                created = self._retried(lambda: self._api.create(EVENT, body, namespace))
            with self._lock:
                self._seen[key] = (created["metadata"]["name"], namespace, 1)
            return True
        except ApiError as exc:
            log.warning("event not recorded", reason=reason, object=ref["name"], error=str(exc))
            return False

    def _body(
        self, ref: dict[str, Any], namespace: str, event_type: str, reason: str, message: str,
        *, now: str,
    ) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name(ref["name"]), "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }

    def fresh(
        self, obj: Mapping[str, Any], event_type: str, reason: str, message: str,
        *, dedup_key: str | None = None, at: str | None = None,
    ) -> tuple[SeenKey, dict[str, Any]] | None:
        """For a caller that sends creates itself (a batch): the new Event `record` would
        create, with its de-duplication key, or None when this one repeats an Event already
        written (then `record` bumps its count). Report the create with `created`. `at`: when
        it happened (RFC 3339), for an Event written later than that; default now."""
        ref = object_reference(obj)
        namespace = ref["namespace"] or "default"
        key = _seen_key(ref, namespace, reason, dedup_key if dedup_key is not None else message)
        with self._lock:
            if key in self._seen:
                return None
        return key, self._body(ref, namespace, event_type, reason, message, now=at or _now())

    def created(self, key: SeenKey, name: str, namespace: str) -> None:
        """An Event from `fresh` was created: its repeats now bump its count."""
        with self._lock:
            self._seen[key] = (name, namespace, 1)

    def _retried(self, call: Callable[[], T]) -> T:
        """`call`, tried again on a passing refusal (EVENT_ATTEMPTS); a conflict goes up."""
        return with_retries(call, self._attempts, EVENT_RETRY_DELAY, retry_conflicts=False,
                            sleep=self._sleep)

    def stop_retrying(self) -> None:
        """One attempt per Event from now on: a stopping process flushes its writes within
        its grace period (SIGTERM: test_faults' 10 s) rather than sleeping 7 s per Event on
        a connection that is gone."""
        self._attempts = 1


class AsyncEventRecorder:
    """Correlates events (aggregation, spam filter) and writes them from a background thread.

    For hot paths such as binding, where an Event per pod must not add an API round trip to
    the caller: `record` only enqueues. A full queue drops the event (counted), as client-go's
    broadcaster does, rather than slowing the scheduler down. After emptying its queue the
    writer lingers `linger` seconds before sleeping on it, so a burst's events share its
    wake-ups (`flush` and `close` cut a linger short).
    """

    def __init__(
        self,
        recorder: EventRecorder,
        correlator: EventCorrelator | None = None,
        *,
        maxsize: int = 1000,
        linger: float = EVENT_LINGER,
    ) -> None:
        self._recorder = recorder
        self._linger = linger
        self._hurry = threading.Event()
        """Set while a flush or close waits: the writer does not linger."""
        self._correlator = correlator or EventCorrelator()
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[Mapping[str, Any], str, str, str, str] | None] = (
            queue.Queue(maxsize)
        )
        self._thread = threading.Thread(target=self._drain, name="kq-events", daemon=True)
        self._thread.start()

    def _correlate(
        self, obj: Mapping[str, Any], event_type: str, reason: str, message: str
    ) -> tuple[str, str] | None:
        ref = object_reference(obj)
        identity = ref["uid"] or f"{ref['namespace']}/{ref['name']}"
        with self._lock:
            correlated = self._correlator.correlate(
                (identity, ref["kind"]), event_type, reason, message
            )
        if correlated is None:
            EVENTS.labels("spam").inc()
        return correlated

    def record_all(
        self, events: Sequence[tuple[Mapping[str, Any], str, str, str]], post_all: PostAll,
        *, at: str | None = None,
    ) -> list[bool]:
        """(object, type, reason, message) events correlated as by `record`, written in the
        caller's thread: the new Events' creates in one `post_all` (the scheduler's batch of
        binds' `Scheduled` events, in flight together), repeats and refused creates one at a
        time as `record` writes them (count bumps, generateName, retries). For callers that
        write from a pool of their own, so events keep pace with their writes instead of
        queueing behind the one writer thread (at one POST at a time it fell behind a burst
        of binds and dropped what overflowed its queue). `at`: when they happened, for events
        written later (the scheduler's event_lane.py); a repeat's count bump says now. True
        per event written."""
        written = [False] * len(events)
        batch: list[tuple[int, SeenKey, dict[str, Any], tuple[str, str, str, str]]] = []
        for i, (obj, event_type, reason, message) in enumerate(events):
            correlated = self._correlate(obj, event_type, reason, message)
            if correlated is None:
                continue
            text, key = correlated
            new = self._recorder.fresh(obj, event_type, reason, text, dedup_key=key, at=at)
            if new is None:
                written[i] = self._write(obj, event_type, reason, text, key)
            else:
                batch.append((i, new[0], new[1], (event_type, reason, text, key)))
        posts = [(EVENT.path(body["metadata"]["namespace"]), body) for _i, _k, body, _a in batch]
        for (i, seen, body, args), answer in zip(batch, post_all(posts), strict=True):
            if isinstance(answer, ApiError):  # a conflict, a refusal: the one-at-a-time path
                written[i] = self._write(events[i][0], *args)
                continue
            name = (answer.get("metadata") or {}).get("name") or body["metadata"]["name"]
            self._recorder.created(seen, name, body["metadata"]["namespace"])
            EVENTS.labels("written").inc()
            written[i] = True
        return written

    def _write(self, obj: Mapping[str, Any], event_type: str, reason: str, text: str,
               key: str) -> bool:  # fmt: skip
        ok = self._recorder.record(obj, event_type, reason, text, dedup_key=key)
        EVENTS.labels("written" if ok else "failed").inc()
        return ok

    def record(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> bool:
        """Queue an event; False when it was dropped (rate limit or full queue)."""
        correlated = self._correlate(obj, event_type, reason, message)
        if correlated is None:
            return False
        text, key = correlated
        try:
            self._queue.put_nowait((obj, event_type, reason, text, key))
        except queue.Full:
            EVENTS.labels("full").inc()
            return False
        return True

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                obj, event_type, reason, text, key = item
                ok = self._recorder.record(obj, event_type, reason, text, dedup_key=key)
                EVENTS.labels("written" if ok else "failed").inc()
            except Exception:  # never let one event stop the writer
                log.exception("event writer failed")
            finally:
                self._queue.task_done()
            if self._linger > 0 and self._queue.empty() and not self._hurry.is_set():
                self._hurry.wait(self._linger)

    def flush(self) -> None:
        """Block until every queued event has been written (tests, shutdown)."""
        self._hurry.set()
        try:
            self._queue.join()
        finally:
            self._hurry.clear()

    def close(self) -> None:
        """Write what is queued, then stop the writer thread."""
        self._hurry.set()
        self._queue.put(None)
        self._thread.join(timeout=10.0)
