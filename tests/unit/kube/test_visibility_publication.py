"""The controller publishes each admission round for the visibility API, and a Queue's hold
annotation (what `kubectl koordqueue stop queue` writes) reaches its rounds."""

from __future__ import annotations

import copy

from koordqueue.domain.names import STOP_POLICY_ANNOTATION, STOP_POLICY_HOLD
from koordqueue.domain.pending import pending_units
from koordqueue.domain.verdict import Reason
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import controller, quota, unit


def test_each_round_is_published_and_a_held_queue_waits() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("a", cpu="4"), "default")
    c = controller(api)
    c.resync()
    assert c.state.published.last() is None
    queue = api.get(QUEUE, "a", "koord-queue")
    assert queue is not None
    queue["metadata"].setdefault("annotations", {})[STOP_POLICY_ANNOTATION] = STOP_POLICY_HOLD
    c.on_queue("MODIFIED", queue)
    for name in ("u1", "u2"):
        obj = api.create(QUEUE_UNIT, unit(name, "a"), "ns")
        c.on_unit("ADDED", obj)
    result = c.admission_round()
    published = c.state.published.last()
    assert published is not None and published.result is result and published.number == 1
    rows = [(p.unit.name, p.position_in_queue, p.reason) for p in pending_units(result)]
    assert rows == [("u1", 1, Reason.QUEUE_HELD), ("u2", 2, Reason.QUEUE_HELD)]
    resumed = copy.deepcopy(queue)  # (a watch event is a new object)
    del resumed["metadata"]["annotations"][STOP_POLICY_ANNOTATION]
    c.on_queue("MODIFIED", resumed)
    assert {u.name for u, _ in c.admission_round().admitted} == {"u1", "u2"}
    assert c.state.published.last().number == 2  # type: ignore[union-attr]
    c.close()
