"""A warm standby's ElasticQuota and Queue informers (issue 11 follow-up: these kinds left
kopf for informers). Standing by, their events are dropped, as kopf's handlers dropped them:
the takeover resync lists both kinds, so replaying them would only repeat its Queue applies.
Once leading, every event goes straight to the controller."""

from __future__ import annotations

from typing import Any

from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE
from koordqueue.kube.controller.base import ADDED
from koordqueue.kube.operator import WarmStandby
from tests.unit.kube.test_controller_state import quota


def test_quota_and_queue_events_are_dropped_while_standing_by_and_forwarded_once_leading() -> None:
    standby = WarmStandby()
    seen: list[tuple[str | None, str, str]] = []

    def target(kind: str) -> Any:
        return lambda event_type, obj: seen.append((event_type, kind, obj["metadata"]["name"]))

    quotas = standby.route(ELASTIC_QUOTA, target("quota"), keep=False)
    queues = standby.route(QUEUE, target("queue"), keep=False)
    quotas(None, quota("a"))
    queues(ADDED, {"metadata": {"name": "a", "namespace": "koord-queue"}})
    listings = standby.take_over()
    assert seen == [] and ELASTIC_QUOTA not in listings and QUEUE not in listings
    quotas("MODIFIED", quota("b"))
    queues(ADDED, {"metadata": {"name": "b", "namespace": "koord-queue"}})
    assert seen == [("MODIFIED", "quota", "b"), (ADDED, "queue", "b")]
