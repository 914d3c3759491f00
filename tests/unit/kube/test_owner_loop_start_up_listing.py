"""The owner loop does not keep the start-up resync's listings (issue 36, RSS): they are every
Job and QueueUnit there was at start-up, handed to start()'s caller (the informers watch on
from their resourceVersion) and dropped there. The loop thread held them for its whole life
(its Thread's arguments and its frame kept start()'s future, and the future its result): a
controller restarted under 10,000 pending Jobs carried a second copy of all of them."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from koordqueue.kube.api import ELASTIC_QUOTA, JOB, Kind, Listing
from koordqueue.kube.controller import Controller, OwnerLoop
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import quota


class Obj(dict[str, Any]):
    """A listed object that can be watched for being freed."""


class WatchedListApi(MemoryApi):
    """MemoryApi whose Job listings are weakly referenced here."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[weakref.ref[Obj]] = []

    def list_with_version(self, kind: Kind, *args: Any, **kwargs: Any) -> Listing:
        items, version = super().list_with_version(kind, *args, **kwargs)
        if kind != JOB:
            return items, version
        out = [Obj(item) for item in items]
        self.listed += [weakref.ref(item) for item in out]
        return list(out), version


def _job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}  # fmt: skip


def test_the_start_up_listings_are_freed_once_the_caller_drops_them() -> None:
    api = WatchedListApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="2"), "default")
    for i in range(3):
        api.create(JOB, _job(f"j{i}"), "ns")
    controller = Controller(api, ControllerSettings(), writers=1)
    owner = OwnerLoop(controller, controller.writers)
    listings = owner.start().result(5)
    assert len(listings[JOB][0]) == 3 and len(api.listed) == 3
    del listings
    gc.collect()
    try:
        assert [ref() for ref in api.listed] == [None, None, None]
    finally:
        owner.stop()
        controller.close()
