"""The visibility view: one read of the record per round, caches that follow the units."""

from __future__ import annotations

from dataclasses import replace

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import Record, RoundResult
from koordqueue.kube.visibility.view import (
    BadQuery,
    Parts,
    PendingView,
    Publication,
    Query,
    Snapshot,
    _matches,
    _rows,
    parse_query,
)


def engine_with_backlog() -> AdmissionEngine:
    engine = AdmissionEngine()
    engine.upsert_quota(QuotaSpec("q", max=Resources.of(cpu="1")))
    engine.upsert_queue("q", "Priority")
    for name, priority in (("a", 0), ("b", 1), ("c", 2)):
        engine.upsert_unit(QueueUnit("ns", name, uid=name, resource=Resources.of(cpu="1"),
                                     priority=priority, labels={QUOTA_NAME_LABEL: "q"}))
    return engine


def names_of(answer: Parts) -> list[tuple[str, int]]:
    items = orjson.loads(bytes(answer))["items"]
    assert isinstance(items, list)
    return [(i["metadata"]["name"], i["priority"]) for i in items]


def test_a_round_is_read_once_and_a_changed_unit_is_rendered_again() -> None:
    engine = engine_with_backlog()
    publication = Publication()
    view = PendingView(publication)
    assert view.snapshot() is None  # no round yet
    publication.publish(engine.run_round(1.0), 1.0)
    snap = view.snapshot()
    assert snap is not None and view.snapshot() is snap  # same round: same snapshot
    assert names_of(view.pending(snap, Query())) == [("b", 1), ("a", 0)]  # c admitted
    b = engine.unit("b")
    assert b is not None
    engine.upsert_unit(replace(b, priority=-5))
    publication.publish(engine.run_round(2.0), 2.0)
    fresh = view.snapshot()
    assert fresh is not snap and fresh is not None
    assert names_of(view.pending(fresh, Query())) == [("a", 0), ("b", -5)]
    assert fresh.round.number == 2


def test_query_options_are_read_or_refused_by_name() -> None:
    assert parse_query({"limit": ["5"], "offset": ["2"], "phase": ["Enqueued"]}) == Query(
        phase="Enqueued", offset=2, limit=5)
    for bad in ({"limit": ["-1"]}, {"offset": ["x"]}):
        try:
            parse_query(bad)
        except BadQuery as exc:
            assert next(iter(bad)) in str(exc)
        else:
            raise AssertionError(f"{bad} accepted")


def first_round() -> tuple[AdmissionEngine, Publication, PendingView, Snapshot]:
    """The backlog's first round published and read."""
    engine = engine_with_backlog()
    publication = Publication()
    view = PendingView(publication)
    publication.publish(engine.run_round(1.0), 1.0)
    first = view.snapshot()
    assert first is not None
    return engine, publication, view, first


def test_a_later_round_with_the_same_order_reuses_the_answers_under_its_own_header() -> None:
    engine, publication, view, first = first_round()
    answer = view.pending(first, Query())
    publication.publish(engine.run_round(2.0), 2.0)  # nothing changed
    second = view.snapshot()
    assert second is not None and second is not first
    assert second.answers is first.answers
    again = view.pending(second, Query())
    assert again.chunks[1] is answer.chunks[1]  # the items: kept, not rebuilt
    assert orjson.loads(bytes(again))["round"]["number"] == 2  # the header: this round's
    assert names_of(again) == names_of(answer)
    # another query of the same order is built once, then kept too
    one = view.pending(second, Query(limit=1))
    assert names_of(one) == [("b", 1)]
    assert view.pending(second, Query(limit=1)).chunks[1] is one.chunks[1]


