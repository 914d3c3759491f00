"""resourcequota plugin: cases of volcano-sh/volcano
pkg/scheduler/plugins/resourcequota/resourcequota_test.go (TestResourceQuotaPlugin,
TestJobEnqueuedOnOtherPluginsReject), run through the plugin's registered callbacks in a
real session. util.BuildResourceQuota writes the hard limit in the spec and the status (used
empty): the plugin reads the status, as Volcano's does.

Switched off and run (`test_each_case_fails_with_resourcequota_off`, resourcequota left out
of the configuration): the refusal case of TestResourceQuotaPlugin fails; its three other
cases expect "enqueueable", which holds either way, as Volcano wrote them.
TestJobEnqueuedOnOtherPluginsReject expects pgB admitted, which also holds either way: here
a third PodGroup pgC (1 cpu, same namespace) is added, expected Pending because pgB used the
quota, and that fails with the plugin off; checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot
from koordqueue.scheduler.api import PodGroupPhase
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.api.resource_quota import ResourceQuotaStatus
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.plugins.resourcequota import refusal

from .conftest import REJECTER
from .harness import PodGroup, build, node, pg, pod, queue, rl, run, tiers

INQUEUE, PENDING = PodGroupPhase.INQUEUE, PodGroupPhase.PENDING
HUGE, NORMAL = rl("20000m", "20G"), rl("2000m", "2G")
_off = False


def _quota(name: str, namespace: str, hard: Resources) -> ResourceQuotaStatus:
    return ResourceQuotaStatus(namespace, name, hard)


def _with_quotas(snapshot: ClusterSnapshot, quotas: Sequence[ResourceQuotaStatus]
                 ) -> ClusterSnapshot:  # fmt: skip
    return dataclasses.replace(snapshot, resource_quotas=tuple(quotas))


def _plugin() -> str:
    return "binpack" if _off else vn.RESOURCEQUOTA  # binpack: no enqueue vote


CASES: dict[str, tuple[PodGroup, bool, bool]] = {
    "ResourceQuota capacity can match the needs of this pg":
        (pg("pg1", "c1", 2, INQUEUE, NORMAL), True, True),
    "ResourceQuota capacity can't match the needs of this pg":
        (pg("pg2", "c1", 2, INQUEUE, HUGE), True, False),
    "No ResourceQuota resource object": (pg("pg2", "c1", 2, INQUEUE, HUGE), False, True),
    "MinResources field of pg is not set": (pg("pg3", "c1", 2, INQUEUE), True, True),
}


def _case(name: str) -> list[bool]:
    group, with_quota, _expected = CASES[name]
    snapshot = build([], [], [group], [queue("c1")], "default")
    quotas = [_quota("test", "default", NORMAL)] if with_quota else []
    session = open_session(_with_quotas(snapshot, quotas), tiers((_plugin(), {"JobEnqueued"})))
    return [session.job_enqueueable(job) for job in session.jobs.values()]


@pytest.mark.parametrize("name", list(CASES))
def test_resource_quota_plugin(name: str) -> None:
    """TestResourceQuotaPlugin: a PodGroup's minResources against the namespace's quota
    of 2 cpu / 2G."""
    assert _case(name) == [CASES[name][2]]


def _other_plugin_rejects() -> dict[str, PodGroupPhase]:
    one = rl("1", "1G")
    groups = [pg(g, "q1", 1, PENDING, one) for g in ("pgA", "pgB", "pgC")]
    snapshot = build(
        [node("n1", rl("4", "4G", {"pods": "10"}))],
        [pod(f"pod{g[-1]}", "", False, one, g) for g in ("pgA", "pgB", "pgC")],
        groups, [queue("q1")], "ns1")
    snapshot = _with_quotas(snapshot, [_quota("rq1", "ns1", one)])
    config = tiers((_plugin(), {"JobEnqueued"}), (REJECTER, {"JobEnqueued"}))
    return run(snapshot, config, "enqueue").phases


def test_job_enqueued_on_other_plugins_reject(rejecter: None) -> None:
    """TestJobEnqueuedOnOtherPluginsReject: a quota of exactly 1 cpu in ns1; pgA (1 cpu)
    is rejected by another plugin of the tier, so it does not use the quota and pgB is
    admitted; pgC (added here) then finds the quota used."""
    phases = _other_plugin_rejects()
    assert phases["ns1/pgB"] is INQUEUE
    assert (phases["ns1/pgA"], phases["ns1/pgC"]) == (PENDING, PENDING)


def test_refusal_names_what_was_asked_used_and_allowed() -> None:
    """The skip's detail (PodGroup condition, explain): only the resources over the limit;
    a quota's `requests.cpu` is not the request's `cpu` (Volcano masks by name)."""
    quota = ResourceQuotaStatus("ns1", "rq1", Resources.of({"cpu": "2", "memory": "8Gi"}),
                                Resources.of({"cpu": "1"}))
    reason = refusal(Resources.of({"cpu": "2", "memory": "1Gi"}), quota, Resources())
    assert reason == vn.RESOURCE_QUOTA_INSUFFICIENT.format(
        requested="cpu=2", used="cpu=1", hard="cpu=2", namespace="ns1", name="rq1")
    named = ResourceQuotaStatus("ns1", "rq2", Resources.of({"requests.cpu": "1"}))
    assert refusal(Resources.of({"cpu": "8"}), named, Resources()) is None


def test_refused_podgroup_says_why() -> None:
    """The refused PodGroup's skip names the plugin and the quota (what its Unschedulable
    condition and `koordqueue explain` print)."""
    snapshot = build([], [], [pg("pg2", "c1", 2, PENDING, HUGE)], [queue("c1")], "default")
    out = run(_with_quotas(snapshot, [_quota("test", "default", NORMAL)]),
              tiers((vn.RESOURCEQUOTA, {"JobEnqueued"})), "enqueue")
    entry = out.session.skips.jobs["default/pg2"]
    assert entry.detail.startswith("resourcequota: resource quota insufficient")
    assert "ResourceQuota default/test" in entry.detail
    assert out.session.job_conditions["default/pg2"] == entry.detail


def test_each_case_fails_with_resourcequota_off(
    monkeypatch: pytest.MonkeyPatch, rejecter: None
) -> None:
    monkeypatch.setattr(__name__ + "._off", True)
    assert _case("ResourceQuota capacity can't match the needs of this pg") != [False]
    phases = _other_plugin_rejects()
    assert (phases["ns1/pgA"], phases["ns1/pgC"]) != (PENDING, PENDING)
