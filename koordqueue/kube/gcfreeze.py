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

- after each relist, after one full collection (`gc.unfreeze(); gc.collect(); gc.freeze()`):
  the new listings are frozen and whatever cyclic garbage was frozen since the last relist
  is reclaimed (the relist's own allocations would have triggered that full pass anyway);
- after a pass of work (a scheduler session, a controller admission round), at most every
  `PASS_FREEZE_INTERVAL` seconds, after a young collection (`gc.collect(1)`): what survived
  it is live (the objects decoded since the last freeze), so later collections skip it.
  (Every session, dozens a second in a burst, the young collections alone were ~3 % of the
  scheduler's GIL time.) Cyclic garbage already in the old generation at that moment
  (objects alive through two young collections, e.g. a session or a write in progress
  while one ran) is frozen with it and waits for the next relist: a bounded leak.

Objects freed by reference counting leave the permanent generation as they go, so a frozen
object deleted later costs nothing. With the collector disabled by the embedding process, the
freezer does nothing.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

PASS_FREEZE_INTERVAL = 1.0
"""Seconds between freezes after passes: at most this much young survivors reach the old
generation, whose full passes stay small."""


class GcFreezer:
    """Freezes after relists and passes of work (see the module doc); `enabled=False`: a no-op."""

    def __init__(
        self, enabled: bool, clock: Callable[[], float] = time.monotonic,
        interval: float = PASS_FREEZE_INTERVAL,
    ) -> None:
        self.enabled = enabled
        self.clock = clock
        self.interval = interval
        self._last = float("-inf")
        self.freezes = 0
        """How many times this freezer froze (tests, metrics)."""
        self._lock = threading.Lock()  # a relist (resync) and a pass may end together

    def after_relist(self) -> None:
        """Reclaim what was frozen as garbage, then freeze the fresh listings."""
        if not self.enabled or not gc.isenabled():
            return
        with self._lock:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.freezes += 1
            self._last = self.clock()

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
