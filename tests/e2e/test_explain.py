"""`koordqueue explain` against the real API server, one test per pending reason (issue 7).

The controller creates the situation (units, statuses, events); `explain` then runs as the
installed command, reading only through the API, and must name the same reason and message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import kq
from tests.e2e.running_controller import RunningController

QU = "queueunits.scheduling.x-k8s.io"
KOORDQUEUE = Path(sys.executable).parent / "koordqueue"


@pytest.fixture
def ns(kubectl: Any) -> str:
    return kq.namespace(kubectl, kq.unique("explain"))


def explain(kubeconfig: Path, ns: str, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KOORDQUEUE), "explain", "--kubeconfig", str(kubeconfig), "-n", ns, name, *extra],
        capture_output=True, text=True, timeout=60, check=False,
    )


def explain_json(kubeconfig: Path, ns: str, name: str) -> dict[str, Any]:
    proc = explain(kubeconfig, ns, name, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def _status_message(kubectl: Any, ns: str, name: str) -> str | None:
    unit = kq.get(kubectl, QU, name, ns)
    return None if unit is None else (unit.get("status") or {}).get("message")


def test_no_label_unit_is_explained_with_its_status_message(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    kubectl.apply(kq.job("nolabel", ns, None))
    kq.wait_for(  # past the initial "Enqueued" (the job extension's) to the round's word
        lambda: _status_message(kubectl, ns, "nolabel") not in (None, "Enqueued"),
        what="status message",
    )
    doc = explain_json(kubeconfig, ns, "nolabel")
    assert doc["reason"] == "NoQuotaLabel"
    assert doc["message"] == doc["statusMessage"]
    assert "no quota label" in doc["message"]


def test_unknown_quota_is_queue_not_found_like_the_event(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("nope")
    kubectl.apply(kq.job("stray", ns, quota))
    event = kq.wait_for(lambda: kq.events_for(kubectl, ns, "stray", "QueueNotFound"), what="event")
    doc = explain_json(kubeconfig, ns, "stray")
    assert doc["reason"] == "QueueNotFound"
    expected = f"queue {quota} not found for queueUnit {ns}/stray"
    assert doc["message"] == event[0]["message"] == expected
    assert doc["quota"] == {"name": quota, "exists": False, "namespace": None, "refused": []}


def test_ancestor_exhaustion_names_the_ancestor_and_the_numbers(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    parent, a, b = kq.unique("org"), kq.unique("team-a"), kq.unique("team-b")
    kubectl.apply(kq.quota(parent, max_={"cpu": "2"}))
    kubectl.apply(kq.quota(a, parent=parent, max_={"cpu": "2"}))
    kubectl.apply(kq.quota(b, parent=parent, max_={"cpu": "2"}))
    kubectl.apply(kq.job("first", ns, a, cpu="2"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "first") == "Dequeued", what="first admitted")
    kubectl.apply(kq.job("second", ns, b, cpu="1"))
    kq.wait_for(lambda: kq.events_for(kubectl, ns, "second", "FailedScheduling"), what="rejection")
    doc = explain_json(kubeconfig, ns, "second")
    assert doc["reason"] == "AncestorExhausted"
    assert doc["message"] == f"limited quotaName:{parent}, limited resKey:cpu,"
    assert doc["blockingQuota"] == parent
    assert [level["quota"] for level in doc["chain"]] == [b, parent]
    assert doc["chain"][0]["fits"] is True
    assert doc["chain"][1]["resources"]["cpu"] == {
        "limit": "2", "used": "2", "request": "1", "free": "0", "fits": False
    }
    # the table form marks the blocking level, through the same installed command
    table = explain(kubeconfig, ns, "second")
    assert table.returncode == 0, table.stderr
    assert "Reason:     AncestorExhausted" in table.stdout
    assert any(line.split()[:3] == ["1", parent, "cpu"] and "<- blocks" in line
               for line in table.stdout.splitlines())


def test_cycle_message_is_verbatim(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    x, y = kq.unique("x"), kq.unique("y")
    kubectl.apply(kq.quota(x, parent=y))
    kubectl.apply(kq.quota(y, parent=x))
    kubectl.apply(kq.job("loop", ns, x))
    event = kq.wait_for(lambda: kq.events_for(kubectl, ns, "loop", "FailedScheduling"))
    doc = explain_json(kubeconfig, ns, "loop")
    assert doc["reason"] == "QuotaCycle"
    assert doc["message"] == event[0]["message"] == (
        f"CheckUsage found cycle reference, item:{ns}/loop, quotaName:{x}, visited quota: {x},{y}"
    )


def test_missing_ancestor_message_is_verbatim(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    orphan, ghost = kq.unique("orphan"), kq.unique("ghost")
    kubectl.apply(kq.quota(orphan, parent=ghost))
    kubectl.apply(kq.job("lost", ns, orphan))
    event = kq.wait_for(lambda: kq.events_for(kubectl, ns, "lost", "FailedScheduling"))
    doc = explain_json(kubeconfig, ns, "lost")
    assert doc["reason"] == "AncestorNotFound"
    assert doc["message"] == event[0]["message"]


def test_unregistered_policy_is_add_queue_fail(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("round")
    kubectl.apply(kq.quota(quota, policy="Round"))
    kubectl.apply(kq.job("unserved", ns, quota))
    kq.wait_for(lambda: kq.events_for(kubectl, "koord-queue", quota, "AddQueueFail"), what="event")
    kq.wait_for(lambda: kq.get(kubectl, QU, "unserved", ns), what="unit")
    doc = explain_json(kubeconfig, ns, "unserved")
    assert doc["reason"] == "AddQueueFail"
    assert doc["queue"]["policy"] == "Round"


def test_admitted_unit_reports_its_phase(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("roomy")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "4Gi"}))
    kubectl.apply(kq.job("fits", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "fits") == "Dequeued", what="admitted")
    doc = explain_json(kubeconfig, ns, "fits")
    assert doc["reason"] == "Admitted" and doc["phase"] == "Dequeued"
    assert doc["chain"][0]["resources"]["cpu"]["used"] == "1"


def test_job_that_was_not_suspended_has_no_unit_and_unknown_names_exit_1(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    kubectl.apply(kq.job("free", ns, "whatever", suspend=False))
    doc = explain_json(kubeconfig, ns, "free")
    assert doc["reason"] == "NoQueueUnit"
    assert any("not suspended" in note for note in doc["notes"])
    missing = explain(kubeconfig, ns, "nobody")
    assert missing.returncode == 1
    assert f"QueueUnit {ns}/nobody not found" in missing.stderr
