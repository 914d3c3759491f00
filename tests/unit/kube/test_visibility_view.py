"""The visibility view: one read of the record per round, caches that follow the units."""

from __future__ import annotations

from dataclasses import replace

import orjson

from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.kube.visibility.view import (
    BadQuery,
    Parts,
    PendingView,
    Publication,
    Query,
    Snapshot,
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
