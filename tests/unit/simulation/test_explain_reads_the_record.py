"""Explain reads the round's record: for random states, every explanation is the real round's.

A random cluster (quota trees with empty maxes, missing parents and cycles; Priority, Block,
Intelligent and unregistered policies with max-depth, wait-for-pods-running and preemption;
units unlabelled, mislabelled, admitted, finished, backing off) is folded into a view, a few
rounds run so the policies hold state, and then every unit is explained. After that the
engine runs the real round at the same time, and for each unit the explanation's reason, its
position in the queue and the chain's verdicts must be what that round recorded, mapped by
the table below (written from SPEC, not from explain's code).

Fails on explain before issue 25.2 (its own sort counted units backing off in positions; an
empty max showed `fits: true`): checked by running this file against that code.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.domain.admission import (
    EmptyQuotaSpec,
    QuotaCycle,
    QuotaExceeded,
    QuotaMissing,
)
from koordqueue.domain.mapping import UnresolvedReason
from koordqueue.domain.names import (
    ENABLE_PREEMPTION_ANNOTATION,
    MAX_DEPTH_ANNOTATION,
    QUEUE_NAMESPACE,
    QUOTA_NAME_LABEL,
    QUOTA_PARENT_LABEL,
    WAIT_FOR_PODS_RUNNING_ANNOTATION,
)
from koordqueue.domain.queue_unit import FINISHED_PHASES
from koordqueue.domain.round import (
    Admit,
    BackingOff,
    BeyondMaxDepth,
    BlockedByHead,
    HighPriorityWaiting,
    NotOffered,
    Outcome,
    Preempted,
    QueueNotFound,
    QueueUnserved,
    Reclaimed,
    Reject,
    Unmapped,
    WaitingForPodsRunning,
)
from koordqueue.simulation.explain import ClusterView, Reason, explain

QUOTAS = ("a", "b", "c", "d")
PARENTS = (None, None, "a", "b", "ghost", "c")
POLICIES = ("Priority", "Block", "Intelligent", "Round")
PHASES = ("Enqueued", "Enqueued", "Enqueued", "Dequeued", "Running", "Succeed")


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    quotas = []
    for name in draw(st.lists(st.sampled_from(QUOTAS), unique=True, min_size=1)):
        parent = draw(st.sampled_from(PARENTS))
        labels = {QUOTA_PARENT_LABEL: parent} if parent and parent != name else {}
        cpu = draw(st.sampled_from([None, "0", "1", "2", "3", "5"]))
        spec = {"max": {"cpu": cpu}} if cpu is not None else {}
        quotas.append({"metadata": {"name": name, "namespace": "team", "labels": labels},
                       "spec": spec})
    queues = []
    for name in draw(st.lists(st.sampled_from(QUOTAS), unique=True)):
        annotations: dict[str, str] = {}
        if draw(st.booleans()):
            annotations[MAX_DEPTH_ANNOTATION] = str(draw(st.integers(1, 3)))
        if draw(st.booleans()):
            annotations[WAIT_FOR_PODS_RUNNING_ANNOTATION] = "true"
        if draw(st.booleans()):
            annotations[ENABLE_PREEMPTION_ANNOTATION] = "true"
        queues.append({
            "metadata": {"name": name, "namespace": QUEUE_NAMESPACE, "annotations": annotations},
            "spec": {"queuePolicy": draw(st.sampled_from(POLICIES)), "priority": 1000},
        })
    units = []
    for i in range(draw(st.integers(1, 9))):
        label = draw(st.sampled_from([*QUOTAS, "nope", None, ""]))
        labels = {} if label is None else {QUOTA_NAME_LABEL: label}
        units.append({
            "metadata": {"name": f"u{i}", "namespace": "ns", "uid": f"uid-{i}",
                         "labels": labels,
                         "creationTimestamp": f"2026-01-01T00:00:{draw(st.integers(0, 5)):02d}Z"},
            "spec": {"resource": {"cpu": draw(st.sampled_from(["0", "1", "2", "4"]))},
                     "priority": draw(st.sampled_from([0, 1, 5]))},
            "status": {"phase": draw(st.sampled_from(PHASES))},
        })
    backing_off = draw(st.lists(st.integers(0, 8), unique=True, max_size=3))
    rounds = draw(st.integers(0, 3))
    return {"quotas": quotas, "queues": queues, "units": units,
            "backing_off": backing_off, "rounds": rounds}


def expected_reason(outcome: Outcome | None, admitted: bool, finished: bool) -> Reason:
    """SPEC's verdict for what the round recorded (or, off the record, the unit's state)."""
    if outcome is None:
        assert finished or admitted, "a waiting unit without an entry in the record"
        return Reason.FINISHED if finished else Reason.ADMITTED
    if isinstance(outcome, Reject):
        d = outcome.decision
        if isinstance(d, QuotaExceeded):
            return Reason.QUOTA_EXCEEDED if d.path[0] == d.quota else Reason.ANCESTOR_EXHAUSTED
        return {EmptyQuotaSpec: Reason.EMPTY_QUOTA_SPEC, QuotaCycle: Reason.QUOTA_CYCLE,
                QuotaMissing: Reason.ANCESTOR_NOT_FOUND}[type(d)]
    if isinstance(outcome, Unmapped):
        no_label = outcome.unresolved.reason is UnresolvedReason.NO_LABEL
        return Reason.NO_QUOTA_LABEL if no_label else Reason.INVALID_QUOTA_LABEL
    table: dict[type, Reason] = {
        Admit: Reason.FITS, NotOffered: Reason.FITS,
        # queue-level preemption (issue 35 point 7): marked this round, its replicas not
        # running taken back the next
        Preempted: Reason.BEING_RECLAIMED, Reclaimed: Reason.RECLAIMED,
        QueueNotFound: Reason.QUEUE_NOT_FOUND, QueueUnserved: Reason.ADD_QUEUE_FAIL,
        WaitingForPodsRunning: Reason.WAITING_FOR_PODS_RUNNING,
        BeyondMaxDepth: Reason.BEYOND_MAX_DEPTH, BlockedByHead: Reason.BLOCKED_BY_HEAD,
        HighPriorityWaiting: Reason.BLOCKED_BY_HEAD, BackingOff: Reason.BACKOFF,
    }
    return table[type(outcome)]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_every_explanation_is_what_the_same_round_records(cluster: dict[str, Any]) -> None:
    now = 100.0
    view = ClusterView.from_objects(cluster["quotas"], cluster["queues"], cluster["units"],
                                    now=now)
    view.rebuilt = False  # the engine's own state, as a scenario replay has it
    engine = view.engine
    for t in range(cluster["rounds"]):
        engine.run_round(float(t))
    units = engine.units()
    for i in cluster["backing_off"]:
        if i < len(units) and not engine.is_admitted(units[i].uid):
            engine.defer(units[i].uid, now + 10)
    explanations = {u.uid: explain(view, u.key) for u in engine.units()}
    finished = {u.uid for u in engine.units() if u.phase in FINISHED_PHASES}
    admitted = {u.uid for u in engine.units() if engine.is_admitted(u.uid)}

    result = engine.run_round(now)  # the real round, at the time the dry one ran
    recorded = {o.unit.uid: o for o in result.outcomes}
    for uid, ex in explanations.items():
        assert ex is not None
        outcome = recorded.get(uid)
        assert ex.reason is expected_reason(outcome, uid in admitted, uid in finished), (
            ex.unit, outcome)
        waiting = result.waiting.get(ex.quota or "", [])
        keys = [u.key for u in waiting]
        if ex.unit in keys:
            index = keys.index(ex.unit)
            assert (ex.position, ex.queue_length, ex.ahead) == (
                index + 1, len(keys), keys[:index])
        else:
            assert ex.position is None
        if isinstance(outcome, Reject) and isinstance(outcome.decision,
                                                      QuotaExceeded | EmptyQuotaSpec):
            # CheckUsage's walk: every level below the one that refused has room
            verdicts = [(level.quota, level.fits) for level in ex.chain]
            refused = [q for q, _ in verdicts].index(outcome.decision.quota)
            assert [fits for _, fits in verdicts[:refused + 1]] == [True] * refused + [False]
        if isinstance(outcome, Admit):
            assert all(level.fits for level in ex.chain)


def test_a_refused_units_chain_counts_what_the_round_admitted_before_it() -> None:
    """The example hypothesis found: a (max 2 cpu) takes u0 (1 cpu) first, then refuses u1
    (2 cpu) in the same round. Read before the round, the chain showed `a` with room (used 0);
    it must show the usage the round refused u1 at. Fails with `_tree_as_tried` returning the
    tree unchanged."""
    def meta(name: str, **extra: Any) -> dict[str, Any]:
        return {"name": name, "namespace": "team", "labels": {}, **extra}

    quotas = [{"metadata": meta("a"), "spec": {"max": {"cpu": "2"}}}]
    queues = [{"metadata": {"name": "a", "namespace": "koord-queue", "annotations": {}},
               "spec": {"queuePolicy": "Priority", "priority": 1000}}]
    units = [
        {"metadata": {"name": name, "namespace": "ns", "uid": name,
                      "labels": {QUOTA_NAME_LABEL: "a"},
                      "creationTimestamp": "2026-01-01T00:00:00Z"},
         "spec": {"resource": {"cpu": cpu}, "priority": 0}, "status": {"phase": "Enqueued"}}
        for name, cpu in (("u0", "1"), ("u1", "2"))
    ]
    view = ClusterView.from_objects(quotas, queues, units, now=100.0)
    first, second = explain(view, "ns/u0"), explain(view, "ns/u1")
    assert first is not None and second is not None
    assert first.reason is Reason.FITS and [lv.fits for lv in first.chain] == [True]
    assert second.reason is Reason.QUOTA_EXCEEDED
    (level,) = second.chain
    assert not level.fits
    (check,) = level.checks
    assert check.resource == "cpu" and not check.fits
    assert 2 * check.used == check.request == check.limit  # u0's 1 cpu counted
