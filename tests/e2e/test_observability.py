"""Issue 35 points 8 and 6 on the real API server, as an operator sees them: a Queue's
status.queueItemDetails in order (kubectl), the debug endpoint's JSON, and a quota getting its
share back as pods finish. (Every dashboard panel's metric on a live /metrics:
tests/e2e/test_dashboard_metrics.py, with the controller in its own process as deployed, so
the metrics of earlier tests in this session's process do not count; the check once here, on
the shared in-process registry, failed after test_faults.)"""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from koordqueue.domain import names
from tests.e2e import kq
from tests.e2e.running_controller import RunningController

Q = "queues.scheduling.x-k8s.io"
QU = "queueunits.scheduling.x-k8s.io"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def debugged(kubeconfig: Path) -> Iterator[RunningController]:
    """One controller for the file, with the debug API on (off by default)."""
    with RunningController(
        kubeconfig, enable_api_handler=True, api_handler_port=_free_port()
    ) as rc:
        yield rc


def _items(kubectl: Any, queue: str) -> list[dict[str, Any]] | None:
    out = kubectl(
        "get", Q, queue, "-n", "koord-queue", "-o", "jsonpath={.status.queueItemDetails}"
    ).stdout
    if not out.strip():
        return None
    details: dict[str, list[dict[str, Any]]] = json.loads(out)
    return details.get("active")


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def test_queue_status_debug_api_and_metrics(kubectl: Any, debugged: RunningController) -> None:
    ns = kq.namespace(kubectl, kq.unique("obs"))
    quota = kq.unique("obs")
    pc = kq.unique("obs-pc")
    kubectl.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": pc}, "value": 100})
    kubectl.apply(kq.quota(quota, max_={"cpu": "1", "memory": "4Gi"}, annotations={
        names.QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION: "1s"}))
    kq.wait_for(lambda: kq.get(kubectl, Q, quota, "koord-queue"), what="queue")
    kubectl.apply(kq.job("holder", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "holder") == "Dequeued", what="holder admitted")
    for name in ("b", "c"):
        kubectl.apply(kq.job(name, ns, quota, cpu="1"))
        kq.wait_for(lambda n=name: kq.phase(kubectl, ns, n) == "Enqueued", what=f"{name} waits")
    kubectl.apply(kq.job("d", ns, quota, cpu="1", priority_class=pc))

    # the Queue lists its waiting units in the round's order: priority first, then arrival
    want = [
        {"name": "d", "namespace": ns, "priority": 100, "position": 1},
        {"name": "b", "namespace": ns, "position": 2},
        {"name": "c", "namespace": ns, "position": 3},
    ]
    kq.wait_for(lambda: _items(kubectl, quota) == want, timeout=20,
                what="queueItemDetails", state=lambda: _items(kubectl, quota))

    # the debug endpoint: what CheckUsage holds, per quota, in milli-units
    port = debugged.settings.api_handler_port
    view = _get_json(f"http://127.0.0.1:{port}/apis/v1/elasticquota")[quota]
    assert view["Count"] == 1
    assert view["Max"] == {"cpu": 1000, "memory": 4 * 1024**3 * 1000}
    assert view["Used"]["cpu"] == 1000 and view["SelfUsed"]["cpu"] == 1000
    assert view["ChildrenUsed"] == {} and view["OverSoldUsed"] == {}
    assert view["GuaranteedUsed"]["cpu"] == 1000
    assert list(view["Items"]) == [f"{ns}/holder"]
    assert view["Items"][f"{ns}/holder"]["Resource"]["cpu"] == "1"

    # disabled: the list is no longer refreshed and keeps its last value; enabled: refreshed
    kubectl("annotate", Q, quota, "-n", "koord-queue",
            f"{names.DISABLE_SHOW_QUEUE_ITEMS_ANNOTATION}=true")
    time.sleep(0.5)  # the annotation reaches the controller before b goes
    kubectl("delete", "job", "b", "-n", ns)
    kq.wait_for(lambda: kq.get(kubectl, QU, "b", ns) is None, what="b's unit deleted")
    time.sleep(2.5)  # more than two refresh intervals
    assert [i["name"] for i in _items(kubectl, quota) or []] == ["d", "b", "c"]
    kubectl("annotate", Q, quota, "-n", "koord-queue",
            f"{names.DISABLE_SHOW_QUEUE_ITEMS_ANNOTATION}-")
    kq.wait_for(lambda: [i["name"] for i in _items(kubectl, quota) or []] == ["d", "c"],
                timeout=15, what="refreshed again", state=lambda: _items(kubectl, quota))


