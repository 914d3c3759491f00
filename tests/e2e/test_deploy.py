"""deploy/ on the real API server: it applies cleanly, and its RBAC is enough and no more.

The controller is run with the ServiceAccount's own token, so every API call the controller
makes in this test is authorised by deploy/rbac.yaml alone.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import yaml

from tests.e2e import kq
from tests.e2e.running_controller import RunningController

ROOT = Path(__file__).resolve().parents[2]
SA = "system:serviceaccount:koord-queue:koordqueue"


def _sa_kubeconfig(kubectl: Any, admin_kubeconfig: Path, out: Path) -> Path:
    token = kubectl(
        "create", "token", "koordqueue", "-n", "koord-queue", "--duration=1h"
    ).stdout.strip()
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster}],
        "users": [{"name": "koordqueue", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": "koordqueue"}}],
        "current-context": "sa",
    }
    out.write_text(yaml.safe_dump(config))
    return out


def test_deploy_applies_with_kustomize(kubectl: Any) -> None:
    kubectl("apply", "-k", str(ROOT / "deploy"))
    deployment = kq.get(kubectl, "deployment", "koordqueue-controller", "koord-queue")
    assert deployment is not None
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "run"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "koordqueue"
    assert kq.get(kubectl, "clusterrolebinding", "koordqueue-controller") is not None


def test_service_account_may_do_exactly_what_the_controller_needs(kubectl: Any) -> None:
    kubectl("apply", "-k", str(ROOT / "deploy"))
    allowed = [
        ("watch", "elasticquotas.scheduling.sigs.k8s.io"),
        ("patch", "elasticquotas.scheduling.sigs.k8s.io/status"),
        ("patch", "queues.scheduling.x-k8s.io"),
        ("create", "queueunits.scheduling.x-k8s.io"),
        ("patch", "queueunits.scheduling.x-k8s.io/status"),
        ("patch", "jobs.batch"),
        ("create", "events"),
        ("watch", "priorityclasses.scheduling.k8s.io"),
        ("patch", "podgroups.scheduling.volcano.sh"),
    ]
    refused = [
        ("update", "elasticquotas.scheduling.sigs.k8s.io"),
        ("delete", "jobs.batch"),
        ("create", "jobs.batch"),
        ("get", "secrets"),
        ("create", "pods"),
        ("create", "priorityclasses.scheduling.k8s.io"),
    ]
    for verb, resource in allowed:
        sub = resource.split("/", 1)
        args = ["auth", "can-i", verb, sub[0], "--as", SA, "-A"]
        if len(sub) == 2:
            args += ["--subresource", sub[1]]
        assert kubectl(*args, check=False).stdout.strip() == "yes", (verb, resource)
    for verb in ("get", "create", "update"):  # leader election, in its own namespace only
        lease = ["leases.coordination.k8s.io", "--as", SA]
        assert kubectl("auth", "can-i", verb, *lease, "-n", "koord-queue").stdout.strip() == "yes"
        assert kubectl("auth", "can-i", verb, *lease, "-n", "default",
                       check=False).stdout.strip() == "no"
    for verb, resource in refused:
        assert (
            kubectl("auth", "can-i", verb, resource, "--as", SA, "-A", check=False).stdout.strip()
            == "no"
        ), (verb, resource)


def test_controller_runs_with_the_service_account_token(
    kubectl: Any, kubeconfig: Path, tmp_path: Path
) -> None:
    kubectl("apply", "-k", str(ROOT / "deploy"))
    sa_config = _sa_kubeconfig(kubectl, kubeconfig, tmp_path / "sa.kubeconfig")
    ns = kq.namespace(kubectl, kq.unique("rbac"))
    quota = kq.unique("rbac")
    pc = kq.unique("rbac-pc")
    kubectl.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc},
            "value": 3,
        }
    )
    with RunningController(sa_config, leader_elect=True):
        lease = kq.get(kubectl, "lease", "koord-queue", "koord-queue")
        assert lease is not None and lease["spec"]["holderIdentity"]  # RBAC covers the Lease
        kubectl.apply(kq.quota(quota, max_={"cpu": "1"}))
        kq.wait_for(
            lambda: kq.get(kubectl, "queues.scheduling.x-k8s.io", quota, "koord-queue"),
            what="queue",
        )
        kubectl.apply(kq.job("a", ns, quota, cpu="1", priority_class=pc))
        kubectl.apply(kq.job("b", ns, quota, cpu="1"))
        kq.wait_for(lambda: kq.phase(kubectl, ns, "a") == "Dequeued", what="a admitted")
        kq.wait_for(lambda: (kq.get(kubectl, "job", "a", ns) or {})["spec"].get("suspend") is False)
        unit = kq.get(kubectl, "queueunits.scheduling.x-k8s.io", "a", ns)
        assert unit is not None and unit["spec"]["priority"] == 3
        ev = kq.wait_for(lambda: kq.events_for(kubectl, ns, "b", "FailedScheduling"), what="event")
        assert ev[0]["message"] == f"limited quotaName:{quota}, limited resKey:cpu,"
        kubectl("delete", "job", "a", "-n", ns)
        kq.wait_for(
            lambda: kq.phase(kubectl, ns, "b") == "Dequeued", what="b admitted after a is gone"
        )
        kubectl("delete", "elasticquotas.scheduling.sigs.k8s.io", quota, "-n", "default")
        kq.wait_for(
            lambda: kq.get(kubectl, "queues.scheduling.x-k8s.io", quota, "koord-queue") is None
        )
    # the token really is the service account's (not admin): it cannot read secrets
    who = json.loads(
        base64.urlsafe_b64decode(
            yaml.safe_load(sa_config.read_text())["users"][0]["user"]["token"].split(".")[1] + "=="
        )
    )
    assert who["sub"] == SA
