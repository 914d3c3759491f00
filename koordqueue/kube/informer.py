"""List + watch for the high-volume kinds (Jobs, QueueUnits), without kopf's per-event machinery.

kopf runs every event through a per-object worker task, a handler invocation context and a
thread hop. Under a burst of 1,000 Jobs that was about half of the controller's CPU, and the
events queued for seconds behind it while the API server had already delivered them
(bench/HISTORY.md, bench_controller). The controller watches every kind through it (operator.py).

This is the informer shape client-go uses: list, then watch from the list's resourceVersion,
resume from the last seen resourceVersion when the server ends a watch, re-list only on
410 Gone. A re-list also reports what vanished during the gap: the informer remembers each
object's identity (namespace, name, uid), and an object missing from the new listing, or
listed with another uid (deleted and re-created), is handed over as DELETED first.
Events go through a keyed work queue to a pool of worker threads: the events of one object
(namespace/name) are handled in order and never concurrently, while other objects proceed
in parallel (a handler may block on an API write). A handler that never blocks (the
controller's only posts the event onto its owner loop) is called on the watch thread itself
(`workers=0`): the hop to a worker was a futex wake, a context switch and a GIL hand-off per
event, four events per admitted Job.

A watch that dies silently (no data, no close: a NAT entry or a middlebox that lost the
server's side) is noticed as client-go's reflector arranges it: each watch asks for a
server-side `timeoutSeconds` drawn at random from [min, 2 x min] (client-go's
minWatchTimeout, 5 min), so the informers of many controllers do not reconnect in step, and
for bookmarks (`allowWatchBookmarks`). The API server's watch cache sends a bookmark to such
a watch about every minute (`defaultBookmarkFrequency`, k8s.io/apiserver storage/cacher), even
when nothing changes, so a healthy watch is never silent much longer than a minute. The socket
read timeout is the liveness deadline: no byte (event or bookmark) for `idle_timeout` (70 s,
kopf's `inactivity_timeout`: past the bookmark period with room for jitter, and short of the
75 s for which the watch cache keeps events, `DefaultEventFreshDuration`, so the resume from the
last bookmark's version is still served from memory, not refused 410) abandons the watch, and
it is re-established at once from the last resourceVersion it delivered (re-listing only on
410 Gone, as always). client-go over HTTP/2
notices a dead connection with pings instead (30 s idle + 15 s ping timeout); over HTTP/1.1
the bookmark is the only heartbeat there is.

The watch stream is read by `WatchStream`, not kubernetes.watch.Watch: the same lines, events
and errors, decoded with orjson, which took decoding from 6-16 % of the
controller's CPU to a third of that (bench/HISTORY.md, bench_decode).
"""

from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Final

import orjson
import structlog
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ReadTimeoutError

from koordqueue.domain.backoff import Backoff
from koordqueue.kube import metrics
from koordqueue.kube.api import (
    ApiError,
    Kind,
    KubeApi,
    Listing,
    wait_hint,
    without_managed_fields,
)

log = structlog.get_logger(__name__)

Handler = Callable[[str | None, dict[str, Any]], None]
"""(event type or None for objects of a listing, object) -> None, like kopf's raw events."""

BACKOFF: Final = Backoff(0.5, cap=30.0)
"""Seconds between attempts after a failed list or watch: 0.5 s doubling to 30 s, for good
(or the server's Retry-After, when longer)."""

HEALTHY_RESET: Final = 120.0
"""Seconds without a failed list or watch after which the back-off starts again from its first
step (client-go reflector's defaultBackoffReset, 2 min: "if we don't back off for 2 min,
assume the API server is healthy"). Without it, an informer whose watch broke a few times
an hour apart, never ending cleanly in between (behind a proxy that cuts long connections),
came to wait the full 30 s after each break."""

MIN_WATCH_TIMEOUT: Final = 300
"""Seconds: each watch asks the server to end it after a random time in [this, 2 x this]
(client-go reflector's defaultMinWatchTimeout, 5 min, and its randomisation)."""

