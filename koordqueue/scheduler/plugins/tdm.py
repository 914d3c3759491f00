"""tdm: Volcano's time-division multiplexing of revocable nodes (its plugin of that name).

A node labelled `volcano.sh/revocable-zone: <zone>` is lent to preemptable work during the
zone's window, the argument `tdm.revocable-zone.<zone>: "HH:MM-HH:MM"` (local time; an end at
or before the start is the next day's; as in Volcano the window opens at today's start, so
at 01:00 "22:00-02:00" is closed). As in Volcano:
- **predicate**: a revocable node refuses every pod while its window is closed (or its zone
  has no window), and pods without a revocable zone (`volcano.sh/revocable-zone: "*"`, or
  `volcano.sh/preemptable: "true"`) always; UnschedulableAndUnresolvable;
- **node order**: 100 on an open revocable node for a pod that may use it;
- **preemptable**: a preemptable pod, or one allowed on revocable nodes, preempts nothing;
  others may evict running preemptable pods on ordinary nodes, per job no more than its
  budget allows (`volcano.sh/jdb-min-available` / `jdb-max-unavailable`, a number or a
  percentage of its pods rounded up; else 1);
- **victim tasks** (the shuffle action): once every `tdm.evict.period` (1m), the running
  preemptable pods on the nodes of every closed zone, within the same budgets;
- **job order**: PodGroups not marked `volcano.sh/preemptable: "true"` first; **job
  pipelined**: only a job whose waiting and ready pods reach minAvailable; **job starving**:
  a job not so marked with pending pods.
The clock is `TdmPlugin.clock` (wall time; tests set their own). The last eviction time is
kept on the class, as Volcano keeps it in a package variable.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import ClassVar, Final

import numpy as np

from koordqueue.domain.queue_items import parse_go_duration
from koordqueue.scheduler.api import JobInfo, NodeInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.framework.interface import Arguments, ExtensionPoint, Plugin, Vote
from koordqueue.scheduler.framework.placement import BoolArray, FloatArray, Scorer
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.interpod import plugin_enabled

_CLOCK: Final = re.compile(r"^([0-9]{1,2}):([0-9]{2})$")
MAX_NODE_SCORE: Final = 100.0


def _clock_time(text: str, raw: str) -> tuple[int, int]:
    """Go's time.Parse("15:04", text): hour of 1-2 digits below 24, minute of 2 below 60."""
    found = _CLOCK.match(text)
    if found is None or int(found.group(1)) > 23 or int(found.group(2)) > 59:
        raise ValueError(vn.ERR_TDM_ZONE_FORMAT.format(raw=raw))
    return int(found.group(1)), int(found.group(2))


def parse_revocable_zone(raw: str, now: float) -> tuple[float, float]:
    """Volcano's parseRevocableZone: the window's start and end (epoch seconds) around the
    local day of `now`; ValueError naming the value when it is not "HH:MM-HH:MM"."""
    parts = raw.strip().split("-")
    if len(parts) != 2:
        raise ValueError(vn.ERR_TDM_ZONE_FORMAT.format(raw=raw))
    (h1, m1), (h2, m2) = _clock_time(parts[0], raw), _clock_time(parts[1], raw)
    day = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    start = day.replace(hour=h1, minute=m1)
    end = day.replace(hour=h2, minute=m2)
    if (h1, m1) >= (h2, m2):
        end += timedelta(days=1)
    return start.timestamp(), end.timestamp()


def budget_count(value: str, total: int) -> int:
    """intstr: a number, or a percentage of `total` rounded up (0 when neither)."""
    text = value.strip()
    if text.endswith("%"):
        try:
            return math.ceil(int(text[:-1]) * total / 100)
        except ValueError:
            return 0
    try:
        return int(text)
    except ValueError:
        return 0


def max_evictions(job: JobInfo) -> int:
    """Volcano's getMaxPodEvictNum: what the job's disruption budget still lets go."""
    running = len(job.task_status_index.get(TaskStatus.RUNNING, {}))
    total = len(job.tasks)
    notes = job.annotations
    if vn.JDB_MIN_AVAILABLE in notes:
        wanted = budget_count(notes[vn.JDB_MIN_AVAILABLE], total)
        return running - wanted if running >= wanted else 1
    if vn.JDB_MAX_UNAVAILABLE in notes:
        allowed = budget_count(notes[vn.JDB_MAX_UNAVAILABLE], total)
        done = sum(len(job.task_status_index.get(s, {}))
                   for s in (TaskStatus.SUCCEEDED, TaskStatus.FAILED))
        unavailable = total - done - running
        return 0 if unavailable >= allowed else allowed - unavailable
    return 1


def job_preemptable(job: JobInfo) -> bool:
    """The PodGroup marked `volcano.sh/preemptable: "true"` (Volcano's JobInfo.Preemptable:
    false when unset, unlike the pod's default)."""
    return job.annotations.get(vn.PREEMPTABLE, "").strip().lower() in ("true", "1", "t")


