"""backfill: place best-effort (empty request) pending tasks of scheduled jobs."""

from __future__ import annotations

from koordqueue.scheduler.api import FitErrors
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.statement import Statement


class BackfillAction(Action):
    """Best-effort tasks use no resources, so any node passing the predicates will do;
    the highest-scored one is taken. Binds follow the gang rule like allocate."""

    name = "backfill"
    quiet = True

    def execute(self, session: Session) -> None:
        enqueue_configured = "enqueue" in session.config.actions
        for job in session.scan_jobs():
            if enqueue_configured and job.is_pending():
                continue
            # the (pure) validity check only for jobs with best-effort work: most have none
            tasks = [t for t in job.pending_tasks() if t.best_effort and not t.scheduling_gated]
            if not tasks or session.job_valid(job) is not None:
                continue
            statement = Statement(session)
            for task in tasks:
                reason = session.pre_predicate(task)
                if reason is not None:
                    session.fit_errors[task.uid] = FitErrors.all_nodes(session.nodes, reason)
                    continue
                choice = session.select_node(task)
                if isinstance(choice, FitErrors):
                    session.fit_errors[task.uid] = choice
                    continue
                statement.allocate(task, choice[0])
            if session.job_ready(job):
                statement.commit()
            elif not session.job_pipelined(job):
                statement.discard()