WATCH_IDLE_TIMEOUT: Final = 70.0
"""Seconds without a byte (event or bookmark) after which a watch is presumed dead: past the
API server's bookmark period (1 min) with room for its jitter, and within the 75 s its watch
cache keeps events (`DefaultEventFreshDuration`), so the resume is served without a 410.
kopf's `inactivity_timeout` for the quota and queue watches is the same 70 s."""

WATCH_END_GRACE: Final = 30.0
"""A watch still open this long past its server-side timeout is dead, however short that is."""

MIN_WATCH_TIMEOUT_ENV: Final = "KOORDQUEUE_MIN_WATCH_TIMEOUT"
WATCH_IDLE_TIMEOUT_ENV: Final = "KOORDQUEUE_WATCH_IDLE_TIMEOUT"
"""Environment overrides of the two defaults above (seconds), for every informer of the
process; the constructor's arguments win over them."""

Event = tuple[str | None, dict[str, Any]]


class WatchStream:
    """The events of one watch response, as kubernetes.watch.Watch(...).stream yields them for
    a function without a return type, and with a server-side timeout (so no retry of its own).

    Each event is the decoded line with `raw_object` set to its `object` (without
    metadata.managedFields: api.without_managed_fields); a non-2xx answer
    raises ApiException.from_response (404, 410...); an ERROR event raises
    ApiException(status=its code, reason="reason: message") (410 Gone: the caller re-lists);
    socket errors and the read timeout (urllib3's ReadTimeoutError) pass through unchanged. As
    there, lines are split on b"\\n" across chunks and a last line without one (a cut stream) is
    dropped: the next watch resumes before it. Where Watch yields None (a blank line, a line
    that is not JSON) and the informer then failed on it, a blank line is skipped and a line
    that is not JSON raises json.JSONDecodeError; either way the watch is re-established from
    the last version delivered.
    """

    def __init__(self) -> None:
        self._stopped = False
        self._response: Any = None

    def stop(self) -> None:
        """End the stream after the current event, and unblock a read of an idle one."""
        self._stopped = True
        response = self._response
        if response is not None:
            _shutdown(response)

    def events(self, response: Any) -> Iterator[dict[str, Any]]:
        """The events of `response` (a urllib3 response, not preloaded); closes it at the end."""
        self._response = response
        if self._stopped:  # stop() ran before it could see this response
            _shutdown(response)
        return self._read(response)

    def _read(self, response: Any) -> Iterator[dict[str, Any]]:
        try:
            status = getattr(response, "status", None)
            if isinstance(status, int) and not 200 <= status <= 299:
                raise ApiException.from_response(http_resp=response, body=None, data=None)
            for line in _lines(response):
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:  # what orjson refuses, read as Watch reads it
                    if line.isspace() or not line:
                        continue
                    event = json.loads(line.decode("utf-8", errors="replace"))
                event["raw_object"] = without_managed_fields(event["object"])
                if event["type"] == "ERROR":
                    obj = event["raw_object"]
                    raise ApiException(
                        status=obj["code"], reason=f"{obj['reason']}: {obj['message']}"
                    )
                yield event
                if self._stopped:
                    break
        finally:
            response.close()
            response.release_conn()
            self._response = None


def _lines(response: Any) -> Iterator[bytes]:
    """The lines of a streamed response, without their b"\\n"; a last unterminated one is not
    returned (kubernetes.watch.iter_resp_lines drops it too)."""
    head: list[bytes] = []
    for segment in response.stream(amt=None, decode_content=False):
        if isinstance(segment, bytes):
            chunk = segment
        elif isinstance(segment, str):
            chunk = segment.encode("utf-8")
        else:
            raise TypeError(f"a watch stream chunk must be bytes or str, not {type(segment)}")
        start = 0
        end = chunk.find(b"\n")
        while end != -1:
            if head:
                head.append(chunk[start:end])
                line = b"".join(head)
                head.clear()
            else:
                line = chunk[start:end]
            yield line
            start = end + 1
            end = chunk.find(b"\n", start)
        if start < len(chunk):
            head.append(chunk[start:] if start else chunk)


