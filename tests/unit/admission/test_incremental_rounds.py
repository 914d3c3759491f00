"""Incremental rounds (issue 11, part 4): a round re-checks only what its changes can affect,
and records and decides exactly what the full scan (`skip_unchanged=False`) does.

The property test drives both engines with the same random event streams — quota adds,
edits, removes and reparents (cycles and missing parents included), queue policy and setting
changes, unit adds, updates, finishes and removes, requeues, rollbacks, back-offs, the fast
path, dry rounds and rounds at advancing times — and compares every answer, every round
record in full, and the engines' state after each step. It also plans each round's effects
as the controller does (the incremental engine's from the record's new entries only, the
full scan's from every entry) and checks both engines' per-queue unit counts against a recount.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.domain.effects import Effect, SetUnitStatus, effects
from koordqueue.domain.engine import AdmissionEngine, RoundResult
from koordqueue.domain.mapping import QuotaName, queue_name_for
from koordqueue.domain.names import (
    BLOCK_TIMEOUT_ANNOTATION,
    ENABLE_PREEMPTION_ANNOTATION,
    MAX_DEPTH_ANNOTATION,
    PREEMPTIBLE_ANNOTATION,
    PRIORITY_THRESHOLD_ANNOTATION,
    QUOTA_NAME_LABEL,
    WAIT_FOR_PODS_RUNNING_ANNOTATION,
)
from koordqueue.domain.queue_unit import FINISHED_PHASES, AdmissionCount, Phase, QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import BlockedByHead, Reject

QUOTAS = ("q0", "q1", "q2", "q3")
UIDS = tuple(f"u{i}" for i in range(30))
POLICIES = ("Priority", "Block", "Intelligent")


def resources(draw: st.DrawFn, top: int) -> Resources:
    """cpu and memory in a random order, zeros included (a zero limit is still a limit)."""
    amounts: dict[str, str] = {}
    for name in draw(st.permutations(("cpu", "memory"))):
        if draw(st.booleans()):
            amounts[name] = str(draw(st.integers(0, top)))
    return Resources.of(amounts)


@st.composite
def quota_op(draw: st.DrawFn) -> tuple[Any, ...]:
    name = draw(st.sampled_from(QUOTAS))
    parent = draw(st.sampled_from(("root", "root", *QUOTAS, "gone")))
    namespace = draw(st.sampled_from(("a", "a", "b")))
    return ("quota", QuotaSpec(name, max=resources(draw, 5), parent=parent, namespace=namespace))


@st.composite
def queue_op(draw: st.DrawFn) -> tuple[Any, ...]:
    name = draw(st.sampled_from((*QUOTAS, "nope")))
    policy = draw(st.sampled_from((*POLICIES, *POLICIES, "Round")))
    annotations: dict[str, str] = {}
    if draw(st.integers(0, 3)) == 0:
        annotations[MAX_DEPTH_ANNOTATION] = draw(st.sampled_from(("1", "2", "3")))
    if draw(st.integers(0, 3)) == 0:
        annotations[WAIT_FOR_PODS_RUNNING_ANNOTATION] = "true"
        if draw(st.booleans()):
            annotations[ENABLE_PREEMPTION_ANNOTATION] = "true"
    if draw(st.integers(0, 3)) == 0:
        annotations[BLOCK_TIMEOUT_ANNOTATION] = draw(st.sampled_from(("5", "100")))
    if draw(st.integers(0, 3)) == 0:
        annotations[PRIORITY_THRESHOLD_ANNOTATION] = draw(st.sampled_from(("1", "3")))
    return ("queue", name, policy, annotations)


@st.composite
def unit_op(draw: st.DrawFn, uniform: bool = False) -> tuple[Any, ...]:
    """A unit add or update; `uniform`: mostly 1-cpu units, so that a release followed by an
    admission often brings a chain's usage back to what its parked units were checked at."""
    uid = draw(st.sampled_from(UIDS))
    name = draw(st.sampled_from((uid, uid, "same")))  # equal keys: arrival breaks the tie
    label = draw(st.sampled_from((*QUOTAS, *QUOTAS, "nope", None, "bad label!")))
    phase = draw(
        st.sampled_from(
            (Phase.ENQUEUED,) * 4
            + (Phase.DEQUEUED, Phase.RUNNING, Phase.SUCCEED, Phase.FAILED, Phase.BACKOFF)
        )
    )
    annotations = {PREEMPTIBLE_ANNOTATION: "true"} if draw(st.integers(0, 4)) == 0 else {}
    return (
        "unit",
        QueueUnit(
            "ns",
            name,
            uid=uid,
            resource=(
                Resources.of(cpu="1") if uniform and draw(st.integers(0, 4)) else resources(draw, 3)
            ),
            priority=draw(st.integers(0, 5)),
            labels={} if label is None else {QUOTA_NAME_LABEL: label},
            annotations=annotations,
            phase=phase,
            created=float(draw(st.integers(0, 3))),
            # issue 35: inactive units keep their place unoffered, admitted ones are evicted
            active=draw(st.integers(0, 4)) != 0,
            reclaiming=draw(st.integers(0, 6)) == 0,
            max_exec_seconds=draw(st.sampled_from((None, None, None, 1, 5))),
            pods_ready_since=draw(st.sampled_from((None, 0.0, 3.0))),
            accumulated_seconds=draw(st.sampled_from((0, 0, 2))),
            # issue 35 point 7: pod sets with some replicas running, some marked; the label
            admissions=draw(st.sampled_from((
                (), (), (AdmissionCount(name, 2),), (AdmissionCount(name, 3, running=1),),
                (AdmissionCount(name, 2, running=2),), (AdmissionCount(name, 2, 0, 2),),
            ))),
            last_allocate=draw(st.sampled_from((None, None, 0.0))),
        ),
    )


