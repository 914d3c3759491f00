"""resourcequota: Volcano's enqueue check against namespace ResourceQuotas (its plugin of
that name).

As in Volcano, a PodGroup with `spec.minResources` is enqueueable only if, for every
ResourceQuota of its namespace, the quota's `status.used`, plus the minResources of the
namespace's jobs this session already enqueued, plus its own minResources stay within
`status.hard` on every resource both the quota and the request name (a quota's `requests.cpu`
does not match a request's `cpu`, as in Volcano). Without minResources, or in a namespace
without quotas, it permits. A refusal is the job's skip (`Skip.PLUGIN`) and condition naming
the plugin, what was asked, used and allowed: the PodGroup's Unschedulable condition (Volcano
records an event on it) and `koordqueue explain` say it.
The status is what the API server's quota controller writes: without one nothing is checked.
"""

from __future__ import annotations

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.api.resource_quota import ResourceQuotaStatus
from koordqueue.scheduler.framework.interface import Plugin, Vote
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.framework.skips import Skip, TaskSkip


def _mask(amounts: Resources, names: set[str] | frozenset[str]) -> Resources:
    return Resources({k: v for k, v in amounts.items() if k in names})


def _show(amounts: Resources) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(amounts.to_quantities().items())) or "-"


def refusal(request: Resources, quota: ResourceQuotaStatus, pending: Resources) -> str | None:
    """Why `request` does not fit `quota` on top of its use and `pending`, or None."""
    requested = _mask(request, set(quota.hard))
    used = quota.used + pending
    new = _mask(used + requested, set(requested))
    exceeded = {name for name, cap in quota.hard.items() if name in new and new[name] > cap}
    if not exceeded:
        return None
    return vn.RESOURCE_QUOTA_INSUFFICIENT.format(
        requested=_show(_mask(requested, exceeded)), used=_show(_mask(quota.used, exceeded)),
        hard=_show(_mask(quota.hard, exceeded)), namespace=quota.namespace, name=quota.name)


class ResourceQuotaPlugin(Plugin):
    """Votes a PodGroup not enqueueable when its namespace's ResourceQuotas cannot take it."""

    name = vn.RESOURCEQUOTA
    quiet = True

    def on_session_open(self, session: Session) -> None:
        quotas: dict[str, list[ResourceQuotaStatus]] = {}
        for quota in session.resource_quotas:
            quotas.setdefault(quota.namespace, []).append(quota)
        pending: dict[str, Resources] = {}

        def enqueueable(job: JobInfo) -> Vote:
            request = job.min_resources
            if request is None or job.namespace not in quotas:
                return Vote.PERMIT
            for quota in quotas[job.namespace]:
                reason = refusal(request, quota, pending.get(job.namespace, Resources()))
                if reason is not None:
                    session.skips.job(job.uid, TaskSkip(Skip.PLUGIN, detail=reason))
                    session.job_conditions[job.uid] = reason
                    return Vote.REJECT
            return Vote.PERMIT

        def enqueued(job: JobInfo) -> None:
            if job.min_resources is None or job.namespace not in quotas:
                return
            pending[job.namespace] = pending.get(job.namespace, Resources()) + job.min_resources

        session.add_job_enqueueable_fn(self.name, enqueueable)
        session.add_job_enqueued_fn(self.name, enqueued)
