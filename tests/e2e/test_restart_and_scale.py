"""Restarts lose nothing and admit nothing twice; bursts of Jobs are all mapped and admitted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e import kq
from tests.e2e.running_controller import RunningController

QU = "queueunits.scheduling.x-k8s.io"


def _phases(kubectl: Any, ns: str) -> dict[str, str]:
    units = kubectl.json("get", QU, "-n", ns)["items"]
    return {u["metadata"]["name"]: (u.get("status") or {}).get("phase", "") for u in units}


def _admission_times(kubectl: Any, ns: str) -> dict[str, str]:
    units = kubectl.json("get", QU, "-n", ns)["items"]
    return {
        u["metadata"]["name"]: (u.get("status") or {}).get("admissionTime", "")
        for u in units
        if (u.get("status") or {}).get("phase") == "Dequeued"
    }


def test_controller_restart_loses_nothing_and_admits_nothing_twice(
    kubectl: Any, kubeconfig: Path
) -> None:
    ns = kq.namespace(kubectl, kq.unique("restart"))
    quota = kq.unique("restart")
    kubectl.apply(kq.quota(quota, max_={"cpu": "3"}))
    with RunningController(kubeconfig):
        for i in range(3):
            kubectl.apply(kq.job(f"before{i}", ns, quota, cpu="1"))
        kq.wait_for(
            lambda: list(_phases(kubectl, ns).values()).count("Dequeued") == 3, what="3 admitted"
        )
    admitted_before = _admission_times(kubectl, ns)
    # while the controller is down, more Jobs arrive; the quota is full
    for i in range(3):
        kubectl.apply(kq.job(f"during{i}", ns, quota, cpu="1"))
    with RunningController(kubeconfig):
        kq.wait_for(
            lambda: len(_phases(kubectl, ns)) == 6, what="units for Jobs created while down"
        )
        kq.wait_for(
            lambda: all(
                kq.events_for(kubectl, ns, f"during{i}", "FailedScheduling") for i in range(3)
            ),
            what="all new units rejected: quota full",
        )
        phases = _phases(kubectl, ns)
        assert sorted(n for n, p in phases.items() if p == "Dequeued") == [
            "before0",
            "before1",
            "before2",
        ]
        assert _admission_times(kubectl, ns) == admitted_before  # nothing re-admitted
        # the rebuilt usage is exact: releasing one admits exactly one more
        kubectl("delete", "job", "before0", "-n", ns)
        kq.wait_for(
            lambda: (
                list(_phases(kubectl, ns).values()).count("Dequeued") == 3
                and "before0" not in _phases(kubectl, ns)
            ),
            what="one more admitted",
        )
        phases = _phases(kubectl, ns)
        assert sum(p == "Dequeued" for n, p in phases.items() if n.startswith("during")) == 1


def test_unsuspend_lost_in_a_crash_is_repaired_on_restart(kubectl: Any, kubeconfig: Path) -> None:
    """A unit persisted as Dequeued whose Job is still suspended (crash between two writes)."""
    ns = kq.namespace(kubectl, kq.unique("crash"))
    quota = kq.unique("crash")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2"}))
    with RunningController(kubeconfig):
        kubectl.apply(kq.job("j", ns, quota, cpu="1"))
        kq.wait_for(lambda: kq.phase(kubectl, ns, "j") == "Dequeued", what="admitted")
        kq.wait_for(
            lambda: (kq.get(kubectl, "job", "j", ns) or {}).get("spec", {}).get("suspend") is False
        )
    # the Job as a crash between the two writes leaves it: never resumed, so suspended and
    # without the dequeue timestamp the resume writes together with suspend: false (a Job
    # suspended by hand after its resume keeps that timestamp, and Koord-Queue leaves it alone)
    crashed = {"spec": {"suspend": True},
               "metadata": {"annotations": {"koord-queue/job-dequeue-timestamp": ""}}}
    kubectl("patch", "job", "j", "-n", ns, "--type=merge", "-p", json.dumps(crashed))
    with RunningController(kubeconfig):
        kq.wait_for(
            lambda: (kq.get(kubectl, "job", "j", ns) or {}).get("spec", {}).get("suspend") is False,
            what="job resumed again by the level-triggered reconcile",
        )


def test_200_jobs_created_at_once_are_all_mapped_and_admitted_up_to_quota(
    kubectl: Any, kubeconfig: Path
) -> None:
    ns = kq.namespace(kubectl, kq.unique("burst"))
    quotas = [kq.unique(f"burst{i}") for i in range(4)]
    for q in quotas:
        kubectl.apply(kq.quota(q, max_={"cpu": "40", "memory": "400Gi"}))  # 40 × 1 CPU each
    jobs = [kq.job(f"job{i:03d}", ns, quotas[i % 4], cpu="1", memory="1Gi") for i in range(200)]
    with RunningController(kubeconfig):
        kubectl.apply({"apiVersion": "v1", "kind": "List", "items": jobs})
        kq.wait_for(lambda: len(_phases(kubectl, ns)) == 200, timeout=90, what="200 units")
        kq.wait_for(
            lambda: list(_phases(kubectl, ns).values()).count("Dequeued") == 160,
            timeout=90,
            what="160 admitted (4 quotas × 40 CPU)",
            state=lambda: sorted(_phases(kubectl, ns).items()),
        )
        units = kubectl.json("get", QU, "-n", ns)["items"]
        per_quota: dict[str, int] = {}
        for u in units:
            if (u.get("status") or {}).get("phase") == "Dequeued":
                q = u["metadata"]["labels"]["quota.scheduling.koordinator.sh/name"]
                per_quota[q] = per_quota.get(q, 0) + 1
        assert per_quota == {q: 40 for q in quotas}
        resumed = [
            j
            for j in kubectl.json("get", "jobs", "-n", ns)["items"]
            if not j["spec"].get("suspend")
        ]
        assert len(resumed) == 160