class TdmPlugin(Plugin):
    """Lends revocable nodes to preemptable pods inside their zones' windows."""

    name = vn.TDM
    quiet = True
    clock: ClassVar[Callable[[], float]] = time.time
    last_evict_at: ClassVar[float] = 0.0

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        self.zones = {
            key[len(vn.TDM_ZONE_PREFIX):]: str(value)
            for key, value in self.arguments.items() if key.startswith(vn.TDM_ZONE_PREFIX)
        }
        self.evict_period = vn.TDM_DEFAULT_EVICT_PERIOD
        raw = self.arguments.get(vn.TDM_EVICT_PERIOD)
        if isinstance(raw, str):
            with contextlib.suppress(ValueError):  # Volcano keeps the default
                self.evict_period = parse_go_duration(raw)

    def closed(self, zone: str, now: float) -> str | None:
        """Why `zone`'s window is closed at `now` (Volcano's availableRevocableZone), or None."""
        raw = self.zones.get(zone)
        if raw is None:
            return vn.ERR_TDM_ZONE_UNKNOWN.format(zone=zone)
        try:
            start, end = parse_revocable_zone(raw, now)
        except ValueError as exc:
            return str(exc)
        if int(now) < int(start) or int(now) > int(end):
            return vn.ERR_TDM_WINDOW_CLOSED.format(zone=zone, raw=raw)
        return None

    def on_session_open(self, session: Session) -> None:
        self.session = session
        now = self.now = type(self).clock()
        nodes = session.node_list
        self.node_zone = {n.name: n.labels.get(vn.REVOCABLE_ZONE, "") for n in nodes}
        self.refusals: dict[str, str | None] = {
            zone: self.closed(zone, now) for zone in set(self.node_zone.values()) if zone}
        revocable = np.array([bool(self.node_zone[n.name]) for n in nodes], dtype=np.bool_)
        self.open_mask: BoolArray = np.array(
            [not z or self.refusals[z] is None for z in (self.node_zone[n.name] for n in nodes)],
            dtype=np.bool_)
        self.plain_mask: BoolArray = ~revocable
        self.scores: FloatArray = np.where(revocable & self.open_mask, MAX_NODE_SCORE, 0.0)
        if revocable.any():
            if plugin_enabled(session, self.name, ExtensionPoint.PREDICATE):
                session.placement.add_dynamic_predicate(self.predicate, self.explain)
            if plugin_enabled(session, self.name, ExtensionPoint.NODE_ORDER):
                session.placement.add_dynamic_score(self.scorer)
        session.add_preemptable_fn(self.name, self.preemptable)
        session.add_victim_tasks_fn(self.name, self.victim_tasks)
        session.add_job_order_fn(self.name, self._job_order,
                                 key=lambda job: 1 if job_preemptable(job) else 0)
        session.add_job_pipelined_fn(self.name, self._pipelined)
        session.add_job_starving_fn(self.name, self._starving)

    # --- predicate and score ---------------------------------------------------------------
    def refusal(self, task: TaskInfo, zone: str) -> str | None:
        """Volcano's predicateFn on a node of `zone` ("" for an ordinary node)."""
        if not zone:
            return None
        closed = self.refusals.get(zone) if zone in self.refusals else self.closed(zone, self.now)
        if closed is not None:
            return closed
        return None if task.vc.get(vn.REVOCABLE_ZONE) else vn.ERR_TDM_NOT_REVOCABLE

    def predicate(self, task: TaskInfo) -> BoolArray:
        return self.open_mask if task.vc.get(vn.REVOCABLE_ZONE) else self.plain_mask

    def explain(self, task: TaskInfo, node: NodeInfo) -> str | None:
        return self.refusal(task, self.node_zone.get(node.name, ""))

    def scorer(self, task: TaskInfo) -> Scorer | None:
        if not task.vc.get(vn.REVOCABLE_ZONE):
            return None
        scores = self.scores
        return lambda _eff: scores

    # --- eviction --------------------------------------------------------------------------
    def _by_job(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        grouped: dict[str, list[TaskInfo]] = {}
        for task in tasks:
            grouped.setdefault(task.job, []).append(task)
        victims: list[TaskInfo] = []
        for uid, candidates in grouped.items():
            job = self.session.jobs.get(uid)
            if job is not None:
                victims.extend(candidates[:max(0, min(max_evictions(job), len(candidates)))])
        return victims

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Volcano's preemptableFn."""
        if preemptor.preemptable or preemptor.vc.get(vn.REVOCABLE_ZONE):
            return []
        eligible = [
            t for t in candidates
            if t.preemptable and t.status is TaskStatus.RUNNING and t.node_name is not None
            and t.node_name in self.node_zone and not self.node_zone[t.node_name]
        ]
        return self._by_job(eligible)

    def victim_tasks(self, _candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Volcano's victimsFn: preemptable running pods on closed zones' nodes."""
        cls = type(self)
        now = cls.clock()
        if cls.last_evict_at + self.evict_period > now:
            return []
        victims: list[TaskInfo] = []
        for zone in sorted(self.zones):
            if self.closed(zone, now) is None:
                continue
            on_zone = [
                t for node in self.session.node_list
                if self.node_zone.get(node.name) == zone
                for t in node.tasks.values()
                if t.preemptable and t.status is TaskStatus.RUNNING
                and t.job in self.session.jobs
            ]
            victims.extend(self._by_job(on_zone))
        cls.last_evict_at = now
        return victims

    # --- job order, pipelined, starving ----------------------------------------------------
    @staticmethod
    def _job_order(left: JobInfo, right: JobInfo) -> int:
        lp, rp = job_preemptable(left), job_preemptable(right)
        return 0 if lp == rp else (1 if lp else -1)

    @staticmethod
    def _pipelined(job: JobInfo) -> Vote:
        pipelined = job.waiting_task_num() + job.ready_task_num() >= job.min_available
        return Vote.PERMIT if pipelined else Vote.REJECT

    @staticmethod
    def _starving(job: JobInfo) -> bool:
        return not job_preemptable(job) and bool(job.task_status_index.get(TaskStatus.PENDING))
