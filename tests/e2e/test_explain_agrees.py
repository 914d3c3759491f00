"""explain agrees with the controller, on the real API server (issue 33.6).

The controller runs without the ElasticQuota webhook (as when it is down: failurePolicy
Ignore), so a bad edit reaches it and it refuses it itself. `koordqueue explain`, the
installed command, reads only the API; before issue 33.6 it said QueueNotFound for a quota
the controller still admitted against (the last valid max), read the other copy of a
duplicated name, and for a refused quota said both "no ElasticQuota exists" and "exists but
is invalid". It now folds the quotas with the controller's own rule (domain/quota_fold.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import kq
from tests.e2e.running_controller import RunningController
from tests.e2e.test_explain import explain, explain_json

QUOTAS = "elasticquotas.scheduling.sigs.k8s.io"


@pytest.fixture
def ns(kubectl: Any) -> str:
    return kq.namespace(kubectl, kq.unique("agree"))


def status_of(kubectl: Any, name: str, namespace: str) -> dict[str, Any]:
    return dict((kq.get(kubectl, QUOTAS, name, namespace) or {}).get("status") or {})


def test_a_refused_edit_is_explained_against_the_max_the_controller_still_uses(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    q = kq.unique("kept")
    kubectl.apply(kq.quota(q, ns, max_={"cpu": "4", "memory": "8Gi"}))
    kubectl.apply(kq.job("first", ns, q, cpu="3"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "first") == "Dequeued", what="first admitted")
    kubectl.apply(kq.quota(q, ns, max_={"cpu": "4", "memory": "8Gi"}, min_={"cpu": "9"}))
    kept = kq.wait_for(lambda: status_of(kubectl, q, ns).get("lastValid"), what="lastValid")
    assert kept["spec"]["max"] == {"cpu": "4", "memory": "8Gi"}

    kubectl.apply(kq.job("second", ns, q, cpu="2"))
    event = kq.wait_for(lambda: kq.events_for(kubectl, ns, "second", "FailedScheduling"),
                        what="the controller's rejection")
    doc = explain_json(kubeconfig, ns, "second")
    assert doc["reason"] == "QuotaExceeded"  # was QueueNotFound
    assert doc["message"] == event[0]["message"] == f"limited quotaName:{q}, limited resKey:cpu,"
    assert doc["chain"][0]["resources"]["cpu"]["limit"] == "4"
    assert doc["quota"]["refused"][0]["kept"] is True
    assert any("last valid definition stays in force" in n for n in doc["notes"])
    assert kq.phase(kubectl, ns, "first") == "Dequeued"  # nothing admitted was undone


def test_the_copy_of_a_duplicated_name_is_the_one_the_controller_admits_from(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    q = kq.unique("dup")
    first, second = (kq.namespace(kubectl, kq.unique(p)) for p in ("dup-a", "dup-b"))
    kubectl.apply(kq.quota(q, first, max_={"cpu": "4", "memory": "8Gi"}))
    time.sleep(1.1)  # creationTimestamp has whole seconds: the first is the older
    kubectl.apply(kq.quota(q, second, max_={"cpu": "1", "memory": "8Gi"}))
    kubectl.apply(kq.job("big", ns, q, cpu="2"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "big") == "Dequeued", what="admitted by the older")
    doc = explain_json(kubeconfig, ns, "big")
    assert doc["reason"] == "Admitted"
    assert doc["quota"]["namespace"] == first
    assert doc["chain"][0]["resources"]["cpu"]["limit"] == "4"
    assert any(f"{first} (in force: the oldest) and {second} (ignored" in n for n in doc["notes"])


def test_a_refused_quota_with_no_earlier_definition_is_said_once(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    q = kq.unique("solo")
    kubectl.apply(kq.quota(q, ns, max_={"cpu": "2"}, min_={"memory": "1Gi"}))
    kq.wait_for(lambda: any(c.get("type") == "Valid" and c.get("status") == "False"
                            for c in status_of(kubectl, q, ns).get("conditions") or []),
                what="Valid=False")
    kubectl.apply(kq.job("lonely", ns, q))
    kq.wait_for(lambda: kq.events_for(kubectl, ns, "lonely", "QueueNotFound"), what="event")
    doc = explain_json(kubeconfig, ns, "lonely")
    assert doc["reason"] == "QueueNotFound"
    assert doc["summary"].startswith(f"ElasticQuota {ns}/{q} exists, but the controller refuses")
    assert "spec.min[memory]" in doc["summary"]
    assert "no ElasticQuota" not in doc["summary"]
    assert not any("exists but is invalid" in n for n in doc["notes"])
    table = explain(kubeconfig, ns, "lonely")
    assert table.returncode == 0 and f"{q} (refused: no definition in force)" in table.stdout


def test_a_parent_edit_refused_for_a_cycle_is_taken_once_the_cycle_is_gone(
    kubectl: Any, kubeconfig: Path, controller: RunningController, ns: str
) -> None:
    """Level-triggered: c -> a is refused while a -> c (it would close a loop) and c keeps
    its root parent; once a is moved back to the root, nothing loops through c's edit any
    more, and the controller takes it without c being edited again, as a fresh fold (explain,
    a new leader) of the same objects does."""
    a, c = kq.unique("cyc-a"), kq.unique("cyc-c")
    kubectl.apply(kq.quota(c, ns, max_={"cpu": "4"}))
    kubectl.apply(kq.quota(a, ns, max_={"cpu": "4"}, parent=c))
    kubectl.apply(kq.quota(c, ns, max_={"cpu": "4"}, parent=a))
    kept = kq.wait_for(lambda: status_of(kubectl, c, ns).get("lastValid"), what="c refused")
    assert "labels" not in kept or a not in str(kept["labels"])  # the root parent is kept

    kubectl.apply(kq.quota(a, ns, max_={"cpu": "4"}))  # a back to the root: no loop now

    def taken() -> dict[str, Any] | None:
        status = status_of(kubectl, c, ns)
        valid = [x for x in status.get("conditions") or [] if x.get("type") == "Valid"]
        return status if "lastValid" not in status and valid and valid[0]["status"] == "True" \
            else None

    kq.wait_for(taken, what="c's edit taken")
    kubectl.apply(kq.job("under-c", ns, c, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "under-c") == "Dequeued", what="admitted")
    doc = explain_json(kubeconfig, ns, "under-c")
    assert [link["quota"] for link in doc["chain"]] == [c, a]  # c's parent in force is a
