"""Quota usage of a bench_scale run, from one watch per object (pure; issue 28 part 2).

`usage held` is the quota the controller holds, integrated over the run: Kueue's definition
(its ClusterQueues' `status.flavorsUsage`). Each admitted object's holding is read from the
states of that one object as one watch saw them: a QueueUnit from its phase (Reserved ...
SchedSucceed hold; Succeed / Failed / Enqueued do not), a Kueue Workload from its conditions
(QuotaReserved holds until Finished or the reservation is dropped). Both ends of a stretch are
stamped by the same watch, in the API server's order, so the figure can never show more
quota in use at an instant than the controller had admitted at that point of the API's history.

Before issue 28 the bench stamped the start on the Job watch (resume seen) and the end on
the QueueUnit / Workload watch (release seen): two streams read by one Python process on a
saturated box. Whenever the release watch fell behind the Job watch, every held stretch grew
by that lag, and usage held could pass 100 % (132.7 % at `--scale 0.1`, bench/HISTORY.md)
while the controller never held more than its quotas allow. `peak_by_group` is the check:
the most quota held at once per cohort, which must stay within the cohort's quota.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

UNIT_HOLDS = frozenset({"Reserved", "Dequeued", "Running", "SchedReady", "SchedSucceed"})
"""QueueUnit phases that hold quota (koordqueue's admitted phases)."""
WORKLOAD_RESERVED = "QuotaReserved"
WORKLOAD_FINISHED = "Finished"
WORKLOAD_PENDING = "Pending"
WORKLOAD_HOLDS = frozenset({WORKLOAD_RESERVED})


def _true(conditions: Iterable[Mapping[str, Any]], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def workload_state(obj: Mapping[str, Any]) -> str:
    """A Kueue Workload's quota state: Finished, QuotaReserved (holding) or Pending."""
    status = obj.get("status") or {}
    conditions = status.get("conditions") or []
    if _true(conditions, "Finished"):
        return WORKLOAD_FINISHED
    if _true(conditions, "QuotaReserved"):
        return WORKLOAD_RESERVED
    return WORKLOAD_PENDING


def record(history: dict[str, list[tuple[float, str]]], key: str, at: float, state: str) -> None:
    """Append `state` to `key`'s history when it changed (re-sent objects add nothing)."""
    steps = history.setdefault(key, [])
    if not steps or steps[-1][1] != state:
        steps.append((at, state))


def held_stretches(
    steps: Sequence[tuple[float, str]], holds: frozenset[str], end: float
) -> list[tuple[float, float]]:
    """The (from, to) stretches in which `steps` (time-ordered (at, state)) are in `holds`;
    one still holding at the last step runs to `end`."""
    stretches: list[tuple[float, float]] = []
    start: float | None = None
    for at, state in steps:
        if state in holds:
            if start is None:
                start = at
        elif start is not None:
            stretches.append((start, at))
            start = None
    if start is not None:
        stretches.append((start, max(start, end)))
    return stretches


def held_intervals(
    history: Mapping[str, Sequence[tuple[float, str]]],
    holds: frozenset[str],
    amount: Callable[[str], float | None],
    end: float,
) -> list[tuple[float, float, float, str]]:
    """(from, to, amount, key) of every holding stretch of every key `amount` knows (None:
    not one of the run's objects)."""
    intervals = []
    for key, steps in history.items():
        value = amount(key)
        if value is None:
            continue
        for begin, finish in held_stretches(steps, holds, end):
            intervals.append((begin, finish, value, key))
    return intervals


def peak_by_group(intervals: Iterable[tuple[float, float, float, str]]) -> dict[str, float]:
    """The most held at once per group: (from, to, amount, group) swept in time order, a
    release at the same instant as an admission counted first (the quota it frees)."""
    events: list[tuple[float, int, float, str]] = []
    for begin, finish, value, group in intervals:
        if finish > begin:
            events.append((begin, 1, value, group))
            events.append((finish, 0, -value, group))
    events.sort(key=lambda e: (e[0], e[1]))
    current: dict[str, float] = {}
    peak: dict[str, float] = {}
    for _, _, value, group in events:
        current[group] = current.get(group, 0.0) + value
        peak[group] = max(peak.get(group, 0.0), current[group])
    return peak
