"""Queue policies: cases of koordinator-sh/koord-queue pkg/queue/queuepolicies.

Sources: `schedulingqueuev2/schedulingqueuev2_test.go` (Priority order), `intelligentqueue/
intelligentqueue_test.go` (Intelligent), and, where Koord-Queue has no test case (Block, and
the Intelligent cursor and blocked-quota rules), the behaviour of `schedulingqueuev2.go` and
`intelligentqueue/methods.go` (Next, findNextQueueUnit, AddQueueUnitInfo, Delete, Update,
AddUnschedulableIfNotPresent); those docstrings say "source" instead of naming a test case.

Koord-Queue's scheduler asks a queue for one unit at a time; koordqueue's engine asks in rounds.
A case's "dequeue order" is the order the round offers units to CheckUsage: admitted units in
`RoundResult.admitted`, failures in `RoundResult.rejected`, both in the order tried. Not
transcribed: queue bookkeeping without an observable order (TestAddQueueUnitInfo's duplicate
error, TestDelete/TestLength/TestFix/TestUpdate internals, TestPriorityQueue_Update's assumed
map), and TestWaitForPodsRunningReserve (preemption, another part of the engine).
"""

from __future__ import annotations

from dataclasses import replace

from koordqueue.domain.engine import AdmissionEngine, RoundResult
from koordqueue.domain.names import (
    BLOCK_TIMEOUT_ANNOTATION,
    PRIORITY_THRESHOLD_ANNOTATION,
    QUOTA_NAME_LABEL,
)
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources

QUOTA = "q"
THREE_MINUTES = 180.0


def make_unit(name: str, priority: int, cpu: str = "1", created: float = 0.0) -> QueueUnit:
    """Like the cases' makeTestQueueUnit: one pod set, in quota `q`, namespace default."""
    return QueueUnit(
        "default",
        name,
        uid=name,
        resource=Resources.of(cpu=cpu),
        priority=priority,
        labels={QUOTA_NAME_LABEL: QUOTA},
        created=created,
    )


def make_engine(
    policy: str, max_cpu: str, annotations: dict[str, str] | None = None
) -> AdmissionEngine:
    engine = AdmissionEngine(oversell_rate="1")
    engine.upsert_quota(QuotaSpec(QUOTA, max=Resources.of(cpu=max_cpu)))
    engine.upsert_queue(QUOTA, policy, annotations)
    return engine


def fill(engine: AdmissionEngine, *fillers: QueueUnit) -> None:
    """Admit units that use the quota before the case starts (running jobs)."""
    for filler in fillers:
        engine.upsert_unit(replace(filler, phase=Phase.RUNNING))


def add(engine: AdmissionEngine, *units: QueueUnit) -> None:
    for unit in units:
        engine.upsert_unit(unit)


def finish(engine: AdmissionEngine, unit: QueueUnit) -> None:
    engine.upsert_unit(replace(unit, phase=Phase.SUCCEED))


def admitted(result: RoundResult) -> list[str]:
    return [u.name for u, _ in result.admitted]


def rejected(result: RoundResult) -> list[str]:
    return [u.name for u, _ in result.rejected]


def intelligent(max_cpu: str, threshold: str = "4") -> AdmissionEngine:
    return make_engine("Intelligent", max_cpu, {PRIORITY_THRESHOLD_ANNOTATION: threshold})


# --- schedulingqueuev2_test.go (Priority) -----------------------------------------------------


def test_priority_queue_dequeues_the_higher_priority_unit_first() -> None:
    """schedulingqueuev2_test.go, TestNext: job1 (priority 10) and job2 (20); job2 comes
    first, job1 after it."""
    engine = make_engine("Priority", "10")
    add(engine, make_unit("job1", 10), make_unit("job2", 20))
    assert admitted(engine.run_round(0.0)) == ["job2", "job1"]


def test_priority_queue_order_is_priority_descending() -> None:
    """schedulingqueuev2_test.go, TestSortedList: job1 (10), job2 (20), job3 (15) are listed
    job2, job3, job1."""
    engine = make_engine("Priority", "0")
    add(engine, make_unit("job1", 10), make_unit("job2", 20), make_unit("job3", 15))
    result = engine.run_round(0.0)
    assert [u.name for u in result.waiting[QUOTA]] == ["job2", "job3", "job1"]


def test_priority_queue_equal_priority_earlier_first_attempt_first() -> None:
    """schedulingqueuev2_test.go, TestLess, "equal priority, a earlier timestamp" and "equal
    priority, b earlier timestamp": the earlier initial attempt comes first, whatever the
    names."""
    engine = make_engine("Priority", "0")
    add(engine, make_unit("pod1", 5, created=1.0), make_unit("pod2", 5, created=0.0))
    assert rejected(engine.run_round(2.0)) == ["pod2", "pod1"]


