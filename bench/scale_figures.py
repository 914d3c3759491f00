"""The figures of a bench_scale run (pure): quota usage from one watch per object (issue 28
part 2), time to admission per class, the summary and its table.

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

import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.bench_peers import KUEUE_SHIPPED_CONCURRENCY, PEER_CLIENT_QPS, kueue_profile_line
from bench.burst import percentile
from bench.scale_shape import PlannedJob

PUBLISHED_WALL_S = 351.1  # Kueue default_rangespec.yaml: average of 5 runs, 351116.4 ms
PUBLISHED_USAGE = 0.587
PUBLISHED_AVG_ADMISSION_S = {"small": 215.5, "medium": 76.8, "large": 6.7}
TARGET_WALL_RATIO = 0.6  # issue 28: wall <= 0.6x Kueue's on the same box
TARGET_USAGE = 0.55
LEGACY_PROFILE = "peer-qps"  # what bench_scale ran Kueue with before issue 28

UNIT_HOLDS = frozenset({"Reserved", "Dequeued", "Running", "SchedReady", "SchedSucceed"})
"""QueueUnit phases that hold quota (koordqueue's admitted phases)."""
UNIT_RELEASED = frozenset({"Succeed", "Failed"})
WORKLOAD_RESERVED = "QuotaReserved"
WORKLOAD_FINISHED = "Finished"
WORKLOAD_PENDING = "Pending"
WORKLOAD_HOLDS = frozenset({WORKLOAD_RESERVED})
WORKLOAD_RELEASED = frozenset({WORKLOAD_FINISHED})
RELEASED_STATES = {UNIT_HOLDS: UNIT_RELEASED, WORKLOAD_HOLDS: WORKLOAD_RELEASED}


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


def held_after_release(
    history: Mapping[str, Sequence[tuple[float, str]]],
    holds: frozenset[str],
    released: frozenset[str],
) -> list[str]:
    """The keys that held quota again after a released state (a finished QueueUnit admitted
    again; a Finished Workload whose quota Kueue reserved again, its Finished condition gone)."""
    again = []
    for key, steps in history.items():
        seen_release = False
        for _, state in steps:
            if state in released:
                seen_release = True
            elif seen_release and state in holds:
                again.append(key)
                break
    return sorted(again)


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


def usage_ratio(
    intervals: Iterable[tuple[float, float, float]], capacity: float, start: float, end: float
) -> float:
    """Time-weighted used / capacity over [start, end]: sum(amount x overlap) / (capacity x span).

    `intervals` are (from, to, amount); the parts outside the window do not count.
    """
    span = end - start
    if span <= 0 or capacity <= 0:
        return 0.0
    used = 0.0
    for begin, finish, amount in intervals:
        overlap = min(finish, end) - max(begin, start)
        if overlap > 0:
            used += amount * overlap
    return used / (capacity * span)


def class_stats(
    jobs: Iterable[PlannedJob], created: Mapping[str, float], admitted: Mapping[str, float]
) -> dict[str, dict[str, float]]:
    """Per class: Jobs admitted of all, average / p50 / p99 / max seconds creation -> admission."""
    waits: dict[str, list[float]] = {}
    totals: dict[str, int] = {}
    for job in jobs:
        totals[job.klass] = totals.get(job.klass, 0) + 1
        if job.key in created and job.key in admitted:
            waits.setdefault(job.klass, []).append(admitted[job.key] - created[job.key])
    stats: dict[str, dict[str, float]] = {}
    for klass, total in totals.items():
        values = waits.get(klass, [])
        stats[klass] = {
            "admitted": len(values),
            "of": total,
            "avg_s": round(statistics.fmean(values), 3) if values else float("nan"),
            "p50_s": round(percentile(values, 50), 3) if values else float("nan"),
            "p99_s": round(percentile(values, 99), 3) if values else float("nan"),
            "max_s": round(max(values), 3) if values else float("nan"),
        }
    return stats


@dataclass
class Run:
    """Wall times per Job key, filled by the creators, the watches and the completer."""

    created: dict[str, float] = field(default_factory=dict)
    admitted: dict[str, float] = field(default_factory=dict)  # the last resume seen
    first_admitted: dict[str, float] = field(default_factory=dict)
    completed: dict[str, float] = field(default_factory=dict)  # Complete seen on the watch
    released: dict[str, float] = field(default_factory=dict)  # the controller released it
    evictions: dict[str, int] = field(default_factory=dict)
    # the release watch: each QueueUnit's phases / each Workload's quota state, in order
    history: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    raw: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)  # --dump: the events
    patch_errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def summarise(
    jobs: list[PlannedJob],
    run: Run,
    *,
    t0: float,
    create_s: float,
    cpu_s: float,
    bench_cpu_s: float,
    capacity_cpu: float,
    cohort_cpu: float = 0.0,
    holds: frozenset[str] = UNIT_HOLDS,
) -> dict[str, Any]:
    """The headline figures of one run (pure: from the recorded wall times).

    `usage_held` integrates the quota each object held by its own states on the release watch
    (one stream per object, no lag between two watches); `peak_held_cpu` is the most held at
    once per cohort, which the cohort's quota (`cohort_cpu`) bounds unless the API showed more
    reserved than the quota allows (`over_quota`; `held_after_release` counts the objects that
    held again after their release, one way there). `usage_running`: resume -> Complete, both on
    the Job watch. `usage_held_two_watches`: the pre-issue-28 figure (resume on the Job watch
    -> release on the release watch), kept to show the lag it carried."""
    by_key = {j.key: j for j in jobs}
    end = max(run.completed.values(), default=time.time())
    intervals = held_intervals(
        run.history, holds, lambda k: by_key[k].cpu if k in by_key else None, end
    )
    held = [(begin, finish, amount) for begin, finish, amount, _ in intervals]
    peaks = peak_by_group((b, f, a, by_key[k].cohort) for b, f, a, k in intervals)
    two_watches = [(run.admitted[k], run.released.get(k, run.completed[k]), by_key[k].cpu)
                   for k in run.completed if k in run.admitted]  # fmt: skip
    running = [(run.admitted[k], run.completed[k], by_key[k].cpu)
               for k in run.completed if k in run.admitted]  # fmt: skip
    done = len(run.completed)
    return {
        "jobs": len(jobs),
        "completed": done,
        "released": len(run.released),
        "wall_s": round(end - t0, 2),
        "create_phase_s": round(create_s, 2),
        "usage_held": round(usage_ratio(held, capacity_cpu, t0, end), 4),
        "usage_running": round(usage_ratio(running, capacity_cpu, t0, end), 4),
        "usage_held_two_watches": round(usage_ratio(two_watches, capacity_cpu, t0, end), 4),
        "peak_held_cpu": {c: round(v, 3) for c, v in sorted(peaks.items())},
        "over_quota": bool(cohort_cpu) and any(v > cohort_cpu + 1e-9 for v in peaks.values()),
        # the API showed these holding quota again after their release (see held_after_release)
        "held_after_release": len(
            held_after_release(run.history, holds, RELEASED_STATES.get(holds, frozenset()))
        ),
        "admission_s": class_stats(jobs, run.created, run.admitted),
        "evictions": sum(run.evictions.values()),
        "complete_patch_errors": run.patch_errors,
        "controller_cpu_s": round(cpu_s, 2),
        "controller_cpu_ms_per_job": round(1000 * cpu_s / max(done, 1), 3),
        "bench_cpu_s": round(bench_cpu_s, 2),
    }


