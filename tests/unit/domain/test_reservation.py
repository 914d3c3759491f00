"""A reservation's course (domain/reservation.py): the one decision the controller executes
and the replay records (issue 35 point 5, issue 29)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain import admission_checks as ac
from koordqueue.domain import names, requeue, reservation
from koordqueue.domain.admission import Admitted
from koordqueue.domain.effects import Effect, ResumeConsumer, SetUnitStatus, UnitEvent
from koordqueue.domain.queue_unit import Phase, QueueUnit

UNIT = QueueUnit("ns", "u", "uid-u")


def _admission_group() -> list[Effect]:
    return [
        SetUnitStatus(UNIT, "admitted", Phase.DEQUEUED,
                      admission=Admitted("ns/u", "q", ("q",))),
        ResumeConsumer(UNIT),
        UnitEvent(UNIT, names.EVENT_NORMAL, names.REASON_ADMITTED, "admitted"),
    ]


def test_an_admission_on_a_queue_with_checks_becomes_a_reservation() -> None:
    out, phase = reservation.reserve(_admission_group(), ("c1", "c2"), {}, strict=False)
    assert phase is Phase.RESERVED
    status, event = out
    assert isinstance(status, SetUnitStatus) and status.phase is Phase.RESERVED
    assert status.message == ac.MSG_RESERVED and status.checks == ("c1", "c2")
    assert isinstance(event, UnitEvent) and event.reason == names.REASON_QUOTA_RESERVED
    assert event.message == "quota reserved; waiting for admission checks c1, c2"


def test_strict_mode_admits_to_sched_ready_and_no_checks_changes_nothing() -> None:
    group = _admission_group()
    out, phase = reservation.reserve(group, (), {}, strict=True)
    assert phase is Phase.SCHED_READY and not any(isinstance(e, ResumeConsumer) for e in out)
    assert reservation.reserve(group, (), {}, strict=False) == (group, None)


def test_all_ready_releases_pending_waits_a_failure_backs_off() -> None:
    now = reservation.Clock(100.0, attempts=1)
    ready = [ac.CheckState("c", ac.READY)]
    assert reservation.fate(ready, ["c"], False, now) == reservation.Release(Phase.DEQUEUED)
    assert reservation.fate(ready, ["c"], True, now) == reservation.Release(Phase.SCHED_READY)
    assert reservation.fate([ac.CheckState("c")], ["c"], False, now) is None
    failed = ac.CheckState("c", ac.RETRY, message="no room")
    backed = reservation.fate([failed], ["c"], False, now, random.Random(0))
    assert isinstance(backed, reservation.BackOff)
    assert backed.attempts == 2 and backed.failed == failed and backed.requeue is None
    assert 18 <= backed.until - 100.0 <= 22  # the flat schedule's second attempt: 20 s +-10 %
    assert backed.message.startswith("admission check failed: c is Retry (no room); retry in")


def test_the_structured_schedule_records_the_requeue_state() -> None:
    clock = reservation.Clock(100.0, structured=True,
                              previous=requeue.RequeueState(1, 90.0), base=1.0)
    backed = reservation.fate([ac.CheckState("c", ac.REJECTED)], ["c"], False, clock)
    assert isinstance(backed, reservation.BackOff) and backed.requeue is not None
    assert backed.requeue.count == 2 and backed.until == backed.requeue.requeue_at


@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(ac.STATES)), max_size=4),
    st.lists(st.sampled_from("abc"), max_size=3),
)
def test_the_fate_is_the_verdict_of_evaluate(
    pairs: list[tuple[str, str]], asked: list[str]
) -> None:
    states = [ac.CheckState(n, s) for n, s in pairs]
    verdict = ac.evaluate(states, asked).verdict
    decided = reservation.fate(states, asked, False, reservation.Clock(0.0))
    expected = {ac.Verdict.READY: reservation.Release, ac.Verdict.BACK_OFF: reservation.BackOff}
    assert type(decided) is expected.get(verdict, type(None))
    if decided is not None:
        kinds = [type(e) for e in reservation.fate_effects(UNIT, decided)]
        assert kinds[0] is SetUnitStatus and kinds[-1] is UnitEvent
