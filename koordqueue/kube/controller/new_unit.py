"""A new QueueUnit's first status: admitted at once when its queue is idle, else Enqueued.

The same for every workload kind (workloads.py calls it when its create returned the unit):
the fast path costs one status write (the admission's); otherwise the status, a subresource
the create ignored, is a second write guarded by the created resourceVersion, so an admission
a round made from the unit's watch event first is never overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from koordqueue.domain.effects import CREATED_STATUS, Effect, effects
from koordqueue.domain.integrations import WorkloadPatch
from koordqueue.domain.queue_unit import InvalidQueueUnitError, Phase, queue_unit_from_object
from koordqueue.domain.round import Admit
from koordqueue.kube.api import Kind
from koordqueue.kube.controller.base import ADDED, meta
from koordqueue.kube.controller.state import ControllerState
from koordqueue.kube.controller.status import seen_conditions, unit_status_patch
from koordqueue.kube.controller.workload_writes import InitialUnitStatus, UnitCreated

OnUnit = Callable[[str | None, dict[str, Any]], None]
"""UnitHandlers.on_unit: fold in a unit our own write returned."""
Execute = Callable[[list[Effect], Callable[[], None] | None], None]
"""AdmissionRounds.execute: run planned effects, then call back once all are taken in."""


def first_status(
    state: ControllerState,
    outcome: UnitCreated,
    *,
    on_unit: OnUnit,
    execute: Execute,
    kind: Kind,
    key: str,
    workload: Mapping[str, Any],
    done: Callable[[], None],
) -> None:
    """Write the first status of the unit `outcome` made for `workload` (unit key `key`);
    `done` once it is taken in."""
    created = outcome.obj
    # Fast path: nothing waits in its queue, so admit now and write the status once.
    try:
        fresh = queue_unit_from_object(created)
    except InvalidQueueUnitError:
        fresh = None
    if fresh is not None:
        state.unit_objects[fresh.uid] = created
        state.unit_by_key[key] = fresh.uid
        state.engine.upsert_unit(fresh)
        decision = state.engine.admit_if_queue_idle(fresh.uid, state.clock())
        if decision is not None:
            admitted = replace(fresh, phase=Phase.DEQUEUED)
            execute(effects([Admit(admitted, decision)], state.reported), done)
            return
    # the workload is marked first, so it carries its mark before any round's message on
    # its unit
    m = meta(created)
    patch = unit_status_patch(
        CREATED_STATUS.message,
        CREATED_STATUS.phase,
        initial=True,
        resource_version=m.get("resourceVersion"),
        conditions=seen_conditions(state.features, created),
    )
    mark = None
    if outcome.mark:
        marking = WorkloadPatch({"metadata": {"annotations": dict(outcome.mark)}})
        mark = (kind, workload, marking)
    write = InitialUnitStatus(
        str(m.get("namespace")), str(m.get("name", "")), patch, CREATED_STATUS.phase, mark
    )

    def written(enqueued: dict[str, Any] | None) -> None:
        on_unit(ADDED, enqueued or created)
        done()

    state.writer.submit(write, written, str(m.get("uid") or key))
