"""A workload's reclaimable pods onto its admitted unit (issue 35 point 6, Kueue's rule).

On each look at an owned workload whose unit holds quota, the integration says which pods
finished and are no longer needed (`Integration.reclaimable_pods`); merged with what the unit
has (a count never goes down while the unit holds its reservation), a change is written to
`status.reclaimablePods`. The written unit is folded at once: the engine then holds only what
the unit still needs (unit_share.held_request, AdmissionEngine._give_back) and wakes a round
for the room given back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from koordqueue.domain.integrations import Integration
from koordqueue.domain.queue_unit import FINISHED_PHASES
from koordqueue.domain.reclaimable import (
    InvalidReclaimablePodsError,
    merged,
    parse_reclaimable_pods,
)
from koordqueue.kube.controller.base import MODIFIED, log, meta
from koordqueue.kube.controller.state import ControllerState
from koordqueue.kube.controller.writes import PatchUnitStatus

OPERATION = "patch reclaimable pods"


def sync_reclaimable(
    state: ControllerState,
    integration: Integration,
    members: Sequence[Mapping[str, Any]],
    uid: str,
    unit_obj: Mapping[str, Any],
    *,
    on_unit: Callable[[str | None, dict[str, Any]], None],
) -> None:
    """Write the unit's status.reclaimablePods when the workload says more pods finished."""
    unit = state.engine.unit(uid)
    if unit is None or unit.phase in FINISHED_PHASES or not state.engine.is_admitted(uid):
        return
    now = integration.reclaimable_pods(members)
    if not now:
        return
    try:
        held = parse_reclaimable_pods((unit_obj.get("status") or {}).get("reclaimablePods"))
    except InvalidReclaimablePodsError:
        held = ()  # (the unit was refused when parsed; its own event said why)
    wanted = merged(held, now)
    if wanted == tuple(p for p in held if p.count):
        return
    m = meta(unit_obj)
    patch = {"status": {"reclaimablePods": [pod.to_object() for pod in wanted]}}
    write = PatchUnitStatus(
        str(m.get("namespace", "")), str(m.get("name", "")), patch, True, OPERATION
    )

    def written(obj: dict[str, Any] | None) -> None:
        if obj is not None:
            log.info("pods reclaimable", unit=unit.key, pods=patch["status"]["reclaimablePods"])
            on_unit(MODIFIED, obj)  # folded now: the share goes back (its event follows)
            state.wake.set()

    state.writer.submit(write, written, uid)
