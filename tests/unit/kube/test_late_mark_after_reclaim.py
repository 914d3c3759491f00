"""A victim's marked copy delivered after the round that reclaimed it is not folded back in.

Seen in CI twice (e2e test_koord_queue_kinds, sparkapplication then xgboostjob: "low held
again" timed out): under load the watch delivered the victim's Preempted-mark version (phase
Dequeued) after the next round had reclaimed it but before that round's writes were taken
in. The engine took the old phase as an admission, the reclaim's own Enqueued event then
read as "stale, our decision stands", and the workload reconcile resumed the victim while
its preemptor waited.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from koordqueue.kube.api import QUEUE_UNIT
from koordqueue.kube.controller import Controller
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_queue_preemption_controller import (
    _feed,
    _get,
    _unit,
    reserving_quota,
)


def _marked(api: MemoryApi) -> tuple[Controller, dict[str, Any]]:
    """test_queue_preemption_controller's setup up to the mark: the victim's marked copy."""
    c = reserving_quota(api)
    c.on_unit("ADDED", api.create(QUEUE_UNIT, _unit("victim", 10), "ns"))
    c.admission_round()
    _feed(c, api, "victim")
    c.on_unit("ADDED", api.create(QUEUE_UNIT, _unit("preemptor", 100), "ns"))
    c.admission_round()  # marks the victim (still Dequeued, holding its quota)
    _feed(c, api, "victim")
    marked = copy.deepcopy(_get(api, "victim"))
    assert marked["status"]["phase"] == "Dequeued"
    return c, marked


def test_the_marked_copy_arriving_late_does_not_admit_the_victim_again() -> None:
    api = MemoryApi()
    c, marked = _marked(api)
    uid = str(marked["metadata"]["uid"])
    posted: list[Callable[[], None]] = []
    c.writer.use_pool(1, posted.append)  # outcomes wait, as on a busy owner loop
    c.admission_round()  # reclaims the victim, admits the preemptor
    deadline = time.monotonic() + 5
    while _get(api, "victim")["status"]["phase"] != "Enqueued" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not c.engine.is_admitted(uid)
    c.on_unit("MODIFIED", copy.deepcopy(marked))  # the watch, late
    assert not c.engine.is_admitted(uid)
    c.close()
    for then in posted:
        then()
    _feed(c, api, "victim")  # the reclaim's own version
    assert not c.engine.is_admitted(uid)
    victim = c.engine.unit(uid)
    assert victim is not None and victim.phase.value == "Enqueued"
    assert c.engine.is_admitted(str(_get(api, "preemptor")["metadata"]["uid"]))
