"""A priority queue ordered by a session comparator (heapq with a `less` function)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

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
