"""A node's measured load: what Volcano's NodeInfo.ResourceUsage carries for the `usage`
and `rescheduling` plugins.

Why its own type, kept beside the snapshot rather than on NodeInfo: the readings come from
a metrics system on their own period (Volcano's `metrics.interval`, 30 s), not from the
watch that keeps nodes, and only two opt-in plugins read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

STALE_AFTER: Final = 300.0
"""Seconds after which a reading is ignored (Volcano's usage plugin: five minutes)."""
CURRENT: Final = float("inf")
"""`at` of a reading that never goes stale: a scenario's, which describes the cluster as it
is at every step."""


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """Average cpu and memory use of one node over the metrics period, in percent of the
    node; None where the source had no value. `at` is when it was measured (epoch
    seconds); 0 means never, which the plugins treat as no reading at all."""

    cpu: float | None = None
    memory: float | None = None
    at: float = 0.0

    def fresh(self, now: float) -> bool:
        """Measured, and not longer than `STALE_AFTER` ago."""
        return self.at > 0 and (self.at == CURRENT or now - self.at <= STALE_AFTER)
