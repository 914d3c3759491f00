"""Issue 35 point 7 on the real API server: queue-level preemption as an operator sees it.

Koord-Queue's reserve_preemption_test (under Priority and under Block) and
reclaim_reschedule_test, driven through batch Jobs with priority classes: quota 4 cpu with
wait-for-pods-running and enable-queueunit-preemption, a low Job (priority 10, 1 cpu) admitted
and not running, then a high Job (priority 100, 1 cpu) that fits. The low Job's unit is marked
(Warning Preempted), reclaimed (Normal Reclaimed, Enqueued with Evicted reason Preempted, its
Job suspended) and the high Job admitted; once the high Job's pod is ready the low one is
admitted again with a fresh admission. Both policies share one controller run. There is no
kubelet or Job controller on this plane: the test writes Job status as the Job controller would.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.e2e import kq
from tests.e2e.running_controller import RunningController

QU = "queueunits.scheduling.x-k8s.io"
ON = {
    "koord-queue/wait-for-pods-running": "true",
    "koord-queue/enable-queueunit-preemption": "true",
}
POLICIES = ("Priority", "Block")


@pytest.fixture
def ns(kubectl: Any) -> str:
    return kq.namespace(kubectl, kq.unique("qpreempt"))


def _unit(kubectl: Any, ns: str, name: str) -> dict[str, Any]:
    obj = kq.get(kubectl, QU, name, ns)
    assert obj is not None, f"unit {name} is gone"
    return obj


def _status(kubectl: Any, ns: str, name: str) -> dict[str, Any]:
    return dict(_unit(kubectl, ns, name).get("status") or {})


def _suspended(kubectl: Any, ns: str, name: str) -> bool:
    job = kq.get(kubectl, "job", name, ns)
    assert job is not None
    return bool(job["spec"].get("suspend"))


def _unit_events(kubectl: Any, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e for e in kq.events_for(kubectl, ns, name, reason)
        if e["involvedObject"].get("kind") == "QueueUnit"
    ]


def test_reserve_path_preemption_under_priority_and_block_and_the_victim_comes_back(
    kubectl: Any, kubeconfig: Any, ns: str
) -> None:
    tag = kq.unique("qp")
    for value in (10, 100):
        kubectl.apply({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": f"{tag}-{value}"}, "value": value,
        })
    quotas = {p: f"{tag}-{p.lower()}" for p in POLICIES}
    for policy, quota in quotas.items():
        kubectl.apply(kq.quota(quota, max_={"cpu": "4", "memory": "8Gi"},
                               min_={"cpu": "4", "memory": "8Gi"}, policy=policy,
                               annotations=ON))
    low = {p: f"{p.lower()}-victim" for p in POLICIES}
    high = {p: f"{p.lower()}-preemptor" for p in POLICIES}
    with RunningController(kubeconfig):
        for policy, quota in quotas.items():
            kubectl.apply(kq.job(low[policy], ns, quota, cpu="1", priority_class=f"{tag}-10"))
        for policy in POLICIES:
            kq.wait_for(lambda p=policy: _status(kubectl, ns, low[p]).get("phase") == "Dequeued",
                        what=f"{policy}: victim admitted")
            status = _status(kubectl, ns, low[policy])
            assert status["admissions"] == [{"name": low[policy], "replicas": 1}]  # no reclaim
            assert status["lastAllocateTime"]
        for policy, quota in quotas.items():
            kubectl.apply(kq.job(high[policy], ns, quota, cpu="1", priority_class=f"{tag}-100"))

        for policy in POLICIES:
            reclaimed = kq.wait_for(
                lambda p=policy: _unit_events(kubectl, ns, low[p], "Reclaimed"),
                what=f"{policy}: victim reclaimed",
            )[0]
            preempted = _unit_events(kubectl, ns, low[policy], "Preempted")
            assert [(e["type"], e["message"]) for e in preempted] == [
                ("Warning", f"preempted by {ns}/{high[policy]}; back in queue")
            ]
            assert reclaimed["type"] == "Normal"
            assert preempted[0]["firstTimestamp"] <= reclaimed["firstTimestamp"]
            kq.wait_for(lambda p=policy: _status(kubectl, ns, high[p]).get("phase") == "Dequeued"
                        and not _suspended(kubectl, ns, high[p]),
                        what=f"{policy}: preemptor admitted and resumed")
            victim = _status(kubectl, ns, low[policy])
            assert (victim["phase"], victim["message"]) == ("Enqueued", "Enqueued after preempted")
            assert victim.get("admissions", []) == []
            evicted = {c["type"]: c for c in victim["conditions"]}["Evicted"]
            assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
            assert _suspended(kubectl, ns, low[policy])

        # the preemptors' pods run: their queues stop waiting, the victims come back
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for policy in POLICIES:
            kubectl("patch", "job", high[policy], "-n", ns, "--subresource=status",
                    "--type=merge", "-p",
                    json.dumps({"status": {"startTime": now, "active": 1, "ready": 1}}))
        for policy in POLICIES:
            kq.wait_for(lambda p=policy: _status(kubectl, ns, low[p]).get("phase") == "Dequeued"
                        and not _suspended(kubectl, ns, low[p]),
                        what=f"{policy}: victim admitted again")
            again = _status(kubectl, ns, low[policy])
            assert again["admissions"] == [{"name": low[policy], "replicas": 1}]
            assert len(_unit_events(kubectl, ns, low[policy], "Preempted")) == 1  # not again
    kubectl("delete", "jobs", "--all", "-n", ns, "--wait=false")
