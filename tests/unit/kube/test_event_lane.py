"""The scheduler's event lane: `Scheduled` Events held through a burst of binds, none lost."""

from __future__ import annotations

import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.kube.events import AsyncEventRecorder, EventRecorder
from koordqueue.kube.scheduler.event_lane import EventLane, Scheduled


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def pod(i: int) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}"}}


def scheduled(i: int) -> Scheduled:
    return (pod(i), "Normal", "Scheduled", f"assigned p{i}")


class Sink:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []  # (pod name, stamp)

    def __call__(self, events: list[Scheduled], at: str) -> None:
        self.sent.extend((str(e[0]["metadata"]["name"]), at) for e in events)


def lane(sink: Sink, clock: Clock, **kw: Any) -> EventLane:
    stamp = lambda: f"t{clock.now:.1f}"  # noqa: E731
    return EventLane(sink, clock=clock, stamp=stamp, start=False, busy_rate=10.0, window=1.0,
                     max_defer=5.0, **kw)  # fmt: skip


def test_at_a_quiet_pace_each_event_goes_with_its_bind() -> None:
    clock, sink = Clock(), Sink()
    events = lane(sink, clock)
    for i in range(5):
        assert events.offer([scheduled(i)], binds=1) is True  # the caller writes it
        clock.now += 0.5
    assert events.held == 0 and events.pump() == 0 and sink.sent == []


def test_a_burst_holds_events_until_the_pace_drops_then_writes_them_in_order() -> None:
    clock, sink = Clock(), Sink()
    events = lane(sink, clock)
    assert events.offer([scheduled(i) for i in range(8)], binds=8) is True  # 8 < 10 a second
    assert events.offer([scheduled(i) for i in range(8, 12)], binds=4) is False  # 12: a burst
    clock.now += 0.2
    assert events.offer([scheduled(12)], binds=1) is False
    assert events.held == 5
    assert events.pump() == 0  # still 13 binds in the last second
    clock.now += 0.9  # the first 12 binds are older than the window now
    assert events.pump() == 5
    assert [name for name, _ in sink.sent] == ["p8", "p9", "p10", "p11", "p12"]
    # each carries the time of its bind, not of the write
    assert [at for _, at in sink.sent] == ["t100.0"] * 4 + ["t100.2"]
    assert events.held == 0


def test_an_event_waits_at_most_max_defer_through_a_long_burst() -> None:
    clock, sink = Clock(), Sink()
    events = lane(sink, clock)
    for i in range(80):  # 20 binds a second for 4 s: busy from the tenth on
        assert events.offer([scheduled(i)], binds=1) is (i < 9)
        clock.now += 0.05
        events.pump()
    assert sink.sent == []
    for i in range(80, 120):  # 2 s more (to t = 106): those held by t = 101 come due, in order
        events.offer([scheduled(i)], binds=1)
        clock.now += 0.05
        events.pump()
    names = [name for name, _ in sink.sent]
    assert names == [f"p{i}" for i in range(9, 9 + len(names))] and len(names) in (11, 12)
    assert events.held == 111 - len(names)


def test_once_events_are_held_later_ones_queue_behind_them_even_at_a_quiet_pace() -> None:
    clock, sink = Clock(), Sink()
    events = lane(sink, clock)
    events.offer([], binds=20)  # a burst of binds whose events were refused (none to write)
    assert events.offer([scheduled(1)], binds=1) is False
    clock.now += 2.0
    assert events.offer([scheduled(2)], binds=1) is False  # p1 is still held: behind it
    assert events.pump() == 2 and [n for n, _ in sink.sent] == ["p1", "p2"]


def test_a_burst_that_resumes_stops_a_flush_after_the_chunk_in_flight() -> None:
    clock = Clock()
    sink = Sink()
    lane_: list[EventLane] = []

    def send(events: list[Scheduled], at: str) -> None:
        sink(events, at)
        if len(sink.sent) == 32:  # binds again while the first chunk is written
            lane_[0].offer([], binds=50)

    events = EventLane(send, clock=clock, start=False, busy_rate=10.0, max_defer=5.0)
    lane_.append(events)
    events.offer([scheduled(i) for i in range(100)], binds=100)
    clock.now += 1.5  # the pace dropped: due, a chunk at a time
    assert events.pump() == 32 and events.held == 68
    clock.now += 1.5
    assert events.pump() == 68 and [n for n, _ in sink.sent] == [f"p{i}" for i in range(100)]


