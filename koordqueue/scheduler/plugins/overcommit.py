"""overcommit: admit (enqueue) jobs while their minResources fit factor x cluster capacity."""

from __future__ import annotations

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, PodGroupPhase, names
from koordqueue.scheduler.api.resource import fits, scale, sum_resources
from koordqueue.scheduler.framework.interface import Plugin, Vote
from koordqueue.scheduler.framework.session import Session


class OvercommitPlugin(Plugin):
    """Enqueue vote: used + inqueue minResources + this job's must fit total x factor.

    Why a factor > 1: jobs are admitted a little ahead of capacity so that pods are ready
    to take resources the moment others release them.
    """

    name = "overcommit"
    quiet = True

    def on_session_open(self, session: Session) -> None:
        factor = self.arguments.get_float("overcommit-factor", names.OVERCOMMIT_FACTOR_DEFAULT)
        if factor < 1.0:
            factor = names.OVERCOMMIT_FACTOR_DEFAULT
        used = session.nodes_used()
        idle = scale(session.total_resource, factor) - used
        inqueue: list[Resources] = []
        zero_dims: dict[str, int] = {}
        sums = session.queue_sums()
        if sums is not None:  # the cache's per-queue sums over every Inqueue job
            for name, queue_sums in sums.items():
                if name in session.queues:
                    inqueue.append(queue_sums.overcommit_inqueue.resources())
                    zero_dims.update(dict.fromkeys(queue_sums.overcommit_dims.counts, 0))
        else:
            for job in session.jobs.values():
                if job.phase is not PodGroupPhase.INQUEUE:
                    continue
                if job.min_resources is None:  # contributes 0 on each dimension it holds
                    zero_dims.update(dict.fromkeys(job.allocated_amounts(), 0))
                else:
                    inqueue.append((job.min_request() - job.allocated).clamp_nonnegative())
        inqueue.append(Resources(zero_dims))
        state = {"inqueue": sum_resources(inqueue)}

        def enqueueable(job: JobInfo) -> Vote:
            if job.min_resources is None:
                return Vote.PERMIT
            if fits(state["inqueue"] + job.min_request(), idle):
                return Vote.PERMIT
            return Vote.REJECT

        def enqueued(job: JobInfo) -> None:
            state["inqueue"] = state["inqueue"] + job.min_request()

        session.add_job_enqueueable_fn(self.name, enqueueable)
        session.add_job_enqueued_fn(self.name, enqueued)
