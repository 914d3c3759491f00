"""pdb: preempt and reclaim never pick a victim whose eviction would break a PodDisruptionBudget.

Follows Volcano's `pdb` plugin (opt-in: enabled only by naming it in a tier). Its filter
registers as preemptable, reclaimable and victim-tasks function. It walks the candidates in
the order given; each candidate charges one disruption to every budget that selects it
(same namespace, non-empty selector matching its labels, pod not already in the budget's
disruptedPods) and is dropped when any such budget falls below zero. A candidate's charges
stay spent even when it is dropped, as in Volcano and kube-scheduler's
filterPodsWithPDBViolation. Because the filter drops only the violating candidates, a node
whose other candidates can make room is still chosen: a budget is broken nowhere.

One addition (argument `pdb.countSessionEvictions`, default true): evictions this session
already made are charged to their budgets before each call, so two preemptors in one session
cannot both spend a budget's last disruption (Volcano re-reads the budgets' status on every
call, and the status only changes after the evictions reach the API server). Set it to false
for Volcano's per-call counting.

Pods without labels are covered by no budget and stay victims (Volcano's filter drops them;
see docs/plugins.md).
"""

from __future__ import annotations

from typing import Final

from koordqueue.scheduler.api import TaskInfo, TaskStatus
from koordqueue.scheduler.api.pdb import PodDisruptionBudget
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.session import EventHandler, Session

COUNT_SESSION_EVICTIONS: Final = "pdb.countSessionEvictions"
"""Argument: charge the session's own evictions to the budgets (default true)."""


class _Budgets:
    """The session's budgets and the disruptions its evictions have spent on each."""

    def __init__(self, pdbs: list[PodDisruptionBudget]) -> None:
        self.pdbs = pdbs
        self.spent = [0] * len(pdbs)
        self.charged: dict[str, tuple[int, ...]] = {}
        """Evicted task uid -> the budgets its eviction was charged to."""

    def charging(self, task: TaskInfo) -> tuple[int, ...]:
        return tuple(
            i
            for i, pdb in enumerate(self.pdbs)
            if pdb.charges(task.namespace, task.name, task.labels)
        )

    def on_deallocate(self, task: TaskInfo) -> None:
        # Deallocate fires for evictions (task now Releasing) and for undone placements.
        if task.status is not TaskStatus.RELEASING or task.uid in self.charged:
            return
        charged = self.charging(task)
        self.charged[task.uid] = charged
        for i in charged:
            self.spent[i] += 1

    def on_allocate(self, task: TaskInfo) -> None:
        # An eviction undone (statement discarded) gives its disruptions back.
        if task.status is TaskStatus.RELEASING:
            return
        for i in self.charged.pop(task.uid, ()):
            self.spent[i] -= 1

    def keep(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        """The tasks that can be evicted, in order, without any budget going below zero."""
        if not self.pdbs:
            return list(tasks)
        allowed = [
            pdb.disruptions_allowed - spent
            for pdb, spent in zip(self.pdbs, self.spent, strict=True)
        ]
        victims: list[TaskInfo] = []
        for task in tasks:
            violated = False
            for i in self.charging(task):
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
            if not violated:
                victims.append(task)
        return victims


class PdbPlugin(Plugin):
    """Filters preempt/reclaim victims (and victim tasks) by PodDisruptionBudgets."""

    name = "pdb"

    def on_session_open(self, session: Session) -> None:
        budgets = _Budgets(list(session.pdbs))
        if budgets.pdbs and self.arguments.get_bool(COUNT_SESSION_EVICTIONS, True):
            session.add_event_handler(
                self.name,
                EventHandler(allocate=budgets.on_allocate, deallocate=budgets.on_deallocate),
            )

        def evictable(_preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            return budgets.keep(candidates)

        session.add_preemptable_fn(self.name, evictable)
        session.add_reclaimable_fn(self.name, evictable)
        session.add_victim_tasks_fn(self.name, budgets.keep)