def test_flush_and_close_write_everything_held() -> None:
    clock, sink = Clock(), Sink()
    events = lane(sink, clock)
    events.offer([scheduled(i) for i in range(40)], binds=40)
    assert events.held == 40 and events.flush() == 40
    events.offer([scheduled(40)], binds=1)
    events.close()
    assert [n for n, _ in sink.sent] == [f"p{i}" for i in range(41)]


def test_a_failing_write_does_not_stop_the_lane() -> None:
    clock = Clock()
    calls: list[int] = []

    def send(events: list[Scheduled], at: str) -> None:
        calls.append(len(events))
        if len(calls) == 1:
            raise RuntimeError("API down")

    events = EventLane(send, clock=clock, start=False, busy_rate=10.0)
    events.offer([scheduled(i) for i in range(70)], binds=70)
    assert events.flush() == 70 and calls == [32, 32, 6]


def test_the_lanes_thread_writes_held_events_once_the_burst_is_over() -> None:
    sink = Sink()
    done = threading.Event()

    def send(events: list[Scheduled], at: str) -> None:
        sink(events, at)
        if len(sink.sent) >= 30:
            done.set()

    events = EventLane(send, busy_rate=10.0, window=0.2)
    assert events.offer([scheduled(i) for i in range(30)], binds=30) is False
    assert done.wait(5.0), "held events never written"
    assert [n for n, _ in sink.sent] == [f"p{i}" for i in range(30)]
    events.close()


def test_held_events_reach_the_api_with_their_binds_time() -> None:
    clock = Clock()
    posted: list[dict[str, Any]] = []

    def post_all(posts: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        posted.extend(body for _, body in posts)
        return [{"metadata": {"name": f"e{i}"}} for i in range(len(posts))]

    recorder = AsyncEventRecorder(EventRecorder(None))  # type: ignore[arg-type]
    events = EventLane(lambda ev, at: recorder.record_all(ev, post_all, at=at), clock=clock,
                       stamp=lambda: "2026-12-06T08:00:00Z", start=False, busy_rate=1.0)
    assert events.offer([scheduled(1), scheduled(2)], binds=2) is False
    clock.now += 2.0
    assert events.pump() == 2
    assert [b["involvedObject"]["name"] for b in posted] == ["p1", "p2"]
    assert {b["firstTimestamp"] for b in posted} == {"2026-12-06T08:00:00Z"}
    assert {b["lastTimestamp"] for b in posted} == {"2026-12-06T08:00:00Z"}
    recorder.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 4), st.floats(0.0, 3.0)),
                max_size=40))
def test_every_event_is_written_once_in_order(steps: list[tuple[int, int, float]]) -> None:
    """Whatever the pace: each Event offered is written exactly once (by the caller when the
    lane says so, else by the lane), and the lane's own writes keep the offered order."""
    clock, sink = Clock(), Sink()
    events = lane(sink, clock)
    by_caller: list[str] = []
    offered: list[str] = []
    n = 0
    for binds, count, wait in steps:
        batch = [scheduled(n + i) for i in range(count)]
        n += count
        offered += [str(e[0]["metadata"]["name"]) for e in batch]
        if events.offer(batch, binds=binds):
            by_caller += [str(e[0]["metadata"]["name"]) for e in batch]
        clock.now += wait
        events.pump()
    events.close()
    by_lane = [name for name, _ in sink.sent]
    assert sorted(by_caller + by_lane) == sorted(offered)
    assert by_lane == [x for x in offered if x in set(by_lane)]
    assert events.held == 0


def test_binds_without_events_do_not_pile_up_in_the_pace_window() -> None:
    clock, sink = Clock(), Sink()
    events = lane(sink, clock)
    for _ in range(1000):
        assert events.offer([], binds=1) is True  # (binds whose events are not written)
        clock.now += 0.01
    assert len(events._binds) <= 101  # one window's worth
