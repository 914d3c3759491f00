"""The seam where a workload kind plugs into the controller.

A QueueUnit's spec.consumerRef names the workload that follows its admission. For each kind
the controller serves, one reconciler, registered in `Controller.consumers` under the kind
and watched by one informer: it turns the kind's watch events into units (creating them) and
unit changes into the workload's state (resume, suspend). Every kind, batch/v1 Job included,
is served by the same class, workloads.WorkloadReconciler, over the kind's `Integration`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from koordqueue.kube.api import Kind, ObjectApi
from koordqueue.kube.controller.writes import Write


class ConsumerReconciler(Protocol):
    """One workload kind's side of admission; called on the owner thread only."""

    @property
    def consumer_kind(self) -> str:
        """spec.consumerRef.kind of the units it serves (e.g. "Job")."""

    @property
    def watched(self) -> Kind:
        """The API kind its informer watches."""

    def on_event(self, event_type: str | None, obj: dict[str, Any]) -> None:
        """A watch event of the workload (None: an object of a listing)."""

    def resume(self, unit_obj: Mapping[str, Any]) -> Write[Any] | None:
        """The write that lets the unit's workload run (None: nothing to write)."""

    def suspend(self, unit_obj: Mapping[str, Any]) -> Write[Any] | None:
        """The write that stops the unit's workload again."""

    def unit_scheduled(self, unit_obj: Mapping[str, Any]) -> None:
        """The unit turned SchedSucceed: look at its workload now."""

    def fire_timers(self) -> None:
        """Look again at workloads whose timeout, back-off or refused write is due."""

    def resync_started(self) -> None:
        """The periodic resync's lists are asked for (events from now on are newer)."""

    @property
    def listed_whole(self) -> bool:
        """The resync lists every object of the kind (its watch can continue from that)."""

    def listing(self, api: ObjectApi) -> list[dict[str, Any]]:
        """What the periodic resync lists of the kind, when not listed whole."""

    def resync_listing(self, api: ObjectApi) -> tuple[list[dict[str, Any]], str]:
        """What the periodic resync lists of the kind when listed whole (on the writer's
        pool): the objects it must look at whole, the others' metadata (quiet_looks.py)."""

    def fold(self, listed: Sequence[dict[str, Any]], periodic: bool) -> None:
        """Reconcile a listing of the kind (`periodic`: also its units not listed)."""