def _shutdown(response: Any) -> None:
    """Shut the response's socket down, so a read blocked on it returns now (closing it from
    another thread could wait on the TLS socket's lock that read holds; Watch.stop does the
    same). The stream's reader closes the response itself.

    urllib3's `HTTPResponse.shutdown` (2.3+) first: it kept the socket from before http.client
    took it over. An answer with `Connection: close` (a proxy, a load balancer) hands the
    socket to the response and leaves `connection.sock` None, and a stop that looked only
    there left the read blocked until the liveness deadline."""
    shutdown = getattr(response, "shutdown", None)
    if callable(shutdown):
        try:
            shutdown()
            return
        except Exception:  # released, or an older urllib3: the connection's socket below
            pass
    try:
        sock = getattr(getattr(response, "connection", None), "sock", None)
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:  # already closed: nothing to unblock
        return


def _from_env(name: str, default: float) -> float:
    """A positive number of seconds from the environment, or `default` (with a warning when
    the value is not one)."""
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if value > 0:
        return value
    log.warning("ignoring an invalid setting", variable=name, value=raw, using=default)
    return default


class KeyedQueue:
    """A work queue where one key is held by at most one worker at a time (client-go style).

    Unlike a queue per worker chosen by hashing the key, a free worker takes the next ready
    key, so a slow object never holds up unrelated ones queued behind it.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: dict[str, list[Event]] = {}
        self._ready: deque[str] = deque()
        self._active: set[str] = set()
        self._closed = False
        self._size = 0

    def put(self, key: str, event: Event) -> None:
        with self._cond:
            self._size += 1
            events = self._pending.get(key)
            if events is None:
                self._pending[key] = [event]
                if key not in self._active:
                    self._ready.append(key)
                    self._cond.notify()
            else:
                events.append(event)

    def take(self) -> tuple[str, list[Event]] | None:
        """The next ready key and its events in arrival order; None once closed and empty."""
        with self._cond:
            while not self._ready:
                if self._closed:
                    return None
                self._cond.wait()
            key = self._ready.popleft()
            self._active.add(key)
            events = self._pending.pop(key)
            self._size -= len(events)
            return key, events

    def done(self, key: str) -> None:
        """Release `key`; events that arrived while it was held make it ready again."""
        with self._cond:
            self._active.discard(key)
            if key in self._pending:
                self._ready.append(key)
                self._cond.notify()

    def close(self) -> None:
        """Workers finish what is queued, then `take` returns None."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __len__(self) -> int:
        """Events queued and not yet taken by a worker."""
        return self._size