def test_priority_queue_equal_priority_and_time_orders_by_name() -> None:
    """schedulingqueuev2_test.go, TestLess, "equal priority and timestamp, a.Name < b.Name"
    and "a.Name > b.Name": pod1 before pod2."""
    engine = make_engine("Priority", "0")
    add(engine, make_unit("pod2", 5), make_unit("pod1", 5))
    assert rejected(engine.run_round(0.0)) == ["pod1", "pod2"]


def test_priority_queue_reorders_a_unit_whose_priority_changed() -> None:
    """schedulingqueuev2_test.go, TestPriorityQueue_UpdatePriorityOrder: job1 (10), job2
    (20), job3 (30) are job3, job2, job1; job1 raised to 25 gives job3, job1, job2."""
    engine = make_engine("Priority", "0")
    job1 = make_unit("job1", 10)
    add(engine, job1, make_unit("job2", 20), make_unit("job3", 30))
    assert rejected(engine.run_round(0.0)) == ["job3", "job2", "job1"]
    engine.upsert_unit(replace(job1, priority=25))
    assert rejected(engine.run_round(1.0)) == ["job3", "job1", "job2"]


def test_priority_queue_moves_past_an_unschedulable_unit() -> None:
    """schedulingqueuev2_test.go, TestAddUnschedulableIfNotPresent: under Priority an
    unschedulable unit advances the cursor (nextIdx 0 -> 1), so the next unit is tried and
    admitted although the first does not fit."""
    engine = make_engine("Priority", "2")
    add(engine, make_unit("job1", 10, cpu="3"), make_unit("job2", 5))
    result = engine.run_round(0.0)
    assert rejected(result) == ["job1"]
    assert admitted(result) == ["job2"]


# --- schedulingqueuev2.go (Block): no test case, the source's behaviour -----------------------


def _blocked_queue() -> tuple[AdmissionEngine, QueueUnit, QueueUnit]:
    """Block, 2 CPUs, one running; head (3 CPUs, never fits) before small (1 CPU, fits)."""
    engine = make_engine("Block", "2")
    fill(engine, make_unit("running", 0))
    head, small = make_unit("head", 10, cpu="3"), make_unit("small", 1)
    add(engine, head, small)
    return engine, head, small


def test_block_head_that_does_not_fit_blocks_its_quota() -> None:
    """Source, schedulingqueuev2.go AddUnschedulableIfNotPresent (Block: the unit's quota is
    stored blocked, the cursor reset) and findNextQueueUnit (units of a blocked quota are
    skipped): small, which fits, is not tried behind head."""
    engine, _, _ = _blocked_queue()
    result = engine.run_round(0.0)
    assert rejected(result) == ["head"]
    assert admitted(result) == []


def test_block_quota_stays_blocked_while_nothing_changes() -> None:
    """Source, schedulingqueuev2.go Next (Block): with every unit's quota blocked the queue
    waits (30 s wake-ups) and tries nothing, the head included, until something changes."""
    engine, _, _ = _blocked_queue()
    engine.run_round(0.0)
    for now in (1.0, 30.0, 60.0, 61.0, 120.0, 180.0):
        result = engine.run_round(now)
        assert rejected(result) == [] and admitted(result) == [], now


def test_block_adding_a_unit_retries_the_head_first() -> None:
    """Source, schedulingqueuev2.go AddQueueUnitInfo (the new unit's quota is no longer
    blocked, the cursor reset): the next pass starts at head, which blocks the quota again,
    so neither small nor the newcomer passes it."""
    engine, _, _ = _blocked_queue()
    engine.run_round(0.0)
    add(engine, make_unit("newcomer", 0, created=5.0))
    result = engine.run_round(5.0)
    assert rejected(result) == ["head"]
    assert admitted(result) == []


def test_block_deleting_a_unit_retries_the_head_first() -> None:
    """Source, schedulingqueuev2.go Delete (Block: the deleted unit's quota is no longer
    blocked): head is tried again first and blocks again; small stays behind it."""
    engine, _, _ = _blocked_queue()
    add(engine, make_unit("other", 0, created=1.0))
    engine.run_round(0.0)
    engine.remove_unit("other")
    result = engine.run_round(5.0)
    assert rejected(result) == ["head"]
    assert admitted(result) == []


