"""The controller's namespace (issue 33 part 3), as an operator meets it.

Before: `koordqueue run` with no `koord-queue` namespace said "ready", then every unit showed
QueueNotFound and nothing said why. Now the namespace is created at start-up when the
controller may, start-up fails with one line naming it when it may not (the shipped RBAC
does not grant creating namespaces: deploy/ creates it), and explain names it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from koordqueue.domain.names import QUOTA_NAME_LABEL
from tests.e2e import deployed, kq
from tests.e2e.deployed import ROOT
from tests.e2e.deployed import sa_kubeconfig as _sa_kubeconfig
from tests.e2e.running_controller import RunningController

KOORDQUEUE = Path(sys.executable).parent / "koordqueue"


def test_a_missing_namespace_is_created_and_the_queues_land_there(
    kubectl: Any, kubeconfig: Path
) -> None:
    queues_ns = kq.unique("kq-home")
    assert kq.get(kubectl, "namespace", queues_ns) is None
    with RunningController(kubeconfig, namespace=queues_ns):
        created = kq.get(kubectl, "namespace", queues_ns)
        assert created is not None
        assert created["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "koordqueue"
        quota = kq.unique("home")
        kubectl.apply(kq.quota(quota))
        kq.wait_for(lambda: kq.get(kubectl, "kq", quota, queues_ns), what="queue in it")
    kubectl("delete", "namespace", queues_ns, "--wait=false")
    kubectl("delete", "elasticquota", quota, "-n", "default")


def test_without_the_right_to_create_it_start_up_fails_naming_it(
    kubectl: Any, kubeconfig: Path, tmp_path: Path
) -> None:
    kubectl("apply", "-k", str(ROOT / "deploy"))  # the ServiceAccount and its shipped RBAC
    deployed.remove_apiservices(kubectl)  # (its Service has no endpoint here)
    sa = _sa_kubeconfig(kubectl, kubeconfig, tmp_path / "sa.kubeconfig")
    missing = kq.unique("nowhere")
    proc = subprocess.run(
        [
            str(KOORDQUEUE),
            "run",
            "--kubeconfig",
            str(sa),
            "--namespace",
            missing,
            "--metrics-port",
            "0",
            "--health-port",
            "0",
            "--log-format",
            "console",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"koordqueue run: namespace {missing} does not exist and could not be created "
        "(403 Forbidden)"
    ), proc.stderr
    assert f"kubectl create namespace {missing}" in last
    assert "ready" not in proc.stderr


def test_explain_names_the_missing_namespace(kubectl: Any, kubeconfig: Path) -> None:
    ns = kq.namespace(kubectl, kq.unique("nsx"))
    quota = kq.unique("nsq")
    kubectl.apply(kq.quota(quota, ns))
    kubectl.apply(
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "QueueUnit",
            "metadata": {"name": "u", "namespace": ns, "labels": {QUOTA_NAME_LABEL: quota}},
            "spec": {"resource": {"cpu": "1"}},
        }
    )
    missing = kq.unique("gone")
    proc = subprocess.run(
        [
            str(KOORDQUEUE),
            "explain",
            "--kubeconfig",
            str(kubeconfig),
            "-n",
            ns,
            "u",
            "--queue-namespace",
            missing,
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["reason"] == "QueueNotFound"
    assert any(
        note.startswith(
            f"namespace {missing}, where the controller keeps the Queues, does not exist"
        )
        for note in doc["notes"]
    ), doc