def test_equal_copies_of_every_unit_keep_the_answers_and_the_snapshot_takes_the_copies() -> None:
    """A resync re-reads every unit: equal objects, not the same ones. The answers stay; the
    snapshot holds the copies from then on, so the next round compares by identity instead
    of walking every unit by value (as it did every round while it held the originals)."""
    engine, publication, view, first = first_round()
    answer = view.pending(first, Query())
    for uid in ("a", "b", "c"):
        unit = engine.unit(uid)
        assert unit is not None
        engine.upsert_unit(replace(unit))
    publication.publish(engine.run_round(2.0), 2.0)
    second = view.snapshot()
    assert second is not None and second.answers is first.answers
    assert view.pending(second, Query()).chunks[1] is answer.chunks[1]
    assert all(unit is engine.unit(unit.uid) for unit in second.order.units)
    assert [u.uid for u in second.order.units] == ["b", "a"]


def test_a_new_unit_or_a_moved_quota_rebuilds_the_order() -> None:
    engine, publication, view, first = first_round()
    view.pending(first, Query())
    engine.upsert_unit(QueueUnit("ns", "d", uid="d", resource=Resources.of(cpu="1"),
                                 priority=9, labels={QUOTA_NAME_LABEL: "q"}))
    publication.publish(engine.run_round(2.0), 2.0)
    second = view.snapshot()
    assert second is not None and second.answers is not first.answers
    assert names_of(view.pending(second, Query())) == [("d", 9), ("b", 1), ("a", 0)]
    engine.upsert_quota(QuotaSpec("top", max=Resources.of(cpu="8")))
    engine.upsert_quota(QuotaSpec("q", max=Resources.of(cpu="1"), parent="top"))
    publication.publish(engine.run_round(3.0), 3.0)
    third = view.snapshot()
    assert third is not None and third.answers is not second.answers
    assert third.paths["q"] == ("q", "top")
    top = orjson.loads(bytes(view.in_quota(third, "top", Query())))
    assert [i["positionInQuota"] for i in top["items"]] == [1, 2, 3]


def test_every_query_selects_the_units_a_walk_of_the_order_would() -> None:
    """Selection by slices (queue only, or nothing asked) against the walk by each unit."""
    engine = AdmissionEngine()
    for name in ("q", "r"):
        engine.upsert_quota(QuotaSpec(name, max=Resources.of(cpu="1")))
        engine.upsert_queue(name, "Priority")
    for i, (quota, ns) in enumerate([("q", "x"), ("r", "y"), ("q", "y"), ("gone", "x"),
                                     ("r", "x"), ("q", "x"), ("gone", "y")]):
        engine.upsert_unit(QueueUnit(ns, f"u{i}", uid=f"u{i}", resource=Resources.of(cpu="1"),
                                     labels={QUOTA_NAME_LABEL: quota}))
    publication = Publication()
    view = PendingView(publication)
    publication.publish(engine.run_round(1.0), 1.0)
    snap = view.snapshot()
    assert snap is not None and snap.order.tried < len(snap.order)  # "gone": not tried
    for query in (Query(), Query(queue="q"), Query(queue="gone"), Query(queue="r", namespace="x"),
                  Query(namespace="y"), Query(phase="Enqueued"), Query(queue="none")):
        for name in ("", "r"):
            want = name or query.queue
            walked = [i for i in range(len(snap.order))
                      if _matches(snap.order, i, query, want)]
            assert list(_rows(snap.order, query, want)) == walked, (query, name)
    assert [i["metadata"]["name"] for i in orjson.loads(
        bytes(view.pending(snap, Query(queue="gone"))))["items"]] == ["u3", "u6"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "remove", "round"]),
                          st.sampled_from(["parent", "a", "b", "gone"]), st.integers(0, 30)),
                max_size=40),
       st.integers(0, 6), st.integers(1, 40))
