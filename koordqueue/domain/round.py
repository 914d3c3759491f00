"""What an admission round decided for each unit it looked at, and why (typed reasons).

The engine's round appends one outcome per unit: admitted, rejected by CheckUsage, or skipped
with the rule that skipped it. Everything else reads this record instead of re-deriving the
rules: `effects` turns it into events and status writes for the controller and the simulator,
and `explain` reads a dry round's record for one unit.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordqueue.domain.admission import Admitted, Rejection
from koordqueue.domain.mapping import Unresolved
from koordqueue.domain.queue_unit import QueueUnit


@dataclass(slots=True)
class Admit:
    """CheckUsage admitted the unit (after preempting, if `Preempted` outcomes name it)."""

    unit: QueueUnit
    decision: Admitted


@dataclass(slots=True)
class Reject:
    """The policy offered the unit and CheckUsage refused it."""

    unit: QueueUnit
    decision: Rejection


@dataclass(slots=True)
class Preempted:
    """An admitted, not yet running unit lost its admission so that `by` fits."""

    unit: QueueUnit
    by: QueueUnit


@dataclass(slots=True)
class QueueNotFound:
    """The unit names a queue (or quota) that does not exist."""

    unit: QueueUnit
    queue: str


@dataclass(slots=True)
class Unmapped:
    """The unit names no usable quota: it is never admitted."""

    unit: QueueUnit
    unresolved: Unresolved


@dataclass(slots=True)
class QueueUnserved:
    """Its queue asks for a policy the factory cannot serve (AddQueueFail on the Queue)."""

    unit: QueueUnit
    queue: str
    error: str


@dataclass(slots=True)
class BlockedByHead:
    """Block/Intelligent: its quota is blocked since `since` by `head` (maybe the unit itself)."""

    unit: QueueUnit
    quota: str
    head: str
    since: float


@dataclass(slots=True)
class HighPriorityWaiting:
    """Intelligent: below the priority threshold, and these high units still wait."""

    unit: QueueUnit
    waiting: tuple[str, ...]
    threshold: int


@dataclass(slots=True)
class BeyondMaxDepth:
    """Its position (1-based) is past `koord-queue/max-depth`: the policy does not scan it."""

    unit: QueueUnit
    position: int
    depth: int


@dataclass(slots=True)
class WaitingForPodsRunning:
    """wait-for-pods-running: these admitted units of the queue do not run yet."""

    unit: QueueUnit
    not_running: tuple[str, ...]


@dataclass(slots=True)
class BackingOff:
    """The unit is kept out of rounds until `until` (back-off after a failure)."""

    unit: QueueUnit
    until: float


@dataclass(slots=True)
class NotOffered:
    """The policy did not offer the unit this round for no rule above (should not happen)."""

    unit: QueueUnit


Skip = BlockedByHead | HighPriorityWaiting | BeyondMaxDepth | NotOffered
"""Why a policy did not offer a waiting unit."""

Outcome = (
    Admit
    | Reject
    | Preempted
    | QueueNotFound
    | Unmapped
    | QueueUnserved
    | WaitingForPodsRunning
    | BackingOff
    | Skip
)
