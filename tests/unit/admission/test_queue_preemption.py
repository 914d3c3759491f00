"""Issue 35 point 7: queue-level preemption as Koord-Queue does it now, in the engine.

Cases transcribed from Koord-Queue's pkg/test/integration/elasticquotav1alpha1preemption
(reserve_preemption_test, preemption_test, reclaim_reschedule_test, priority_order_test) and
its manual "Queue-Level Preemption": the reserve path (wait-for-pods-running alone) under
Priority and Block, the path after a failed fit (both annotations), reclaim re-admitting the
victim, queue order after a preemption; then the victim rules (never a running replica,
reclaimState = replicas - running, protect time, the preemptible label, one round per queue).
Each case runs on the full scan and on the incremental rounds.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import (
    ENABLE_PREEMPTION_ANNOTATION,
    PREEMPTIBLE_LABEL,
    QUOTA_NAME_LABEL,
    WAIT_FOR_PODS_RUNNING_ANNOTATION,
)
from koordqueue.domain.queue_preemption import (
    VictimRules,
    fit_victims,
    is_assumed,
    reclaimable,
    reserve_victims,
)
from koordqueue.domain.queue_unit import AdmissionCount, Phase, QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import Preempted, Reclaimed, WaitingForPodsRunning, outcome_of

WAIT = {WAIT_FOR_PODS_RUNNING_ANNOTATION: "true"}
BOTH = {**WAIT, ENABLE_PREEMPTION_ANNOTATION: "true"}
MODES = pytest.mark.parametrize("full", [False, True], ids=["incremental", "full"])


def unit(name: str, priority: int, cpu: str = "1", created: float = 0.0, **kw: object) -> QueueUnit:
    base = QueueUnit(
        "default", name, uid=name, resource=Resources.of(cpu=cpu), priority=priority,
        labels={QUOTA_NAME_LABEL: "q", PREEMPTIBLE_LABEL: "true"}, created=created,
        consumer_kind="Job",
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def engine(
    cpu: str, annotations: dict[str, str], policy: str = "Priority", *, full: bool,
    rules: VictimRules | None = None,
) -> AdmissionEngine:
    e = AdmissionEngine(skip_unchanged=not full, victim_rules=rules)
    e.upsert_quota(QuotaSpec("q", min=Resources.of(cpu=cpu), max=Resources.of(cpu=cpu)))
    e.upsert_queue("q", policy, annotations)
    return e


def admitted(e: AdmissionEngine, name: str, replicas: int = 1) -> None:
    """As the controller folds the admission write back in: one pod set, not running."""
    u = e.unit(name)
    assert u is not None and e.is_admitted(name)
    e.upsert_unit(replace(u, admissions=(AdmissionCount(name, replicas),)))


def running(e: AdmissionEngine, name: str) -> None:
    u = e.unit(name)
    assert u is not None
    e.upsert_unit(replace(u, phase=Phase.RUNNING))


@MODES
@pytest.mark.parametrize("policy", ["Priority", "Block"])
@pytest.mark.parametrize("annotations", [WAIT, BOTH], ids=["wait", "both"])
def test_reserve_path_marks_the_lower_unit_then_admits_the_preemptor(
    policy: str, annotations: dict[str, str], full: bool
) -> None:
    """reserve_preemption_test: quota 4 cpu, victim (priority 10, 1 cpu) Dequeued with
    replicas 1 and no reclaimState; preemptor (priority 100, 1 cpu) fits, and still marks
    the victim (reclaimState.replicas 1) before it is Dequeued. wait-for-pods-running alone
    is enough for this path."""
    e = engine("4", annotations, policy, full=full)
    e.upsert_unit(unit("victim", 10))
    assert [u.name for u, _ in e.run_round(0.0).admitted] == ["victim"]
    admitted(e, "victim")
    e.upsert_unit(unit("preemptor", 100, created=1.0))
    first = e.run_round(1.0)
    assert first.admitted == []  # not admitted in the round that marks
    marked = outcome_of(first.outcomes, "victim")
    assert isinstance(marked, Preempted) and marked.by.name == "preemptor"
    assert [a.reclaim for a in marked.admissions] == [1]
    assert e.is_admitted("victim")  # it holds its quota until reclaimed
    second = e.run_round(2.0)
    assert isinstance(outcome_of(second.outcomes, "victim"), Reclaimed)
    assert [u.name for u, _ in second.admitted] == ["preemptor"]
    victim = e.unit("victim")
    assert victim is not None and victim.phase is Phase.ENQUEUED and not victim.reclaiming


@MODES
def test_a_failed_fit_marks_the_victim_only_with_enable_queueunit_preemption(full: bool) -> None:
    """preemption_test: quota 2 cpu, victim 2 cpu priority 10 Dequeued; preemptor 2 cpu
    priority 100 does not fit: the victim's admission gets reclaimState.replicas 1."""
    for knobs, marks in ((BOTH, True), (WAIT, False)):
        e = engine("2", knobs, full=full)
        e.upsert_unit(unit("victim", 10, cpu="2"))
        e.run_round(0.0)
        admitted(e, "victim")
        e.upsert_unit(unit("preemptor", 100, cpu="2", created=1.0))
        result = e.run_round(1.0)
        assert isinstance(outcome_of(result.outcomes, "victim"), Preempted) is marks
        if marks:  # reclaimed first in the next round, which then has room for the preemptor
            after = e.run_round(2.0)
            assert isinstance(outcome_of(after.outcomes, "victim"), Reclaimed)
            assert [u.name for u, _ in after.admitted] == ["preemptor"]
        else:
            assert isinstance(outcome_of(result.outcomes, "preemptor"), WaitingForPodsRunning)