def test_items_kept_by_runs_are_the_items_rendered_unit_by_unit(
    ops: list[tuple[str, str, int]], offset: int, limit: int
) -> None:
    """Round after round (queues growing, shrinking, moving in the order), an answer put
    together from each queue's kept run of items is the one rendered unit by unit."""
    engine = AdmissionEngine()
    engine.upsert_quota(QuotaSpec("parent", max=Resources.of(cpu="2"), is_parent=True))
    for name in ("a", "b"):
        engine.upsert_quota(QuotaSpec(name, max=Resources.of(cpu="1"), parent="parent"))
    for name in ("parent", "a", "b"):
        engine.upsert_queue(name, "Priority")
    publication = Publication()
    view = PendingView(publication)
    made: list[str] = []
    for step, (op, quota, n) in enumerate([*ops, ("round", "", 0)]):
        if op == "add":
            made.append(f"u{len(made)}")
            engine.upsert_unit(QueueUnit("ns", made[-1], uid=made[-1], priority=n % 3,
                                         resource=Resources.of(cpu=str(1 + n % 2)),
                                         labels={QUOTA_NAME_LABEL: quota}))
        elif op == "remove" and made:
            engine.remove_unit(made[n % len(made)])
        elif op == "round":
            publication.publish(engine.run_round(float(step)), float(step))
            snap = view.snapshot()
            assert snap is not None
            for queue in ("", "a", "b", "parent", "gone"):
                for query in (Query(queue=queue), Query(queue=queue, offset=offset, limit=limit)):
                    rows = _rows(snap.order, query, queue)
                    by_unit = view._page(snap, rows, snap.in_own_quota, query)
                    assert view._page_by_runs(snap, rows, queue, query) == by_unit, query


def test_a_queue_moved_down_the_order_is_numbered_again_from_its_kept_pieces() -> None:
    """b's units do not change while a grows ahead of them: b's items keep their pieces and
    take their new positions (fails if a kept run is not numbered again, or is cut again)."""
    engine = AdmissionEngine()
    for name in ("a", "b"):
        engine.upsert_quota(QuotaSpec(name, max=Resources.of(cpu="1")))
        engine.upsert_queue(name, "Priority")

    def add(name: str, quota: str) -> None:  # 5 cpu: never fits
        engine.upsert_unit(QueueUnit("ns", name, uid=name, resource=Resources.of(cpu="5"),
                                     labels={QUOTA_NAME_LABEL: quota}, created=len(name)))

    for name, quota in (("a1", "a"), ("b1", "b"), ("b2", "b")):
        add(name, quota)
    publication = Publication()
    view = PendingView(publication)
    heads = []
    for step in range(2):
        if step:
            add("a22", "a")
        publication.publish(engine.run_round(float(step)), float(step))
        snap = view.snapshot()
        assert snap is not None
        items = orjson.loads(bytes(view.pending(snap, Query())))["items"]
        assert [(i["metadata"]["name"], i["position"], i["positionInQueue"])
                for i in items if i["queueName"] == "b"] == [("b1", 2 + step, 1),
                                                             ("b2", 3 + step, 2)]
        heads.append(view._rendered["b"].heads)
    assert heads[0] is heads[1]


def test_a_unit_changed_while_its_entry_is_carried_is_served_as_it_is_now() -> None:
    """A round may carry a queue's entries from an earlier record while the queue's units
    are newer objects (a status written, a label edited): their items follow the units."""
    engine = engine_with_backlog()
    publication = Publication()
    view = PendingView(publication)
    first = engine.run_round(1.0)
    publication.publish(first, 1.0)
    snap = view.snapshot()
    assert snap is not None
    before = orjson.loads(bytes(view.pending(snap, Query())))["items"]
    assert [i["phase"] for i in before] == ["Enqueued", "Enqueued"]
    carried = Record()
    carried.carry(list(first.outcomes))  # the same entries, carried
    later = RoundResult(outcomes=carried, paths=first.paths, waiting={
        queue: [replace(u, phase=Phase.BACKOFF) if u.name == "b" else u for u in units]
        for queue, units in first.waiting.items()})
    publication.publish(later, 2.0)
    snap = view.snapshot()
    assert snap is not None
    after = orjson.loads(bytes(view.pending(snap, Query())))["items"]
    assert [(i["metadata"]["name"], i["phase"]) for i in after] == [("b", "TimeoutBackoff"),
                                                                     ("a", "Enqueued")]
