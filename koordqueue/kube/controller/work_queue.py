"""The writer pool's queue: tasks by priority, first in first out within one.

queue.PriorityQueue is Python code around a Condition (a waiter lock per blocked get, a heap
push and pop per task): under a burst of Jobs its get and put were ~6 % of the controller's
GIL samples (py-spy, bench_controller --jobs 1500; issue 36). Here a task goes to its
priority's deque and one token to a SimpleQueue, whose blocking get is C code that sleeps
without the GIL; a taker woken by a token pops the first task of the most urgent non-empty
priority. Tokens are put after their task and taken before a pop, so a woken taker always
finds a task (perhaps not the one its token came with: a more urgent one, as the
PriorityQueue would have handed it).
"""

from __future__ import annotations

import queue
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class WorkQueue(Generic[T]):
    """`levels` priorities, 0 the most urgent; `take` blocks until a task is there."""

    def __init__(self, levels: int) -> None:
        self._lanes: list[deque[T]] = [deque() for _ in range(levels)]
        self._tokens: queue.SimpleQueue[None] = queue.SimpleQueue()

    def put(self, priority: int, task: T) -> None:
        self._lanes[priority].append(task)
        self._tokens.put(None)

    def take(self) -> T:
        self._tokens.get()
        for lane in self._lanes:
            try:
                return lane.popleft()
            except IndexError:
                continue
        raise AssertionError("a token without its task")  # pragma: no cover

    def __len__(self) -> int:
        """Tasks queued and not yet taken."""
        return sum(len(lane) for lane in self._lanes)
