"""A warm standby that takes over lists the QueueUnits again rather than trusting its watch
cache (found by bench/soak.py, `--ci --seed 3`): a standby's unit watch stalled by a
never-ending watch missed 42 s of changes (two deletions, admissions by the old leader); the
new leader folded that cache, saw room in soak-l0 that the API did not have, and admitted a
unit over the quota's max (2.75 of 2 cpu) 2.4 s after taking the Lease."""

from __future__ import annotations

from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE, QUEUE_UNIT
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import controller, quota, unit


def test_a_takeover_counts_an_admission_its_stale_cache_missed() -> None:
    """Fails without the fresh unit listing in `Resync.resync` (checked: `waiting` admitted,
    2 cpu admitted in a quota of 1)."""
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="1"), "default")
    waiting = api.create(QUEUE_UNIT, unit("waiting", "q"), "ns")
    stale = {QUEUE_UNIT: ([waiting], "1"), JOB: ([], "1")}  # the cache, as the standby held it
    api.create(QUEUE_UNIT, unit("admitted", "q", phase="Dequeued"), "ns")  # the old leader's
    c = controller(api)
    c.resync(stale)
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    result = c.admission_round()
    assert result.admitted == []
    assert (api.get(QUEUE_UNIT, "waiting", "ns") or {}).get("status", {}).get("phase") != (
        "Dequeued"
    )
    c.close()


def test_a_takeover_forgets_a_unit_deleted_while_its_watch_was_stalled() -> None:
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="1"), "default")
    gone = api.create(QUEUE_UNIT, unit("gone", "q", phase="Dequeued"), "ns")
    api.delete(QUEUE_UNIT, "gone", "ns")
    c = controller(api)
    c.resync({QUEUE_UNIT: ([gone], "1"), JOB: ([], "1")})
    assert [u.name for u in c.engine.units()] == []
    c.close()
