"""Two status patches of one quota on the writer pool land in the order they were made.

Seen in CI (e2e test_describe_elasticquota_says_why_a_quota_admits_nothing): a new quota's
first conditions (Active=True) and, a moment later, its Queue's refusal (Active=False) were
two patches on a pool of writer threads; the older one landed last and `kubectl describe`
said Active=True for good, since the controller believed it had said False.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from koordqueue.kube.api import ELASTIC_QUOTA, Kind
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_quota_conditions import quota


class FirstStatusPatchSlow(MemoryApi):
    """The first quota status patch waits (up to a second) for a second one to start."""

    def __init__(self) -> None:
        super().__init__()
        self.status_patches = 0
        self.lock = threading.Lock()
        self.second_started = threading.Event()
        self.overtaken = False

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        if kind == ELASTIC_QUOTA and subresource == "status":
            with self.lock:
                self.status_patches += 1
                first = self.status_patches == 1
            if first:
                self.overtaken = self.second_started.wait(1.0)
            else:
                self.second_started.set()
        return super().merge_patch(kind, name, patch, namespace, subresource)


def active(api: MemoryApi, name: str) -> dict[str, Any]:
    stored = api.objects[api._key(ELASTIC_QUOTA, "default", name)]
    conditions = (stored.get("status") or {}).get("conditions") or []
    return next(c for c in conditions if c["type"] == "Active")


def test_the_last_conditions_made_are_the_ones_the_quota_keeps() -> None:
    api = FirstStatusPatchSlow()
    stored = api.create(ELASTIC_QUOTA, quota("r"), "default")
    c = Controller(api, ControllerSettings(), writers=2)
    outcomes: list[Callable[[], None]] = []
    c.writer.use_pool(2, outcomes.append)
    c.on_quota("ADDED", stored)  # Active=True (its Queue is not refused)
    c.state.queue_errors["r"] = "queue r asks for queue policy 'Round', which is not registered"
    c.quotas.refresh_quota_status()  # Active=False, made after the first
    c.close()
    for then in outcomes:
        then()
    assert api.status_patches == 2
    assert not api.overtaken, "the second patch started while the first was in flight"
    assert (active(api, "r")["status"], active(api, "r")["reason"]) == ("False", "AddQueueFail")