def kueue_profile_name(name: str) -> str:
    """What a Kueue row ran: a bench_peers KUEUE_PROFILES entry, or this bench's first one."""
    if name == LEGACY_PROFILE:
        return (f"{LEGACY_PROFILE} (qps {PEER_CLIENT_QPS} / burst {PEER_CLIENT_QPS}, Job "
                f"{KUEUE_SHIPPED_CONCURRENCY['Job.batch']} / Workload "
                f"{KUEUE_SHIPPED_CONCURRENCY['Workload.kueue.x-k8s.io']} workers)")  # fmt: skip
    return kueue_profile_line(name)


def peer_label(result: Mapping[str, Any]) -> str:
    """A table row's peer: Kueue with its profile's name."""
    profile = result.get("kueue_profile")
    return f"{result['who']} {str(profile).split(' (')[0]}" if profile else str(result["who"])


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: one row per peer, with ratios to Kueue (same run) and to the published 351 s."""
    kueue = next((r for r in results if r["who"] == "kueue"), None)
    head = ("| peer | Jobs | wall s | wall / 351 s | wall / Kueue | usage held | usage running "
            "| peak held cpu per cohort | avg (p99) admission s: small | medium | large "
            "| evictions | controller CPU s (ms / Job) |")  # fmt: skip
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        adm = r["admission_s"]
        vs_kueue = f"{r['wall_s'] / kueue['wall_s']:.2f}x" if kueue and kueue["wall_s"] else "—"
        cells = [
            peer_label(r), f"{r['completed']}/{r['jobs']}", f"{r['wall_s']:.1f}",
            f"{r['wall_s'] / PUBLISHED_WALL_S:.2f}x", vs_kueue,
            f"{100 * r['usage_held']:.1f} %", f"{100 * r['usage_running']:.1f} %",
            f"{max(r['peak_held_cpu'].values(), default=0):g}"
            + (" OVER QUOTA" if r.get("over_quota") else "")
            + (f" ({r['held_after_release']} held again after release)"
               if r.get("held_after_release") else ""),
            *[f"{adm[c]['avg_s']:.2f} ({adm[c]['p99_s']:.2f})" if c in adm else "—"
              for c in ("small", "medium", "large")],
            str(r["evictions"]),
            f"{r['controller_cpu_s']:.1f} ({r['controller_cpu_ms_per_job']:.2f})",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
