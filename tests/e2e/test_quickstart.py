"""docs/quickstart.md as written, on the real API server (issue 33's done criterion).

The YAML is applied from docs/examples/quickstart/, the files the quickstart shows (a unit
test keeps them equal: tests/unit/cli/test_deploy_manifests.py). Step 1 (the image) needs a
container engine: tests/e2e/test_image.py. Step 2 is deploy/ as shipped (kustomize), its
webhook certificate from deploy/webhook-cert.sh (a CA made here, as cert-manager would), and
`koordqueue run` with the Deployment's arguments as a process with the ServiceAccount's token
(this plane has no kubelet to run the pod; the webhooks are repointed to it on loopback).
Every check is what kubectl shows.

Also what the quickstart says in passing: a second quota of the same name is refused at apply
(the ElasticQuota webhook), a labelled Job created running is stored suspended (the workload
webhook). Grows as issue 33's other parts land: warned applies and `kubectl describe
elasticquota` events (parts 4-5), the propagated label (part 7), the Insufficient reason
(part 9).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue import __version__
from koordqueue.domain.names import LAST_APPLIED_ANNOTATION
from tests.e2e import deployed, kq

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples" / "quickstart"
QUOTA = yaml.safe_load((EXAMPLES / "quota.yaml").read_text())
JOB = yaml.safe_load((EXAMPLES / "job.yaml").read_text())
NS = JOB["metadata"]["namespace"]
QU = "queueunits.scheduling.x-k8s.io"
EQ = "elasticquotas.scheduling.sigs.k8s.io"


@dataclass
class Installed:
    run: deployed.Process
    sa_kubeconfig: Path
    metrics_port: int


def _forget_team_a(kubectl: Any) -> None:
    """An empty cluster, as the quickstart starts from: no quota of that name anywhere (other
    tests made one), no Queue, Job or unit of the quickstart's names."""
    name = QUOTA["metadata"]["name"]
    for quota in kubectl.json("get", EQ, "-A")["items"]:
        if quota["metadata"]["name"] == name:
            kubectl("delete", EQ, name, "-n", quota["metadata"]["namespace"], "--wait=false")
    kubectl("delete", "queues.scheduling.x-k8s.io", name, "-n", "koord-queue",
            "--ignore-not-found")
    if kq.get(kubectl, "namespace", NS) is not None:
        for kind in ("job", QU):
            kubectl("delete", kind, JOB["metadata"]["name"], "-n", NS, "--ignore-not-found")


