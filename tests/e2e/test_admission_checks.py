"""Admission checks on the real API server (issue 35 point 5), as an operator sees them.

The operator patches a Queue's spec.admissionChecks; each check's controller is played by
`kubectl patch --subresource=status` on the unit, as Koord-Queue's admissioncheck suite plays
it with UpdateStatus. The back-off base is scaled to 1 s (`--backoff-base-seconds`, as Kueue's
tests shorten backoffBaseSeconds) so count 2 comes within seconds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import kq
from tests.e2e.running_controller import RunningController

QU = "queueunits.scheduling.x-k8s.io"
QUEUE = "queues.scheduling.x-k8s.io"


@pytest.fixture(scope="module")
def controller(kubeconfig: Path) -> Iterator[RunningController]:
    with RunningController(
        kubeconfig, feature_gates="QueueUnitRequeueState=true", backoff_base_seconds=1.0
    ) as rc:
        yield rc


def _queue_with_checks(kubectl: Any, checks: list[str]) -> str:
    """A quota and its Queue, on which the operator sets `checks`."""
    quota = kq.unique("acq")
    kubectl.apply(kq.quota(quota, max_={"cpu": "4"}))
    kq.wait_for(lambda: kq.get(kubectl, QUEUE, quota, "koord-queue"), what="queue made")
    patch = {"spec": {"admissionChecks": [{"name": c} for c in checks]}}
    kubectl("patch", QUEUE, quota, "-n", "koord-queue", "--type=merge", "-p", json.dumps(patch))
    return quota


def _unit(kubectl: Any, ns: str, name: str) -> dict[str, Any]:
    obj = kq.get(kubectl, QU, name, ns)
    assert obj is not None, f"unit {name} is gone"
    return obj


def _set_checks(kubectl: Any, ns: str, name: str, **states: str) -> None:
    """What a check's controller writes: every entry, some with a new state."""
    entries = _unit(kubectl, ns, name)["status"]["admissionChecks"]
    for entry in entries:
        entry["state"] = states.get(entry["name"], entry["state"])
    patch = json.dumps({"status": {"admissionChecks": entries}})
    kubectl("patch", QU, name, "-n", ns, "--subresource=status", "--type=merge", "-p", patch)


def _conditions(unit: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in unit["status"].get("conditions", [])}


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _suspended(kubectl: Any, ns: str, name: str) -> bool:
    job = kq.get(kubectl, "job", name, ns)
    assert job is not None
    return bool(job["spec"]["suspend"])


def _reserved(kubectl: Any, ns: str, name: str) -> dict[str, Any]:
    # (the controller makes the unit after the Job: it may not exist at the first look)
    return kq.wait_for(
        lambda: (u := kq.get(kubectl, QU, name, ns) or {}).get("status", {}).get("phase")
        == "Reserved"
        and u["status"].get("admissionChecks")
        and u,
        what=f"{name} Reserved",
        state=lambda: (kq.get(kubectl, QU, name, ns) or {}).get("status"),
    )


def test_reserved_until_every_check_is_ready_then_dequeued_and_resumed(
    kubectl: Any, controller: RunningController
) -> None:
    ns = kq.namespace(kubectl, kq.unique("acheck"))
    quota = _queue_with_checks(kubectl, ["ad1", "ad2"])
    # the checks survive the quota's reconcile (here: its policy label changes the Queue)
    kubectl.apply(kq.quota(quota, max_={"cpu": "4"}, policy="Block"))
    queue = kq.wait_for(
        lambda: (q := kq.get(kubectl, QUEUE, quota, "koord-queue"))
        and q["spec"].get("queuePolicy") == "Block"
        and q,
        what="queue reconciled",
    )
    assert [c["name"] for c in queue["spec"]["admissionChecks"]] == ["ad1", "ad2"]

    kubectl.apply(kq.job("ok", ns, quota))
    unit = _reserved(kubectl, ns, "ok")
    assert [(c["name"], c["state"]) for c in unit["status"]["admissionChecks"]] == [
        ("ad1", "Pending"), ("ad2", "Pending"),
    ]
    assert unit["status"]["message"] == (
        "Reserved resources success, waiting admission checks to be ready"
    )
    assert _conditions(unit)["QuotaReserved"] == ("True", "QuotaReserved")
    assert _conditions(unit)["Admitted"] == ("False", "WaitingForAdmissionChecks")
    assert _suspended(kubectl, ns, "ok")

    _set_checks(kubectl, ns, "ok", ad1="Ready")  # one Ready, one Pending: stays Reserved
    time.sleep(1.0)  # five admission periods
    assert _unit(kubectl, ns, "ok")["status"]["phase"] == "Reserved"
    assert _suspended(kubectl, ns, "ok")

    _set_checks(kubectl, ns, "ok", ad2="Ready")
    kq.wait_for(lambda: kq.phase(kubectl, ns, "ok") == "Dequeued", what="ok Dequeued")
    kq.wait_for(lambda: not _suspended(kubectl, ns, "ok"), what="Job resumed")
    done = _unit(kubectl, ns, "ok")
    assert done["status"]["message"] == "all admission checks success"
    assert _conditions(done)["Admitted"] == ("True", "Admitted")
    kq.wait_for(lambda: kq.events_for(kubectl, ns, "ok", "Admitted"), what="Admitted event")
    reserved = kq.events_for(kubectl, ns, "ok", "QuotaReserved")
    assert reserved and reserved[0]["type"] == "Normal"
    assert reserved[0]["message"] == "quota reserved; waiting for admission checks ad1, ad2"