class Informer:
    """`start()` lists and watches `kind` cluster-wide in the background; `stop()` ends it."""

    def __init__(
        self,
        api: KubeApi,
        kind: Kind,
        handler: Handler,
        *,
        workers: int = 8,
        watch_timeout: float | None = None,
        idle_timeout: float | None = None,
        backoff: Backoff = BACKOFF,
        rng: random.Random | None = None,
        healthy_reset: float = HEALTHY_RESET,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`workers`: threads handling events (0: the watch thread itself, in order, for a
        handler that never blocks: no queue and no thread wake per event). `watch_timeout`:
        the least server-side timeout of a watch (each is random in
        [watch_timeout, 2 x watch_timeout]); `idle_timeout`: the liveness deadline. Both in
        seconds, defaulting to $KOORDQUEUE_MIN_WATCH_TIMEOUT / $KOORDQUEUE_WATCH_IDLE_TIMEOUT,
        else MIN_WATCH_TIMEOUT / WATCH_IDLE_TIMEOUT. `healthy_reset`: seconds without a
        failure after which the back-off starts over (`clock` measures them)."""
        self.api = api
        self.kind = kind
        self.handler = handler
        self.watch_timeout = (
            watch_timeout
            if watch_timeout is not None
            else _from_env(MIN_WATCH_TIMEOUT_ENV, MIN_WATCH_TIMEOUT)
        )
        self.idle_timeout = (
            idle_timeout
            if idle_timeout is not None
            else _from_env(WATCH_IDLE_TIMEOUT_ENV, WATCH_IDLE_TIMEOUT)
        )
        self.backoff = backoff
        self.healthy_reset = healthy_reset
        self._clock = clock
        self._failures = 0
        """Failures since the back-off last started over (it sets the next wait)."""
        self._failed_at: float | None = None
        self._rng = rng or random.Random()
        self.synced = threading.Event()
        """Set once the first listing has been handed to the workers."""
        self._stop = threading.Event()
        self._watch: WatchStream | None = None
        self._workers = workers
        self._queue = KeyedQueue()
        # uid of every object seen, by key; only the watch thread touches it (after start())
        self._known: dict[str, str | None] = {}
        self._first_version: str | None = None
        # the last resourceVersion the current watch delivered (None: listing, not watching)
        self._progress: str | None = None
        metrics.INFORMER_BACKLOG.labels(kind.plural).set_function(lambda: len(self._queue))
        self._threads: list[threading.Thread] = []

    # --- lifecycle ----------------------------------------------------------------------
    def start(self, listing: Listing | None = None) -> None:
        """Start the workers and the watch.

        `listing`: one the caller has already handled (its start-up sync); the informer then
        remembers those objects and watches from the listing's version instead of listing
        and handing over everything a second time.
        """
        if listing is not None and listing[1]:
            items, self._first_version = listing
            self._known = {_key(item): _uid(item) for item in items}
            self.synced.set()
        name = self.kind.plural
        self._threads = [
            threading.Thread(target=self._work, name=f"kq-{name}-{i}", daemon=True)
            for i in range(self._workers)
        ]
        watcher = threading.Thread(target=self._run, name=f"kq-{name}-watch", daemon=True)
        self._threads.append(watcher)
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching, let the workers finish what they hold, and wait for the threads."""
        self._stop.set()
        watch = self._watch
        if watch is not None:
            watch.stop()  # unblocks the read of an idle watch stream
        self._queue.close()
        deadline = time.monotonic() + timeout  # one bound for all threads, not one each
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # --- the watch loop -----------------------------------------------------------------
    def _run(self) -> None:
        version = self._first_version
        while not self._stop.is_set():
            self._progress = None
            try:
                if version is None:
                    version = self._list()
                self._progress = version
                version = self._watch_from(version)
                self._failures = 0  # the server ended the watch: healthy
            except (ApiException, ApiError) as exc:
                status = exc.status or 0
                if status == 410:  # our resourceVersion is older than the server keeps
                    metrics.WATCH_RESTARTS.labels(self.kind.plural, "expired").inc()
                    log.info("watch expired; re-listing", kind=self.kind.plural)
                    version = None
                    continue
                version = self._progress or version
                self._pause(exc)
            except ReadTimeoutError:  # silent past the liveness deadline: presumed dead
                version = self._progress or version
                metrics.WATCH_RESTARTS.labels(self.kind.plural, "idle").inc()
                if not self._stop.is_set():
                    log.warning(
                        "watch silent past its deadline; re-watching",
                        kind=self.kind.plural,
                        silent_s=self.idle_timeout,
                        resource_version=version,
                    )
            except Exception as exc:  # connection reset, TLS, timeouts: retry from where we were
                version = self._progress or version
                self._pause(exc)

    def next_delay(self, exc: BaseException) -> float:
        """Count a failure and return the wait before the next attempt: the back-off's step
        for the failures since it last started over (it does when none came for
        `healthy_reset` seconds), or the server's Retry-After when that is longer."""
        now = self._clock()
        if self._failed_at is not None and now - self._failed_at >= self.healthy_reset:
            self._failures = 0
        self._failed_at = now
        delay = max(self.backoff.delay(self._failures), wait_hint(exc))
        self._failures += 1
        return delay

    def _pause(self, exc: Exception) -> None:
        metrics.WATCH_RESTARTS.labels(self.kind.plural, "error").inc()
        delay = self.next_delay(exc)
        if not self._stop.is_set():
            log.warning("watch failed; retrying", kind=self.kind.plural, error=str(exc), in_s=delay)
        self._stop.wait(delay)

    def _list(self) -> str:
        items, version = self.api.list_with_version(self.kind)
        listed = {_key(item): _uid(item) for item in items}
        gone = [
            self._tombstone(key, uid)
            for key, uid in self._known.items()
            if key not in listed or listed[key] != uid
        ]
        if gone:
            log.info(
                "re-list found deletions missed while not watching",
                kind=self.kind.plural,
                count=len(gone),
            )
        for stub in gone:
            self._dispatch("DELETED", stub)
        for item in items:
            self._dispatch(None, item)
        self.synced.set()
        return version

    def _tombstone(self, key: str, uid: str | None) -> dict[str, Any]:
        """What a DELETED event missed during a watch gap carries: the object's identity."""
        namespace, name = key.split("/", 1)
        meta: dict[str, Any] = {"name": name, "uid": uid}
        if namespace:
            meta["namespace"] = namespace
        return {"apiVersion": self.kind.api_version, "kind": self.kind.kind, "metadata": meta}

    def next_watch_timeout(self) -> int:
        """The server-side timeout of the next watch: random in [min, 2 x min] whole seconds,
        as client-go's reflector draws it, so reconnects of many clients spread out."""
        low = max(1.0, self.watch_timeout)
        return int(low + self._rng.random() * low)

    def read_timeout(self, timeout_seconds: float) -> float:
        """The socket read timeout of a watch: the liveness deadline, or the server-side
        timeout plus a grace when that is sooner (a watch the server should have ended)."""
        return min(self.idle_timeout, timeout_seconds + WATCH_END_GRACE)

    def _watch_from(self, version: str) -> str:
        """Stream events from `version` until the server ends the watch; the last version seen.

        `_progress` follows every version delivered, so a watch that fails midway (a reset,
        the liveness deadline) resumes from where it got to, not from where it began.
        """
        watch = WatchStream()
        self._watch = watch
        if self._stop.is_set():  # stop() ran before it could see this watch
            self._watch = None
            return version
        try:
            response = self._open_watch(
                resource_version=version,
                timeout_seconds=self.next_watch_timeout(),
                allow_watch_bookmarks=True,
            )
            for event in watch.events(response):
                if self._stop.is_set():
                    break
                obj = event.get("raw_object") or {}
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                self._progress = version
                kind = event.get("type")
                if kind != "BOOKMARK":
                    self._dispatch(kind, obj)
        finally:
            self._watch = None
        return version

    def _open_watch(self, **kwargs: Any) -> Any:
        """The watch request for WatchStream: its urllib3 response, not read yet."""
        query = [("watch", "1")]
        if kwargs.get("resource_version"):
            query.append(("resourceVersion", str(kwargs["resource_version"])))
        if kwargs.get("timeout_seconds"):
            query.append(("timeoutSeconds", str(kwargs["timeout_seconds"])))
        if kwargs.get("allow_watch_bookmarks"):
            query.append(("allowWatchBookmarks", "true"))
        client = self.api.api_client
        serialized = client.param_serialize(
            "GET",
            self.kind.path(),
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        # the read timeout is the liveness deadline: it applies to every read of the stream, so
        # a watch with no event and no bookmark for that long raises ReadTimeoutError
        read = self.read_timeout(float(kwargs.get("timeout_seconds") or self.watch_timeout))
        response = client.call_api(*serialized, _request_timeout=(10, read))
        return response.response

    # --- workers ------------------------------------------------------------------------
    def _dispatch(self, event_type: str | None, obj: dict[str, Any]) -> None:
        key, uid = _key(obj), _uid(obj)
        if event_type != "DELETED":
            self._known[key] = uid
        elif key in self._known and self._known[key] == uid:
            del self._known[key]
        if not self._workers:  # inline: the handler never blocks (scheduler cache, owner loop)
            self._handle(key, event_type, obj)
            return
        self._queue.put(key, (event_type, obj))

    def _handle(self, key: str, event_type: str | None, obj: dict[str, Any]) -> None:
        try:
            self.handler(event_type, obj)
        except Exception:  # one bad object must not stop the others
            metrics.HANDLER_ERRORS.labels(self.kind.plural).inc()
            log.exception("event handler failed", kind=self.kind.plural, key=key)

    def _work(self) -> None:
        while (item := self._queue.take()) is not None:
            key, events = item
            try:
                for event_type, obj in events:
                    self._handle(key, event_type, obj)
            finally:
                self._queue.done(key)


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _uid(obj: dict[str, Any]) -> str | None:
    uid = (obj.get("metadata") or {}).get("uid")
    return str(uid) if uid is not None else None
