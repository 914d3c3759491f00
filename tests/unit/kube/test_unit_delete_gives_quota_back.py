"""An admitted unit whose workload is gone gives its quota back once the API has deleted it,
not when its delete is asked for (bench/soak.py's 30-minute run, seed 1, on cc30d67).

There the new leader's resync found units of workloads deleted while no replica led, asked
for their deletes and gave their quota back at once; one delete's connection was dropped by
the fault proxy, and its retry reached the API 37 ms after the next round's admission of a
2-cpu unit into the same quota: for that moment the API held both units admitted, 4 cpu in a
quota of max 3, and the soak's checker counted a quota-over-max violation. A refused delete
was worse: the unit stayed admitted in the API while its room was admitted again, until the
next resync's look.

In memory: the quota fits one 4-cpu PyTorchJob; a second waits; the first is deleted. While
its unit's delete is in flight, or after it was refused, the second is not admitted; once
the unit is gone, it is. Both tests fail without the fix (checked by reverting
WorkloadReconciler._delete_unit to give the quota back at once: the second unit is admitted
while the first still stands admitted in the API).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from koordqueue.domain.queue_unit import ADMITTED_PHASES
from koordqueue.kube.api import QUEUE_UNIT, ApiError, Kind
from koordqueue.kube.controller import Controller
from koordqueue.kube.controller.writes import Delete
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_integration_resync import PYTORCH, Clock, make, next_period, start
from tests.unit.kube.test_integration_wiring import pytorch

ADMITTED = frozenset(p.value for p in ADMITTED_PHASES)


class RefusingApi(MemoryApi):
    """Refuses the first `refuse` QueueUnit deletes (500), as a fault burst does."""

    def __init__(self, refuse: int = 0) -> None:
        super().__init__()
        self.refuse = refuse

    def delete(
        self, kind: Kind, name: str, namespace: str | None = None, uid: str | None = None
    ) -> bool:
        if kind == QUEUE_UNIT and self.refuse > 0:
            self.refuse -= 1
            raise ApiError(500, "InternalError", "injected", "DELETE", kind.path(namespace, name))
        return super().delete(kind, name, namespace, uid)


def phase(api: MemoryApi, job: str) -> str | None:
    unit = api.get(QUEUE_UNIT, f"{job}-py-qu", "default")
    return None if unit is None else str((unit.get("status") or {}).get("phase") or "")


def admitted_in_api(api: MemoryApi) -> list[str]:
    """The quota's admitted units as `kubectl get queueunits` shows them."""
    return sorted(
        u["metadata"]["name"]
        for u in api.list_objects(QUEUE_UNIT)
        if (u.get("status") or {}).get("phase") in ADMITTED
    )


def two_jobs(api: MemoryApi) -> tuple[Controller, Any]:
    """`a` admitted (4 cpu of 4), `b` waiting for its room."""
    c, consumer, clock = make(api, cpu="4")
    consumer.on_event("ADDED", pytorch(api, "a"))
    c.admission_round()
    consumer.on_event("ADDED", pytorch(api, "b"))
    c.admission_round()
    assert admitted_in_api(api) == ["a-py-qu"]
    assert phase(api, "b") not in ADMITTED
    return c, (consumer, clock)


def test_a_unit_delete_in_flight_keeps_its_quota_until_the_api_has_done_it() -> None:
    api = MemoryApi()
    c, (consumer, _) = two_jobs(api)
    held: list[Callable[[], None]] = []
    submit = c.state.writer.submit

    def holding(write: Any, then: Any = None, *args: Any, **kwargs: Any) -> None:
        if isinstance(write, Delete) and write.kind == QUEUE_UNIT:
            held.append(lambda: submit(write, then, *args, **kwargs))
            return
        submit(write, then, *args, **kwargs)

    c.state.writer.submit = holding  # type: ignore[method-assign]
    job = api.get(PYTORCH, "a", "default")
    api.delete(PYTORCH, "a", "default")
    consumer.on_event("DELETED", job)
    assert len(held) == 1  # the unit's delete is asked for, not yet answered
    c.admission_round()
    assert admitted_in_api(api) == ["a-py-qu"], "b admitted while a's unit still stands"
    held.pop()()  # the API deletes a's unit; its answer comes back
    c.admission_round()
    assert admitted_in_api(api) == ["b-py-qu"]


def test_a_refused_unit_delete_keeps_its_quota_and_the_next_resync_deletes_it() -> None:
    api = RefusingApi(refuse=1)
    c, (consumer, clock) = two_jobs(api)
    job = api.get(PYTORCH, "a", "default")
    api.delete(PYTORCH, "a", "default")
    consumer.on_event("DELETED", job)  # its unit's delete is refused
    c.admission_round()
    assert phase(api, "a") in ADMITTED
    assert admitted_in_api(api) == ["a-py-qu"], "b admitted while a's unit still stands"
    next_period(c, clock)  # the resync finds a's unit without a workload: deleted now
    c.admission_round()
    assert api.get(QUEUE_UNIT, "a-py-qu", "default") is None
    assert admitted_in_api(api) == ["b-py-qu"]


def test_a_new_leader_deletes_at_start_up_the_units_of_workloads_gone_while_none_led() -> None:
    """The soak's diagnosis also showed the unit of a PyTorchJob deleted in a leaderless gap
    holding its 2 cpu through two takeovers, 2 min 40 s, until a periodic resync looked:
    only the periodic resync looked for units without a workload. Fails without the look at
    start-up (resync._fold_workloads): a's unit stays admitted and b waits."""
    api = MemoryApi()
    two_jobs(api)
    api.delete(PYTORCH, "a", "default")  # no replica sees the DELETED event
    leader = start(api, "kubeflow.org/pytorchjob", Clock())  # the new leader's takeover
    leader.admission_round()
    assert api.get(QUEUE_UNIT, "a-py-qu", "default") is None
    assert admitted_in_api(api) == ["b-py-qu"]
