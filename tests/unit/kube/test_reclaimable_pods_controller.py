"""A Job's finished pods give their share back through its unit's status.reclaimablePods
(issue 35 point 6), against the in-memory API: written once per change, only while the unit
holds quota, never lowered, and the freed room admits the next unit."""

from __future__ import annotations

import pytest

from koordqueue.domain.resources import Resources
from koordqueue.kube.api import QUEUE_UNIT
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_job_extension_controller import (
    feed_unit,
    make,
    set_job_status,
    submit,
    unit,
)


@pytest.fixture
def api() -> MemoryApi:
    return MemoryApi()


def test_finished_pods_are_reclaimable_and_the_next_job_is_admitted(api: MemoryApi) -> None:
    """Fails without sync_reclaimable: `next` stays Enqueued."""
    c, _ = make(api, cpu="2")
    submit(c, api, "wide", parallelism=2, completions=4)
    submit(c, api, "next", parallelism=1)
    assert unit(api, "wide")["status"]["phase"] == "Dequeued"
    assert unit(api, "next")["status"]["phase"] == "Enqueued"
    set_job_status(c, api, "wide", active=2, ready=2, succeeded=2)  # 2 remain: none back
    assert "reclaimablePods" not in unit(api, "wide")["status"]
    set_job_status(c, api, "wide", active=1, ready=1, succeeded=3)  # 1 remains
    assert unit(api, "wide")["status"]["reclaimablePods"] == [{"name": "wide", "count": 1}]
    assert c.engine.tree.used("q") == Resources.parse({"cpu": "1"})
    c.admission_round()
    assert unit(api, "next")["status"]["phase"] == "Dequeued"
    c.close()


def test_an_unchanged_count_is_not_written_again_nor_lowered(api: MemoryApi) -> None:
    c, _ = make(api, cpu="3")
    submit(c, api, "wide", parallelism=3, completions=4)
    set_job_status(c, api, "wide", active=2, ready=2, succeeded=2)  # 2 remain < 3: 1 back
    first = unit(api, "wide")
    assert first["status"]["reclaimablePods"] == [{"name": "wide", "count": 1}]
    feed_unit(c, api, "wide")
    set_job_status(c, api, "wide", active=2, ready=2, succeeded=2)
    assert unit(api, "wide")["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    set_job_status(c, api, "wide", active=3, ready=3, succeeded=0)  # (a recount): not lowered
    assert unit(api, "wide")["status"]["reclaimablePods"] == [{"name": "wide", "count": 1}]
    c.close()


def test_a_waiting_unit_gets_no_reclaimable_pods(api: MemoryApi) -> None:
    c, _ = make(api, cpu="1")
    submit(c, api, "first", parallelism=1)
    submit(c, api, "wide", parallelism=2, completions=3)  # 2 cpu: never fits, waits
    set_job_status(c, api, "wide", succeeded=2)
    obj = api.get(QUEUE_UNIT, "wide", "ns")
    assert obj is not None and "reclaimablePods" not in (obj.get("status") or {})
    c.close()
