"""Event aggregation and spam filtering, as client-go's EventCorrelator does them."""

from __future__ import annotations

from koordqueue.kube.event_correlator import AGGREGATE_PREFIX, EventCorrelator

POD = ("uid-1", "Pod")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_ordinary_event_keeps_its_message_and_is_deduplicated_on_it() -> None:
    correlator = EventCorrelator(clock=Clock())
    assert correlator.correlate(POD, "Normal", "Scheduled", "to n1") == ("to n1", "to n1")


def test_the_tenth_different_message_of_one_reason_is_folded_into_one_aggregate() -> None:
    correlator = EventCorrelator(clock=Clock())
    seen = [correlator.correlate(POD, "Warning", "FailedScheduling", f"m{i}") for i in range(12)]
    assert seen[:9] == [(f"m{i}", f"m{i}") for i in range(9)]
    assert seen[9:] == [(AGGREGATE_PREFIX + f"m{i}", AGGREGATE_PREFIX) for i in range(9, 12)]


def test_aggregation_counts_per_object_type_and_reason() -> None:
    correlator = EventCorrelator(clock=Clock())
    for i in range(9):
        correlator.correlate(POD, "Warning", "FailedScheduling", f"m{i}")
    assert correlator.correlate(("uid-2", "Pod"), "Warning", "FailedScheduling", "x") == ("x", "x")
    assert correlator.correlate(POD, "Warning", "Evict", "x") == ("x", "x")


def test_similar_messages_older_than_the_window_start_a_new_count() -> None:
    clock = Clock()
    correlator = EventCorrelator(clock=clock, similar_window=600.0)
    for i in range(9):
        correlator.correlate(POD, "Warning", "FailedScheduling", f"m{i}")
    clock.now = 601.0
    assert correlator.correlate(POD, "Warning", "FailedScheduling", "late") == ("late", "late")


def test_the_spam_filter_allows_a_burst_then_one_event_per_refill_interval() -> None:
    clock = Clock()
    correlator = EventCorrelator(clock=clock, burst=25, refill_seconds=300.0)
    allowed = [correlator.correlate(POD, "Normal", "R", "same") for _ in range(30)]
    assert sum(a is not None for a in allowed) == 25
    assert allowed[25:] == [None] * 5
    clock.now = 299.0
    assert correlator.correlate(POD, "Normal", "R", "same") is None
    clock.now = 300.5
    assert correlator.correlate(POD, "Normal", "R", "same") is not None
    assert correlator.correlate(POD, "Normal", "R", "same") is None


def test_the_spam_filter_is_per_object() -> None:
    correlator = EventCorrelator(clock=Clock(), burst=1)
    assert correlator.correlate(POD, "Normal", "R", "a") is not None
    assert correlator.correlate(POD, "Normal", "R", "a") is None
    assert correlator.correlate(("uid-2", "Pod"), "Normal", "R", "a") is not None


def test_each_cache_keeps_client_gos_4096_objects_the_least_recently_used_out_first() -> None:
    """client-go's maxLruCacheEntries: an object not heard of for 4096 others is forgotten
    (its spam bucket full again), so the caches stop growing under churn; 4095 keep it."""
    for others, forgotten in ((4095, False), (4096, True)):
        correlator = EventCorrelator(clock=Clock(), burst=1)
        assert correlator.correlate(POD, "Normal", "R", "a") is not None
        for i in range(others):
            correlator.correlate((f"other-{i}", "Pod"), "Normal", "R", "a")
        assert (correlator.correlate(POD, "Normal", "R", "a") is not None) is forgotten
