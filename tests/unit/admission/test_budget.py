"""Issue 35 point 2: the execution budget (spec.maximumExecutionTimeSeconds).

Koord-Queue's reconcileMaxExecutionTime (pkg/jobext/framework/activation.go): the clock runs
from PodsReady's lastTransitionTime while it is True, on top of the time banked by earlier
admissions; waiting costs nothing; once spent: spec.active=false, banked time reset, PodsReady
False (the clock stops), Evicted reason MaximumExecutionTimeExceeded and a Warning event of
that name; then the deactivation of point 1 evicts it (final reason Deactivated).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from koordqueue.domain.activation import budget_left
from koordqueue.domain.conditions import REASON_MAXIMUM_EXECUTION_TIME_EXCEEDED
from koordqueue.domain.effects import DeactivateUnit, SetUnitStatus, UnitEvent, effects
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import Phase, QueueUnit, queue_unit_from_object
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import Admit, BudgetSpent, Deactivated, outcome_of
from koordqueue.domain.verdict import Reason, verdict_of
from koordqueue.kube.controller.status import banked_seconds, unit_status_patch


def unit(**kw: object) -> QueueUnit:
    base = QueueUnit(
        "ns", "u", uid="u", resource=Resources.of(cpu="1"),
        labels={QUOTA_NAME_LABEL: "q"}, consumer_kind="Job", max_exec_seconds=10,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "now", "left"),
    [
        ({"pods_ready_since": 100.0}, 104.0, 6.0),
        ({"pods_ready_since": 100.0, "accumulated_seconds": 7}, 104.0, -1.0),
        ({}, 500.0, None),  # pods not running: waiting is free
        ({"pods_ready_since": 100.0, "max_exec_seconds": None}, 500.0, None),
        ({"pods_ready_since": 100.0, "active": False}, 500.0, None),
    ],
)
def test_the_clock_runs_from_pods_ready_on_top_of_the_banked_time(
    kw: dict[str, object], now: float, left: float | None
) -> None:
    assert budget_left(unit(**kw), now) == left


def engine(honour: bool = True, *, full: bool = False) -> AdmissionEngine:
    e = AdmissionEngine(honour_budget=honour, skip_unchanged=not full)
    e.upsert_quota(QuotaSpec("q", max=Resources.of(cpu="1")))
    e.upsert_queue("q", "Priority", None)
    return e


@pytest.mark.parametrize("full", [False, True])
def test_a_spent_budget_deactivates_then_the_next_round_evicts(full: bool) -> None:
    e = engine(full=full)
    e.upsert_unit(unit())
    assert isinstance(outcome_of(e.run_round(0.0).outcomes, "u"), Admit)
    e.upsert_unit(unit(phase=Phase.RUNNING, pods_ready_since=1.0))
    assert outcome_of(e.run_round(5.0).outcomes, "u") is None  # 6 s left: holding
    spent = outcome_of(e.run_round(11.0).outcomes, "u")
    assert isinstance(spent, BudgetSpent) and spent.budget == 10
    assert e.is_admitted("u") and e.is_inactive("u")
    assert isinstance(outcome_of(e.run_round(12.0).outcomes, "u"), Deactivated)
    assert not e.is_admitted("u")


def test_with_the_gate_off_the_budget_is_ignored() -> None:
    e = engine(honour=False)
    e.upsert_unit(unit(phase=Phase.RUNNING, pods_ready_since=0.0))
    e.run_round(0.0)
    assert outcome_of(e.run_round(1000.0).outcomes, "u") is None
    assert not e.is_inactive("u")


def test_spending_writes_active_false_resets_and_warns_on_the_workload() -> None:
    deactivate, status, event = effects([BudgetSpent(unit(), 10)], {})
    assert isinstance(deactivate, DeactivateUnit)
    assert isinstance(status, SetUnitStatus) and status.spent and status.phase is None
    assert status.evicted == REASON_MAXIMUM_EXECUTION_TIME_EXCEEDED
    assert isinstance(event, UnitEvent)
    assert (event.type, event.reason, event.on_workload) == (
        "Warning", "MaximumExecutionTimeExceeded", True,
    )
    assert event.message == "The maximum execution time (10s) was exceeded"
    assert verdict_of(BudgetSpent(unit(), 10)) is Reason.DEACTIVATED


RUNNING_SINCE = [
    {"type": "PodsReady", "status": "True", "reason": "PodsRunning", "message": "",
     "lastTransitionTime": "2026-12-04T16:00:00Z"}
]


def test_the_spent_write_stops_the_clock_so_the_eviction_banks_nothing() -> None:
    patch = unit_status_patch(
        "spent", None, now="2026-12-04T16:00:30Z", conditions=RUNNING_SINCE,
        evicted=REASON_MAXIMUM_EXECUTION_TIME_EXCEEDED, stop_clock=True,
    )
    conds = {c["type"]: c for c in patch["status"]["conditions"]}
    assert conds["PodsReady"]["status"] == "False"
    assert conds["Evicted"]["reason"] == "MaximumExecutionTimeExceeded"
    assert banked_seconds({"status": patch["status"]}, "2026-12-04T16:00:40Z") is None


def test_an_eviction_banks_the_time_run_since_pods_ready() -> None:
    obj = {"status": {"conditions": RUNNING_SINCE, "accumulatedPastExecutionTimeSeconds": 4}}
    assert banked_seconds(obj, "2026-12-04T16:00:09Z") == 13


def test_the_budget_and_the_clock_are_read_from_the_object() -> None:
    obj = {
        "metadata": {"name": "u", "namespace": "ns"},
        "spec": {"maximumExecutionTimeSeconds": 30},
        "status": {"conditions": RUNNING_SINCE, "accumulatedPastExecutionTimeSeconds": 4},
    }
    parsed = queue_unit_from_object(obj)
    assert (parsed.max_exec_seconds, parsed.accumulated_seconds) == (30, 4)
    assert parsed.pods_ready_since is not None
