"""The round record (one typed outcome per unit looked at) and `effects()` (issue 15, part 1)."""

from __future__ import annotations

from koordqueue.domain import names
from koordqueue.domain.effects import (
    QueueEvent,
    ResumeConsumer,
    SetUnitStatus,
    SuspendConsumer,
    UnitEvent,
    effects,
    per_unit,
    queue_effects,
)
from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import (
    ENABLE_PREEMPTION_ANNOTATION,
    MAX_DEPTH_ANNOTATION,
    QUOTA_NAME_LABEL,
    WAIT_FOR_PODS_RUNNING_ANNOTATION,
)
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import (
    Admit,
    BackingOff,
    BeyondMaxDepth,
    BlockedByHead,
    HighPriorityWaiting,
    Preempted,
    QueueNotFound,
    QueueUnserved,
    Reclaimed,
    Reject,
    Unmapped,
    WaitingForPodsRunning,
)


def unit(
    name: str,
    quota: str | None = "q",
    cpu: str = "1",
    priority: int = 0,
    phase: Phase = Phase.ENQUEUED,
    consumer: str | None = None,
) -> QueueUnit:
    labels = {QUOTA_NAME_LABEL: quota} if quota is not None else {}
    return QueueUnit(
        "ns", name, uid=name, resource=Resources.of(cpu=cpu), priority=priority,
        labels=labels, phase=phase, consumer_kind=consumer,
    )


def engine(policy: str = "Priority", cpu: str = "2", **annotations: str) -> AdmissionEngine:
    e = AdmissionEngine()
    e.upsert_quota(QuotaSpec("q", max=Resources.of(cpu=cpu)))
    e.upsert_queue("q", policy, dict(annotations))
    return e


def kinds(e: AdmissionEngine, now: float = 0.0) -> dict[str, type]:
    return {o.unit.name: type(o) for o in e.run_round(now).outcomes}


def test_every_waiting_unit_gets_an_outcome_with_its_rule() -> None:
    e = engine("Block")
    for u in (unit("head", cpu="3", priority=5), unit("next"), unit("lost", quota="nope"),
              unit("stray", quota=None)):
        e.upsert_unit(u)
    record = e.run_round(0.0)
    by_name = {o.unit.name: o for o in record.outcomes}
    assert isinstance(by_name["head"], Reject)
    assert by_name["next"] == BlockedByHead(by_name["next"].unit, "q", "ns/head", 0.0)
    assert isinstance(by_name["lost"], QueueNotFound)
    assert isinstance(by_name["stray"], Unmapped)


def test_a_blocked_head_is_recorded_as_blocking_itself_in_later_rounds() -> None:
    e = engine("Block")
    e.upsert_unit(unit("head", cpu="3"))
    e.run_round(0.0)
    [outcome] = e.run_round(1.0).outcomes
    assert isinstance(outcome, BlockedByHead) and outcome.head == "ns/head"


def test_intelligent_low_units_wait_for_a_waiting_high_unit() -> None:
    e = engine("Intelligent")
    e.upsert_unit(unit("high", cpu="3", priority=9))
    e.upsert_unit(unit("low", priority=1))
    outcomes = {o.unit.name: o for o in e.run_round(0.0).outcomes}
    assert isinstance(outcomes["high"], Reject)
    assert outcomes["low"] == HighPriorityWaiting(outcomes["low"].unit, ("ns/high",), 4)


def test_intelligent_ignores_max_depth() -> None:
    e = engine("Intelligent", cpu="9", **{MAX_DEPTH_ANNOTATION: "1"})
    for name in ("a", "b", "c"):
        e.upsert_unit(unit(name))
    assert set(kinds(e).values()) == {Admit}


def test_priority_beyond_max_depth_is_recorded_with_position() -> None:
    e = engine("Priority", cpu="9", **{MAX_DEPTH_ANNOTATION: "1"})
    e.upsert_unit(unit("a", priority=2))
    e.upsert_unit(unit("b", priority=1))
    outcomes = {o.unit.name: o for o in e.run_round(0.0).outcomes}
    assert isinstance(outcomes["a"], Admit)
    assert outcomes["b"] == BeyondMaxDepth(outcomes["b"].unit, 2, 1)


def test_backoff_unserved_and_paused_queues_are_recorded() -> None:
    e = engine("Priority", **{WAIT_FOR_PODS_RUNNING_ANNOTATION: "true"})
    e.upsert_unit(unit("running", phase=Phase.DEQUEUED))
    e.upsert_unit(unit("waits"))
    e.upsert_unit(unit("later", quota="q"))
    e.requeue("later", until=5.0)
    e.upsert_quota(QuotaSpec("r", max=Resources.of(cpu="1")))
    e.upsert_queue("r", "Round")
    e.upsert_unit(unit("unserved", quota="r"))
    outcomes = {o.unit.name: o for o in e.run_round(0.0).outcomes}
    assert outcomes["waits"] == WaitingForPodsRunning(outcomes["waits"].unit, ("ns/running",))
    assert outcomes["later"] == BackingOff(outcomes["later"].unit, 5.0)
    assert isinstance(outcomes["unserved"], QueueUnserved)


