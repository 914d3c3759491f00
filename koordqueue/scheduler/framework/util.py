"""Priority queues in a session's orders: by a comparator (heapq with a `less` function), or
by keys taken at push time (`KeyedJobQueue`)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from koordqueue.scheduler.api.job_info import JobInfo

T = TypeVar("T")


class _Entry(Generic[T]):
    __slots__ = ("item", "less")

    def __init__(self, item: T, less: Callable[[T, T], bool]) -> None:
        self.item = item
        self.less = less

    def __lt__(self, other: _Entry[T]) -> bool:
        return self.less(self.item, other.item)


class PriorityQueue(Generic[T]):
    """Pop returns the item that is `less` than all others (the session's order functions)."""

    __slots__ = ("_heap", "_less")

    def __init__(self, less: Callable[[T, T], bool], items: Iterable[T] = ()) -> None:
        self._less = less
        self._heap: list[_Entry[T]] = [_Entry(i, less) for i in items]
        heapq.heapify(self._heap)

    def push(self, item: T) -> None:
        """Insert an item."""
        heapq.heappush(self._heap, _Entry(item, self._less))

    def pop(self) -> T:
        """Remove and return the first item."""
        return heapq.heappop(self._heap).item

    def items(self) -> list[T]:
        """The queued items, in no particular order."""
        return [entry.item for entry in self._heap]

    def empty(self) -> bool:
        """True when nothing is queued."""
        return not self._heap

    def __len__(self) -> int:
        return len(self._heap)


class KeyedJobQueue:
    """A job queue ordered by keys taken at push time (`Session.job_order_key`).

    Why: a heap of comparisons asks every job order plugin twice per comparison, ~16
    comparisons per pop; a key is computed once per push. The same pops as the session's
    comparisons while a queued job's tasks keep their statuses (enqueue changes only the
    phase of the job it popped, allocate only the tasks of the job it popped, which it
    pushes again with a fresh key); the keys end with creation time and uid, a total
    order, so the minimum is unique.
    """

    __slots__ = ("_count", "_heap", "_key")

    def __init__(self, key: Callable[[JobInfo], tuple[Any, ...]]) -> None:
        self._key = key
        self._heap: list[tuple[tuple[Any, ...], int, JobInfo]] = []
        self._count = 0  # a tie-break that never reaches the job (uids make keys unique)

    def push(self, job: JobInfo) -> None:
        """Insert a job under its current key."""
        self._count += 1
        heapq.heappush(self._heap, (self._key(job), self._count, job))

    def pop(self) -> JobInfo:
        """Remove and return the first job."""
        return heapq.heappop(self._heap)[2]

    def empty(self) -> bool:
        """True when nothing is queued."""
        return not self._heap


JobQueue = PriorityQueue[JobInfo] | KeyedJobQueue
"""A queue of jobs in the session's job order (`Session.job_queue`)."""
