"""Keep the cyclic garbage collector off a long-lived process's caches.

CPython's full (generation 2) collection walks every tracked object, with the GIL held, and
recurs each time the live set grows by a quarter (all through a burst). The scheduler's cache
at 5,000 pods took ~150 ms a pass, at 50,000 ~0.7 s; in the controller, under a burst of
1,500 Jobs, perf put ~11 % of the process's CPU in the collector (gc_collect_main and its
visits: the informers' decoded Jobs and units, walked again and again). Those objects (decoded
API objects, their conversions) are acyclic and freed by reference counting, so the
collector has nothing to find in them.

`gc.freeze()` moves every tracked object to the permanent generation, which no collection
walks; freezing is O(1) (a list splice). The freezer freezes:

- after each relist: the new listings are frozen after a young collection. At most every
  `FULL_PASS_INTERVAL` seconds (and at the first relist) a full collection comes first
  (`gc.unfreeze(); gc.collect(); gc.freeze()`), which reclaims the cyclic garbage frozen
  since the last one. Not at every relist: a full pass holds the interpreter for the whole
  heap (~1 s in `koordqueue run` with 15,000 units waiting, in py-spy), and the controller's
  resync and its scheduler's relist each asked for one every minute, stalling admission;
- after a pass of work (a scheduler session, a controller admission round), at most every
  `PASS_FREEZE_INTERVAL` seconds, after a young collection (`gc.collect(1)`): what survived
  it is live (the objects decoded since the last freeze), so later collections skip it.
  (Every session, dozens a second in a burst, the young collections alone were ~3 % of the
  scheduler's GIL time.) Cyclic garbage already in the old generation at that moment
  (objects alive through two young collections, e.g. a session or a write in progress
  while one ran) is frozen with it and waits for the next full pass: a bounded leak.

Objects freed by reference counting leave the permanent generation as they go, so a frozen
object deleted later costs nothing. With the collector disabled by the embedding process, the
freezer does nothing.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

import structlog

log = structlog.get_logger(__name__)

PASS_FREEZE_INTERVAL = 1.0
"""Seconds between freezes after passes: at most this much young survivors reach the old
generation, whose full passes stay small."""
FULL_PASS_INTERVAL = 600.0
"""Seconds between full collections (after relists): how long cyclic garbage may stay
frozen, against a stall of the whole process per pass."""


class GcFreezer:
    """Freezes after relists and passes of work (see the module doc); `enabled=False`: a no-op."""

    def __init__(
        self, enabled: bool, clock: Callable[[], float] = time.monotonic,
        interval: float = PASS_FREEZE_INTERVAL, full_interval: float = FULL_PASS_INTERVAL,
    ) -> None:
        self.enabled = enabled
        self.clock = clock
        self.interval = interval
        self.full_interval = full_interval
        self._last = float("-inf")
        self._last_full = float("-inf")
        self.freezes = 0
        """How many times this freezer froze (tests, metrics)."""
        self._lock = threading.Lock()  # a relist (resync) and a pass may end together

    def after_relist(self) -> None:
        """Freeze the fresh listings; first reclaim what was frozen as garbage when the last
        full pass is `full_interval` old."""
        if not self.enabled or not gc.isenabled():
            return
        with self._lock:
            now = self.clock()
            if now - self._last_full >= self.full_interval:
                started = time.perf_counter()
                gc.unfreeze()
                gc.collect()
                gc.freeze()
                self._last_full = now
                log.info("collector full pass", seconds=round(time.perf_counter() - started, 3))
            else:
                gc.collect(1)
                gc.freeze()
            self.freezes += 1
            self._last = now

    def after_pass(self) -> None:
        """Freeze what survived a young collection, unless the last freeze was recent."""
        if not self.enabled or not gc.isenabled():
            return
        with self._lock:
            now = self.clock()
            if now - self._last < self.interval:
                return
            gc.collect(1)
            gc.freeze()
            self.freezes += 1
            self._last = now
