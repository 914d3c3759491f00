"""`helm install` of charts/koordqueue on the real API server (issue 27 part 4).

The chart installed with its default values (the pinned helm, tests/controlplane/helm.py),
its webhook certificate made by deploy/webhook-cert.sh, and koordqueue run as a process with
the installed Deployment's own arguments and the chart's ServiceAccount token (the plane has
no kubelet: deployed.py). Jobs created running with a quota label are held by the chart's
webhook and admitted by the controller in turn, the one left waiting is served through the
chart's APIService; what kubectl shows is asserted, then the release is uninstalled.
Measured: ~11 s (helm install ~5 s, the rest ~6 s).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import helm
from tests.e2e import deployed, kq

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "koordqueue"
RELEASE = "koordqueue"
NAMESPACE = "koord-queue"


class Helm:
    def __init__(self, binary: Path, kubeconfig: Path) -> None:
        self.binary, self.kubeconfig = binary, kubeconfig

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run([str(self.binary), "--kubeconfig", str(self.kubeconfig), *args],
                             capture_output=True, text=True, timeout=120, check=False)
        assert not check or out.returncode == 0, out.stdout + out.stderr
        return out


@pytest.fixture
def installed(kubectl: Any, kubeconfig: Path) -> Iterator[Helm]:
    """The release, installed; uninstalled after (the webhooks select every namespace).
    --take-ownership and --force-conflicts: a test_deploy.py run on this plane may have left
    deploy/'s objects, their fields owned by kubectl's client-side apply (a clean-clone CI run
    met "Apply failed with 3 conflicts" on the Deployment's args and env)."""
    helm_ = Helm(helm.ensure_helm(quiet=True), kubeconfig)
    deployed.remove_apiservices(kubectl)
    helm_("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace",
          "--take-ownership", "--force-conflicts")
    try:
        yield helm_
    finally:
        helm_("uninstall", RELEASE, "--namespace", NAMESPACE, check=False)
        deployed.remove_webhooks(kubectl)
        deployed.remove_apiservices(kubectl)


def _released(obj: dict[str, Any] | None) -> bool:
    """Made by this release, as Helm marks what it owns."""
    meta = (obj or {}).get("metadata", {})
    return ((meta.get("labels") or {}).get("app.kubernetes.io/managed-by") == "Helm"
            and (meta.get("annotations") or {}).get("meta.helm.sh/release-name") == RELEASE)


def test_helm_install_admits_a_job(
    installed: Helm, kubectl: Any, kubeconfig: Path, audit_log: Path, tmp_path: Path
) -> None:
    """What the release made, as kubectl shows it; then the controller, run with the installed
    Deployment's arguments and the chart's ServiceAccount token, admits a Job held by the
    chart's webhook, lists the one left waiting through the chart's APIService, and is refused
    nothing (its log and the API server's audit log, from this test's start on)."""
    audit_start = deployed.audit_offset(audit_log)
    status = json.loads(installed("status", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"
    deployment = kq.get(kubectl, "deployment", "koordqueue-controller", NAMESPACE)
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "koordqueue"
    for kind, name, ns in (
        ("poddisruptionbudget", "koordqueue-controller", NAMESPACE),
        ("service", "koordqueue-metrics", NAMESPACE), ("service", "koordqueue-webhook", NAMESPACE),
        ("service", "koordqueue-visibility", NAMESPACE),
        ("serviceaccount", "koordqueue", NAMESPACE),
        ("role", "koordqueue-leader-election", NAMESPACE),
        ("rolebinding", "koordqueue-leader-election", NAMESPACE),
        ("clusterrole", "koordqueue-controller", None),
        ("clusterrolebinding", "koordqueue-controller", None),
        ("clusterrole", "koordqueue-visibility-viewer", None),
        ("clusterrole", "koordqueue-dashboard-viewer", None),
        ("apiservice", "v1alpha1.visibility.koord-queue.io", None),
    ):
        assert _released(kq.get(kubectl, kind, name, ns)), (kind, name)
    for kind in deployed.WEBHOOK_KINDS:
        configs = kubectl.json("get", kind, "-l", deployed.SELECTOR)["items"]
        assert configs and all(_released(c) for c in configs), kind
    for crd in ("elasticquotas.scheduling.sigs.k8s.io", "queueunits.scheduling.x-k8s.io",
                "queues.scheduling.x-k8s.io", "podgroups.scheduling.volcano.sh"):
        assert kq.get(kubectl, "crd", crd) is not None, crd

    served = deployed.make_webhook_cert(kubectl, tmp_path)
    sa_config = deployed.sa_kubeconfig(kubectl, kubeconfig, tmp_path / "sa.kubeconfig")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    health, visibility_port = deployed.free_port(), deployed.free_port()
    args = deployed.with_flags(
        [str(a) for a in container["args"]],
        kubeconfig=sa_config, metrics_port=deployed.free_port(), health_port=health,
        webhook_port=served.webhook_port, webhook_cert=served.certfile,
        webhook_key=served.keyfile, visibility_port=visibility_port,
        visibility_cert=served.certfile, visibility_key=served.keyfile,
        log_format="console", admission_period=0.2,
    )
    ns = kq.namespace(kubectl, kq.unique("helm"))
    quota = kq.unique("helm")
    with deployed.running(args, tmp_path / "run.log", health) as run:
        kubectl.apply(kq.quota(quota, max_={"cpu": "1"}))
        # created running: the chart's workload webhook stores it suspended
        for name in ("a", "b"):
            created = json.loads(kubectl("create", "-o", "json", "-f", "-", input=json.dumps(
                kq.job(name, ns, quota, cpu="1", suspend=False))).stdout)
            assert created["spec"]["suspend"] is True, name
            kq.wait_for(lambda n=name: kq.phase(kubectl, ns, n), what=f"{name}'s unit")
        kq.wait_for(lambda: kq.phase(kubectl, ns, "a") == "Dequeued", what="a admitted")
        kq.wait_for(lambda: (kq.get(kubectl, "job", "a", ns) or {})["spec"].get("suspend")
                    is False, what="a resumed")
        ev = kq.wait_for(lambda: kq.events_for(kubectl, ns, "b", "FailedScheduling"),
                         what="b held")
        assert ev[0]["message"] == f"limited quotaName:{quota}, limited resKey:cpu,"
        assert (kq.get(kubectl, "job", "b", ns) or {})["spec"]["suspend"] is True
        body = deployed.visibility_through_the_aggregator(kubectl, visibility_port, ns)
        assert [(i["metadata"]["name"], i["positionInQueue"]) for i in body["items"]] == [
            ("b", 1)], body
        kubectl("delete", "elasticquotas.scheduling.sigs.k8s.io", quota, "-n", "default")
    assert run.forbidden_lines() == [], run.log[-3000:]
    _, refused = deployed.audited(audit_log, since=audit_start)
    assert refused == [], [(e["verb"], e.get("objectRef")) for e in refused]