def _job_progress(kubectl: Any, ns: str, name: str, active: int, succeeded: int) -> None:
    """The Job controller's stand-in: pods running and pods succeeded. startTime is set once
    (immutable on an unsuspended Job once set: a later second's value is refused)."""
    job = kubectl.json("get", "job", name, "-n", ns)
    status: dict[str, Any] = {"status": {"active": active, "ready": active,
                                         "succeeded": succeeded}}
    if not (job.get("status") or {}).get("startTime"):
        status["status"]["startTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    kubectl("patch", "job", name, "-n", ns, "--subresource=status", "--type=merge",
            "-p", json.dumps(status))


def test_finished_pods_give_their_share_back(kubectl: Any, debugged: RunningController) -> None:
    """A Job of 4 completions, 2 at a time, fills its 2-cpu quota; once 3 succeeded only one
    pod remains: its unit shows one reclaimable pod, the quota holds 1 cpu for it, and the
    waiting Job gets the freed cpu (Kueue's reclaimablePods; Koord-Queue has only the field)."""
    ns = kq.namespace(kubectl, kq.unique("reclaim"))
    quota = kq.unique("reclaim")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "8Gi"}))
    kq.wait_for(lambda: kq.get(kubectl, Q, quota, "koord-queue"), what="queue")
    wide = kq.job("wide", ns, quota, cpu="1", parallelism=2)
    wide["spec"]["completions"] = 4
    kubectl.apply(wide)
    kq.wait_for(lambda: kq.phase(kubectl, ns, "wide") == "Dequeued", what="wide admitted")
    kubectl.apply(kq.job("next", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.events_for(kubectl, ns, "next", "FailedScheduling"), what="next held")

    _job_progress(kubectl, ns, "wide", active=2, succeeded=2)  # 2 remain: all still needed
    kq.wait_for(lambda: kq.phase(kubectl, ns, "wide") == "Running", what="wide running")
    assert "reclaimablePods" not in ((kq.get(kubectl, QU, "wide", ns) or {})["status"])
    _job_progress(kubectl, ns, "wide", active=1, succeeded=3)
    reclaimable = kq.wait_for(
        lambda: (kq.get(kubectl, QU, "wide", ns) or {}).get("status", {}).get("reclaimablePods"),
        what="wide's reclaimable pods")
    assert reclaimable == [{"name": "wide", "count": 1}]
    kq.wait_for(lambda: kq.phase(kubectl, ns, "next") == "Dequeued", what="next admitted")
    port = debugged.settings.api_handler_port
    view = _get_json(f"http://127.0.0.1:{port}/apis/v1/elasticquota")[quota]
    assert view["Used"]["cpu"] == 2000 and view["Count"] == 2
    held = {key: item["Resource"]["cpu"] for key, item in view["Items"].items()}
    assert held == {f"{ns}/wide": "1", f"{ns}/next": "1"}


def test_queue_items_refresh_every_15_seconds_by_default(
    kubectl: Any, debugged: RunningController
) -> None:
    """Without the interval annotation a Queue's list is written when the Queue is first
    served and then every 15 s (Koord-Queue's default), not after every round: a unit that
    starts waiting just after a refresh appears in the list only at the next one."""
    ns = kq.namespace(kubectl, kq.unique("obs15"))
    quota = kq.unique("obs15")
    kubectl.apply(kq.quota(quota, max_={"cpu": "1", "memory": "4Gi"}))
    kq.wait_for(lambda: _items(kubectl, quota) is not None, timeout=30,
                what="the Queue's first list")
    first = time.monotonic()  # (the refresh was at most this; the next is 15 s after it)
    assert _items(kubectl, quota) == []
    kubectl.apply(kq.job("holder", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "holder") == "Dequeued", what="holder admitted")
    kubectl.apply(kq.job("b", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "b") == "Enqueued", what="b waits")
    if time.monotonic() - first < 12.0:  # (under a heavy load the next refresh may be near)
        assert _items(kubectl, quota) == [], "refreshed before the 15 s were up"
    kq.wait_for(lambda: _items(kubectl, quota) == [
        {"name": "b", "namespace": ns, "position": 1}], timeout=40,
        what="b listed at the next refresh", state=lambda: _items(kubectl, quota))
    waited = time.monotonic() - first
    # 15 s after the first refresh, less what its write took to be seen (slack for load)
    assert 10.0 <= waited <= 35.0, waited
