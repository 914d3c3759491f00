"""`Scheduled` Events yield to binds while a burst of binds goes out.

Why: every bound pod costs the API server two writes, its bind and its `Scheduled` Event, and
on a busy control plane the Event's create competes with the next pods' creates and binds. In
bench_peers' 2,000-pod / 100-node burst, with no Event written at all the scheduler's p99
create -> bind was 0.130 / 0.113 s against 0.144 / 0.238 s with each Event sent right after
its bind (two runs each; its throughput 539 / 527 against 399 / 318 pods a second). The bind
is what starts the pod; the Event only says so.

So while binds go out faster than BUSY_RATE a second (over the last RATE_WINDOW seconds), a
batch's Events are held here instead of being sent after its binds, and written, in the order
their binds were, once the pace drops below it, or once they have waited MAX_DEFER seconds
(a long burst then writes them at its own pace, MAX_DEFER late). Each carries the time of its
bind, so `kubectl get events` shows when the pod was placed, not when the Event was written.
None is dropped: at a quieter pace, with nothing held, each goes right after its bind as before.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import structlog
from prometheus_client import Gauge

from koordqueue.kube.api import now_rfc3339
from koordqueue.kube.metrics import REGISTRY

log = structlog.get_logger(__name__)

BUSY_RATE: Final = 100.0
"""Binds a second at or above which Events are held: a burst, well beyond a busy cluster's
steady pace of pods starting."""
RATE_WINDOW: Final = 1.0
"""Seconds of binds the pace is measured over."""
MAX_DEFER: Final = 10.0
"""Seconds an Event may be held at most."""
TICK: Final = 0.1
"""Seconds between the lane's looks while it holds Events."""
CHUNK: Final = 32
"""Events per write (`send`): as many as a batch of binds (scheduler.py MULTI_BATCH)."""

HELD: Final = Gauge(
    "koordqueue_scheduler_events_held",
    "Scheduled Events held back while a burst of binds goes out (written after it).",
    registry=REGISTRY,
)

Scheduled = tuple[Mapping[str, Any], str, str, str]
"""(pod, type, reason, message) of one Event."""
Send = Callable[[list[Scheduled], str], object]
"""Write Events that happened at a time (RFC 3339): AsyncEventRecorder.record_all's shape."""


@dataclass(slots=True)
class _Held:
    events: list[Scheduled]
    at: str
    """When their binds were answered (RFC 3339)."""
    since: float
    """The same, on the lane's clock."""


class EventLane:
    """Holds `Scheduled` Events through bursts of binds (module doc); thread-safe.

    `start=False` runs no thread: the caller pumps (tests, with a fake clock)."""

    def __init__(
        self, send: Send, *, busy_rate: float = BUSY_RATE, window: float = RATE_WINDOW,
        max_defer: float = MAX_DEFER, clock: Callable[[], float] = time.monotonic,
        stamp: Callable[[], str] = now_rfc3339, start: bool = True,
    ) -> None:
        self._send = send
        self.busy_rate = busy_rate
        self.window = window
        self.max_defer = max_defer
        self._clock = clock
        self._stamp = stamp
        self._binds: deque[tuple[float, int]] = deque()
        self._bound = 0  # binds in `_binds`
        self._held: deque[_Held] = deque()
        self._count = 0  # Events in `_held`
        self._cond = threading.Condition()
        self._stopped = False
        self._sending = threading.Lock()  # one writer at a time keeps the Events in order
        self._start = start
        self._thread: threading.Thread | None = None
        """Started at the first hold: a scheduler that never meets a burst runs none."""

    @property
    def held(self) -> int:
        """Events held now."""
        return self._count

    def offer(self, events: Sequence[Scheduled], binds: int) -> bool:
        """`binds` were just answered, `events` theirs: True when the caller writes them now
        (no burst, nothing held before them), False when the lane holds them."""
        with self._cond:
            now = self._clock()
            self._binds.append((now, binds))
            self._bound += binds
            busy = self._busy(now)  # (also drops binds older than the window)
            if not events or (not self._held and not busy):
                return True
            self._held.append(_Held(list(events), self._stamp(), now))
            self._count += len(events)
            HELD.set(self._count)
            if self._thread is None and self._start and not self._stopped:
                self._thread = threading.Thread(
                    target=self._run, name="kq-event-lane", daemon=True
                )
                self._thread.start()
            self._cond.notify()
            return False

    def pump(self) -> int:
        """Write the Events now due (the pace dropped, or held MAX_DEFER); how many. One
        write of CHUNK at a time, the pace looked at again before each: a burst that resumes
        (a pause in a creator, a relist) stops a flush, instead of meeting hundreds of
        Event creates at once."""
        written = 0
        with self._sending:
            while True:
                with self._cond:
                    due = self._due(self._clock())
                if not due:
                    return written
                written += self._write(due)

    def flush(self) -> int:
        """Write every Event held (shutdown, tests); how many."""
        with self._sending:
            with self._cond:
                due = self._take(len(self._held))
            return self._write(due)

    def close(self) -> None:
        """Stop the lane's thread, then write what it holds."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        self.flush()

    def _busy(self, now: float) -> bool:
        """Binds in the last `window` seconds at `busy_rate` a second or more (lock held)."""
        while self._binds and self._binds[0][0] <= now - self.window:
            self._bound -= self._binds.popleft()[1]
        return self._bound >= self.busy_rate * self.window

    def _due(self, now: float) -> list[_Held]:
        """The next CHUNK held Events (or fewer) if due now (lock held)."""
        if not self._held:
            return []
        first = self._held[0]
        if self._busy(now) and first.since > now - self.max_defer:
            return []
        if len(first.events) <= CHUNK:
            return self._take(1)
        taken = _Held(first.events[:CHUNK], first.at, first.since)
        del first.events[:CHUNK]
        self._count -= CHUNK
        HELD.set(self._count)
        return [taken]

    def _take(self, count: int) -> list[_Held]:
        taken = [self._held.popleft() for _ in range(count)]
        self._count -= sum(len(h.events) for h in taken)
        HELD.set(self._count)
        return taken

    def _write(self, due: list[_Held]) -> int:
        written = 0
        for held in due:
            for i in range(0, len(held.events), CHUNK):
                chunk = held.events[i:i + CHUNK]
                try:
                    self._send(chunk, held.at)
                except Exception:  # never let one write stop the lane
                    log.exception("held events not written")
                written += len(chunk)
        return written

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                self._cond.wait(TICK if self._held else None)
                if self._stopped:
                    return
            self.pump()
