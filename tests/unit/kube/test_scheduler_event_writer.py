"""The scheduler's asynchronous event writer shares wake-ups between a burst's events.

Waking the idle writer thread for every `Scheduled` event cost more CPU than recording it
(issue 19): once its queue is empty the writer lingers before sleeping on it, so events
recorded meanwhile are written in the same wake-up; `flush` and `close` never wait for a
linger to end.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from koordqueue.kube.events import AsyncEventRecorder, EventRecorder

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u"}}


class Api:
    def __init__(self) -> None:
        self.threads: list[int] = []
        self.created = threading.Event()

    def create(self, kind: Any, body: dict[str, Any], namespace: str | None = None) -> Any:
        self.threads.append(threading.get_ident())
        self.created.set()
        return {"metadata": {"name": f"e{len(self.threads)}"}}


def test_events_recorded_while_the_writer_lingers_wait_for_it() -> None:
    api = Api()
    events = AsyncEventRecorder(EventRecorder(api), linger=30.0)  # type: ignore[arg-type]
    events.record(POD, "Normal", "Scheduled", "first")
    assert api.created.wait(5)
    time.sleep(0.05)  # the writer has emptied its queue: it lingers now
    events.record(POD, "Normal", "Scheduled", "second")
    time.sleep(0.05)
    assert len(api.threads) == 1  # not woken for the second one
    started = time.monotonic()
    events.flush()  # cuts the linger short
    assert len(api.threads) == 2 and time.monotonic() - started < 5
    events.close()


def test_close_does_not_wait_for_a_linger() -> None:
    api = Api()
    events = AsyncEventRecorder(EventRecorder(api), linger=30.0)  # type: ignore[arg-type]
    events.record(POD, "Normal", "Scheduled", "only")
    assert api.created.wait(5)
    started = time.monotonic()
    events.close()
    assert time.monotonic() - started < 5


def test_without_linger_each_event_is_written_at_once() -> None:
    api = Api()
    events = AsyncEventRecorder(EventRecorder(api), linger=0.0)  # type: ignore[arg-type]
    for message in ("a", "b"):
        api.created.clear()
        events.record(POD, "Normal", "Scheduled", message)
        assert api.created.wait(5)
    events.close()
