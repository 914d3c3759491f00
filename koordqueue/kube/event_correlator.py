"""What client-go's EventCorrelator does before an Event is written: aggregate and spam-filter.

A scheduler that fails to place a thousand pods every 20 ms would otherwise write Events faster
than anyone can read them. Two rules, with client-go's defaults:

- Aggregation: once one object has had `max_similar` (10) events of the same type and reason
  with *different* messages inside `similar_window` (10 min), further ones are folded into a
  single event whose message starts with "(combined from similar events): ".
- Spam filter: a token bucket per object (and source): a burst of `burst` (25) events, then one
  every `refill_seconds` (5 min). An event that finds the bucket empty is dropped.

Identical repeats are not this module's business: the recorder turns them into a `count` bump.
Pure apart from the injected clock, so the rules are testable without a server or a sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from cachetools import LRUCache

AGGREGATE_PREFIX: Final = "(combined from similar events): "
MAX_SIMILAR: Final = 10
SIMILAR_WINDOW: Final = 600.0
SPAM_BURST: Final = 25
SPAM_REFILL_SECONDS: Final = 300.0
MAX_OBJECTS: Final = 4096
"""Entries each cache keeps, least recently used out first: client-go's maxLruCacheEntries.
20,000 before: under churn (objects made and deleted) the caches filled for hours and a
leader's RSS grew ~15 MB/h in the 40-minute soak (bench/README.md)."""

ObjectKey = tuple[str, str]
"""(object identity — uid, or namespace/name — , kind)."""


@dataclass(slots=True)
class _Similar:
    messages: set[str]
    first_seen: float


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class EventCorrelator:
    """Decides, per event, the message to write (possibly aggregated) or None to drop it."""

    def __init__(
        self,
        *,
        max_similar: int = MAX_SIMILAR,
        similar_window: float = SIMILAR_WINDOW,
        burst: int = SPAM_BURST,
        refill_seconds: float = SPAM_REFILL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        max_objects: int = MAX_OBJECTS,
    ) -> None:
        self._max_similar = max_similar
        self._window = similar_window
        self._burst = burst
        self._refill = refill_seconds
        self._clock = clock
        self._similar: LRUCache[tuple[ObjectKey, str, str], _Similar] = LRUCache(max_objects)
        self._buckets: LRUCache[ObjectKey, _Bucket] = LRUCache(max_objects)

    def correlate(
        self, obj: ObjectKey, event_type: str, reason: str, message: str
    ) -> tuple[str, str] | None:
        """(message to record, key the recorder de-duplicates on), or None to drop the event.

        An aggregated event shares one key, so it stays one Event whose message and count
        move, as client-go's aggregate event does.
        """
        now = self._clock()
        if not self._take_token(obj, now):
            return None
        key = (obj, event_type, reason)
        similar = self._similar.get(key)
        if similar is None or now - similar.first_seen > self._window:
            similar = self._similar[key] = _Similar(set(), now)
        if len(similar.messages) < self._max_similar:
            similar.messages.add(message)
        if len(similar.messages) >= self._max_similar:
            return AGGREGATE_PREFIX + message, AGGREGATE_PREFIX
        return message, message

    def _take_token(self, obj: ObjectKey, now: float) -> bool:
        bucket = self._buckets.get(obj)
        if bucket is None:
            bucket = self._buckets[obj] = _Bucket(float(self._burst), now)
        else:
            refill = (now - bucket.updated) / self._refill if self._refill > 0 else self._burst
            bucket.tokens = min(float(self._burst), bucket.tokens + refill)
            bucket.updated = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True
