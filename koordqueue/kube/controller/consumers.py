"""The seam where a job kind plugs into the controller.

A QueueUnit's spec.consumerRef names the workload that follows its admission. For each kind
of workload the controller serves, one reconciler: it turns the kind's watch events into
units (creating them) and unit changes into the workload's state (resume, suspend), reading
the kind's rules from the pure domain. batch/v1 Job (jobs.py) is the one served today; a kind
from koordqueue.domain.integrations is served by one more class with this shape, registered
in `Controller.consumers` and watched by one more informer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from koordqueue.kube.api import Kind
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
