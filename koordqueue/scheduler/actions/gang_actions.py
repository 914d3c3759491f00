"""gangpreempt and gangreclaim: a starving job evicts whole gangs, or their spare tasks, in one
network domain (Volcano v1.15's actions of those names; their shared parts are
gang_eviction.py).

Both walk queues in queue order and, in each, the starving jobs in job order (gangreclaim
skips an overused queue, and a job whose queue may not reclaim for its pending tasks). For
a job: its pending tasks (all of them for a job not yet ready) and what they need; the
domains it may run in; per domain, the candidates there, as bundles, cut to what the
plugins' unified evictable functions allow (priority, gang, conformance, capacity:
`Session.unified_evictable`). Bundles are taken in order, each added to the victims, until
the domain's idle plus releasing plus the victims' requests cover the need and the dry run
(evict them, pipeline every pending task in the domain) pipelines the job; the plan is
then made for real, and committed when the job is pipelined.

Candidates: gangpreempt, running or bound preemptable tasks of other jobs of the same queue
with a lower job priority, in reverse job order; gangreclaim, running preemptable tasks of
other, reclaimable queues, in victim queue order. A job whose PodGroup says
`volcano.sh/preemptable: "false"` gives none. Arguments (`configurations:`): `maxDomains` (8;
0 or less means 8) and `allowWholeBundle` (true).
"""

from __future__ import annotations

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api import topology_names as tn
from koordqueue.scheduler.api.resource import fits
from koordqueue.scheduler.framework.callbacks import (
    GANG_PREEMPT,
    GANG_RECLAIM,
    EvictionContext,
)
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.statement import Statement
from koordqueue.scheduler.framework.util import PriorityQueue

from . import gang_eviction as ge
from .preempt_nodes import PREEMPTABLE_STATUSES


def parse(session: Session, name: str) -> tuple[int, bool]:
    """(maxDomains, allowWholeBundle) of the action's `configurations:` entry."""
    args = session.config.action_arguments(name)
    max_domains = args.get_int(tn.MAX_DOMAINS, ge.DEFAULT_MAX_DOMAINS)
    if max_domains <= 0:
        session.warnings.append(
            f"{name}: {tn.MAX_DOMAINS} must be positive; {ge.DEFAULT_MAX_DOMAINS} is used"
        )
        max_domains = ge.DEFAULT_MAX_DOMAINS
    return max_domains, args.get_bool(tn.ALLOW_WHOLE_BUNDLE, ge.DEFAULT_WHOLE_BUNDLE)


