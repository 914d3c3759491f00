"""A namespace whose pods and pod parents (StatefulSets, Deployments, LeaderWorkerSets) go
through the webhooks of an in-process controller, which the real kube-apiserver calls over
loopback. Shared by the pod-parent e2e modules: they differ only in the parents' rule and the
integrations served."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.kube.gates.certs import self_signed
from koordqueue.kube.webhooks import pod_parents
from tests.e2e import kq
from tests.e2e.running_controller import RunningController
from tests.e2e.test_gates_admission import SCOPE_LABEL, free_port, register_webhook


@contextmanager
def serving_pod_parents(
    kubectl: Any,
    kubeconfig: Path,
    certs: Path,
    *,
    prefix: str,
    integrations: str,
    rule: dict[str, Any],
) -> Iterator[str]:
    """Yields the namespace; the pod webhook and a pod-parent webhook with `rule` (its
    apiGroups, apiVersions and resources) are scoped to it and removed after."""
    scope = kq.unique(prefix)
    cert = self_signed(certs, ["127.0.0.1"])
    port = free_port()
    pods_config, parents_config = f"kq-e2e-{scope}-pods", f"kq-e2e-{scope}-parents"
    with RunningController(
        kubeconfig,
        integrations=integrations,
        webhook_port=port,
        webhook_cert=str(cert.certfile),
        webhook_key=str(cert.keyfile),
    ):
        register_webhook(kubectl, pods_config, port, cert.ca_pem, scope)
        kubectl.apply(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": parents_config},
                "webhooks": [
                    {
                        "name": "pod-parents.koord-queue.io",
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "failurePolicy": "Fail",  # the test must see a broken webhook
                        "timeoutSeconds": 5,
                        "rules": [{**rule, "operations": ["CREATE", "UPDATE"]}],
                        "namespaceSelector": {"matchLabels": {SCOPE_LABEL: scope}},
                        "objectSelector": {
                            "matchExpressions": [{"key": QUOTA_NAME_LABEL, "operator": "Exists"}]
                        },
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{port}/{pod_parents.PATH}",
                            "caBundle": base64.b64encode(cert.ca_pem).decode(),
                        },
                    }
                ],
            }
        )
        try:
            ns = kq.unique(prefix)
            kubectl.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns, "labels": {SCOPE_LABEL: scope}},
                }
            )
            yield ns
        finally:
            for name in (pods_config, parents_config):
                kubectl("delete", "mutatingwebhookconfiguration", name, check=False)