def uid_op(kind: str) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.tuples(st.just(kind), st.sampled_from(UIDS))


OPS = st.one_of(
    quota_op(),
    st.tuples(st.just("rmquota"), st.sampled_from(QUOTAS), st.sampled_from((None, "a", "b"))),
    queue_op(),
    st.tuples(st.just("rmqueue"), st.sampled_from(QUOTAS)),
    unit_op(),
    unit_op(),
    uid_op("rmunit"),
    uid_op("finish"),
    uid_op("start"),
    uid_op("rollback"),
    uid_op("fast"),
    st.tuples(st.just("requeue"), st.sampled_from(UIDS), st.sampled_from((1.0, 30.0))),
    st.tuples(st.just("defer"), st.sampled_from(UIDS), st.sampled_from((1.0, 30.0))),
    st.tuples(st.just("round"), st.sampled_from((0.0, 1.0, 1.0, 7.0, 200.0))),
    st.tuples(st.just("round"), st.sampled_from((0.0, 1.0, 3.0))),
    st.tuples(st.just("dry"), st.just(0.0)),
)


@dataclass
class Twin:
    """The full-scan engine and the incremental one, driven in lockstep."""

    full: AdmissionEngine = field(default_factory=lambda: AdmissionEngine(skip_unchanged=False))
    fast: AdmissionEngine = field(default_factory=AdmissionEngine)
    now: float = 0.0
    rounds: int = 0
    reported_full: dict[str, str] = field(default_factory=dict)
    reported_fast: dict[str, str] = field(default_factory=dict)
    counts_full: dict[str, tuple[int, int]] = field(default_factory=dict)
    counts_fast: dict[str, tuple[int, int]] = field(default_factory=dict)
    pending: tuple[RoundResult, RoundResult] | None = None
    """The last round's records, compared in full only after the next step changed the
    engines, so that an entry recorded lazily from state the step changes would show."""

    def both(self, call: str, *args: Any) -> Any:
        a = getattr(self.full, call)(*args)
        b = getattr(self.fast, call)(*args)
        assert a == b, (call, args)
        return a

    def apply(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        previous, self.pending = self.pending, None
        if kind == "quota":
            self.both("upsert_quota", op[1])
        elif kind == "rmquota":
            self.both("remove_quota", op[1], op[2])
        elif kind == "queue":
            self.both("upsert_queue", op[1], op[2], op[3])
        elif kind == "rmqueue":
            self.both("remove_queue", op[1])
        elif kind == "unit":
            self.both("upsert_unit", op[1])
        elif kind == "rmunit":
            self.both("remove_unit", op[1])
            self.reported_full.pop(op[1], None)  # (the controller forgets a deleted unit)
            self.reported_fast.pop(op[1], None)
        elif kind in ("finish", "start"):
            current = self.full.unit(op[1])
            if current is not None:
                phase = Phase.SUCCEED if kind == "finish" else Phase.RUNNING
                self.both("upsert_unit", _with_phase(current, phase))
        elif kind == "release":  # finish the k-th admitted unit, if any
            admitted = sorted(u.uid for u in self.full.units() if self.full.is_admitted(u.uid))
            if admitted:
                unit = self.full.unit(admitted[op[1] % len(admitted)])
                assert unit is not None
                self.both("upsert_unit", _with_phase(unit, Phase.SUCCEED))
        elif kind == "rollback":
            self.both("rollback", op[1])
        elif kind == "fast":
            self.both("admit_if_queue_idle", op[1], self.now)
        elif kind == "requeue":
            self.both("requeue", op[1], self.now + op[2])
        elif kind == "defer":
            self.both("defer", op[1], self.now + op[2])
        elif kind == "round":
            self.now += op[1]
            self.rounds += 1
            record, fast_record = self.full.run_round(self.now), self.fast.run_round(self.now)
            assert record.admitted == fast_record.admitted
            self.same_effects(record, fast_record)
            self.pending = record, fast_record
        elif kind == "dry":
            self.both("dry_round", self.now)
        if previous is not None:
            assert previous[0] == previous[1]
        self.same_state()

    def finish(self) -> None:
        if self.pending is not None:
            assert self.pending[0] == self.pending[1]

    def same_effects(self, record: RoundResult, fast_record: RoundResult) -> None:
        """What the controller writes for the round: planned from the new entries only (the
        incremental engine) and from the whole record (the full scan) — the same effects."""
        everything = effects(record, self.reported_full)
        planned = effects(fast_record.outcomes.new(), self.reported_fast)
        assert planned == everything
        remember(everything, self.reported_full)
        remember(planned, self.reported_fast)

    def same_state(self) -> None:
        full, fast = self.full, self.fast
        for engine, counts in ((full, self.counts_full), (fast, self.counts_fast)):
            counts.update(engine.count_changes())
            assert {q: c for q, c in counts.items() if c != (0, 0)} == recount(engine)
        assert full.units() == fast.units()
        assert full.tree.admitted_uids() == fast.tree.admitted_uids()
        assert full.tree.report() == fast.tree.report()
        for quota in (*QUOTAS, "nope"):
            a, b = full.queue_policy(quota), fast.queue_policy(quota)
            assert (a is None) == (b is None)
            if a is not None and b is not None:
                assert vars_of(a) == vars_of(b), quota


def remember(planned: list[Effect], reported: dict[str, str]) -> None:
    """Every status write goes through (as the simulator records them)."""
    for effect in planned:
        if isinstance(effect, SetUnitStatus):
            reported[effect.unit.uid] = effect.message


def recount(engine: AdmissionEngine) -> dict[str, tuple[int, int]]:
    """Units waiting / admitted per queue, from every unit (what the metrics used to walk)."""
    counts: dict[str, list[int]] = {}
    for unit in engine.units():
        resolution = queue_name_for(unit.labels)
        if unit.phase in FINISHED_PHASES or not isinstance(resolution, QuotaName):
            continue
        entry = counts.setdefault(resolution.name, [0, 0])
        entry[1 if engine.is_admitted(unit.uid) else 0] += 1
    return {q: (c[0], c[1]) for q, c in counts.items()}


def vars_of(policy: object) -> dict[str, object]:
    """A policy's state (its slots and attributes), for comparing two engines' policies."""
    return {k: v for k, v in vars(policy).items() if k != "settings"}


def _with_phase(unit: QueueUnit, phase: Phase) -> QueueUnit:
    from dataclasses import replace

    return replace(unit, phase=phase)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=80))
