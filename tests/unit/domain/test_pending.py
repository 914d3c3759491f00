"""Pending units read from the round's record: order, positions, reasons; the queue hold."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import QUOTA_NAME_LABEL, STOP_POLICY_ANNOTATION, STOP_POLICY_HOLD
from koordqueue.domain.pending import (
    NOT_TRIED,
    PAUSE_EVERY,
    PendingOrder,
    PendingReader,
    in_quota,
    own_quota_positions,
    pending_order,
    pending_units,
)
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import Admit, Outcome, QueueHeld, RoundResult
from koordqueue.domain.verdict import Reason, verdict_message, verdict_of

HOLD = {STOP_POLICY_ANNOTATION: STOP_POLICY_HOLD}


def unit(name: str, quota: str | None, cpu: str = "1", priority: int = 0) -> QueueUnit:
    labels = {QUOTA_NAME_LABEL: quota} if quota is not None else {}
    return QueueUnit("ns", name, uid=name, resource=Resources.of(cpu=cpu), priority=priority,
                     labels=labels, created=float(len(name)))


def tree_engine(*, incremental: bool = True, policy: str = "Priority") -> AdmissionEngine:
    """parent (max 2 cpu) over a (max 2) and b (max 2); solo (max 1) alone."""
    engine = AdmissionEngine(skip_unchanged=incremental)
    engine.upsert_quota(QuotaSpec("parent", max=Resources.of(cpu="2"), is_parent=True))
    for name in ("a", "b"):
        engine.upsert_quota(QuotaSpec(name, max=Resources.of(cpu="2"), parent="parent"))
    engine.upsert_quota(QuotaSpec("solo", max=Resources.of(cpu="1")))
    for name in ("parent", "a", "b", "solo"):
        engine.upsert_queue(name, policy)
    return engine


@pytest.mark.parametrize("incremental", [True, False])
def test_the_order_is_the_rounds_waiting_queue_by_queue(incremental: bool) -> None:
    engine = tree_engine(incremental=incremental)
    for u in (unit("a1", "a", cpu="2"), unit("a2", "a", priority=5), unit("a3", "a"),
              unit("b1", "b"), unit("s1", "solo"), unit("s22", "solo", cpu="2")):
        engine.upsert_unit(u)
    result = engine.run_round(0.0)
    pending = pending_units(result)
    # a2 (priority 5) admitted first; then a1 (2 cpu) and a3 do not fit the parent's 1 left...
    admitted = {o.unit.name for o in result.outcomes if isinstance(o, Admit)}
    rows = [(p.unit.name, p.queue, p.position, p.position_in_queue) for p in pending]
    waiting = [(u.name, q) for q, units in result.waiting.items() for u in units]
    assert [(n, q) for n, q, _, _ in rows] == waiting
    assert [r[2] for r in rows] == list(range(1, len(rows) + 1))
    assert not admitted & {r[0] for r in rows}
    by_queue: dict[str, list[int | None]] = {}
    for _, q, _, in_queue in rows:
        by_queue.setdefault(q, []).append(in_queue)
    assert all(v == list(range(1, len(v) + 1)) for v in by_queue.values())


def test_the_reason_is_the_units_last_entry_in_the_record() -> None:
    engine = tree_engine()
    engine.upsert_unit(unit("s1", "solo"))
    engine.upsert_unit(unit("s22", "solo", cpu="2"))
    pending = pending_units(engine.run_round(0.0))
    assert [(p.unit.name, p.reason) for p in pending] == [("s22", Reason.QUOTA_EXCEEDED)]
    assert pending[0].message == "limited quotaName:solo, limited resKey:cpu,"


def test_units_no_round_tries_follow_without_positions() -> None:
    engine = tree_engine()
    engine.upsert_unit(unit("nolabel", None))
    engine.upsert_unit(unit("lost", "missing"))
    engine.upsert_unit(unit("big", "solo", cpu="5"))
    pending = pending_units(engine.run_round(0.0))
    assert (pending[0].unit.name, pending[0].position) == ("big", 1)
    rest = {p.unit.name: (p.position, p.reason) for p in pending[1:]}
    assert rest == {"nolabel": (None, Reason.NO_QUOTA_LABEL),
                    "lost": (None, Reason.QUEUE_NOT_FOUND)}


def test_positions_in_a_parent_quota_count_its_childrens_units_in_round_order() -> None:
    engine = tree_engine()
    for u in (unit("a1", "a", cpu="2"), unit("a22", "a", cpu="2"), unit("b1", "b", cpu="2"),
              unit("s1", "solo", cpu="3")):
        engine.upsert_unit(u)
    result = engine.run_round(0.0)
    order = pending_order(result)
    assert result.paths["a"] == ("a", "parent")

    def rows(quota: str) -> list[tuple[int, str]]:
        indexes, positions = in_quota(order, quota, result.paths)
        return [(p, order.units[i].name) for i, p in zip(indexes, positions, strict=True)]

    assert rows("parent") == [(1, "a22"), (2, "b1")]  # a1 took the parent's 2 cpu
    assert rows("b") == [(1, "b1")]


@pytest.mark.parametrize("incremental", [True, False])
def test_a_held_queue_admits_nothing_new_and_keeps_what_runs(incremental: bool) -> None:
    """Fails without the hold (settings.held ignored): `late` is admitted."""
    engine = tree_engine(incremental=incremental)
    engine.upsert_unit(unit("early", "solo"))
    engine.run_round(0.0)
    assert engine.is_admitted("early")
    engine.upsert_queue("solo", "Priority", HOLD)
    engine.upsert_unit(unit("late", "solo"))
    engine.remove_unit("early")  # room again: still nothing new
    assert engine.admit_if_queue_idle("late", 1.0) is None
    result = engine.run_round(1.0)
    assert not engine.is_admitted("late")
    assert [type(o) for o in result.outcomes if o.unit.name == "late"] == [QueueHeld]
    (row,) = pending_units(result)
    assert (row.unit.name, row.reason, row.position_in_queue) == ("late", Reason.QUEUE_HELD, 1)
    assert row.message == "queue solo is held (koord-queue/stop-policy=Hold)"
    engine.upsert_queue("solo", "Priority", {})  # resume
    engine.run_round(2.0)
    assert engine.is_admitted("late")


def test_a_held_queue_keeps_its_admitted_units() -> None:
    engine = tree_engine()
    engine.upsert_unit(unit("early", "solo"))
    engine.run_round(0.0)
    engine.upsert_queue("solo", "Intelligent", HOLD)
    engine.upsert_unit(QueueUnit("ns", "early", uid="early", resource=Resources.of(cpu="1"),
                                 labels={QUOTA_NAME_LABEL: "solo"}, phase=Phase.RUNNING))
    engine.run_round(1.0)
    assert engine.is_admitted("early")


def test_a_readers_pause_is_called_as_it_reads_and_changes_nothing() -> None:
    """The visibility API hands the interpreter to the admission loop through `pause`
    (kube/visibility/view.py); the order must not depend on it."""
    engine = AdmissionEngine(oversell_rate="1")
    engine.upsert_quota(QuotaSpec("a", max=Resources.of(cpu="1")))
    engine.upsert_queue("a", "Priority", None)
    units = 2 * PAUSE_EVERY + 10
    for i in range(units):
        engine.upsert_unit(unit(f"u{i}", "a", priority=i % 3))
    result = engine.run_round(0.0)
    calls: list[int] = []
    paused = pending_order(result, {}, lambda: calls.append(1))
    plain = pending_order(result)
    assert paused.units == plain.units and paused.verdicts == plain.verdicts
    assert list(paused.in_queue) == list(plain.in_queue) and paused.tried == plain.tried
    # at least every PAUSE_EVERY entries of the record read and units given a verdict
    assert len(calls) >= len(result.outcomes) // PAUSE_EVERY + len(paused) // PAUSE_EVERY
    positions = own_quota_positions(plain, result.paths)
    calls.clear()
    assert own_quota_positions(paused, result.paths, lambda: calls.append(1)) == positions
    assert len(calls) == len(paused.runs) == 1


# --- a reader across rounds ------------------------------------------------------------------
def reference_rows(result: RoundResult) -> list[tuple[str, str, int, str, str]]:
    """The order as the record defines it, read the plain way: each unit's last entry, the
    waiting queues in order, then the units no round tries in record order."""
    last: dict[str, Outcome] = {}
    for outcome in result.outcomes:
        last[outcome.unit.uid] = outcome
    rows = []
    for queue, waiting in result.waiting.items():
        for index, u in enumerate(waiting, start=1):
            outcome = last[u.uid]
            rows.append((u.uid, queue, index, verdict_of(outcome).value,
                         verdict_message(outcome)))
    for outcome in last.values():
        if isinstance(outcome, NOT_TRIED):
            labels = outcome.unit.labels
            rows.append((outcome.unit.uid, labels.get(QUOTA_NAME_LABEL, ""), 0,
                         verdict_of(outcome).value, verdict_message(outcome)))
    return rows


def reference_own_quota(order: PendingOrder, paths: dict[str, tuple[str, ...]]) -> list[int]:
    counters: dict[str, int] = {}
    out = []
    for index, queue in enumerate(order.queues):
        if index >= order.tried:
            out.append(0)
            continue
        for quota in paths.get(queue) or (queue,):
            counters[quota] = counters.get(quota, 0) + 1
        out.append(counters[queue])
    return out


def rows_of(order: PendingOrder) -> list[tuple[str, str, int, str, str]]:
    return [(u.uid, q, n, v[1].value, v[2])
            for u, q, n, v in zip(order.units, order.queues, order.in_queue, order.verdicts,
                                  strict=True)]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(["a", "b", "parent", "solo", "gone", ""]),
                  st.integers(1, 3), st.integers(0, 2)),
        st.tuples(st.just("remove"), st.integers(0, 40), st.just(0), st.just(0)),
        st.tuples(st.just("hold"), st.sampled_from(["a", "solo"]), st.booleans(), st.just(0)),
        st.tuples(st.just("round"), st.just(""), st.just(0), st.just(0)),
    ),
    max_size=40,
)


@pytest.mark.parametrize("incremental", [True, False])
@settings(max_examples=80, deadline=None)
@given(ops=OPS)
def test_a_reader_across_rounds_reads_each_round_as_the_record_defines_it(
    incremental: bool, ops: list[tuple[str, str, int, int]]
) -> None:
    """Whatever the rounds did, the reader that keeps slices and parts from earlier rounds
    gives each round's order, verdicts and positions as a plain read of its record."""
    engine = tree_engine(incremental=incremental)
    reader = PendingReader()
    made: list[str] = []
    now = 0.0
    for op, target, amount, priority in [*ops, ("round", "", 0, 0)]:
        if op == "add":
            name = f"u{len(made)}"
            made.append(name)
            engine.upsert_unit(unit(name, target or None, cpu=str(amount), priority=priority))
        elif op == "remove" and made:
            engine.remove_unit(made[amount % len(made)])
        elif op == "hold":
            engine.upsert_queue(target, "Priority", HOLD if amount else {})
        elif op == "round":
            now += 1.0
            result = engine.run_round(now)
            order = reader.read(result)
            assert rows_of(order) == reference_rows(result)
            assert [order.position(i) for i in range(len(order))] == [
                i + 1 if i < order.tried else None for i in range(len(order))]
            assert list(own_quota_positions(order, result.paths)) == reference_own_quota(
                order, result.paths)


def test_a_quiet_round_rebuilds_nothing_and_a_busy_queue_only_its_slice() -> None:
    """15,000 units behind a busy queue cost the reader the busy queue's units (fails if each
    read builds every slice again)."""
    engine = tree_engine()
    for i in range(300):
        engine.upsert_unit(unit(f"s{i}", "solo", cpu="2"))  # never fits solo's 1 cpu
    for i in range(3):
        engine.upsert_unit(unit(f"b{i}", "b", cpu="3"))  # never fits b's 2 cpu
    reader = PendingReader()
    first = reader.read(engine.run_round(0.0))
    assert reader.rebuilt == len(first) == 303
    second = reader.read(engine.run_round(1.0))
    assert reader.rebuilt == 0 and rows_of(second) == rows_of(first)
    engine.upsert_unit(unit("b3", "b", cpu="3"))
    third = reader.read(engine.run_round(2.0))
    assert reader.rebuilt == 4
    assert [u.name for u in third.units if u.name.startswith("b")] == ["b0", "b1", "b2", "b3"]
