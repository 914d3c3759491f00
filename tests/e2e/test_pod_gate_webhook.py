"""The pod webhook gates a plain pod that names a quota (issue 13, Kueue's pod webhook).

The controller runs in-process with `--integrations batch/job,pod` and `--webhook-port`, and
serves the pod webhook itself (no scheduler in this process): the real kube-apiserver calls
it over loopback, through a MutatingWebhookConfiguration that selects only this test's
namespace (tests/e2e/test_gates_admission.py's helpers). What kubectl shows: the pod, created
without any gate, comes back from the API server gated with `koord-queue/admission`; its
QueueUnit is admitted into the quota (Dequeued, `Admitted` event naming the quota); the
controller removes the gate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from koordqueue.domain.names import POD_ADMISSION_GATE, QUOTA_NAME_LABEL
from koordqueue.kube.gates.certs import self_signed
from tests.e2e import kq
from tests.e2e.running_controller import RunningController
from tests.e2e.test_gates_admission import (
    SCOPE_LABEL,
    free_port,
    gates_of,
    live_gates,
    register_webhook,
)

QU = "queueunits.scheduling.x-k8s.io"


def test_a_pod_created_without_the_gate_is_gated_then_admitted_and_ungated(
    kubectl: Any, kubeconfig: Path, tmp_path: Path
) -> None:
    scope = kq.unique("podgate")
    cert = self_signed(tmp_path, ["127.0.0.1"])
    port = free_port()
    config_name = f"kq-e2e-{scope}"
    with RunningController(
        kubeconfig,
        integrations="batch/job,pod",
        webhook_port=port,
        webhook_cert=str(cert.certfile),
        webhook_key=str(cert.keyfile),
    ):
        register_webhook(kubectl, config_name, port, cert.ca_pem, scope)
        try:
            ns = kq.unique("podgate")
            kubectl.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns, "labels": {SCOPE_LABEL: scope}},
                }
            )
            quota = kq.unique("podgate")
            kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "4Gi"}))
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "solo", "namespace": ns, "labels": {QUOTA_NAME_LABEL: quota}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "1", "memory": "512Mi"}},
                        }
                    ],
                },
            }
            created = json.loads(
                kubectl("create", "-o", "json", "-f", "-", input=json.dumps(pod)).stdout
            )
            assert gates_of(created) == [POD_ADMISSION_GATE]  # added by the webhook

            unit = "solo-pod-qu"
            kq.wait_for(
                lambda: kq.phase(kubectl, ns, unit) in ("Dequeued", "Running"),
                what=f"{unit} admitted",
                state=lambda: (kq.get(kubectl, QU, unit, ns), live_gates(kubectl, ns, "solo")),
            )
            events = kq.wait_for(
                lambda: kq.events_for(kubectl, ns, unit, "Admitted"), what="Admitted event"
            )
            assert quota in events[0]["message"]
            kq.wait_for(lambda: live_gates(kubectl, ns, "solo") == [], what="pod ungated")
        finally:
            kubectl("delete", "mutatingwebhookconfiguration", config_name, check=False)
