"""The controller rides out an API server restart: its watches come back, and Jobs created
after the restart are admitted, with nothing admitted twice. Uses its own control plane, so
the restart cannot disturb the other tests' clients."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from koordqueue.kube import metrics
from tests.controlplane.harness import ControlPlane
from tests.e2e import kq
from tests.e2e.conftest import Kubectl, install_crds
from tests.e2e.running_controller import RunningController

QU = "queueunits.scheduling.x-k8s.io"


@pytest.fixture
def plane() -> Iterator[ControlPlane]:
    with ControlPlane() as cp:
        yield cp


def _units(kubectl: Any, ns: str) -> dict[str, dict[str, Any]]:
    return {u["metadata"]["name"]: u for u in kubectl.json("get", QU, "-n", ns)["items"]}


def _resumed(kubectl: Any, ns: str, name: str) -> bool:
    job = kq.get(kubectl, "job", name, ns)
    return job is not None and job["spec"].get("suspend") is False


def test_jobs_after_an_apiserver_restart_are_admitted(plane: ControlPlane) -> None:
    assert plane.kubeconfig is not None
    kubectl = Kubectl(plane.binaries.kubectl, plane.kubeconfig)
    install_crds(kubectl)
    kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koord-queue"}})
    ns = kq.namespace(kubectl, "restart")
    kubectl.apply(kq.quota("team", max_={"cpu": "4"}))

    def restarts() -> float:
        value = metrics.REGISTRY.get_sample_value(
            "koordqueue_watch_restarts_total", {"kind": "jobs", "reason": "error"}
        )
        return value or 0.0

    with RunningController(plane.kubeconfig):
        kubectl.apply(kq.job("before", ns, "team", cpu="1"))
        kq.wait_for(lambda: _resumed(kubectl, ns, "before"), what="the first Job resumed")
        errors_before = restarts()

        plane.restart_apiserver(down_seconds=1.0)

        for i in range(3):
            kubectl.apply(kq.job(f"after{i}", ns, "team", cpu="1"))
        kq.wait_for(
            lambda: all(_resumed(kubectl, ns, f"after{i}") for i in range(3)),
            timeout=90,
            what="Jobs created after the restart resumed",
        )
        assert restarts() > errors_before, "the Job watch should have seen the drop"

    units = _units(kubectl, ns)
    assert sorted(units) == ["after0", "after1", "after2", "before"]
    assert {u["status"]["phase"] for u in units.values()} == {"Dequeued"}
    # the admission written before the restart was kept, not redone
    events = kq.events_for(kubectl, ns, "before", "Admitted")
    assert len(events) == 1 and events[0].get("count", 1) == 1
