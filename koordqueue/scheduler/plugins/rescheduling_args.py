"""Arguments of the rescheduling plugin (Volcano's plugins/rescheduling), parsed apart from it.

Volcano reads
`interval` (a Go duration; anything it cannot parse, a bare number included, falls back to
5m) and `strategies` ({name, parameters}, default one lowNodeUtilization). Its
lowNodeUtilization reads `thresholds` / `targetThresholds` in percent per resource, skipping
values that are not whole numbers and keys that are not strings (rescheduling_test.go).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog

from koordqueue.domain.queue_items import parse_go_duration
from koordqueue.scheduler.api import load_names as ln

log = structlog.get_logger(__name__)

THRESHOLD_KEYS = ("cpu", "memory", "pods")


def parse_interval(raw: object) -> float:
    """Seconds between runs; 5m, with a warning, for a missing or unparsable value."""
    if raw is None:
        return ln.RESCHEDULING_DEFAULT_INTERVAL
    if isinstance(raw, str):
        try:
            return parse_go_duration(raw)
        except ValueError:
            pass
    log.warning("rescheduling: interval is not a Go duration; using 5m", interval=repr(raw))
    return ln.RESCHEDULING_DEFAULT_INTERVAL


def _defaults() -> dict[str, float]:
    return {key: 100.0 for key in THRESHOLD_KEYS}


@dataclass
class LowNodeUtilizationConf:
    """Percent of a node's allocatable under which it is low / over which it is high."""

    thresholds: dict[str, float] = field(default_factory=_defaults)
    target_thresholds: dict[str, float] = field(default_factory=_defaults)

    def parse(self, parameters: Mapping[str, object]) -> None:
        """Overlay `thresholds` / `targetThresholds`: whole-number values on string keys
        are taken, other entries skipped (as Volcano's tests require)."""
        for key, into in (
            ("thresholds", self.thresholds),
            ("targetThresholds", self.target_thresholds),
        ):
            given = parameters.get(key)
            if not isinstance(given, Mapping):
                continue
            for name, value in given.items():
                if isinstance(name, str) and isinstance(value, int) and not isinstance(value, bool):
                    into[name] = float(value)
