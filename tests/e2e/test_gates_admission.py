"""Queue admission through scheduling gates on the real control plane (SPEC 3.5, issue 6).

The webhook is served by the scheduler process (kopf's WebhookServer, certificate from the
openssl CLI) and registered with the real kube-apiserver, which calls it over loopback.
Each scheduler only sees its own namespaces' pods through its schedulerName, and each
MutatingWebhookConfiguration selects only its own namespaces, so other e2e tests are never
touched.
"""

from __future__ import annotations

import base64
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.gates.certs import self_signed
from koordqueue.kube.gates.webhook import WEBHOOK_PATH
from koordqueue.kube.scheduler.runner import SchedulerRunner
from koordqueue.kube.settings import ControllerSettings
from koordqueue.scheduler.gates.names import (
    GATE_NAME,
    OPT_IN_ANNOTATION,
    REASON_RESERVATION_EXPIRED,
)
from tests.e2e.kq import events_for, get, unique, wait_for
from tests.e2e.test_scheduler_binding import make_node, scheduled_condition

SCOPE_LABEL = "kq-gates-e2e"
OPT_IN = {OPT_IN_ANNOTATION: "true"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Plane:
    """One scheduler (+ webhook) and the namespaces its webhook configuration selects."""

    def __init__(self, kubectl: Any, runner: SchedulerRunner, scope: str) -> None:
        self.kubectl, self.runner, self.scope = kubectl, runner, scope

    @property
    def scheduler_name(self) -> str:
        return self.runner.settings.scheduler_name

    def namespace(self) -> str:
        name = unique("gates")
        self.kubectl.apply({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": name, "labels": {SCOPE_LABEL: self.scope}}})
        return name

    def queue(self, cpu: str, memory: str) -> str:
        name = unique("q")
        self.kubectl.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                             "metadata": {"name": name},
                             "spec": {"weight": 1, "capability": {"cpu": cpu, "memory": memory}}})
        return name

    def pod(self, ns: str, name: str, queue: str, *, opt_in: bool = True,
            selector: dict[str, str] | None = None,
            gates: list[str] | None = None) -> dict[str, Any]:
        """Create the pod; returns the object as admitted (after the webhook ran)."""
        notes = {"scheduling.volcano.sh/queue-name": queue, **(OPT_IN if opt_in else {})}
        spec: dict[str, Any] = {
            "schedulerName": self.scheduler_name,
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        }
        if selector:
            spec["nodeSelector"] = selector
        if gates:
            spec["schedulingGates"] = [{"name": g} for g in gates]
        manifest = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": ns, "annotations": notes},
                    "spec": spec}
        created: dict[str, Any] = json.loads(
            self.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout)
        return created


def gates_of(pod: dict[str, Any] | None) -> list[str]:
    return [g["name"] for g in ((pod or {}).get("spec") or {}).get("schedulingGates") or []]


def live_gates(kubectl: Any, ns: str, name: str) -> list[str]:
    return gates_of(get(kubectl, "pod", name, ns))


def node_of(kubectl: Any, ns: str, name: str) -> str | None:
    return ((get(kubectl, "pod", name, ns) or {}).get("spec") or {}).get("nodeName")


def register_webhook(kubectl: Any, name: str, port: int, ca: bytes, scope: str) -> None:
    kubectl.apply({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "queue-allocation-gate.scheduling.volcano.sh",
            "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail",  # the test must see a broken webhook, not skip it
            "timeoutSeconds": 5, "reinvocationPolicy": "IfNeeded",
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                       "operations": ["CREATE"]}],
            "namespaceSelector": {"matchLabels": {SCOPE_LABEL: scope}},
            "clientConfig": {"url": f"https://127.0.0.1:{port}{WEBHOOK_PATH}/gate",
                             "caBundle": base64.b64encode(ca).decode()},
        }],
    })


def start_plane(kubectl: Any, kubeconfig: Path, tmp: Path, scope: str,
                gates_on: bool, reservation_timeout: float = 0.0) -> tuple[Plane, str]:
    cert = self_signed(tmp / scope, ["127.0.0.1"])
    port = free_port()
    settings = ControllerSettings(
        kubeconfig=str(kubeconfig), schedule_period=0.2, metrics_port=0, log_format="console",
        scheduler_name=f"volcano-{scope}",
        feature_gates=f"SchedulingGatesQueueAdmission={'true' if gates_on else 'false'}",
        webhook_port=port, webhook_cert=str(cert.certfile), webhook_key=str(cert.keyfile),
        gate_reservation_timeout=reservation_timeout,
    )
    runner = SchedulerRunner(settings).start()
    config_name = f"kq-e2e-{scope}"
    register_webhook(kubectl, config_name, port, cert.ca_pem, scope)
    return Plane(kubectl, runner, scope), config_name


@pytest.fixture(scope="module")
def pool(kubectl: Any) -> str:
    """A roomy node only these tests' pods select."""
    label = unique("gatepool")
    make_node(kubectl, label, "16", "64Gi", labels={SCOPE_LABEL: label})
    return label


