"""The visibility view: one read of the record per round, caches that follow the units."""

from __future__ import annotations

from dataclasses import replace

import orjson

from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.kube.visibility.view import BadQuery, PendingView, Publication, Query, parse_query


def engine_with_backlog() -> AdmissionEngine:
    engine = AdmissionEngine()
    engine.upsert_quota(QuotaSpec("q", max=Resources.of(cpu="1")))
    engine.upsert_queue("q", "Priority")
    for name, priority in (("a", 0), ("b", 1), ("c", 2)):
        engine.upsert_unit(QueueUnit("ns", name, uid=name, resource=Resources.of(cpu="1"),
                                     priority=priority, labels={QUOTA_NAME_LABEL: "q"}))
    return engine


def names_of(answer: bytes) -> list[tuple[str, int]]:
    items = orjson.loads(answer)["items"]
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
