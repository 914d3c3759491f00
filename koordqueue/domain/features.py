"""Feature gates: every name, default and dependency in one place (issue 35 point 9).

The QueueUnit lifecycle gates carry Koord-Queue's names and defaults (its
pkg/features/features.go), so a `--feature-gates` line written for Koord-Queue works here
unchanged. Koord-Queue runs its job extension as a second binary with its own gate set; we
run one process, so one parsed set is read by the controller, the job reconcilers, the
scheduler and the webhooks alike. A combination one gate cannot work in (a gate whose
dependency is off) is refused at start-up, not discovered at run time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final


class Stage(StrEnum):
    ALPHA = "Alpha"
    BETA = "Beta"


SCHEDULING_GATES_QUEUE_ADMISSION: Final = "SchedulingGatesQueueAdmission"
"""Volcano's queue admission through pod scheduling gates (SPEC 3.5)."""
QUEUE_UNIT_CONDITIONS: Final = "QueueUnitConditions"
"""status.conditions mirror the phase (QuotaReserved, Admitted, PodsReady, Finished, Evicted)."""
QUEUE_UNIT_ACTIVE: Final = "QueueUnitActive"
"""spec.active: an inactive unit is never admitted, an admitted one is evicted."""
QUEUE_UNIT_REQUEUE_STATE: Final = "QueueUnitRequeueState"
"""status.requeueState: the structured exponential back-off of a re-queued unit."""
MAXIMUM_EXECUTION_TIME: Final = "MaximumExecutionTime"
"""spec.maximumExecutionTimeSeconds: a unit that ran that long is deactivated."""


@dataclass(frozen=True, slots=True)
class GateSpec:
    default: bool
    stage: Stage
    needs: tuple[str, ...] = ()
    """Gates that must be on too (what the gate writes or reads is kept by them)."""


KNOWN: Final[Mapping[str, GateSpec]] = MappingProxyType(
    {
        SCHEDULING_GATES_QUEUE_ADMISSION: GateSpec(False, Stage.ALPHA),
        QUEUE_UNIT_CONDITIONS: GateSpec(True, Stage.BETA),
        QUEUE_UNIT_ACTIVE: GateSpec(False, Stage.ALPHA),
        # the back-off is reported through the Evicted condition's BackoffTimeout reason
        QUEUE_UNIT_REQUEUE_STATE: GateSpec(False, Stage.ALPHA, (QUEUE_UNIT_CONDITIONS,)),
        # the clock starts at PodsReady's lastTransitionTime; spending the budget deactivates
        MAXIMUM_EXECUTION_TIME: GateSpec(
            False, Stage.ALPHA, (QUEUE_UNIT_ACTIVE, QUEUE_UNIT_CONDITIONS)
        ),
    }
)
"""Every gate this project knows, with Koord-Queue's default and stage."""


class FeatureGateError(ValueError):
    """A malformed, unknown or unsatisfiable entry in --feature-gates."""

    def __init__(self, entry: str, reason: str) -> None:
        self.entry = entry
        self.reason = reason
        super().__init__(f"--feature-gates: {entry!r}: {reason}")


def _defaults() -> Mapping[str, bool]:
    return MappingProxyType({name: spec.default for name, spec in KNOWN.items()})


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """The parsed set; `gates[name]` or the named properties. Build it by `parse_feature_gates`."""

    values: Mapping[str, bool] = field(default_factory=_defaults)

    def __getitem__(self, name: str) -> bool:
        return self.values[name]

    @property
    def conditions(self) -> bool:
        return self.values[QUEUE_UNIT_CONDITIONS]

    @property
    def active(self) -> bool:
        return self.values[QUEUE_UNIT_ACTIVE]

    @property
    def requeue_state(self) -> bool:
        return self.values[QUEUE_UNIT_REQUEUE_STATE]

    @property
    def maximum_execution_time(self) -> bool:
        return self.values[MAXIMUM_EXECUTION_TIME]


DEFAULT: Final = FeatureGates()


def parse_feature_gates(text: str | None) -> FeatureGates:
    """`Name=true,Other=false` over the defaults; unknown names, non-boolean values and a gate
    whose dependency is off are errors naming the entry and what to set."""
    values = {name: spec.default for name, spec in KNOWN.items()}
    for raw in (text or "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        name, sep, value = entry.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or value not in ("true", "false"):
            raise FeatureGateError(entry, "expected Name=true or Name=false")
        if name not in KNOWN:
            raise FeatureGateError(entry, f"unknown feature gate (known: {', '.join(KNOWN)})")
        values[name] = value == "true"
    for name, spec in KNOWN.items():
        missing = [need for need in spec.needs if values[name] and not values[need]]
        if missing:
            fix = ",".join(f"{need}=true" for need in missing)
            raise FeatureGateError(
                f"{name}=true", f"needs {' and '.join(missing)} enabled too (add {fix})"
            )
    return FeatureGates(MappingProxyType(values))