def test_block_release_lets_the_head_in_first() -> None:
    """Source, schedulingqueuev2.go Update (IsResourceReleased: the quota is no longer
    blocked) with the release making room for head (2 CPUs here): head is admitted first."""
    engine = make_engine("Block", "2")
    running = make_unit("running", 0)
    fill(engine, running)
    add(engine, make_unit("head", 10, cpu="2"), make_unit("small", 1))
    assert rejected(engine.run_round(0.0)) == ["head"]
    finish(engine, running)
    result = engine.run_round(10.0)
    assert admitted(result) == ["head"]
    assert rejected(result) == ["small"]


def test_block_head_that_never_fits_holds_its_quota_after_the_idle_clear() -> None:
    """Source, schedulingqueuev2.go Next (Block): when nothing is found and no unit was handed
    out for 3 minutes, the blocked quotas are cleared and the scan restarts at the same head,
    which blocks the quota again: small never passes a head that never fits."""
    engine, _, _ = _blocked_queue()
    engine.run_round(0.0)
    assert rejected(engine.run_round(THREE_MINUTES)) == []
    result = engine.run_round(THREE_MINUTES + 1)
    assert rejected(result) == ["head"] and admitted(result) == []
    result = engine.run_round(2 * THREE_MINUTES + 2)
    assert rejected(result) == ["head"] and admitted(result) == []


def test_block_timeout_opt_in_lets_small_pass_the_head() -> None:
    """The previous case with koordqueue's opt-in `koord-queue/block-timeout-seconds: "60"`
    (not in Koord-Queue; docs/concepts.md): after 60 s blocked, one Priority-style round
    admits small past head, and head holds the quota again."""
    engine = make_engine("Block", "2", {BLOCK_TIMEOUT_ANNOTATION: "60"})
    fill(engine, make_unit("running", 0))
    add(engine, make_unit("head", 10, cpu="3"), make_unit("small", 1), make_unit("last", 0))
    assert rejected(engine.run_round(0.0)) == ["head"]
    assert rejected(engine.run_round(30.0)) == []
    result = engine.run_round(60.0)
    assert rejected(result) == ["head", "last"]
    assert admitted(result) == ["small"]
    assert rejected(engine.run_round(61.0)) == []


# --- intelligentqueue_test.go and intelligentqueue/methods.go (Intelligent) -------------------


def test_intelligent_threshold_splits_high_from_low() -> None:
    """intelligentqueue_test.go, TestIntelligentQueue_DistributeToQueue (threshold "4"):
    high-job (5) and boundary-job (4) go to the high queue, low-job (2) to the low one. Seen
    from outside: a high unit that does not fit holds the rest, a low one does not."""
    for name, priority, holds in (
        ("high-job", 5, True),
        ("boundary-job", 4, True),
        ("low-job", 2, False),
    ):
        engine = intelligent("2")
        add(engine, make_unit(name, priority, cpu="3"), make_unit("probe", 0, created=1.0))
        result = engine.run_round(2.0)
        assert rejected(result) == [name], name
        assert admitted(result) == ([] if holds else ["probe"]), name


def test_intelligent_high_unit_comes_before_an_earlier_low_unit() -> None:
    """intelligentqueue_test.go, TestIntelligentQueue_Top: low-job (2) added first, then
    high-job (5); the top is high-job."""
    engine = intelligent("10")
    add(engine, make_unit("low-job", 2, created=0.0), make_unit("high-job", 5, created=1.0))
    assert admitted(engine.run_round(2.0)) == ["high-job", "low-job"]


def test_intelligent_threshold_comes_from_the_queue_annotation() -> None:
    """intelligentqueue_test.go, TestIntelligentQueue_ThresholdUpdate: job1 (3) and job2 (5);
    threshold 4: job2 high, job1 low; 6: both low; 2: both high. Seen from outside with job2
    not fitting: it holds job1 exactly when job2 is high and job1 is low, or both are high
    (Block-style: job2 blocks the quota)."""
    for threshold, job1_admitted in (("4", False), ("6", True), ("2", False)):
        engine = intelligent("2", threshold)
        add(engine, make_unit("job1", 3), make_unit("job2", 5, cpu="3"))
        result = engine.run_round(0.0)
        assert rejected(result) == ["job2"], threshold
        assert admitted(result) == (["job1"] if job1_admitted else []), threshold


def test_intelligent_failed_high_unit_is_retried_first() -> None:
    """intelligentqueue_test.go, TestIntelligentQueue_HighPriorityBlockingBehavior, steps 1-2:
    high-job (5) fails and highNextIdx stays 0, so the high unit is the one retried; low-job-1
    to -3 (2) wait behind it. Here: after a release that leaves room for a low unit but not
    for high-job, high-job is tried again and the low units are still not served."""
    engine = intelligent("2")
    filler = make_unit("filler", 0)
    fill(engine, filler, make_unit("filler-2", 0))
    lows = [make_unit(f"low-job-{i}", 2, created=float(i)) for i in (1, 2, 3)]
    add(engine, make_unit("high-job", 5, cpu="2"), *lows)
    assert rejected(engine.run_round(5.0)) == ["high-job"]
    finish(engine, filler)
    result = engine.run_round(6.0)
    assert rejected(result) == ["high-job"]
    assert admitted(result) == []


