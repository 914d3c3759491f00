"""A Warning event once per cause: remember what was said about each object, say it again
only when it changes.

Level-triggered loops see the same cause at every session and every resync; an event each
time buries the one line a person needs (and the recorder's count bumps are API writes too).
`PostedCauses` keeps, per object and reason, the last message posted: `fresh` says whether
this one is new (and remembers it), `seen` records one already shown (a condition found on
the object after a restart, so the new leader does not repeat it), `keep` forgets objects
that are gone. Thread-safe: events are posted from worker threads.
"""

from __future__ import annotations

import threading
from collections.abc import Container


class PostedCauses:
    """The last message posted per (object uid, reason)."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def fresh(self, uid: str, reason: str, message: str) -> bool:
        """True (and remembered) when `message` is not what was last posted for the object
        and reason: post it; False: it was said already."""
        key = (uid, reason)
        with self._lock:
            if self._last.get(key) == message:
                return False
            self._last[key] = message
            return True

    def seen(self, uid: str, reason: str, message: str) -> None:
        """The object already shows this cause: remember it as posted."""
        with self._lock:
            self._last[(uid, reason)] = message

    def forget(self, uid: str, reason: str) -> None:
        """The cause went away (the pod was bound): a recurrence is posted again."""
        with self._lock:
            self._last.pop((uid, reason), None)

    def keep(self, *live: Container[str]) -> None:
        """Forget every object in none of `live` (deleted objects)."""
        with self._lock:
            for key in [k for k in self._last if not any(k[0] in c for c in live)]:
                del self._last[key]