@MODES
def test_reclaim_re_admits_the_victim_once_the_preemptor_runs(full: bool) -> None:
    """reclaim_reschedule_test: after the reclaim the victim is admitted again, a fresh
    admission without reclaimState, once the preemptor's pods run."""
    e = engine("4", BOTH, full=full)
    e.upsert_unit(unit("victim", 10))
    e.run_round(0.0)
    admitted(e, "victim")
    e.upsert_unit(unit("preemptor", 100, created=1.0))
    e.run_round(1.0)
    assert [u.name for u, _ in e.run_round(2.0).admitted] == ["preemptor"]
    assert e.run_round(3.0).admitted == []  # the preemptor's pods are not running yet
    running(e, "preemptor")
    again = e.run_round(4.0).admitted
    assert [u.name for u, _ in again] == ["victim"]
    fresh = e.unit("victim")
    assert fresh is not None and not fresh.reclaiming and fresh.phase is Phase.DEQUEUED


@MODES
def test_after_a_preemption_the_rest_go_in_priority_order(full: bool) -> None:
    """priority_order_test: A (1) admitted; C (100) preempts A and is admitted; B (2) waits
    while C's pods are not running, then goes before A. (Koord-Queue admits one unit per
    cycle, so A waits for B's pods too; here wait-for-pods-running pauses a queue from one
    round to the next, so A follows B in the same round.)"""
    e = engine("4", BOTH, full=full)
    e.upsert_unit(unit("a", 1))
    e.run_round(0.0)
    admitted(e, "a")
    e.upsert_unit(unit("c", 100, created=1.0))
    assert isinstance(outcome_of(e.run_round(1.0).outcomes, "a"), Preempted)
    assert [u.name for u, _ in e.run_round(2.0).admitted] == ["c"]
    admitted(e, "c")
    e.upsert_unit(unit("b", 2, created=2.0))
    held = e.run_round(3.0)
    assert held.admitted == [] and held.preempted == []  # c sorts before b: no victim
    running(e, "c")
    assert [u.name for u, _ in e.run_round(4.0).admitted] == ["b", "a"]


@MODES
def test_running_units_and_earlier_units_are_never_victims(full: bool) -> None:
    e = engine("2", BOTH, full=full)
    e.upsert_unit(unit("runs", 1))
    e.upsert_unit(unit("first", 200, created=-1.0))  # sorts before the preemptor
    e.run_round(0.0)
    running(e, "runs")
    admitted(e, "first")
    e.upsert_unit(unit("preemptor", 100, cpu="2", created=1.0))
    result = e.run_round(1.0)
    assert result.preempted == [] and e.is_admitted("runs") and e.is_admitted("first")


