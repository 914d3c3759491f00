"""Issue 35 point 4: status.requeueState, the structured back-off (QueueUnitRequeueState).

Transcribed from Koord-Queue's pkg/utils/requeue_test.go: the delay grows from the base and is
capped (bounds allow the ±10 % jitter, repeated so the jitter cannot pass by luck), a zero base
falls back to 10 s, the count climbs from the recorded one and requeueAt is now + delay, the
flat back-off applies without a recorded state, and running clears it; and from
requeuestate_test.go: count 1 with requeueAt after lastUpdateTime, then count 2 later.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain import requeue
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import Phase, QueueUnit, queue_unit_from_object
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import BackingOff, outcome_of
from koordqueue.kube.controller.status import backoff_after, requeue_object


@pytest.mark.parametrize(
    ("attempt", "low", "high"),
    [(1, 9.0, 11.0), (2, 18.0, 22.0), (3, 36.0, 44.0), (30, 810.0, 990.0)],
)
def test_the_delay_doubles_from_the_base_and_is_capped(
    attempt: int, low: float, high: float
) -> None:
    rng = random.Random(attempt)
    for _ in range(50):
        assert low <= requeue.delay(10.0, attempt, rng) <= high


def test_a_zero_base_falls_back_to_ten_seconds() -> None:
    assert 9.0 <= requeue.delay(0.0, 1) <= 11.0


@pytest.mark.parametrize(("previous", "count"), [(None, 1), (1, 2), (7, 8)])
def test_the_count_climbs_from_the_recorded_one_and_requeue_at_is_now_plus_delay(
    previous: int | None, count: int
) -> None:
    prior = None if previous is None else requeue.RequeueState(previous, 0.0)
    state = requeue.record(prior, 10.0, 1000.25, random.Random(0))
    assert state.count == count
    assert state.requeue_at > 1000.25 and state.requeue_at == int(state.requeue_at)


def test_without_a_recorded_state_the_flat_back_off_applies() -> None:
    assert requeue.remaining(requeue.RequeueState(1, 120.0), 30.0, 0.0, 100.0) == 20.0
    assert requeue.remaining(requeue.RequeueState(3, 99.0), 30.0, 0.0, 100.0) < 0
    assert requeue.remaining(None, 30.0, 95.0, 100.0) == 25.0
    assert requeue.remaining(None, 30.0, 40.0, 100.0) < 0


@given(st.floats(0.0, 1e9), st.floats(0.0, 100.0), st.integers(0, 40))
def test_requeue_at_is_always_after_the_write_that_records_it(
    now: float, base: float, previous: int
) -> None:
    """requeuestate_test.go: requeueAt after lastUpdateTime (both stored to the second)."""
    prior = requeue.RequeueState(previous, 0.0) if previous else None
    state = requeue.record(prior, base, now)
    assert int(state.requeue_at) > int(now)
    assert state.requeue_at - now <= requeue.MAX_DELAY * 1.1 + 1


def test_a_second_back_off_lands_later_than_the_first() -> None:
    first = requeue.record(None, 1.0, 100.0, random.Random(1))
    second = requeue.record(first, 1.0, 100.0, random.Random(1))
    assert (first.count, second.count) == (1, 2)
    assert second.requeue_at > first.requeue_at


def test_the_job_extension_waits_until_requeue_at() -> None:
    obj = {"status": {"lastUpdateTime": "2026-12-04T16:00:00Z",
                      "requeueState": {"count": 2, "requeueAt": "2026-12-04T16:00:21Z"}}}
    assert backoff_after(obj, 0.0, structured=True) == 21.0
    assert backoff_after(obj, 3.0, structured=False) == 3.0  # gate off: the state is ignored
    assert backoff_after({"status": {}}, 3.0, structured=True) == 3.0


def test_a_unit_seen_backing_off_is_not_offered_before_its_requeue_at() -> None:
    """After a restart (or in explain) the deadline comes from the object, not memory."""
    obj = {
        "metadata": {"name": "u", "namespace": "ns", "uid": "u",
                     "labels": {QUOTA_NAME_LABEL: "q"}},
        "spec": {"resource": {"cpu": "1"}},
        "status": {"phase": "TimeoutBackoff",
                   "requeueState": requeue_object(requeue.RequeueState(2, 2_000_000_000.0))},
    }
    unit = queue_unit_from_object(obj)
    assert (unit.requeue_count, unit.requeue_at) == (2, 2_000_000_000.0)
    e = AdmissionEngine()
    e.upsert_quota(QuotaSpec("q", max=Resources.of(cpu="1")))
    e.upsert_queue("q", "Priority", None)
    e.upsert_unit(unit)
    outcome = outcome_of(e.run_round(1_999_999_000.0).outcomes, "u")
    assert isinstance(outcome, BackingOff) and outcome.until == 2_000_000_000.0
    assert outcome_of(e.run_round(2_000_000_001.0).outcomes, "u") is not None
    assert e.is_admitted("u")


def test_a_fresh_unit_without_state_is_offered_at_once() -> None:
    unit = QueueUnit("ns", "u", uid="u", resource=Resources.of(cpu="1"),
                     labels={QUOTA_NAME_LABEL: "q"}, phase=Phase.BACKOFF)
    e = AdmissionEngine()
    e.upsert_quota(QuotaSpec("q", max=Resources.of(cpu="1")))
    e.upsert_queue("q", "Priority", None)
    e.upsert_unit(unit)
    e.run_round(0.0)
    assert e.is_admitted("u")
