"""Issue 35 point 3: QueueUnit conditions mirror the phase with Koord-Queue's types and reasons.

The table is Koord-Queue's TestSyncQueueUnitConditions (pkg/utils/conditions_test.go): each
phase's (type, status, reason) triples, what must stay absent, and that a second sync of the
same phase changes nothing. Then its TestSetQueueUnitEvictedCondition and
TestSetConditionKeepsLastTransitionTimeStable, and hypothesis over phase sequences.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain import conditions as c
from koordqueue.domain.features import parse_feature_gates
from koordqueue.domain.queue_unit import Phase
from koordqueue.kube.controller.status import seen_conditions, unit_status_patch

T0, T1, T2 = "2026-12-04T16:00:00Z", "2026-12-04T16:00:05Z", "2026-12-04T16:00:09Z"

Triple = tuple[str, bool, str]


def triples(conds: c.Conditions) -> set[Triple]:
    return {(x.type, x.status, x.reason) for x in conds}


CASES: list[tuple[str, Phase, str, c.Conditions, set[Triple], set[str]]] = [
    (
        "enqueued reports pending quota and admission",
        Phase.ENQUEUED,
        "",
        (),
        {(c.QUOTA_RESERVED, False, "Pending"), (c.ADMITTED, False, "Pending")},
        {c.EVICTED, c.PODS_READY},  # a unit never evicted gains no Evicted condition
    ),
    (
        "reserved reports quota reserved but not admitted",
        Phase.RESERVED,
        "",
        (),
        {
            (c.QUOTA_RESERVED, True, "QuotaReserved"),
            (c.ADMITTED, False, "WaitingForAdmissionChecks"),
        },
        set(),
    ),
    (
        "dequeued reports admitted",
        Phase.DEQUEUED,
        "",
        (),
        {(c.QUOTA_RESERVED, True, "QuotaReserved"), (c.ADMITTED, True, "Admitted")},
        set(),
    ),
    (
        "schedReady reports admitted",
        Phase.SCHED_READY,
        "",
        (),
        {(c.ADMITTED, True, "Admitted")},
        set(),
    ),
    (
        "running reports pods ready",
        Phase.RUNNING,
        "",
        (),
        {(c.ADMITTED, True, "Admitted"), (c.PODS_READY, True, "PodsRunning")},
        set(),
    ),
    ("succeed reports finished", Phase.SUCCEED, "", (), {(c.FINISHED, True, "Succeeded")}, set()),
    ("failed reports finished", Phase.FAILED, "", (), {(c.FINISHED, True, "Failed")}, set()),
    (
        "backoff reports eviction and drops the reservation",
        Phase.BACKOFF,
        "running timeout",
        (),
        {(c.QUOTA_RESERVED, False, "BackoffTimeout"), (c.EVICTED, True, "BackoffTimeout")},
        set(),
    ),
    (
        "schedFailed reports admission failure",
        Phase.SCHED_FAILED,
        "no node",
        (),
        {(c.ADMITTED, False, "SchedulingFailed")},
        set(),
    ),
    (
        "requeue after eviction clears the evicted condition",
        Phase.ENQUEUED,
        "",
        (c.Condition(c.EVICTED, True, "Preempted", "preempted", T0),),
        {(c.EVICTED, False, "Requeued")},
        set(),
    ),
]


@pytest.mark.parametrize(
    ("phase", "message", "start", "want", "absent"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_sync_mirrors_the_phase_and_a_second_sync_changes_nothing(
    phase: Phase, message: str, start: c.Conditions, want: set[Triple], absent: set[str]
) -> None:
    synced = c.sync(start, phase, message, T1)
    assert synced != start
    assert want <= triples(synced)
    assert not absent & {x.type for x in synced}
    assert c.sync(synced, phase, message, T2) == synced


@pytest.mark.parametrize(
    ("reason", "start"),
    [
        (c.REASON_DEACTIVATED, ()),
        (c.REASON_MAXIMUM_EXECUTION_TIME_EXCEEDED, ()),
        (c.REASON_PREEMPTED, (c.Condition(c.EVICTED, True, c.REASON_BACKOFF_TIMEOUT, "b", T0),)),
    ],
)
def test_evict_sets_evicted_true_and_admitted_false_with_the_precise_reason(
    reason: str, start: c.Conditions
) -> None:
    admitted = c.sync(start, Phase.DEQUEUED, "", T0)
    evicted = c.evict(admitted, reason, "why", T1)
    assert (c.EVICTED, True, reason) in triples(evicted)
    assert (c.ADMITTED, False, reason) in triples(evicted)
    assert c.is_true(evicted, c.EVICTED)
    found = c.find(evicted, c.EVICTED)
    assert found is not None and found.message == "why"


def test_last_transition_time_moves_only_when_the_status_flips() -> None:
    conds = c.sync((), Phase.DEQUEUED, "", T0)
    same_status = c.set_condition(
        conds, c.Condition(c.ADMITTED, True, c.REASON_ADMITTED, "another message"), T1
    )
    found = c.find(same_status, c.ADMITTED)
    assert found is not None and found.last_transition_time == T0
    flipped = c.set_condition(
        same_status, c.Condition(c.ADMITTED, False, c.REASON_PENDING, "evicted"), T2
    )
    found = c.find(flipped, c.ADMITTED)
    assert found is not None and found.last_transition_time == T2


def test_stopping_the_execution_clock_never_adds_pods_ready() -> None:
    assert c.stop_execution_clock((), T0) == ()
    running = c.sync((), Phase.RUNNING, "", T0)
    stopped = c.stop_execution_clock(running, T1)
    assert (c.PODS_READY, False, c.REASON_PENDING) in triples(stopped)


def test_objects_round_trip_through_the_api_shape() -> None:
    conds = c.evict(c.sync((), Phase.RUNNING, "", T0), c.REASON_DEACTIVATED, "m", T1)
    objects = c.to_objects(conds)
    assert {o["status"] for o in objects} <= {"True", "False"}
    assert c.from_objects(objects) == conds


@given(st.lists(st.sampled_from(list(Phase)), max_size=12))
def test_any_phase_sequence_keeps_one_condition_per_type_and_only_known_types(
    phases: list[Phase],
) -> None:
    conds: c.Conditions = ()
    for step, phase in enumerate(phases):
        before = conds
        conds = c.sync(conds, phase, "m", f"2026-12-04T16:00:{step:02d}Z")
        for new in conds:
            old = c.find(before, new.type)
            if old is not None and old.status == new.status:
                assert new.last_transition_time == old.last_transition_time
    kinds = [x.type for x in conds]
    assert len(kinds) == len(set(kinds))
    assert set(kinds) <= set(c.TYPES)


# --- the status writer (kube/controller/status.py) ------------------------------------------


def test_a_phase_write_carries_the_conditions_when_the_gate_is_on() -> None:
    seen = seen_conditions(parse_feature_gates(""), {"status": {}})
    patch = unit_status_patch("admitted", Phase.DEQUEUED, now=T0, conditions=seen)
    conds = c.from_objects(patch["status"]["conditions"])
    assert (c.ADMITTED, True, "Admitted") in triples(conds)
    assert all(x.last_transition_time == T0 for x in conds)


def test_with_the_gate_off_no_condition_is_written() -> None:
    """QueueUnitConditions=false: Koord-Queue's TestSyncQueueUnitConditionsFeatureGateDisabled."""
    seen = seen_conditions(parse_feature_gates("QueueUnitConditions=false"), {"status": {}})
    assert seen is None
    patch = unit_status_patch("admitted", Phase.DEQUEUED, now=T0, conditions=seen)
    assert "conditions" not in patch["status"]


def test_an_eviction_write_names_its_cause() -> None:
    admitted = c.to_objects(c.sync((), Phase.DEQUEUED, "", T0))
    patch = unit_status_patch(
        "preempted", Phase.ENQUEUED, now=T1, conditions=admitted, evicted=c.REASON_PREEMPTED
    )
    conds = c.from_objects(patch["status"]["conditions"])
    assert {(c.EVICTED, True, "Preempted"), (c.ADMITTED, False, "Preempted")} <= triples(conds)
    assert (c.QUOTA_RESERVED, False, "Pending") in triples(conds)