@MODES
def test_some_replicas_running_only_the_others_are_reclaimed(full: bool) -> None:
    """reclaimState.replicas = replicas - running; the victim keeps the running share."""
    e = engine("3", BOTH, full=full)
    e.upsert_unit(unit("victim", 1, cpu="3"))
    e.run_round(0.0)
    u = e.unit("victim")
    assert u is not None
    e.upsert_unit(replace(u, admissions=(AdmissionCount("victim", 3, running=1),)))
    e.upsert_unit(unit("preemptor", 9, cpu="2", created=1.0))
    marked = outcome_of(e.run_round(1.0).outcomes, "victim")
    assert isinstance(marked, Preempted)
    assert marked.admissions == (AdmissionCount("victim", 3, 1, 2),)
    reclaimed = outcome_of(e.run_round(2.0).outcomes, "victim")
    assert isinstance(reclaimed, Reclaimed) and reclaimed.replicas == 2
    kept = e.unit("victim")
    assert kept is not None and e.is_admitted("victim")
    assert kept.resource == Resources.of(cpu="1")
    assert kept.admissions == (AdmissionCount("victim", 1, 1),)
    assert e.tree.reserved_request("victim") == Resources.of(cpu="1")


@MODES
def test_the_protect_time_counts_from_last_allocate_time(full: bool) -> None:
    rules = VictimRules(protect_seconds=300.0)
    for now, marks in ((1100.0, False), (1400.0, True)):
        e = engine("4", WAIT, full=full, rules=rules)
        e.upsert_unit(unit("victim", 10))
        e.run_round(1000.0)
        u = e.unit("victim")
        assert u is not None
        e.upsert_unit(replace(u, admissions=(AdmissionCount("victim", 1),), last_allocate=1000.0))
        e.upsert_unit(unit("preemptor", 100, created=1.0))
        assert bool(e.run_round(now).preempted) is marks


@pytest.mark.parametrize(
    ("label", "default", "victim"),
    [("true", False, True), ("false", True, False), (None, True, True), (None, False, False)],
)
def test_the_preemptible_label_and_its_default(
    label: str | None, default: bool, victim: bool
) -> None:
    labels = {QUOTA_NAME_LABEL: "q"} | ({PREEMPTIBLE_LABEL: label} if label else {})
    low = unit("low", 1, labels=labels, phase=Phase.DEQUEUED)
    marks = reserve_victims(
        unit("high", 9), [low], lambda u: (-u.priority,), VictimRules(default_preemptible=default),
        0.0,
    )
    assert bool(marks) is victim


@MODES
def test_one_preemption_per_queue_and_round(full: bool) -> None:
    e = engine("2", BOTH, full=full)
    e.upsert_unit(unit("low1", 1))
    e.upsert_unit(unit("low2", 1, created=1.0))
    e.run_round(0.0)
    admitted(e, "low1")
    admitted(e, "low2")
    e.upsert_unit(unit("hi1", 9, created=2.0))
    e.upsert_unit(unit("hi2", 8, created=3.0))
    result = e.run_round(1.0)
    assert [p.unit.name for p in result.preempted] == ["hi1"]
    assert [[v.name for v in p.victims] for p in result.preempted] == [["low2"]]  # lowest first


def test_fit_victims_lowest_first_until_they_cover_the_request() -> None:
    """Koord-Queue's dry run counts what victims release against the preemptor's whole
    request (not what it lacks), lowest first, and stops once covered; victims that do not
    cover it are still what it found."""
    key = lambda u: (-u.priority, u.name)  # noqa: E731
    lows = [unit(f"low{p}", p, phase=Phase.DEQUEUED) for p in (3, 1, 2)]
    hi = unit("hi", 9, cpu="2")
    assert [m.unit.name for m in fit_victims(hi, lows, key, VictimRules(), 0.0)] == [
        "low1", "low2"
    ]
    assert [m.unit.name for m in fit_victims(hi, lows[:1], key, VictimRules(), 0.0)] == ["low3"]


@MODES
def test_a_failed_fit_marks_nothing_when_the_reclaim_would_not_make_room(full: bool) -> None:
    """Beyond Koord-Queue (which marks what it found): a 3 cpu unit in a 2 cpu quota never
    fits, so reclaiming the 1 cpu victim would help nobody and loop (re-admitted, reclaimed)."""
    e = engine("2", BOTH, full=full)
    e.upsert_unit(unit("low", 1))
    e.run_round(0.0)
    admitted(e, "low")
    e.upsert_unit(unit("huge", 9, cpu="3", created=1.0))
    assert e.run_round(1.0).preempted == [] and e.is_admitted("low")
    e.upsert_unit(unit("fits", 8, cpu="2", created=2.0))  # 1 free + low's 1 released
    assert [[v.name for v in p.victims] for p in e.run_round(2.0).preempted] == [["low"]]


