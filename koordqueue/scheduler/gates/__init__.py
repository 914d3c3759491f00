"""Queue admission through scheduling gates (SPEC 3.5): pure reservation logic and plugin."""

from koordqueue.scheduler.gates.names import FEATURE_GATE, GATE_NAME, OPT_IN_ANNOTATION
from koordqueue.scheduler.gates.reservation import (
    Expiry,
    GateState,
    GateView,
    ReservationClock,
    ReservationLedger,
    classify_gates,
    gated_resources,
    opted_in,
)

__all__ = [
    "FEATURE_GATE",
    "GATE_NAME",
    "OPT_IN_ANNOTATION",
    "Expiry",
    "GateState",
    "GateView",
    "ReservationClock",
    "ReservationLedger",
    "classify_gates",
    "gated_resources",
    "opted_in",
]
