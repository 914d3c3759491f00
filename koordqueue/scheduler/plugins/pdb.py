"""pdb: preempt and reclaim never pick a victim whose eviction would break a PodDisruptionBudget.

Follows Volcano's `pdb` plugin (opt-in: enabled only by naming it in a tier). Its filter
registers as preemptable, reclaimable and victim-tasks function. It walks the candidates in
the order given; each candidate charges one disruption to every budget that selects it
(same namespace, non-empty selector matching its labels, pod not already in the budget's
disruptedPods) and is dropped when any such budget falls below zero. A candidate's charges
stay spent even when it is dropped, as in Volcano and kube-scheduler's
filterPodsWithPDBViolation. Because the filter drops only the violating candidates, a node
whose other candidates can make room is still chosen: a budget is broken nowhere.

Only potential victims are charged: as preemptable/reclaimable function the filter first
asks the other plugins of its tier which candidates they would evict (e.g. `priority` keeps
equal- or higher-priority pods) and charges those alone, as kube-scheduler's
selectVictimsOnNode hands filterPodsWithPDBViolation only the lower-priority pods. (Volcano's
filter charges every candidate it is given, so a protected higher-priority pod on the node
could use up the budget and drop the real victims; argument `pdb.potentialVictimsOnly: false`
restores that.)

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
from koordqueue.scheduler.framework.interface import ExtensionPoint, Plugin
from koordqueue.scheduler.framework.session import EventHandler, EvictableFn, Session

COUNT_SESSION_EVICTIONS: Final = "pdb.countSessionEvictions"
"""Argument: charge the session's own evictions to the budgets (default true)."""
POTENTIAL_VICTIMS_ONLY: Final = "pdb.potentialVictimsOnly"
"""Argument: charge only candidates the rest of the tier would evict (default true; false
charges every candidate, as Volcano)."""


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
    quiet = True

    def on_session_open(self, session: Session) -> None:
        budgets = _Budgets(list(session.pdbs))
        if budgets.pdbs and self.arguments.get_bool(COUNT_SESSION_EVICTIONS, True):
            session.add_event_handler(
                self.name,
                EventHandler(allocate=budgets.on_allocate, deallocate=budgets.on_deallocate),
            )

        if self.arguments.get_bool(POTENTIAL_VICTIMS_ONLY, True):
            preemptable = _potential_victims_only(
                session, self.name, ExtensionPoint.PREEMPTABLE, budgets
            )
            reclaimable = _potential_victims_only(
                session, self.name, ExtensionPoint.RECLAIMABLE, budgets
            )
        else:

            def evictable(_preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
                return budgets.keep(candidates)

            preemptable = reclaimable = evictable
        session.add_preemptable_fn(self.name, preemptable)
        session.add_reclaimable_fn(self.name, reclaimable)
        session.add_victim_tasks_fn(self.name, budgets.keep)


def _potential_victims_only(
    session: Session, name: str, point: ExtensionPoint, budgets: _Budgets
) -> EvictableFn:
    """The filter for `point`, charging only the candidates the rest of its tier evicts."""
    others: list[EvictableFn] | None = None

    def evictable(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        nonlocal others
        if not budgets.pdbs or not any(budgets.charging(t) for t in candidates):
            return list(candidates)
        if others is None:
            # Resolved on first use: every plugin has registered by then. Each other
            # function is asked with all the candidates, as the session asks it.
            others = next(
                (
                    [fn for n, fn in tier if n != name]
                    for tier in session._tiers(point)
                    if any(n == name for n, _fn in tier)
                ),
                [],
            )
        potential = candidates
        for fn in others:
            answer = fn(preemptor, candidates)
            if answer is None:
                continue
            keep = {t.uid for t in answer}
            potential = [t for t in potential if t.uid in keep]
        return budgets.keep(potential)

    return evictable