def test_incremental_rounds_decide_and_record_exactly_like_the_full_scan(
    ops: list[tuple[Any, ...]],
) -> None:
    twin = Twin()
    for op in ops:
        twin.apply(op)
    twin.apply(("round", 1.0))
    twin.finish()


CHURN = st.one_of(
    st.tuples(st.just("release"), st.integers(0, 30)),
    st.tuples(st.just("release"), st.integers(0, 30)),
    st.tuples(st.just("release"), st.integers(0, 30)),
    uid_op("finish"),
    uid_op("start"),
    unit_op(uniform=True),
    uid_op("rmunit"),
    uid_op("requeue").map(lambda op: ("requeue", op[1], 1.0)),
    quota_op(),
)


@st.composite
def churn_stream(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Long queues over small quotas, then releases, arrivals and edits, each followed by a
    round or two: the tails are long, reused in part and followed by new rejections."""
    ops: list[tuple[Any, ...]] = [
        ("quota", QuotaSpec("q0", max=Resources.of(cpu=str(draw(st.integers(2, 6)))))),
    ]
    plain = draw(st.booleans())  # cpu-only quotas and Priority queues: tails reused most
    for name in QUOTAS[1:]:
        parent = draw(st.sampled_from(("root", "q0")))
        limit = Resources.of(cpu=str(draw(st.integers(1, 4)))) if plain else resources(draw, 4)
        ops.append(("quota", QuotaSpec(name, max=limit, parent=parent)))
    for name in QUOTAS:
        annotations = {}
        if draw(st.integers(0, 4)) == 0:
            annotations[MAX_DEPTH_ANNOTATION] = "4"
        policy = "Priority" if plain else draw(st.sampled_from(POLICIES))
        ops.append(("queue", name, policy, annotations))
    ops.extend(draw(st.lists(unit_op(uniform=True), min_size=12, max_size=30)))
    ops.append(("round", 0.0))
    for change in draw(st.lists(CHURN, min_size=1, max_size=30)):
        ops.append(change)
        for _ in range(draw(st.integers(1, 2))):
            ops.append(("round", draw(st.sampled_from((0.5, 1.0, 250.0)))))
    return ops


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(churn_stream())
def test_incremental_rounds_match_the_full_scan_under_release_churn(
    ops: list[tuple[Any, ...]],
) -> None:
    twin = Twin()
    for op in ops:
        twin.apply(op)
    twin.finish()


@st.composite
def busy_stream(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Quotas and queues first, many units, then rounds between single changes: the shape
    where parked units are reused most (and wrongly reused ones would show)."""
    ops: list[tuple[Any, ...]] = []
    for name in QUOTAS:
        parent = draw(st.sampled_from(("root", "root", "q0")))
        if name == "q0":
            parent = "root"
        ops.append(("quota", QuotaSpec(name, max=resources(draw, 6), parent=parent)))
        ops.append(("queue", name, draw(st.sampled_from(POLICIES)), {}))
    ops.extend(draw(st.lists(unit_op(), min_size=8, max_size=24)))
    for change in draw(st.lists(OPS, min_size=1, max_size=40)):
        ops.append(change)
        ops.append(("round", draw(st.sampled_from((0.0, 1.0, 200.0)))))
    return ops


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_stream())
def test_incremental_rounds_match_the_full_scan_with_a_parked_backlog(
    ops: list[tuple[Any, ...]],
) -> None:
    twin = Twin()
    for op in ops:
        twin.apply(op)
    twin.finish()