@MODES
def test_no_victim_for_room_a_later_queue_takes_in_the_same_round(full: bool) -> None:
    """Found by the snapshot round trip: parent q0 (2 cpu) and child q1 (1 cpu), both
    queues with both annotations. The round that reclaims u2 (q1's victim) frees 1 cpu of
    q0; q0's turn comes first and u1 (2 cpu) counted that cpu plus u0's; then q1's u3 took
    it. Marking u0 then took a victim for a preemptor that could not fit (u0 reclaimed, u1
    still waiting, u0 re-admitted). Preemptions are now settled after every queue's turn."""
    e = AdmissionEngine(skip_unchanged=not full)
    e.upsert_quota(QuotaSpec("q0", max=Resources.of(cpu="2"), is_parent=True))
    e.upsert_quota(QuotaSpec("q1", max=Resources.of(cpu="1"), parent="q0"))
    for q in ("q0", "q1"):
        e.upsert_queue(q, "Priority", BOTH)

    def in_quota(name: str, quota: str, cpu: str, priority: int, created: float) -> QueueUnit:
        return unit(name, priority, cpu=cpu, created=created,
                    labels={QUOTA_NAME_LABEL: quota, PREEMPTIBLE_LABEL: "true"})

    e.upsert_unit(in_quota("u0", "q0", "1", 0, 0.0))
    e.upsert_unit(in_quota("u2", "q1", "1", 0, 0.0))
    assert [u.name for u, _ in e.run_round(0.0).admitted] == ["u0", "u2"]
    admitted(e, "u0")
    admitted(e, "u2")
    e.upsert_unit(in_quota("u1", "q0", "2", 1, 1.0))
    e.upsert_unit(in_quota("u3", "q1", "1", 1, 2.0))
    first = e.run_round(1.0)  # u1 cannot fit even with u0 reclaimed; u3 marks u2
    assert [(p.unit.name, [v.name for v in p.victims]) for p in first.preempted] == [
        ("u3", ["u2"])
    ]
    second = e.run_round(2.0)
    assert isinstance(outcome_of(second.outcomes, "u2"), Reclaimed)
    assert [u.name for u, _ in second.admitted] == ["u3"]
    assert second.preempted == []  # u1 would need u3's cpu too
    assert e.is_admitted("u0") and not e.unit("u0").reclaiming  # type: ignore[union-attr]
    for t in (3.0, 4.0):
        assert e.run_round(t).preempted == [] and e.is_admitted("u0")


replicas = st.integers(0, 4)
admission = st.builds(
    AdmissionCount, st.just("ps"), replicas, st.one_of(st.none(), replicas), st.just(0)
)
phases = st.sampled_from([Phase.DEQUEUED, Phase.RESERVED, Phase.SCHED_READY, Phase.RUNNING,
                          Phase.ENQUEUED])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 9), phases, st.lists(admission, max_size=2)),
             min_size=1, max_size=6),
    st.integers(0, 9),
)
def test_a_mark_never_takes_a_running_replica_and_only_units_after_the_preemptor(
    units: list[tuple[int, Phase, list[AdmissionCount]]], priority: int
) -> None:
    assumed = [
        unit(f"u{i}", p, phase=phase, admissions=tuple(adms))
        for i, (p, phase, adms) in enumerate(units)
    ]
    preemptor = unit("pre", priority, cpu="1")
    key = lambda u: (-u.priority, u.name)  # noqa: E731
    for marks in (
        reserve_victims(preemptor, assumed, key, VictimRules(), 0.0),
        fit_victims(preemptor, assumed, key, VictimRules(), 0.0),
    ):
        for mark in marks:
            assert key(mark.unit) > key(preemptor)
            assert is_assumed(mark.unit)
            assert mark.admissions == reclaimable(mark.unit)
            if not mark.unit.admissions:  # no pod sets listed: one replica, not running
                assert mark.admissions == (AdmissionCount("", 1, 0, 1),)
            for before, after in zip(mark.unit.admissions, mark.admissions, strict=False):
                ran = before.running if before.running is not None else (
                    before.replicas if mark.unit.phase is Phase.RUNNING else 0
                )
                assert after.reclaim == before.replicas - min(ran, before.replicas) >= 0
            assert mark.replicas > 0
