"""The Queues' usage annotations follow the units while rounds wait for a round's writes.

bench/soak.py (30 minutes, seed 1): one admission's status write went unanswered on a
half-open connection for the client's 30 s timeout. Rounds wait for the last round's writes,
and the usage sync was submitted only after a round: no Queue's annotations were written for
29 s while units finished, and the checker's usage-annotation invariant fired. The owner loop
now syncs usage on its cadence while it waits. Fails without it (checked: with the loop's
`controller.sync_usage()` call removed, the annotation still says cpu 4 after 3 s).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from koordqueue.domain.names import QUEUE_USED_ANNOTATION
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT, Kind
from koordqueue.kube.controller import OwnerLoop
from koordqueue.kube.metrics import Cadence
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import controller, quota, unit
from tests.unit.kube.test_owner_loop import wait_until


class StallingApi(MemoryApi):
    """The status write of unit `stuck` waits for `gate` (a request without an answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.stalled = threading.Event()

    def merge_patch(self, kind: Kind, name: str, patch: Mapping[str, Any],
                    namespace: str | None = None, subresource: str | None = None,
                    ) -> dict[str, Any]:
        if kind == QUEUE_UNIT and name == "stuck" and subresource == "status":
            self.stalled.set()
            self.gate.wait(10)
        return super().merge_patch(kind, name, patch, namespace, subresource)


def used(api: MemoryApi) -> dict[str, int]:
    queue = api.get(QUEUE, "q", "koord-queue") or {}
    raw = ((queue.get("metadata") or {}).get("annotations") or {}).get(QUEUE_USED_ANNOTATION)
    return {k: v for k, v in json.loads(raw or "{}").items() if v}


def test_usage_annotations_follow_the_units_while_a_rounds_write_hangs() -> None:
    api = StallingApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="10"), "default")
    c = controller(api)
    c.rounds.usage_cadence = Cadence(0.1)  # (5 s in production)
    owner = OwnerLoop(c, writers=4)
    owner.start().result(5)
    try:
        on_unit = owner.handler("queueunits", c.on_unit)
        done = api.create(QUEUE_UNIT, unit("done", "q", cpu="3"), "ns")
        on_unit("ADDED", done)
        wait_until(lambda: used(api) == {"cpu": 3})
        on_unit("ADDED", api.create(QUEUE_UNIT, unit("stuck", "q", cpu="1"), "ns"))
        assert api.stalled.wait(5)  # a round admitted it; its status write hangs
        on_unit("DELETED", done)  # a unit goes: 3 cpu are free again
        wait_until(lambda: used(api) == {"cpu": 1}, timeout=3)  # stuck's, held meanwhile
        assert not api.gate.is_set()
    finally:
        api.gate.set()
        owner.stop()
        c.close()