@pytest.mark.parametrize("failed", ["Rejected", "Retry"])
def test_a_failed_check_backs_off_and_each_retry_counts(
    kubectl: Any, controller: RunningController, failed: str
) -> None:
    ns = kq.namespace(kubectl, kq.unique("acheck"))
    quota = _queue_with_checks(kubectl, ["ad1", "ad2"])
    kubectl.apply(kq.job("no", ns, quota))
    _reserved(kubectl, ns, "no")

    _set_checks(kubectl, ns, "no", ad2=failed)
    unit = kq.wait_for(
        lambda: (u := _unit(kubectl, ns, "no"))["status"].get("phase") == "TimeoutBackoff" and u,
        what="backed off",
    )
    status = unit["status"]
    assert status["requeueState"]["count"] == 1
    assert _epoch(status["requeueState"]["requeueAt"]) > _epoch(status["lastUpdateTime"])
    assert status["admissions"] == []
    assert _conditions(unit)["QuotaReserved"] == ("False", "BackoffTimeout")
    assert _conditions(unit)["Admitted"][0] == "False"
    assert _conditions(unit)["Evicted"] == ("True", "BackoffTimeout")
    event = kq.wait_for(lambda: kq.events_for(kubectl, ns, "no", "Backoff"), what="event")[0]
    assert event["type"] == "Warning"
    assert event["message"].startswith(f"admission check failed: ad2 is {failed}")
    assert _suspended(kubectl, ns, "no")

    # at requeueAt it reserves again, every check Pending; a second failure counts 2
    again = _reserved(kubectl, ns, "no")
    assert {c["state"] for c in again["status"]["admissionChecks"]} == {"Pending"}
    _set_checks(kubectl, ns, "no", ad1=failed)
    kq.wait_for(
        lambda: ((_unit(kubectl, ns, "no")["status"].get("requeueState") or {}).get("count") == 2),
        what="count 2",
    )


def _admission_check(kubectl: Any, name: str, controller: str, active: bool) -> None:
    """Kueue's AdmissionCheck, and the Active condition its controller writes on it."""
    kubectl.apply({
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck",
        "metadata": {"name": name}, "spec": {"controllerName": controller},
    })
    condition = {
        "type": "Active", "status": "True" if active else "False",
        "reason": "Active" if active else "ConfigMissing",
        "message": "" if active else "no ProvisioningRequestConfig",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    kubectl("patch", "admissionchecks.kueue.x-k8s.io", name, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": {"conditions": [condition]}}))


def test_a_reservation_names_each_checks_controller_from_kueues_admission_check(
    kubectl: Any, controller: RunningController
) -> None:
    """A Queue's check named by an AdmissionCheck object: its Pending entry and the
    QuotaReserved event name the object's spec.controllerName, and say when the object is not
    Active; a name no object carries (Koord-Queue's way) works as before."""
    burnin, prov = kq.unique("burnin"), kq.unique("prov")
    _admission_check(kubectl, burnin, "example.com/burnin", active=True)
    _admission_check(kubectl, prov, "kueue.x-k8s.io/provisioning-request", active=False)
    time.sleep(1.0)  # the controller's AdmissionCheck watch delivers both
    ns = kq.namespace(kubectl, kq.unique("acheck"))
    quota = _queue_with_checks(kubectl, [burnin, prov, "free"])
    kubectl.apply(kq.job("named", ns, quota))
    unit = _reserved(kubectl, ns, "named")
    assert [(c["name"], c["state"], c.get("message", "")) for c in
            unit["status"]["admissionChecks"]] == [
        (burnin, "Pending", "waiting for example.com/burnin"),
        (prov, "Pending", f"AdmissionCheck {prov} (kueue.x-k8s.io/provisioning-request) is not "
                          "Active: ConfigMissing: no ProvisioningRequestConfig"),
        ("free", "Pending", ""),
    ]
    reserved = kq.wait_for(lambda: kq.events_for(kubectl, ns, "named", "QuotaReserved"),
                           what="QuotaReserved event")
    assert reserved[0]["message"] == (
        f"quota reserved; waiting for admission checks {burnin} (example.com/burnin), "
        f"{prov} (kueue.x-k8s.io/provisioning-request), free"
    )
    # the states still decide: every check Ready releases the unit
    _set_checks(kubectl, ns, "named", **{burnin: "Ready", prov: "Ready", "free": "Ready"})
    kq.wait_for(lambda: kq.phase(kubectl, ns, "named") == "Dequeued", what="named Dequeued")