class _GangEviction(Action):
    """The walk both actions share; subclasses say whose tasks are candidates."""

    reason = ""

    def execute(self, session: Session) -> None:
        max_domains, allow_whole = parse(session, self.name)
        queues: PriorityQueue[QueueInfo] = PriorityQueue(session.queue_order_less)
        seen: set[str] = set()
        starving: dict[str, PriorityQueue[JobInfo]] = {}
        for job in session.scan_jobs():
            if job.is_pending() or session.job_valid(job) is not None:
                continue
            queue = session.queues.get(job.queue)
            if queue is None:
                continue
            if queue.name not in seen:
                seen.add(queue.name)
                queues.push(queue)
            if session.job_starving(job):
                starving.setdefault(job.queue, PriorityQueue(session.job_order_less)).push(job)
        while not queues.empty():
            queue = queues.pop()
            if self.skips_queue(session, queue):
                continue
            jobs = starving.get(queue.name)
            while jobs is not None and not jobs.empty():
                job = jobs.pop()
                statement = Statement(session)
                self._evict_for(session, statement, queue, job, (max_domains, allow_whole))
                if session.job_pipelined(job):
                    statement.commit()
                else:
                    statement.discard()

    def skips_queue(self, session: Session, queue: QueueInfo) -> bool:
        return False

    def may_evict_for(self, session: Session, queue: QueueInfo, pending: list[TaskInfo]) -> bool:
        return True

    def candidate(self, session: Session, job: JobInfo, task: TaskInfo) -> bool:
        raise NotImplementedError

    def less(self, session: Session, job: JobInfo) -> ge.BundleLess:
        raise NotImplementedError

    def _evict_for(
        self, session: Session, statement: Statement, queue: QueueInfo, job: JobInfo,
        options: tuple[int, bool],
    ) -> None:  # fmt: skip
        pending = ge.pending_for_eviction(session, job)
        if not pending or not self.may_evict_for(session, queue, pending):
            return
        need = ge.init_requests(pending)
        topology = job.network_topology
        hard = topology is not None and topology.hard_tier(session.topology.tier_names) is not None
        max_domains, allow_whole = options
        for domain in ge.candidate_domains(session, job, max_domains, hard):
            if not len(session.topology.nodes_of.get(domain, ())):
                continue
            bundles = self._bundles(session, job, need, domain, allow_whole)
            room = ge.domain_future(session, domain)
            victims: list[TaskInfo] = []
            for bundle in bundles:
                victims.extend(bundle.tasks)
                if not fits(need, room + ge.requests(victims)):
                    continue
                plan = ge.nomination_plan(
                    session, queue=queue, job=job, domain=domain, victims=list(victims),
                    reason=self.reason,
                )  # fmt: skip
                if plan is not None:
                    ge.replay(statement, plan)
                    return

    def _bundles(
        self, session: Session, job: JobInfo, need: Resources, domain: str, allow_whole: bool
    ) -> list[ge.Bundle]:
        """selectDomainBundles: the candidates as bundles, sorted, cut to what the unified
        evictable plugins allow, sorted again, whole ones dropped unless allowed."""
        by_job: dict[str, list[TaskInfo]] = {}
        for i in session.topology.nodes_of[domain].tolist():
            node = session.nodes[session.node_list[i].name]
            for task in node.tasks.values():
                if self.candidate(session, job, task):
                    by_job.setdefault(task.job, []).append(task)
        bundles = [
            bundle
            for uid in sorted(by_job)
            for bundle in ge.create_job_bundles(session.jobs[uid], by_job[uid])
        ]
        if not bundles:
            return []
        less = self.less(session, job)
        ge.sort_bundles(bundles, need, less)
        context = EvictionContext(self.name, job, domain)
        allowed = session.unified_evictable(context, ge.flatten(bundles))
        if not allowed:
            return []
        valid = ge.apply_allowed(bundles, {t.uid for t in allowed})
        ge.sort_bundles(valid, need, less)
        return [b for b in valid if allow_whole or b.type is not ge.BundleType.WHOLE]


class GangPreemptAction(_GangEviction):
    """Volcano's gangpreempt: victims in the starving job's own queue."""

    name = GANG_PREEMPT
    reason = tn.EVICT_GANG_PREEMPT

    def candidate(self, session: Session, job: JobInfo, task: TaskInfo) -> bool:
        if task.status not in PREEMPTABLE_STATUSES or not task.preemptable:
            return False
        victim = session.jobs.get(task.job)
        return (
            victim is not None
            and victim.queue == job.queue
            and victim.uid != job.uid
            and ge.job_evictable(victim)
            and job.priority > victim.priority
        )

    def less(self, session: Session, job: JobInfo) -> ge.BundleLess:
        def later_job_first(a: ge.Bundle, b: ge.Bundle) -> bool:
            return not session.job_order_less(a.job, b.job)

        return later_job_first


class GangReclaimAction(_GangEviction):
    """Volcano's gangreclaim: victims in other, reclaimable queues."""

    name = GANG_RECLAIM
    reason = tn.EVICT_GANG_RECLAIM

    def skips_queue(self, session: Session, queue: QueueInfo) -> bool:
        return session.overused(queue)

    def may_evict_for(self, session: Session, queue: QueueInfo, pending: list[TaskInfo]) -> bool:
        return session.preemptive(queue, pending)

    def candidate(self, session: Session, job: JobInfo, task: TaskInfo) -> bool:
        if task.status is not TaskStatus.RUNNING or not task.preemptable:
            return False
        victim = session.jobs.get(task.job)
        if victim is None or victim.queue == job.queue or not ge.job_evictable(victim):
            return False
        queue = session.queues.get(victim.queue)
        return queue is not None and queue.reclaimable

    def less(self, session: Session, job: JobInfo) -> ge.BundleLess:
        own = session.queues.get(job.queue)

        def queue_order(a: ge.Bundle, b: ge.Bundle) -> bool:
            left, right = session.queues[a.job.queue], session.queues[b.job.queue]
            if left.name == right.name:
                return False
            if own is None:
                return session.queue_order_less(left, right)
            return session.victim_queue_order_less(left, right, own)

        return queue_order


__all__ = ["GangPreemptAction", "GangReclaimAction", "parse"]