@pytest.fixture(scope="module")
def installed(kubectl: Any, kubeconfig: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Steps 1-2: `kubectl apply -f crds/`, `kubectl apply -k deploy/`, the certificate, and
    the controller running (`rollout status` is its health endpoint answering)."""
    tmp = tmp_path_factory.mktemp("quickstart")
    _forget_team_a(kubectl)
    kubectl("apply", "-f", str(ROOT / "crds"))
    served = deployed.apply_deploy(kubectl, tmp)
    sa_config = deployed.sa_kubeconfig(kubectl, kubeconfig, tmp / "sa.kubeconfig")
    health, metrics = deployed.free_port(), deployed.free_port()
    args = deployed.with_flags(
        deployed.deployment_args(),
        kubeconfig=sa_config, metrics_port=metrics, health_port=health,
        webhook_port=served.webhook_port, webhook_cert=served.certfile,
        webhook_key=served.keyfile, log_format="console",
    )
    try:
        with deployed.running(args, tmp / "run.log", health) as run:
            yield Installed(run, sa_config, metrics)
        assert run.forbidden_lines() == [], run.log[-3000:]
    finally:
        deployed.remove_webhooks(kubectl)
        _forget_team_a(kubectl)


def _koordqueue(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "koordqueue.cli.main", *args], capture_output=True, text=True,
        timeout=timeout, check=False, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def _table(kubectl: Any, *args: str) -> list[dict[str, str]]:
    """`kubectl get ...` as printed: one dict per row, keyed by the column headers."""
    lines = kubectl("get", *args).stdout.splitlines()
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=False)) for line in lines[1:]]


def test_the_quickstart_as_written(kubectl: Any, kubeconfig: Path, installed: Installed) -> None:
    # step 2: the controller holds its Lease, the webhooks carry the CA the script made
    lease = kq.wait_for(lambda: kq.get(kubectl, "lease", "koord-queue", "koord-queue"))
    assert lease["spec"]["holderIdentity"]
    assert lease["metadata"]["annotations"]["koord-queue/scheduler-name"] == "volcano"

    # step 3: a quota, and its Queue with the policy
    kubectl("create", "namespace", NS, check=False)  # kept by earlier runs: no kube-controller
    kubectl("apply", "-f", str(EXAMPLES / "quota.yaml"))
    name = QUOTA["metadata"]["name"]
    assert any(r["NAME"] == name for r in _table(kubectl, "elasticquotas", "-A"))
    kq.wait_for(lambda: kq.get(kubectl, "kq", name, "koord-queue"), what="the quota's Queue")
    (queue,) = _table(kubectl, "kq", name, "-n", "koord-queue")
    assert queue["POLICY"] == "Priority"
    every = kubectl("get", "koordqueue", "-A", "-o", "name").stdout.split()  # one table a kind
    assert f"elasticquota.scheduling.sigs.k8s.io/{name}" in every
    assert f"queue.scheduling.x-k8s.io/{name}" in every

    # step 3's note: names are cluster-wide, a second team-a elsewhere is refused at apply
    elsewhere = kq.namespace(kubectl, kq.unique("quickstart-other"))
    second = {**QUOTA, "metadata": {**QUOTA["metadata"], "namespace": elsewhere}}
    refused = kubectl.apply(second, check=False)
    assert refused.returncode != 0
    assert "denied the request" in refused.stderr, refused.stderr
    assert f"already exists in namespace {NS}" in refused.stderr, refused.stderr
    assert kq.get(kubectl, EQ, name, elsewhere) is None

    # step 4's note: with the webhooks served, a labelled Job created running is held
    running = {**JOB, "metadata": {**JOB["metadata"], "name": "train-running"},
               "spec": {**JOB["spec"], "suspend": False}}
    stored = kubectl.json("create", "-f", "-", input=json.dumps(running))
    assert stored["spec"]["suspend"] is True
    kubectl("delete", "job", "train-running", "-n", NS)

    # step 4: the Job, suspended, with the quota label
    kubectl("apply", "-f", str(EXAMPLES / "job.yaml"))

    # step 5: admitted and resumed, as `kubectl get queueunits -A` prints it
    train = JOB["metadata"]["name"]
    kq.wait_for(lambda: kq.phase(kubectl, NS, train) == "Dequeued", what="train admitted",
                state=lambda: kq.get(kubectl, QU, train, NS))
    (row,) = [r for r in _table(kubectl, "queueunits", "-A") if r["NAME"] == train]
    assert (row["NAMESPACE"], row["PHASE"], row["QUEUE"], row["QUOTA"], row["PRIORITY"]) == (
        NS, "Dequeued", name, name, "0")
    kq.wait_for(lambda: kubectl("get", "job", "-n", NS, train, "-o",
                                "jsonpath={.spec.suspend}").stdout == "false", what="resumed")
    events = kq.wait_for(lambda: kq.events_for(kubectl, NS, train, "Admitted"))
    assert events[0]["message"] == f"admitted into quota {name} (checked {name})"
    unit = kq.get(kubectl, QU, train, NS)
    assert unit is not None
    job = kq.get(kubectl, "job", train, NS)
    assert job is not None and LAST_APPLIED_ANNOTATION in job["metadata"]["annotations"]
    assert LAST_APPLIED_ANNOTATION not in (unit["metadata"].get("annotations") or {})

    # step 6: explain, with the operator's kubeconfig
    explained = _koordqueue("explain", "-n", NS, train, f"--kubeconfig={kubeconfig}")
    assert explained.returncode == 0, explained.stderr
    assert "Admitted" in explained.stdout


def test_a_second_scheduler_beside_run_refuses_with_one_line(installed: Installed) -> None:
    """Issue 33 part 8: `koordqueue schedule` beside the Deployment's `run` (which embeds a
    scheduler named volcano and holds the Lease koord-queue/koord-queue)."""
    clash = _koordqueue("schedule", f"--kubeconfig={installed.sa_kubeconfig}",
                        "--metrics-port=0", "--health-port=0")
    assert clash.returncode == 1, clash.stderr
    (line,) = clash.stderr.strip().splitlines()
    assert line.startswith(
        "koordqueue schedule: a scheduler named 'volcano' is already running: Lease "
        "koord-queue/koord-queue is held by ")
    assert line.endswith("give this one another --scheduler-name")
    port = _koordqueue("schedule", f"--kubeconfig={installed.sa_kubeconfig}",
                       f"--metrics-port={installed.metrics_port}", "--health-port=0")
    assert port.returncode == 1, port.stderr
    (line,) = port.stderr.strip().splitlines()
    assert line.startswith(
        f"koordqueue schedule: port {installed.metrics_port} (--metrics-port) is already in use")


def test_version_and_a_missing_kubeconfig_say_so() -> None:
    version = _koordqueue("--version")
    assert (version.returncode, version.stdout.strip()) == (0, f"koordqueue {__version__}")
    missing = _koordqueue("run", "--kubeconfig=/nonexistent/kubeconfig")
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        "koordqueue run: error: kubeconfig /nonexistent/kubeconfig: no such file")
