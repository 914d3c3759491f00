"""Issue 35 point 1: pause and resume through spec.active, in the engine and its effects.

Transcribed from Koord-Queue's pkg/test/integration/workloadapi/active_test.go: a unit born
inactive is never admitted and leaves the whole quota to a rival; activated, it is admitted.
Beyond that suite (activation.go's reconcileDeactivation): deactivating an admitted unit
evicts it (Enqueued, Evicted/Admitted reason Deactivated, workload suspended, Normal event
Deactivated on the workload), and a unit a preemption still reclaims is left alone. The
annotation rules are activation.go's activeFromAnnotation / maxExecutionTimeFromAnnotation.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from koordqueue.domain import activation
from koordqueue.domain.conditions import REASON_DEACTIVATED
from koordqueue.domain.effects import SetUnitStatus, SuspendConsumer, UnitEvent, effects
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.features import parse_feature_gates
from koordqueue.domain.names import MSG_DEACTIVATED, MSG_INACTIVE, QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import (
    InvalidQueueUnitError,
    Phase,
    QueueUnit,
    queue_unit_from_object,
)
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import Admit, Deactivated, Inactive, Reclaimed, outcome_of
from koordqueue.domain.verdict import Reason, verdict_of

ON = parse_feature_gates("QueueUnitActive=true")
OFF = parse_feature_gates("")


def unit(name: str, cpu: str, *, active: bool = True, phase: Phase = Phase.ENQUEUED) -> QueueUnit:
    return QueueUnit(
        "default", name, uid=name, resource=Resources.of(cpu=cpu), priority=10,
        labels={QUOTA_NAME_LABEL: "active-quota"}, phase=phase, active=active,
        consumer_kind="Job",
    )


def engine(honour: bool = True, *, full: bool = False) -> AdmissionEngine:
    e = AdmissionEngine(honour_inactive=honour, skip_unchanged=not full)
    e.upsert_quota(QuotaSpec("active-quota", max=Resources.of(cpu="2")))
    e.upsert_queue("active-quota", "Priority", None)
    return e


@pytest.mark.parametrize("full", [False, True])
def test_born_inactive_is_never_admitted_and_leaves_the_quota_to_a_rival(full: bool) -> None:
    e = engine(full=full)
    e.upsert_unit(unit("active-born-inactive", "2", active=False))
    for now in range(5):
        result = e.run_round(float(now))
        assert isinstance(outcome_of(result.outcomes, "active-born-inactive"), Inactive)
        assert not e.is_admitted("active-born-inactive")
    assert e.admit_if_queue_idle("active-born-inactive", 10.0) is None
    e.upsert_unit(unit("active-rival", "2"))
    result = e.run_round(11.0)
    assert isinstance(outcome_of(result.outcomes, "active-rival"), Admit)


def test_with_the_gate_off_spec_active_is_ignored() -> None:
    """QueueUnitActive off (Koord-Queue's default): the same unit is admitted."""
    e = engine(honour=False)
    e.upsert_unit(unit("u", "1", active=False))
    assert isinstance(outcome_of(e.run_round(0.0).outcomes, "u"), Admit)


@pytest.mark.parametrize("full", [False, True])
def test_activated_it_is_admitted(full: bool) -> None:
    e = engine(full=full)
    e.upsert_unit(unit("active-flip", "1", active=False))
    e.run_round(0.0)
    e.upsert_unit(unit("active-flip", "1"))
    assert isinstance(outcome_of(e.run_round(1.0).outcomes, "active-flip"), Admit)


@pytest.mark.parametrize("full", [False, True])
def test_deactivating_an_admitted_unit_evicts_it_and_frees_its_quota(full: bool) -> None:
    e = engine(full=full)
    e.upsert_unit(unit("a", "2"))
    e.run_round(0.0)
    assert e.is_admitted("a")
    e.upsert_unit(unit("a", "2", active=False, phase=Phase.RUNNING))
    e.upsert_unit(unit("b", "2"))
    result = e.run_round(1.0)
    assert isinstance(outcome_of(result.outcomes, "a"), Deactivated)
    assert not e.is_admitted("a")
    waiting = e.unit("a")
    assert waiting is not None and waiting.phase is Phase.ENQUEUED
    # the eviction comes first in the round, so the freed quota goes to b in the same one
    assert isinstance(outcome_of(result.outcomes, "b"), Admit)
    assert isinstance(outcome_of(e.run_round(2.0).outcomes, "a"), Inactive)


def test_a_unit_being_reclaimed_is_reclaimed_not_deactivated() -> None:
    """Koord-Queue leaves a unit whose admissions carry reclaimState alone until the reclaim
    is done; here the round after the mark does the reclaim (issue 35 point 7), so the unit
    goes back to its queue through the reclaim, inactive, with no second eviction."""
    e = engine()
    e.upsert_unit(unit("a", "2"))
    e.run_round(0.0)
    e.upsert_unit(replace(unit("a", "2", active=False, phase=Phase.DEQUEUED), reclaiming=True))
    outcome = outcome_of(e.run_round(1.0).outcomes, "a")
    assert isinstance(outcome, Reclaimed)
    assert not e.is_admitted("a")
    assert isinstance(outcome_of(e.run_round(2.0).outcomes, "a"), Inactive)


def test_a_deactivation_evicts_suspends_and_tells_the_workload() -> None:
    admitted = unit("a", "1", phase=Phase.RUNNING, active=False)
    planned = effects([Deactivated(admitted)], {})
    status, suspend, event = planned
    assert isinstance(status, SetUnitStatus)
    assert (status.phase, status.message, status.evicted, status.bank) == (
        Phase.ENQUEUED, MSG_DEACTIVATED, REASON_DEACTIVATED, True
    )
    assert isinstance(suspend, SuspendConsumer)
    assert isinstance(event, UnitEvent)
    assert (event.type, event.reason, event.on_workload) == ("Normal", "Deactivated", True)
    assert event.message.startswith("Job is suspended")


def test_an_inactive_unit_says_so_once_and_explain_reads_it() -> None:
    waiting = Inactive(unit("a", "1", active=False))
    planned = effects([waiting], {})
    assert [e.message for e in planned if isinstance(e, SetUnitStatus)] == [MSG_INACTIVE]
    assert effects([waiting], {"a": MSG_INACTIVE}) == []
    assert verdict_of(waiting) is Reason.INACTIVE


def test_spec_active_is_read_from_the_object_nil_meaning_true() -> None:
    base = {"metadata": {"name": "u", "namespace": "ns"}, "spec": {}}
    assert queue_unit_from_object(base).active is True
    assert queue_unit_from_object({**base, "spec": {"active": False}}).active is False
    with pytest.raises(InvalidQueueUnitError, match=r"spec\.active"):
        queue_unit_from_object({**base, "spec": {"active": "no"}})
    reclaimed = {"admissions": [{"name": "p", "replicas": 2, "reclaimState": {"replicas": 1}}]}
    assert queue_unit_from_object({**base, "status": reclaimed}).reclaiming is True


@pytest.mark.parametrize(
    ("value", "want"),
    [("false", False), ("False", False), ("0", False), ("true", True), ("T", True),
     ("", None), ("nope", None)],
)
def test_the_active_annotation_takes_go_booleans_and_ignores_the_rest(
    value: str, want: bool | None
) -> None:
    notes = {"scheduling.x-k8s.io/active": value}
    assert activation.active_from(notes) is want
    patch = activation.spec_patch(notes, {}, {}, ON)
    assert patch == (None if want is None else {"active": want})


def test_removing_the_annotation_changes_nothing_and_the_gate_off_ignores_it() -> None:
    assert activation.spec_patch({}, {}, {"active": False}, ON) is None
    assert activation.spec_patch({"scheduling.x-k8s.io/active": "false"}, {}, {}, OFF) is None
    assert activation.spec_fields({"scheduling.x-k8s.io/active": "false"}, {}, ON) == {
        "active": False
    }


BUDGET = parse_feature_gates("QueueUnitActive=true,MaximumExecutionTime=true")


@pytest.mark.parametrize(
    ("annotations", "labels", "want"),
    [
        ({"scheduling.x-k8s.io/max-exec-time-seconds": "30"}, {}, 30),
        ({"scheduling.x-k8s.io/max-exec-time-seconds": "0"}, {}, None),
        ({"scheduling.x-k8s.io/max-exec-time-seconds": "-5"}, {}, None),
        ({"scheduling.x-k8s.io/max-exec-time-seconds": "2147483648"}, {}, None),
        ({"scheduling.x-k8s.io/max-exec-time-seconds": "x"}, {}, None),
        ({}, {"kueue.x-k8s.io/max-exec-time-seconds": "45"}, 45),
        ({}, {}, None),
    ],
)
def test_the_budget_is_a_positive_int32_and_kueues_label_counts_too(
    annotations: dict[str, str], labels: dict[str, str], want: int | None
) -> None:
    assert activation.max_exec_from(annotations, labels) == want


def test_with_the_budget_gate_on_an_absent_annotation_clears_the_field() -> None:
    assert activation.spec_patch({}, {}, {"maximumExecutionTimeSeconds": 30}, BUDGET) == {
        "maximumExecutionTimeSeconds": None
    }
    assert activation.spec_patch({}, {}, {"maximumExecutionTimeSeconds": 30}, ON) is None


@pytest.mark.parametrize("full", [False, True])
def test_a_block_head_made_inactive_lets_its_quota_go_to_the_next_unit(full: bool) -> None:
    e = AdmissionEngine(skip_unchanged=not full)
    e.upsert_quota(QuotaSpec("active-quota", max=Resources.of(cpu="2")))
    e.upsert_queue("active-quota", "Block", None)
    e.upsert_unit(replace(unit("head", "3"), priority=20))  # never fits: blocks the quota
    e.upsert_unit(unit("next", "1"))
    e.run_round(0.0)
    assert not e.is_admitted("next")
    e.upsert_unit(replace(unit("head", "3", active=False), priority=20))
    result = e.run_round(1.0)
    assert isinstance(outcome_of(result.outcomes, "head"), Inactive)
    assert isinstance(outcome_of(result.outcomes, "next"), Admit)