def test_intelligent_low_units_are_polled_in_order_once_the_high_unit_is_gone() -> None:
    """intelligentqueue_test.go, TestIntelligentQueue_HighPriorityBlockingBehavior, steps 3-6:
    high-job is deleted; low-job-1, -2, -3 (created in that order) are each tried and fail,
    the low cursor advancing 1, 2, 3: polled in FIFO order."""
    engine = intelligent("1")
    fill(engine, make_unit("filler", 0))
    lows = [make_unit(f"low-job-{i}", 2, created=float(i)) for i in (1, 2, 3)]
    add(engine, make_unit("high-job", 5), *lows)
    assert rejected(engine.run_round(5.0)) == ["high-job"]
    engine.remove_unit("high-job")
    assert rejected(engine.run_round(6.0)) == ["low-job-1", "low-job-2", "low-job-3"]


def test_intelligent_higher_priority_comes_first() -> None:
    """intelligentqueue_test.go, TestPriorityLess, "higher priority should come first" and
    "lower priority should come after": job1 (10) before job2 (5), same attempt time. Both
    are low here (threshold 100), so job1's failure holds nothing and both are tried."""
    engine = intelligent("0", threshold="100")
    add(engine, make_unit("job2", 5), make_unit("job1", 10))
    assert rejected(engine.run_round(0.0)) == ["job1", "job2"]


def test_intelligent_no_low_unit_while_a_blocked_high_unit_waits() -> None:
    """Source, intelligentqueue/methods.go findNextQueueUnit: a high unit of a blocked quota
    is skipped but still counted as available, and with any available high unit no low unit
    is returned. Round after round nothing is served though the low unit fits."""
    engine = intelligent("2")
    fill(engine, make_unit("filler", 0))
    add(engine, make_unit("high-job", 5, cpu="2"), make_unit("low-job", 2))
    assert rejected(engine.run_round(0.0)) == ["high-job"]
    for now in (1.0, 30.0, 60.0, THREE_MINUTES):
        result = engine.run_round(now)
        assert admitted(result) == [] and rejected(result) == [], now


def test_intelligent_adding_a_unit_does_not_lift_the_block() -> None:
    """Source, intelligentqueue/methods.go AddQueueUnitInfo: unlike Block, it resets the
    cursor but leaves the blocked quota, so a new high unit that would fit waits too."""
    engine = intelligent("2")
    fill(engine, make_unit("filler", 0))
    add(engine, make_unit("high-job", 5, cpu="2"), make_unit("low-job", 2))
    engine.run_round(0.0)
    add(engine, make_unit("new-high", 9, created=1.0))
    result = engine.run_round(1.0)
    assert admitted(result) == [] and rejected(result) == []


def test_intelligent_idle_clear_retries_the_high_head() -> None:
    """Source, intelligentqueue/methods.go Next: nothing found and no unit handed out for 3
    minutes clears the blocked quotas; the high head is tried again (and blocks again)."""
    engine = intelligent("2")
    fill(engine, make_unit("filler", 0))
    add(engine, make_unit("high-job", 5, cpu="2"), make_unit("low-job", 2))
    engine.run_round(0.0)
    result = engine.run_round(THREE_MINUTES + 1)
    assert rejected(result) == ["high-job"] and admitted(result) == []


def test_intelligent_low_pass_restarts_at_the_earliest_low_unit() -> None:
    """Source, intelligentqueue/methods.go Next and Update: a pass that finds nothing more and
    a release both reset lowNextIdx to the head, so after a release the earliest low unit is
    admitted, not a later one."""
    engine = intelligent("2")
    filler = make_unit("filler", 0)
    fill(engine, filler, make_unit("filler-2", 0))
    add(engine, *(make_unit(f"low-job-{i}", 2, created=float(i)) for i in (1, 2, 3)))
    assert rejected(engine.run_round(5.0)) == ["low-job-1", "low-job-2", "low-job-3"]
    assert rejected(engine.run_round(6.0)) == ["low-job-1", "low-job-2", "low-job-3"]
    finish(engine, filler)
    result = engine.run_round(7.0)
    assert admitted(result) == ["low-job-1"]
    assert rejected(result) == ["low-job-2", "low-job-3"]