PAUSING_QUEUE: Final = {MAX_DEPTH_ANNOTATION: "1", WAIT_FOR_PODS_RUNNING_ANNOTATION: "true",
                         BLOCK_TIMEOUT_ANNOTATION: "5", PRIORITY_THRESHOLD_ANNOTATION: "1"}
"""A wait-for-pods-running Priority queue with preemption: an admitted unit whose pods do
not run pauses it."""


def _waiting_then_admitted(admitted: dict[str, Any], step: float) -> list[tuple[str, str]]:
    """The full scan's outcomes (type, unit) of one round over a waiting unit u0 (marked
    for reclaim) and an admitted unit u1 (`admitted`: its further fields) in quota q0's
    pausing queue; the twin checks the incremental round gives the same."""
    labels = {QUOTA_NAME_LABEL: "q0"}
    notes = {PREEMPTIBLE_ANNOTATION: "true"}
    twin = Twin()
    for op in (
        ("quota", QuotaSpec("q0")),
        ("unit", QueueUnit("ns", "u0", uid="u0", labels=labels, annotations=notes,
                           reclaiming=True)),
        ("unit", QueueUnit("ns", "u1", uid="u1", labels=labels, annotations=notes,
                           phase=Phase.DEQUEUED, **admitted)),
        ("queue", "q0", "Priority", PAUSING_QUEUE),
        ("round", step),
    ):
        twin.apply(op)
    twin.finish()
    full, _fast = twin.pending or (None, None)
    assert full is not None
    return [(type(o).__name__, o.unit.name) for o in full.outcomes]


