"""Names of queue admission through scheduling gates (SPEC 3.5), spelled once.

Why here (pure package): the webhook, the gate manager, the reservation bookkeeping and the
tests all agree on these strings; the Kubernetes side imports them from this module.
"""

from __future__ import annotations

from typing import Final

from koordqueue.domain.features import SCHEDULING_GATES_QUEUE_ADMISSION

FEATURE_GATE: Final = SCHEDULING_GATES_QUEUE_ADMISSION
GATE_NAME: Final = "scheduling.volcano.sh/queue-allocation-gate"
"""The scheduling gate the webhook adds and the gate manager removes."""
OPT_IN_ANNOTATION: Final = "scheduling.volcano.sh/queue-allocation-gate"
"""Pods opt in with this annotation set to "true"."""
OPT_IN_VALUE: Final = "true"
PLUGIN_NAME: Final = "queueallocationgate"
"""Scheduler plugin keeping reservations and choosing which gated pods to release."""

DEFAULT_WORKERS: Final = 5
QUEUE_PER_WORKER: Final = 200

REASON_RESERVATION_EXPIRED: Final = "ReservationExpired"
"""Warning event on a pod whose reservation outlived --gate-reservation-timeout."""
MSG_RESERVATION_EXPIRED: Final = (
    "queue {queue} reserved {request} for this pod {age:.0f}s ago and it was not placed "
    "(--gate-reservation-timeout={timeout:g}s): the reservation is released. Kubernetes "
    "cannot gate the pod again, so it stays pending without a reservation and is placed "
    "like any pod once its queue has room and a node fits it"
)
EXPLAIN_RESERVATION_HELD: Final = (
    "let through the gate: queue {queue} holds room for its request until it is placed "
    "(--gate-reservation-timeout 0: the reservation is never released)"
)
"""`koordqueue explain pod`: a reserved pod, no timeout."""
EXPLAIN_RESERVATION_TIMEOUT: Final = (
    "let through the gate: queue {queue} holds room for its request until it is placed, "
    "or until --gate-reservation-timeout={timeout:g}s after the scheduler first saw it "
    "un-gated; then the reservation is released (a ReservationExpired Warning event on the "
    "pod says when) and it waits like any pod"
)
"""`koordqueue explain pod`: a reserved pod under a timeout, not yet released."""
EXPLAIN_RESERVATION_EXPIRED: Final = (
    "let through the gate, but its reservation in queue {queue} was released by "
    "--gate-reservation-timeout at {at}: it holds no room and is placed like any pod once "
    "its queue has room and a node fits it"
)
"""`koordqueue explain pod`: a pod whose reservation the timeout released (event seen)."""

WARN_GATE_WITHOUT_OPT_IN: Final = (
    "pod {pod} carries gate " + GATE_NAME + " but not the opt-in annotation "
    + OPT_IN_ANNOTATION + '="true"; it will never be un-gated by the scheduler'
)
WARN_QUEUE_FULL: Final = (
    "{count} gate removals refused by full worker queues; those pods are retried next session"
)
