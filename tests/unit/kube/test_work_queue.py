"""The writer pool's queue (kube/controller/work_queue.py): the order queue.PriorityQueue
gave (most urgent priority first, first in first out within one), and no task lost or handed
twice when many threads put and take at once."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.kube.controller.work_queue import WorkQueue


@settings(max_examples=200, deadline=None)
@given(puts=st.lists(st.integers(min_value=0, max_value=3), max_size=40))
def test_tasks_come_out_most_urgent_first_and_in_order_within_a_priority(
    puts: list[int],
) -> None:
    q: WorkQueue[tuple[int, int]] = WorkQueue(4)
    for order, priority in enumerate(puts):
        q.put(priority, (priority, order))
    assert len(q) == len(puts)
    taken = [q.take() for _ in puts]
    assert taken == sorted(taken)  # (priority, order): what the PriorityQueue's tuples gave
    assert len(q) == 0


def test_takes_interleaved_with_puts_follow_priority_then_arrival() -> None:
    q: WorkQueue[str] = WorkQueue(3)
    q.put(2, "event")
    q.put(1, "start")
    assert q.take() == "start"
    q.put(0, "finish-a")
    q.put(0, "finish-b")
    assert [q.take(), q.take(), q.take()] == ["finish-a", "finish-b", "event"]


def test_many_threads_each_task_is_taken_exactly_once() -> None:
    q: WorkQueue[int | None] = WorkQueue(3)
    taken: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        while (task := q.take()) is not None:
            with lock:
                taken.append(task)

    workers = [threading.Thread(target=worker) for _ in range(8)]
    for t in workers:
        t.start()

    def producer(base: int) -> None:
        for i in range(2000):
            q.put(i % 3, base + i)

    producers = [threading.Thread(target=producer, args=(k * 10_000,)) for k in range(4)]
    for t in producers:
        t.start()
    for t in producers:
        t.join(30)
    for _ in workers:
        q.put(2, None)  # after everything of its priority
    for t in workers:
        t.join(30)
    assert sorted(taken) == sorted(k * 10_000 + i for k in range(4) for i in range(2000))
