"""shuffle: evict the running tasks the victim-tasks plugins choose (Volcano's actions/shuffle).

The one caller of `Session.victim_tasks`, as in Volcano: every Running task of the session's
jobs is offered (in job, then task order); the first tier whose victim-tasks plugins name a
victim chooses (their answers united, as Volcano's VictimTasks); each victim is evicted at
once. It runs only when the configuration names it. pdb's function answers every running
task its budgets allow, so pdb with `enableVictim` on makes shuffle evict all of those, in
its tier as in Volcano (docs/plugins.md).
"""

from __future__ import annotations

from koordqueue.scheduler.api import TaskStatus, names
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.statement import Statement


class ShuffleAction(Action):
    """Offer every Running task to the victim-tasks plugins; evict what they choose."""

    name = "shuffle"

    def execute(self, session: Session) -> None:
        # from the nodes (a task evicted must be on one), of our jobs only (a node also holds
        # other schedulers' pods), in job then task order whatever the node order
        running = sorted(
            (
                task
                for node in session.node_list
                for task in node.tasks.values()
                if task.status is TaskStatus.RUNNING and task.job in session.jobs
            ),
            key=lambda task: (task.job, task.uid),
        )
        if not running:
            return
        victims = session.victim_tasks(running)
        if not victims:
            return
        statement = Statement(session)
        for victim in victims:
            statement.evict(victim, names.EVICT_SHUFFLE)
        statement.commit()