def test_a_unit_whose_budget_runs_out_no_longer_holds_a_wait_for_pods_running_queue() -> None:
    """Found by the parked-backlog property: a unit admitted, not running, whose execution
    budget ran out this round is deactivated and left out of the queue's admitted set by the
    full scan (so a waiting unit is offered); the incremental round still counted it, paused
    the queue behind it and preempted it for the waiting unit. The same for a deactivated
    admitted unit. Fails without `held_out` in run_incremental."""
    outcomes = _waiting_then_admitted({"max_exec_seconds": 1, "pods_ready_since": 0.0}, 1.0)
    assert outcomes == [("BudgetSpent", "u1"), ("Admit", "u0")]


def test_a_unit_reclaimed_this_round_no_longer_holds_a_wait_for_pods_running_queue() -> None:
    """Found by the parked-backlog property: an admitted unit marked for reclaim (pods not
    running) is reclaimed at the round's start and, in the full scan, no longer holds its
    wait-for-pods-running queue, so the waiting unit is admitted. The incremental round
    still counted it among the queue's admitted units (its index entry is renewed only
    after the round), paused the queue behind it and preempted it a second time. Fails
    without the reclaimed units in `held_out` (run_incremental)."""
    outcomes = _waiting_then_admitted(
        {"reclaiming": True, "admissions": (AdmissionCount("u1", 2),)}, 0.0)
    assert outcomes == [("Reclaimed", "u1"), ("Admit", "u0")]