@pytest.fixture(scope="module")
def plane(kubectl: Any, kubeconfig: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    p, config = start_plane(kubectl, kubeconfig, tmp_path_factory.mktemp("certs"), "on", True)
    try:
        yield p
    finally:
        kubectl("delete", "mutatingwebhookconfiguration", config, check=False)
        p.runner.stop()


def test_seed_scenario_reservation_holds_the_queue(kubectl: Any, plane: Plane, pool: str) -> None:
    ns, q = plane.namespace(), plane.queue("1", "1Gi")
    here = {SCOPE_LABEL: pool}
    created = [
        plane.pod(ns, "pod-1", q, selector=here),
        plane.pod(ns, "pod-2", q, selector={SCOPE_LABEL: "no-such-node"}),
        plane.pod(ns, "pod-3", q, selector=here),
    ]
    assert [gates_of(p) for p in created] == [[GATE_NAME]] * 3  # all gated at first

    wait_for(lambda: node_of(kubectl, ns, "pod-1"), what="pod-1 bound")
    assert live_gates(kubectl, ns, "pod-1") == []
    time.sleep(1.0)  # five sessions: the queue is full, nobody else passes
    assert live_gates(kubectl, ns, "pod-2") == [GATE_NAME]
    assert live_gates(kubectl, ns, "pod-3") == [GATE_NAME]

    kubectl("delete", "pod", "pod-1", "-n", ns, "--grace-period=0", "--force")
    wait_for(lambda: live_gates(kubectl, ns, "pod-2") == [], what="pod-2 un-gated")
    cond = wait_for(lambda: scheduled_condition(kubectl, ns, "pod-2"), what="pod-2 condition")
    wait_for(lambda: (scheduled_condition(kubectl, ns, "pod-2") or {}).get("reason")
             == "Unschedulable", what="pod-2 Unschedulable", state=lambda: cond)
    time.sleep(1.0)  # pod-2's reservation holds the whole queue
    assert live_gates(kubectl, ns, "pod-3") == [GATE_NAME]
    assert node_of(kubectl, ns, "pod-3") is None
    assert (scheduled_condition(kubectl, ns, "pod-3") or {}).get("reason") != "Unschedulable"


def test_webhook_appends_to_a_foreign_gate_and_the_scheduler_keeps_both(
    kubectl: Any, plane: Plane, pool: str
) -> None:
    ns, q = plane.namespace(), plane.queue("4", "4Gi")
    created = plane.pod(ns, "p", q, selector={SCOPE_LABEL: pool}, gates=["example.com/other"])
    assert gates_of(created) == ["example.com/other", GATE_NAME]
    time.sleep(1.5)
    assert live_gates(kubectl, ns, "p") == ["example.com/other", GATE_NAME]


def test_our_gate_without_the_annotation_is_never_removed(
    kubectl: Any, plane: Plane, pool: str
) -> None:
    ns, q = plane.namespace(), plane.queue("4", "4Gi")
    created = plane.pod(ns, "p", q, opt_in=False, selector={SCOPE_LABEL: pool}, gates=[GATE_NAME])
    assert gates_of(created) == [GATE_NAME]
    time.sleep(1.5)
    assert live_gates(kubectl, ns, "p") == [GATE_NAME]


def test_webhook_never_duplicates_the_gate(kubectl: Any, plane: Plane) -> None:
    ns, q = plane.namespace(), plane.queue("0", "0")
    created = plane.pod(ns, "p", q, gates=[GATE_NAME])  # as if a retry already added it
    assert gates_of(created) == [GATE_NAME]


def test_feature_gate_off_changes_nothing(kubectl: Any, kubeconfig: Path, pool: str,
                                          tmp_path: Path) -> None:
    off, config = start_plane(kubectl, kubeconfig, tmp_path, "off", False)
    try:
        ns, q = off.namespace(), off.queue("1", "1Gi")
        created = off.pod(ns, "p", q, selector={SCOPE_LABEL: pool})
        assert gates_of(created) == []
        assert wait_for(lambda: node_of(kubectl, ns, "p"), what="bound as usual") == pool
    finally:
        kubectl("delete", "mutatingwebhookconfiguration", config, check=False)
        off.runner.stop()


def test_an_expired_reservation_is_released_with_an_event_and_its_room_reused(
    kubectl: Any, kubeconfig: Path, pool: str, tmp_path: Path
) -> None:
    """--gate-reservation-timeout=3: pod-a passes the check but fits no node; after 3 s its
    reservation is released (Warning ReservationExpired), it stays un-gated and pending, and
    pod-b, waiting behind it, is admitted and bound."""
    timed, config = start_plane(kubectl, kubeconfig, tmp_path, "timeout", True, 3.0)
    try:
        ns, q = timed.namespace(), timed.queue("1", "1Gi")
        timed.pod(ns, "pod-a", q, selector={SCOPE_LABEL: "no-such-node"})
        wait_for(lambda: live_gates(kubectl, ns, "pod-a") == [], what="pod-a un-gated")
        timed.pod(ns, "pod-b", q, selector={SCOPE_LABEL: pool})
        assert live_gates(kubectl, ns, "pod-b") == [GATE_NAME]  # pod-a's reservation holds
        [event] = wait_for(lambda: events_for(kubectl, ns, "pod-a", REASON_RESERVATION_EXPIRED),
                           timeout=15, what="ReservationExpired event")
        assert event["type"] == "Warning"
        assert wait_for(lambda: node_of(kubectl, ns, "pod-b"), timeout=15,
                        what="pod-b admitted and bound") == pool
        assert live_gates(kubectl, ns, "pod-a") == []
        assert node_of(kubectl, ns, "pod-a") is None
    finally:
        kubectl("delete", "mutatingwebhookconfiguration", config, check=False)
        timed.runner.stop()
