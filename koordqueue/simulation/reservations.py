"""Admission checks in the replay, as the controller applies them (issue 29).

The live controller (kube/controller/checks.py) turns an admission on a queue with checks
into a reservation, and decides a Reserved unit's fate from its check states when it sees
it; both decisions are domain/reservation.py's, called here with the scenario's queues'
checks. Nothing answers a check during a replay (no check controller runs in it), so a
reservation the replay makes stays Reserved, as it would on the cluster until its checks'
controllers write. Not carried: strict dequeue mode (a release is Dequeued), Kueue's
AdmissionCheck objects (a Pending entry's message and the QuotaReserved event name no
controller), and the QueueUnitRequeueState schedule (a back-off waits the flat 10 s
doubling; the deadline is jittered on the cluster too).
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from koordqueue.domain import reservation
from koordqueue.domain.effects import Effect, QueueEvent, per_unit
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.simulation.scenario import Scenario, UnitDef


class Reservations:
    """The scenario's queues' admission checks, applied to arrivals and to each round."""

    def __init__(self, scenario: Scenario) -> None:
        self.by_queue = {q.name: q.admission_checks for q in scenario.quotas
                         if q.admission_checks}

    def arrived(
        self, unit: QueueUnit, spec: UnitDef, now: float
    ) -> reservation.Release | reservation.BackOff | None:
        """What the controller does on seeing a Reserved unit (None: not Reserved, or it
        keeps waiting on a Pending check). The back-off's jitter is seeded by the unit, so
        a replay is the same every time."""
        if unit.phase is not Phase.RESERVED:
            return None
        clock = reservation.Clock(now, attempts=spec.attempts)
        return reservation.fate(spec.checks, reservation.asked(self.by_queue, unit), False,
                                clock, random.Random(unit.uid))

    def reserve(self, planned: Iterable[Effect]) -> tuple[list[Effect], dict[str, Phase]]:
        """A round's effects with each admission on a queue with checks made a reservation,
        and the phase each such unit now has (uid -> Reserved)."""
        if not self.by_queue:
            return list(planned), {}
        out: list[Effect] = []
        phases: dict[str, Phase] = {}
        for group in per_unit(planned):
            first = group[0]
            if isinstance(first, QueueEvent):
                out.extend(group)
                continue
            checks = reservation.asked(self.by_queue, first.unit)
            effects, phase = reservation.reserve(group, checks, {}, strict=False)
            if phase is not None:
                phases[first.unit.uid] = phase
            out.extend(effects)
        return out, phases
