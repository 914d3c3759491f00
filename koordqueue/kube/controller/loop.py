"""The one owner of the controller: a thread that alone touches the engine and every map.

Informers and kopf handlers do not handle events; they post them onto one queue. This loop
takes them in order, runs an admission round every `admission_period` (sooner, at most every
MIN_ROUND_INTERVAL, once something happened that may let a unit in); each round starts the
periodic resync when it is due.
The API writes it decides run on the writer's bounded pool and come back here as events (their
continuations), so nothing but this thread reads or writes controller state and no lock is
needed. A slow API call costs a pool thread, never the loop.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any, Final

import structlog

from koordqueue.domain import backoff
from koordqueue.domain.backoff import Backoff
from koordqueue.kube import metrics
from koordqueue.kube.api import Kind, Listing, retry_transient
from koordqueue.kube.controller.wiring import Controller

log = structlog.get_logger(__name__)

MIN_ROUND_INTERVAL: Final = 0.05
"""Rounds woken by changes start at least this long after the previous round's writes were
all taken in, so a burst is batched into one round."""
PATIENCE: Final = 60.0
"""Seconds a round waits for the previous round's writes before it runs anyway (a write
that raised instead of answering never reports back)."""
FENCE_POLL: Final = 0.1
"""Seconds between looks at a shut fence (leader election): how soon after the lease is
renewed the held writes go out again and rounds resume."""
STARTUP_RETRY: Final[Backoff] = backoff.STARTUP
"""After a transient failure of the start-up resync (429, 5xx, a lost connection), when to
try again: 0.5 s doubling to 30 s, until it succeeds, as client-go's reflector retries its
list. Before, the error went up to kopf, which retries a failed start-up activity only after
60 s: one 500 on the start-up list of Jobs held every admission for a minute."""


MAX_BATCH: Final = 256
"""Events handled back to back without going back to the blocking queue read (each blocking
read hands the GIL to the writer threads and waits to get it back)."""

Reaction = Callable[[str | None, dict[str, Any]], None]
_STOP: Final = object()


class OwnerLoop:
    """`start()` runs the start-up resync, then events, rounds and resyncs, on one thread.

    `may_write` is the leader-election fence: while it is shut (this process is not, or no
    longer sure it is, the leader) no round or resync runs, events are still folded in, and
    the writer holds every write, including one the fence refused midway; once it reopens
    (a renewed lease) they go out at once and rounds resume. None: always open.
    """

    def __init__(
        self,
        controller: Controller,
        writers: int,
        may_write: Callable[[], bool] | None = None,
    ) -> None:
        self.controller = controller
        self.writers = writers
        self.may_write = may_write
        self.fenced = False
        """The fence was shut at the loop's last look."""
        self._queue: queue.SimpleQueue[Callable[[], None] | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_up: tuple[Future[dict[Kind, Listing]], dict[Kind, Listing] | None] | None = None
        """start()'s future and listings, until the owner thread takes them (not its
        arguments: a Thread keeps those until its target returns)."""
        self._stopping = threading.Event()
        metrics.INFORMER_BACKLOG.labels("owner").set_function(self._queue.qsize)

    # --- what other threads may call ----------------------------------------------------
    def post(self, action: Callable[[], None]) -> None:
        """Run `action` on the owner thread, after everything posted before it."""
        self._queue.put(action)

    def handler(self, source: str, react: Reaction) -> Reaction:
        """An informer/kopf callback that hands each event to `react` on the owner thread."""

        def on_event(event_type: str | None, obj: dict[str, Any]) -> None:
            def handle() -> None:
                try:
                    react(event_type, obj)
                except Exception:  # one bad object must not stop the others
                    metrics.HANDLER_ERRORS.labels(source).inc()
                    log.exception("event handler failed", kind=source)

            self._queue.put(handle)

        return on_event

    def start(self, listings: dict[Kind, Listing] | None = None) -> Future[dict[Kind, Listing]]:
        """Start the thread; the future holds the start-up resync's listings (or its error).

        `listings`: QueueUnits and Jobs the start-up resync folds instead of listing them.
        """
        self.controller.state.writer.use_pool(self.writers, self.post, self.may_write)
        started: Future[dict[Kind, Listing]] = Future()
        self._start_up = (started, listings)
        self._thread = threading.Thread(target=self._run, name="kq-controller", daemon=True)
        self._thread.start()
        return started

    def stop(self, timeout: float = 10.0) -> None:
        """Finish the event in hand, then stop; the writer's writes in flight complete."""
        self._stopping.set()
        self._queue.put(_STOP)
        if self._thread is not None:
            self._thread.join(timeout)

    # --- the owner thread ---------------------------------------------------------------
    def _run(self) -> None:
        """The start-up resync, then the loop. The start-up's listings (every Job and unit
        there was) are handed to start()'s caller and not held by the loop: kept for its
        whole life, they were a second copy of the cluster at start-up in memory."""
        assert self._start_up is not None
        started, listings = self._start_up
        self._start_up = None
        began = self._resync_at_start(started, listings)
        del started, listings
        if began:
            self._serve()

    def _resync_at_start(
        self, started: Future[dict[Kind, Listing]], listings: dict[Kind, Listing] | None
    ) -> bool:
        """The start-up resync; its listings (or error) to `started`. False: no loop."""
        controller = self.controller
        try:  # transient: again after a back-off (a resync is idempotent)
            result = retry_transient(
                lambda: controller.resync(listings), STARTUP_RETRY, self._stopping.wait,
                lambda exc, delay: log.warning(
                    "start-up resync failed; retrying", error=str(exc), in_s=delay
                ),
            )
        except Exception as exc:
            with contextlib.suppress(InvalidStateError):  # cancelled: nobody waits (SIGTERM)
                started.set_exception(exc)
            return False
        try:
            started.set_result(result)
        except InvalidStateError:  # the start-up was cancelled (stopped during it): no loop
            return False
        return True

    def _serve(self) -> None:
        """Events, rounds and resyncs until stopped."""
        controller, state = self.controller, self.controller.state
        settings = state.settings
        round_start = round_end = time.monotonic()
        round_start -= settings.admission_period  # the first round at once
        while not self._stopping.is_set():
            if self._fence_shut():
                if not self._take(FENCE_POLL):
                    return
                continue
            if state.round_writes_pending and time.monotonic() - round_end > PATIENCE:
                log.warning("a round's writes did not all report back; rounds go on")
                state.round_writes_pending = False
            if state.round_writes_pending:
                deadline = time.monotonic() + settings.admission_period  # until they land
                controller.sync_usage()  # (the annotations follow the units meanwhile)
            else:
                earliest = max(round_end, state.round_writes_done_at) + MIN_ROUND_INTERVAL
                periodic = round_start + settings.admission_period
                deadline = earliest if state.wake.is_set() else max(earliest, periodic)
            timeout = deadline - time.monotonic()
            if timeout > 0:
                if not self._take(timeout):
                    return
                continue
            state.wake.clear()
            round_start = time.monotonic()
            try:
                controller.admission_round()  # (starts the periodic resync when due)
            except Exception:
                log.exception("admission round failed; continuing")
            round_end = time.monotonic()

    def _take(self, timeout: float) -> bool:
        """Handle what is queued (waiting up to `timeout` for the first); False: stop."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return True
        for handled in range(1, MAX_BATCH + 1):
            if item is _STOP:
                return False
            self._handle(item)
            if handled == MAX_BATCH:
                break
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
        return True

    def _fence_shut(self) -> bool:
        """Look at the fence; on reopening, release the writes it held."""
        shut = self.may_write is not None and not self.may_write()
        if shut != self.fenced:
            self.fenced = shut
            if shut:
                log.warning("writes fenced (leadership not confirmed): rounds paused")
            else:
                released = self.controller.state.writer.reopen()
                log.info("fence reopened: rounds resume", held_writes=released)
        elif not shut and self.controller.state.writer.parked():
            self.controller.state.writer.reopen()  # refused midway while we last saw it open
        return shut

    @staticmethod
    def _handle(item: object) -> None:
        assert callable(item)
        try:
            item()
        except Exception:  # a continuation must not end the loop
            log.exception("controller event failed")
