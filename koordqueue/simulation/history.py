"""How long workloads run, from the finished QueueUnits a live cluster still holds (issue 29:
"where workloads finish at a given rate, from the snapshot's history").

A finished unit (phase Succeed or Failed) says when it got its quota (the Admitted condition's
lastTransitionTime, else status.lastAllocateTime, written on every admission) and when it
finished (the Finished condition's lastTransitionTime). The median of those spans, over the
admission period (a replay's step is one admission round), is the run time `whatif` gives
every unit when no --runtime is given.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from koordqueue.domain.queue_unit import FINISHED_PHASES, Phase
from koordqueue.simulation.scenario_fields import ScenarioError, check_keys, int_field, line_of

MAX_STEPS: Final = 20_000
"""Most steps a replay paced by history runs: beyond it the note says so (a 10-minute median
at a 1 s admission period is 600 steps per unit in turn)."""


@dataclass(frozen=True, slots=True)
class RunHistory:
    """What the finished units say: how many, their median run (seconds), and the length of
    one replay step (the controller's --admission-period, seconds)."""

    finished: int
    median_run_seconds: float
    step_seconds: float

    @property
    def runtime_steps(self) -> int:
        return max(1, math.ceil(self.median_run_seconds / self.step_seconds))

    def to_doc(self) -> dict[str, Any]:
        return {"finished": self.finished, "medianRunSeconds": round(self.median_run_seconds, 3),
                "stepSeconds": self.step_seconds}

    def describe(self) -> str:
        return (f"{self.finished} finished unit(s) ran {self.median_run_seconds:g} s (median) "
                f"from admission to finish: {self.runtime_steps} step(s) of "
                f"{self.step_seconds:g} s")


def _epoch(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _condition_time(conditions: object, kind: str) -> float | None:
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "True":
            return _epoch(c.get("lastTransitionTime"))
    return None


def run_seconds(obj: Mapping[str, Any]) -> float | None:
    """From admission to finish for a finished unit's object; None when it is not finished
    or does not say both times."""
    status = obj.get("status") or {}
    if not isinstance(status, Mapping):
        return None
    try:
        phase = Phase(str(status.get("phase")))
    except ValueError:
        return None
    if phase not in FINISHED_PHASES:
        return None
    conditions = status.get("conditions")
    end = _condition_time(conditions, "Finished")
    start = _condition_time(conditions, "Admitted") or _epoch(status.get("lastAllocateTime"))
    if end is None or start is None or end < start:
        return None
    return end - start


def run_history(units: Iterable[Mapping[str, Any]], step_seconds: float) -> RunHistory | None:
    """The finished units' median run; None when no finished unit says how long it ran."""
    spans = [s for s in (run_seconds(u) for u in units) if s is not None]
    if not spans or step_seconds <= 0:
        return None
    return RunHistory(len(spans), statistics.median(spans), step_seconds)


def history_field(source: str, doc: Mapping[str, Any]) -> RunHistory | None:
    """A scenario's `history` (what a snapshot found of the finished units)."""
    raw = doc.get("history")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ScenarioError(source, line_of(doc, "history"), "history", "must be a map")
    check_keys(source, raw, {"finished", "medianRunSeconds", "stepSeconds"}, "history")
    finished = int_field(source, raw, "finished", "history", 1) or 0
    values = []
    for key, default in (("medianRunSeconds", None), ("stepSeconds", 1.0)):
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
            key == "stepSeconds" and value == 0
        ):
            raise ScenarioError(source, line_of(raw, key), f"history.{key}",
                                f"must be a number > 0, got {value!r}")
        values.append(float(value))
    if finished < 1:
        raise ScenarioError(source, line_of(raw, "finished"), "history.finished", "must be >= 1")
    return RunHistory(finished, values[0], values[1])