class CountingEngine(AdmissionEngine):
    """Counts CheckUsage calls (try_admit and check) made by rounds."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.checks = 0
        tree = self.tree
        try_admit, check = tree.try_admit, tree.check

        def counted_try_admit(*args: Any, **kw: Any) -> Any:
            self.checks += 1
            return try_admit(*args, **kw)

        def counted_check(*args: Any, **kw: Any) -> Any:
            self.checks += 1
            return check(*args, **kw)

        tree.try_admit = counted_try_admit  # type: ignore[method-assign]
        tree.check = counted_check  # type: ignore[method-assign]


def backlog(policy: str, *, skip_unchanged: bool = True, units: int = 200) -> CountingEngine:
    """Two full quotas of 4 cpu (4 running units each) and `units` 1-cpu units waiting."""
    engine = CountingEngine(skip_unchanged=skip_unchanged)
    for name in ("a", "b"):
        engine.upsert_quota(QuotaSpec(name, max=Resources.of(cpu="4")))
        engine.upsert_queue(name, policy, None)
    for i in range(units):
        engine.upsert_unit(
            QueueUnit(
                "ns", f"w{i}", uid=f"w{i}", resource=Resources.of(cpu="1"), priority=i % 7,
                labels={QUOTA_NAME_LABEL: "ab"[i % 2]}, created=float(i),
            )
        )
    engine.run_round(0.0)  # admits 4 per quota; the rest is parked
    engine.run_round(1.0)
    return engine


def test_a_round_after_one_release_checks_only_up_to_the_unit_that_fills_the_quota() -> None:
    engine = backlog("Priority")
    admitted = next(u for u in engine.units() if engine.is_admitted(u.uid) and u.labels[
        QUOTA_NAME_LABEL] == "a")
    engine.checks = 0
    engine.run_round(2.0)
    assert engine.checks == 0  # nothing changed: every parked unit's rejection is reused
    engine.upsert_unit(_with_phase(admitted, Phase.SUCCEED))
    record = engine.run_round(3.0)
    assert engine.checks == 1  # the head of queue a fits; the others' chain is full again
    assert len(record.admitted) == 1
    assert sum(isinstance(o, Reject) for o in record.outcomes) == 200 - 8 - 1


def test_the_full_scan_checks_every_waiting_unit_every_round() -> None:
    engine = backlog("Priority", skip_unchanged=False)
    engine.checks = 0
    engine.run_round(2.0)
    assert engine.checks == 200 - 8


def test_a_blocked_queue_is_not_walked_again_while_nothing_changes() -> None:
    engine = backlog("Block")
    engine.run_round(2.0)
    engine.checks = 0
    first = engine.run_round(3.0)
    second = engine.run_round(4.0)
    assert engine.checks == 0
    assert first == second
    assert first.outcomes[0] is second.outcomes[0]  # reused, not rebuilt


def test_a_quota_edit_makes_parked_units_be_checked_again() -> None:
    engine = backlog("Priority")
    engine.checks = 0
    engine.upsert_quota(QuotaSpec("a", max=Resources.of(cpu="6")))
    record = engine.run_round(2.0)
    assert len(record.admitted) == 2
    assert engine.checks == 100 - 4  # queue a: every parked unit; queue b: none


def test_an_unchanged_quota_upsert_keeps_parked_units_parked() -> None:
    engine = backlog("Priority")
    engine.checks = 0
    engine.upsert_quota(QuotaSpec("a", max=Resources.of(cpu="4")))
    engine.run_round(2.0)
    assert engine.checks == 0


def test_a_sibling_release_wakes_units_refused_by_the_shared_parent_only() -> None:
    engine = CountingEngine()
    engine.upsert_quota(QuotaSpec("p", max=Resources.of(cpu="2")))
    for name in ("a", "b"):
        engine.upsert_quota(QuotaSpec(name, max=Resources.of(cpu="9"), parent="p"))
        engine.upsert_queue(name, "Priority", None)
    engine.upsert_quota(QuotaSpec("c", max=Resources.of(cpu="1")))
    engine.upsert_queue("c", "Priority", None)

    def waiting(name: str, quota: str, cpu: str = "1") -> QueueUnit:
        return QueueUnit("ns", name, uid=name, resource=Resources.of(cpu=cpu),
                         labels={QUOTA_NAME_LABEL: quota})

    for u in (waiting("a1", "a"), waiting("a2", "a"), waiting("b1", "b"), waiting("c1", "c"),
              waiting("c2", "c")):
        engine.upsert_unit(u)
    engine.run_round(0.0)  # a1, a2 fill p; b1 waits on p; c1 fills c; c2 waits on c
    engine.checks = 0
    engine.upsert_unit(_with_phase(engine.unit("a1"), Phase.SUCCEED))  # type: ignore[arg-type]
    record = engine.run_round(1.0)
    assert [u.name for u, _ in record.admitted] == ["b1"]
    assert engine.checks == 1  # c2 was refused by c, which did not change


def test_a_quiet_block_queue_still_retries_its_head_after_the_idle_spell() -> None:
    engine = backlog("Block")
    engine.run_round(2.0)
    engine.checks = 0
    engine.run_round(100.0)
    assert engine.checks == 0  # blocked and quiet: the last record is reused
    record = engine.run_round(1000.0)  # > BLOCKED_IDLE_RETRY since the last try
    heads = [o for o in record.outcomes if isinstance(o, Reject)]
    assert len(heads) == 2  # each queue's head is offered again and blocks again, now
    assert all(o.since == 1000.0 for o in record.outcomes if isinstance(o, BlockedByHead))
    assert engine.checks == 0  # its chain did not change: the refusal is reused, not rechecked


def test_a_block_timeout_lets_a_quiet_queue_pass_once_it_expires() -> None:
    engine = CountingEngine()
    engine.upsert_quota(QuotaSpec("a", max=Resources.of(cpu="2")))
    engine.upsert_queue("a", "Block", {BLOCK_TIMEOUT_ANNOTATION: "5"})
    for name, cpu, priority in (("big", "3", 9), ("small", "1", 1)):
        engine.upsert_unit(QueueUnit("ns", name, uid=name, resource=Resources.of(cpu=cpu),
                                     priority=priority, labels={QUOTA_NAME_LABEL: "a"}))
    assert engine.run_round(0.0).admitted == []  # big blocks the quota
    assert engine.run_round(1.0).admitted == []  # quiet
    record = engine.run_round(6.0)  # the hold is 6 s old: one Priority-style pass
    assert [u.name for u, _ in record.admitted] == ["small"]


def test_a_block_release_round_records_only_what_it_tried_as_new() -> None:
    for policy in ("Block", "Intelligent"):
        engine = backlog(policy)
        admitted = next(u for u in engine.units() if engine.is_admitted(u.uid) and u.labels[
            QUOTA_NAME_LABEL] == "a")
        engine.upsert_unit(_with_phase(admitted, Phase.SUCCEED))
        record = engine.run_round(3.0)
        new = list(record.outcomes.new())
        assert [type(o).__name__ for o in new] == ["Admit", "Reject"], policy
        assert len(record.outcomes) == 200 - 8  # the blocked rest is still recorded
        assert list(engine.run_round(4.0).outcomes.new()) == []


def test_a_renewed_unit_gets_a_new_entry_in_the_next_record() -> None:
    engine = backlog("Priority")
    assert list(engine.run_round(2.0).outcomes.new()) == []  # parked: every entry carried
    engine.renew("w10")
    new = list(engine.run_round(3.0).outcomes.new())
    assert "w10" in {o.unit.uid for o in new}
    assert all(isinstance(o, Reject) for o in new)


def test_a_rejection_is_planned_again_after_its_queue_was_not_found_for_a_round() -> None:
    """Found by the property: the queue's last tail must not be carried over a round that
    wrote another message for its units (queue not found), or the rejection's message is
    never written again once the quota is back."""
    twin = Twin()
    spec = QuotaSpec("q0", max=Resources.of(cpu="1"), parent="gone")
    unit = QueueUnit("ns", "u0", uid="u0", resource=Resources.of(cpu="1"),
                     labels={QUOTA_NAME_LABEL: "q0"}, phase=Phase.ENQUEUED)
    for op in (("quota", spec), ("queue", "q0", "Priority", {}), ("unit", unit), ("round", 0.0),
               ("rmquota", "q0", None), ("round", 0.0), ("quota", spec), ("round", 0.0)):
        twin.apply(op)
    twin.finish()
    assert twin.reported_fast["u0"] == twin.reported_full["u0"]
    assert "not exist" in twin.reported_fast["u0"]
