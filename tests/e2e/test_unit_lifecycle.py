"""Issue 35 on the real API server: the QueueUnit lifecycle as an operator sees it with kubectl.

Koord-Queue's pkg/test/integration/workloadapi suites, driven through batch Jobs and their
annotations instead of hand-made units, plus what no Koord-Queue test covers (the events, the
deactivation of an admitted unit, the banked time). Waits are shrunk: Koord-Queue checks
"never admitted" for 10 s with rounds on its own 30 s / 1 min timers; here rounds run every
0.2 s, so 2 s is ten rounds that could have admitted the unit and did not. There is no kubelet
or Job controller on this plane: the test writes Job status as the Job controller would.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.e2e import kq
from tests.e2e.running_controller import RunningController

QU = "queueunits.scheduling.x-k8s.io"
ACTIVE = "scheduling.x-k8s.io/active"
BUDGET = "scheduling.x-k8s.io/max-exec-time-seconds"
NEVER_ADMITTED_FOR = 2.0
GATES = "QueueUnitActive=true,MaximumExecutionTime=true"


def _unit(kubectl: Any, ns: str, name: str) -> dict[str, Any]:
    obj = kq.get(kubectl, QU, name, ns)
    assert obj is not None, f"unit {name} is gone"
    return obj


def _job(kubectl: Any, ns: str, name: str) -> dict[str, Any]:
    obj = kq.get(kubectl, "job", name, ns)
    assert obj is not None, f"job {name} is gone"
    return obj


def _conditions(unit: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (unit.get("status") or {}).get("conditions") or []}


def _job_status(kubectl: Any, ns: str, name: str, status: dict[str, Any]) -> None:
    kubectl(
        "patch", "job", name, "-n", ns, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )


def _job_events(kubectl: Any, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [
        e for e in kq.events_for(kubectl, ns, name, reason)
        if e["involvedObject"].get("kind") == "Job"
    ]


@pytest.fixture
def ns(kubectl: Any) -> str:
    return kq.namespace(kubectl, kq.unique("lifecycle"))


def test_conditions_pause_resume_and_deactivation_of_an_admitted_job(
    kubectl: Any, kubeconfig: Any, ns: str
) -> None:
    quota = kq.unique("lifecycle")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "8Gi"}))
    rc = RunningController(kubeconfig, feature_gates=GATES)
    try:
        rc.start()
        # 1. born inactive (point 1): spec.active persisted, never admitted, Job held
        kubectl.apply(kq.job("sleeper", ns, quota, cpu="2", annotations={ACTIVE: "false"}))
        sleeper = kq.wait_for(
            lambda: (u := kq.get(kubectl, QU, "sleeper", ns)) and u.get("status") and u,
            what="sleeper's unit",
        )
        assert sleeper["spec"]["active"] is False  # not pruned by the CRD schema
        deadline = time.monotonic() + NEVER_ADMITTED_FOR
        while time.monotonic() < deadline:
            unit = _unit(kubectl, ns, "sleeper")
            assert unit["status"].get("phase") == "Enqueued"
            assert not unit["status"].get("admissions")
            time.sleep(0.2)
        assert _job(kubectl, ns, "sleeper")["spec"]["suspend"] is True
        unit = _unit(kubectl, ns, "sleeper")
        assert unit["status"]["message"].startswith("inactive (spec.active is false)")
        # conditions (point 3): a waiting unit says Pending, and was never evicted
        conds = _conditions(unit)
        assert (conds["QuotaReserved"]["status"], conds["QuotaReserved"]["reason"]) == (
            "False", "Pending",
        )
        assert "Evicted" not in conds

        # 2. the whole quota goes to a rival: Admitted with a reason and a time
        kubectl.apply(kq.job("rival", ns, quota, cpu="2"))
        kq.wait_for(lambda: kq.phase(kubectl, ns, "rival") == "Dequeued", what="rival admitted")
        conds = _conditions(_unit(kubectl, ns, "rival"))
        assert (conds["Admitted"]["status"], conds["Admitted"]["reason"]) == ("True", "Admitted")
        assert conds["Admitted"]["lastTransitionTime"]
        assert conds["QuotaReserved"]["status"] == "True"
        kq.wait_for(lambda: _job(kubectl, ns, "rival")["spec"]["suspend"] is False,
                    what="rival resumed")

        # 3. its pod runs: PodsReady starts the execution clock
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _job_status(kubectl, ns, "rival", {"startTime": now, "active": 1, "ready": 1})
        kq.wait_for(
            lambda: _conditions(_unit(kubectl, ns, "rival")).get("PodsReady", {}).get("status")
            == "True",
            what="rival PodsReady",
        )
        time.sleep(2.1)  # at least one whole second banked on eviction (to the second)

        # 4. deactivating the admitted rival evicts it: Job suspended, reason Deactivated
        kubectl("annotate", "job", "rival", "-n", ns, f"{ACTIVE}=false")
        kq.wait_for(
            lambda: _conditions(_unit(kubectl, ns, "rival")).get("Evicted", {}).get("reason")
            == "Deactivated",
            what="rival evicted",
        )
        unit = _unit(kubectl, ns, "rival")
        conds = _conditions(unit)
        assert unit["spec"]["active"] is False
        assert unit["status"]["phase"] == "Enqueued"
        # the eviction's message, or, once a later round has looked at the now-waiting unit,
        # the inactive unit's: both say why it is not running
        assert unit["status"]["message"] in (
            "Evicted because the queue unit is deactivated",
            "inactive (spec.active is false): never admitted until it is activated",
        )
        assert (conds["Admitted"]["status"], conds["Admitted"]["reason"]) == (
            "False", "Deactivated",
        )
        assert conds["Evicted"]["status"] == "True"
        assert unit["status"]["accumulatedPastExecutionTimeSeconds"] >= 1
        # a later round's inactive message keeps the eviction's conditions
        unit = kq.wait_for(
            lambda: (u := _unit(kubectl, ns, "rival"))["status"]["message"].startswith("inactive")
            and u,
            what="rival's inactive message",
        )
        conds = _conditions(unit)
        assert (conds["Evicted"]["status"], conds["Evicted"]["reason"]) == ("True", "Deactivated")
        assert conds["Admitted"]["status"] == "False"
        kq.wait_for(lambda: _job(kubectl, ns, "rival")["spec"]["suspend"] is True,
                    what="rival suspended")
        _job_status(kubectl, ns, "rival", {"active": 0, "ready": 0})  # (the Job controller)
        event = kq.wait_for(lambda: _job_events(kubectl, ns, "rival", "Deactivated"),
                            what="Deactivated event on the Job")[0]
        assert event["type"] == "Normal"
        assert "suspended and its resources are reclaimed" in event["message"]

        # 5. activating the sleeper: admitted into the quota the rival gave back
        kubectl("annotate", "job", "sleeper", "-n", ns, f"{ACTIVE}=true", "--overwrite")
        kq.wait_for(lambda: kq.phase(kubectl, ns, "sleeper") == "Dequeued",
                    what="sleeper admitted once activated")
        kq.wait_for(lambda: _job(kubectl, ns, "sleeper")["spec"]["suspend"] is False,
                    what="sleeper resumed")

        # 6. removing the annotation changes nothing: the rival stays inactive, not admitted
        kubectl("annotate", "job", "rival", "-n", ns, f"{ACTIVE}-")
        time.sleep(1.0)
        unit = _unit(kubectl, ns, "rival")
        assert unit["spec"]["active"] is False
        assert unit["status"]["phase"] == "Enqueued"
    finally:
        rc.stop()
        kubectl("delete", "jobs", "--all", "-n", ns, "--wait=false")


def test_a_spent_execution_budget_deactivates_and_evicts_the_job(
    kubectl: Any, kubeconfig: Any, ns: str
) -> None:
    """Point 2: a 2 s budget (Koord-Queue's annotation), counted from PodsReady."""
    quota = kq.unique("budget")
    kubectl.apply(kq.quota(quota, max_={"cpu": "1", "memory": "8Gi"}))
    rc = RunningController(kubeconfig, feature_gates=GATES)
    try:
        rc.start()
        kubectl.apply(kq.job("budget", ns, quota, cpu="1", annotations={BUDGET: "2"}))
        kq.wait_for(lambda: kq.phase(kubectl, ns, "budget") == "Dequeued", what="admitted")
        assert _unit(kubectl, ns, "budget")["spec"]["maximumExecutionTimeSeconds"] == 2
        kq.wait_for(lambda: _job(kubectl, ns, "budget")["spec"]["suspend"] is False,
                    what="resumed")
        time.sleep(1.0)  # admitted but not running: this costs nothing
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _job_status(kubectl, ns, "budget", {"startTime": now, "active": 1, "ready": 1})
        started = time.monotonic()
        event = kq.wait_for(
            lambda: _job_events(kubectl, ns, "budget", "MaximumExecutionTimeExceeded"),
            timeout=15, what="MaximumExecutionTimeExceeded event on the Job",
        )[0]
        assert time.monotonic() - started >= 1.0  # the clock started at PodsReady
        assert event["type"] == "Warning"
        assert event["message"] == "The maximum execution time (2s) was exceeded"
        kq.wait_for(
            lambda: _conditions(_unit(kubectl, ns, "budget")).get("Evicted", {}).get("reason")
            == "Deactivated",
            what="evicted by the deactivation that follows",
        )
        unit = _unit(kubectl, ns, "budget")
        assert unit["spec"]["active"] is False
        assert unit["status"]["phase"] == "Enqueued"
        assert "accumulatedPastExecutionTimeSeconds" not in unit["status"]  # reset, not banked
        assert _conditions(unit)["PodsReady"]["status"] == "False"
        kq.wait_for(lambda: _job(kubectl, ns, "budget")["spec"]["suspend"] is True,
                    what="suspended")
        assert _job_events(kubectl, ns, "budget", "Deactivated")

        # with the gate on, an absent annotation clears the field
        kubectl("annotate", "job", "budget", "-n", ns, f"{BUDGET}-")
        kq.wait_for(
            lambda: "maximumExecutionTimeSeconds" not in _unit(kubectl, ns, "budget")["spec"],
            what="budget cleared",
        )
    finally:
        rc.stop()
        kubectl("delete", "jobs", "--all", "-n", ns, "--wait=false")


def test_requeue_state_counts_back_offs_and_clears_when_running(
    kubectl: Any, kubeconfig: Any, ns: str
) -> None:
    """Point 4 through the running timeout (Koord-Queue's suite drives it by a rejected
    admission check, point 5): count 1 with requeueAt after lastUpdateTime, then count 2
    later; cleared once the Job runs. Base 1 s (--job-backoff-time) instead of 10 s."""
    quota = kq.unique("requeue")
    kubectl.apply(kq.quota(quota, max_={"cpu": "1", "memory": "8Gi"}))
    rc = RunningController(
        kubeconfig, feature_gates="QueueUnitRequeueState=true",
        job_running_timeout=2.0, job_backoff_time=1.0,
    )

    def requeue_state() -> dict[str, Any]:
        # (the controller may not have made the unit yet: the first probes can come first)
        obj = kq.get(kubectl, QU, "retry", ns) or {}
        return dict((obj.get("status") or {}).get("requeueState") or {})

    try:
        rc.start()
        kubectl.apply(kq.job("retry", ns, quota, cpu="1"))
        def backing_off(count: int) -> dict[str, Any] | None:
            # phase and requeueState from one read: with a 1 s base the unit may be Enqueued
            # again by the time of a second read (a clean-clone CI run under load saw that)
            obj = kq.get(kubectl, QU, "retry", ns) or {}
            status = obj.get("status") or {}
            state = status.get("requeueState") or {}
            if state.get("count") == count and status.get("phase") == "TimeoutBackoff":
                return obj
            return None

        unit = kq.wait_for(lambda: backing_off(1), timeout=20, what="first back-off")
        first = unit["status"]["requeueState"]
        assert unit["status"]["phase"] == "TimeoutBackoff"
        assert first["requeueAt"] > unit["status"]["lastUpdateTime"]  # RFC 3339, same format
        conds = _conditions(unit)
        assert (conds["Evicted"]["status"], conds["Evicted"]["reason"]) == (
            "True", "BackoffTimeout",
        )
        assert (conds["QuotaReserved"]["status"], conds["QuotaReserved"]["reason"]) == (
            "False", "BackoffTimeout",
        )
        second = kq.wait_for(lambda: requeue_state().get("count") == 2 and requeue_state(),
                             timeout=20, what="second back-off")
        assert second["requeueAt"] > first["requeueAt"]

        # admitted again after requeueAt: its pod runs this time, which clears the state
        kq.wait_for(lambda: kq.phase(kubectl, ns, "retry") == "Dequeued"
                    and _job(kubectl, ns, "retry")["spec"]["suspend"] is False,
                    timeout=20, what="third admission")
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _job_status(kubectl, ns, "retry", {"startTime": now, "active": 1, "ready": 1})
        kq.wait_for(lambda: kq.phase(kubectl, ns, "retry") == "Running", what="running")
        kq.wait_for(lambda: not requeue_state(), what="requeueState cleared")
        assert _conditions(_unit(kubectl, ns, "retry"))["PodsReady"]["status"] == "True"
    finally:
        rc.stop()
        kubectl("delete", "jobs", "--all", "-n", ns, "--wait=false")