def test_dry_round_records_without_committing() -> None:
    e = engine("Block")
    e.upsert_unit(unit("head", cpu="3", priority=5))
    e.upsert_unit(unit("fits"))
    dry = e.dry_round(0.0)
    assert {type(o) for o in dry.outcomes} == {Reject, BlockedByHead}
    assert not e.queue_policy("q").blocked_quotas  # type: ignore[union-attr]
    assert not e.is_admitted("fits")


def test_admission_effects_write_the_status_resume_then_event() -> None:
    e = engine()
    e.upsert_unit(unit("a"))
    out = effects(e.run_round(0.0))
    assert [type(x) for x in out] == [SetUnitStatus, ResumeConsumer, UnitEvent]
    status, _, event = out
    assert isinstance(status, SetUnitStatus) and status.phase is Phase.DEQUEUED
    assert status.admission is not None
    assert isinstance(event, UnitEvent)
    assert (event.type, event.reason) == (names.EVENT_NORMAL, names.REASON_ADMITTED)
    assert event.message == status.message == "admitted into quota q (checked q)"


def test_rejection_is_reported_once_per_new_message() -> None:
    e = engine()
    e.upsert_unit(unit("big", cpu="3"))
    first = effects(e.run_round(0.0), {})
    assert [(type(x), getattr(x, "reason", None)) for x in first] == [
        (SetUnitStatus, None), (UnitEvent, names.REASON_FAILED_SCHEDULING)
    ]
    message = first[0].message  # type: ignore[union-attr]
    assert message == "limited quotaName:q, limited resKey:cpu,"
    assert effects(e.run_round(1.0), {"big": message}) == []


def test_unmapped_unit_gets_a_status_message_and_no_event() -> None:
    e = engine()
    e.upsert_unit(unit("stray", quota=None))
    out = effects(e.run_round(0.0))
    assert out == [SetUnitStatus(out[0].unit, names.MSG_NO_QUOTA_LABEL)]  # type: ignore[union-attr]


def test_queue_not_found_event_uses_the_koord_queue_message() -> None:
    e = engine()
    e.upsert_unit(unit("lost", quota="nope"))
    out = effects(e.run_round(0.0))
    assert isinstance(out[1], UnitEvent) and out[1].reason == names.REASON_QUEUE_NOT_FOUND
    assert out[1].message == "queue nope not found for queueUnit ns/lost"


def test_a_preemption_marks_then_the_next_round_reclaims_and_suspends() -> None:
    """Issue 35 point 7: the round that preempts writes the victim's reclaimState and
    Koord-Queue's message with a Warning Preempted naming the preemptor (no phase change,
    the victim keeps its quota); the next round reclaims it: Enqueued, the Job suspended,
    a Normal Reclaimed event."""
    e = engine(**{WAIT_FOR_PODS_RUNNING_ANNOTATION: "true", ENABLE_PREEMPTION_ANNOTATION: "true"})
    e.upsert_unit(unit("victim", cpu="2", priority=1, phase=Phase.DEQUEUED, consumer="Job"))
    e.upsert_unit(unit("urgent", cpu="2", priority=9))
    record = e.run_round(0.0)
    # the mark is settled after every queue's turn (round_runner.RoundRunner.proposals)
    assert [type(o) for o in record.outcomes] == [Reject, Preempted]
    mark, warning = per_unit(effects(record))[1]  # (the preemptor's Reject first)
    assert isinstance(mark, SetUnitStatus) and mark.phase is None
    assert mark.message == "Waiting job extension to reclaim resources."
    assert mark.admissions is not None and [a.reclaim for a in mark.admissions] == [1]
    assert isinstance(warning, UnitEvent) and warning.reason == names.REASON_PREEMPTED
    assert (warning.type, warning.message) == ("Warning", "preempted by ns/urgent; back in queue")
    record = e.run_round(1.0)
    assert [type(o) for o in record.outcomes] == [Reclaimed, Admit]
    status, suspend, normal = per_unit(effects(record))[0]
    # a Job's unit says what the job extension writes
    assert isinstance(status, SetUnitStatus) and status.phase is Phase.ENQUEUED
    assert status.message == names.MSG_ENQUEUED_AFTER_PREEMPTED
    assert status.evicted == "Preempted"
    assert isinstance(suspend, SuspendConsumer)
    assert isinstance(normal, UnitEvent) and (normal.type, normal.reason) == ("Normal", "Reclaimed")


def test_a_reclaimed_unit_without_a_job_says_what_was_reclaimed() -> None:
    e = engine(**{WAIT_FOR_PODS_RUNNING_ANNOTATION: "true", ENABLE_PREEMPTION_ANNOTATION: "true"})
    e.upsert_unit(unit("victim", cpu="2", priority=1, phase=Phase.DEQUEUED))
    e.upsert_unit(unit("urgent", cpu="2", priority=9))
    e.run_round(0.0)
    status = effects(e.run_round(1.0))[0]
    assert isinstance(status, SetUnitStatus)
    assert status.message == "reclaimed: 1 admitted replica(s) not running were taken back"


def test_add_queue_fail_is_one_event_per_new_error() -> None:
    assert queue_effects("q", None) == []
    assert queue_effects("q", "bad", "bad") == []
    assert queue_effects("q", "bad") == [
        QueueEvent("q", names.EVENT_WARNING, names.REASON_ADD_QUEUE_FAIL, "bad")
    ]
