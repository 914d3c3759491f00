"""docs/quickstart.md as written, on the real API server (issue 33's done criterion).

The YAML is applied from docs/examples/quickstart/, the files the quickstart shows (a unit
test keeps them equal: tests/unit/cli/test_deploy_manifests.py). Step 1 (the image) needs a
container engine: tests/e2e/test_image.py. Step 2 is deploy/ as shipped (kustomize), its
webhook certificate from deploy/webhook-cert.sh (a CA made here, as cert-manager would), and
`koordqueue run` with the Deployment's arguments as a process with the ServiceAccount's token
(this plane has no kubelet to run the pod; the webhooks are repointed to it on loopback).
Every check is what kubectl, or koordqueue explain with the operator's kubeconfig, shows.

Each point of issue 33, in the quickstart's order: the warned apply (a child quota before its
parent), the duplicate name denied, the labelled Job held at creation, the label put on a Job
after it was made reaching its unit, the denied edit that leaves the quota in force and undoes
no admission, the same edit with the webhook unreachable refused by the controller (Valid=False
and its Warning event in `kubectl describe elasticquota`, the definition kept in status),
kube-scheduler's `0/N nodes are available: N Insufficient cpu.` for a pod larger than every
node (its condition and event, its PodGroup's condition, explain), and the scheduler clash.
This plane has no job controller: a Job's pods are never made, so step 8's pod is applied as
the quickstart shows it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue import __version__
from koordqueue.domain.names import LAST_APPLIED_ANNOTATION, QUOTA_NAME_LABEL, QUOTA_PARENT_LABEL
from tests.e2e import deployed, kq
from tests.e2e.test_scheduler_binding import make_node, scheduled_condition

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples" / "quickstart"
QUOTA = yaml.safe_load((EXAMPLES / "quota.yaml").read_text())
JOB = yaml.safe_load((EXAMPLES / "job.yaml").read_text())
PARENT = yaml.safe_load((EXAMPLES / "research.yaml").read_text())
CHILD = yaml.safe_load((EXAMPLES / "team-b.yaml").read_text())
TOO_BIG = list(yaml.safe_load_all((EXAMPLES / "too-big.yaml").read_text()))
NS = JOB["metadata"]["namespace"]
QU = "queueunits.scheduling.x-k8s.io"
EQ = "elasticquotas.scheduling.sigs.k8s.io"
PG = "podgroups.scheduling.volcano.sh"
LATER = "train-later"
"""The quickstart's Job made without the quota label (step 4's "Forgot the label?")."""
NODE = "quickstart-node"
"""A node for step 8 (the plane has none of its own; other tests' nodes may be there too)."""
INSUFFICIENT = re.compile(r"^0/(\d+) nodes are available: \1 Insufficient cpu\.$")
EDIT = '{"spec":{"max":{"cpu":"1"}}}'
"""Step 7's edit: a max below the quota's min."""
EDIT_PROBLEM = "spec.min[cpu]: min 2 is above max 1"


@dataclass
class Installed:
    run: deployed.Process
    sa_kubeconfig: Path
    metrics_port: int


def _forget_the_quickstart(kubectl: Any) -> None:
    """An empty cluster, as the quickstart starts from: no quota of its names anywhere (other
    tests made some; the child before its parent), no Queue, no Job or unit naming them, no
    Job, unit, pod or node of its names."""
    names = [CHILD["metadata"]["name"], QUOTA["metadata"]["name"], PARENT["metadata"]["name"]]
    quotas = kubectl.json("get", EQ, "-A")["items"]
    for name in names:
        for quota in quotas:
            if quota["metadata"]["name"] == name:
                kubectl("delete", EQ, name, "-n", quota["metadata"]["namespace"],
                        "--wait=false")
        kubectl("delete", "queues.scheduling.x-k8s.io", name, "-n", "koord-queue",
                "--ignore-not-found")
    # names are cluster-wide: other tests' units and Jobs naming these quotas, in their own
    # namespaces, would be admitted into the quickstart's quotas and use their room
    chosen = f"{QUOTA_NAME_LABEL} in ({','.join(names)})"
    for kind in ("jobs", QU):
        kubectl("delete", kind, "-A", "-l", chosen, "--ignore-not-found", "--wait=false")
    if kq.get(kubectl, "namespace", NS) is not None:
        kinds = {"Pod": "pod", "PodGroup": PG}
        for kind, name in [("job", JOB["metadata"]["name"]), (QU, JOB["metadata"]["name"]),
                           ("job", LATER), (QU, LATER), ("job", "train-running"),
                           *((kinds[doc["kind"]], doc["metadata"]["name"]) for doc in TOO_BIG)]:
            kubectl("delete", kind, name, "-n", NS, "--ignore-not-found", "--wait=false")
    kubectl("delete", "node", NODE, "--ignore-not-found", "--wait=false")


@pytest.fixture(scope="module")
def installed(kubectl: Any, kubeconfig: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Steps 1-2: `kubectl apply -f crds/`, `kubectl apply -k deploy/`, the certificate, and
    the controller running (`rollout status` is its health endpoint answering)."""
    tmp = tmp_path_factory.mktemp("quickstart")
    kubectl("apply", "-f", str(ROOT / "crds"))
    _forget_the_quickstart(kubectl)
    served = deployed.apply_deploy(kubectl, tmp)
    sa_config = deployed.sa_kubeconfig(kubectl, kubeconfig, tmp / "sa.kubeconfig")
    health, metrics = deployed.free_port(), deployed.free_port()
    args = deployed.with_flags(
        deployed.deployment_args(),
        kubeconfig=sa_config, metrics_port=metrics, health_port=health,
        webhook_port=served.webhook_port, webhook_cert=served.certfile,
        webhook_key=served.keyfile, visibility_port=deployed.free_port(),
        visibility_cert=served.certfile, visibility_key=served.keyfile, log_format="console",
    )
    try:
        with deployed.running(args, tmp / "run.log", health) as run:
            yield Installed(run, sa_config, metrics)
        assert run.forbidden_lines() == [], run.log[-3000:]
    finally:
        deployed.remove_webhooks(kubectl)
        deployed.remove_apiservices(kubectl)
        _forget_the_quickstart(kubectl)


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


def _condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def _admitted(kubectl: Any, *names: str) -> bool:
    """Every unit named is Dequeued, and its Job resumed (nothing admitted was undone)."""
    return all(
        kq.phase(kubectl, NS, name) == "Dequeued"
        and kubectl("get", "job", "-n", NS, name, "-o", "jsonpath={.spec.suspend}").stdout
        == "false"
        for name in names
    )


def _webhook_unreachable(kubectl: Any) -> None:
    """The ElasticQuota webhook down as shipped: failurePolicy Ignore, nothing answering."""
    ops = [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"},
           {"op": "replace", "path": "/webhooks/0/clientConfig/url",
            "value": f"https://127.0.0.1:{deployed.free_port()}/validate-elasticquotas"}]
    kubectl("patch", "validatingwebhookconfiguration", "koordqueue-elasticquotas",
            "--type=json", "-p", json.dumps(ops))


def test_the_quickstart_as_written(kubectl: Any, kubeconfig: Path, installed: Installed) -> None:
    # step 2: the controller holds its Lease, the webhooks carry the CA the script made
    lease = kq.wait_for(lambda: kq.get(kubectl, "lease", "koord-queue", "koord-queue"))
    assert lease["spec"]["holderIdentity"]
    assert lease["metadata"]["annotations"]["koord-queue/scheduler-name"] == "volcano"
    _step_3_quotas(kubectl)
    train = _steps_4_and_5_jobs(kubectl, kubeconfig)

    # step 6: explain, with the operator's kubeconfig
    explained = _koordqueue("explain", "-n", NS, train, f"--kubeconfig={kubeconfig}")
    assert explained.returncode == 0, explained.stderr
    assert "Admitted" in explained.stdout

    _step_7_mistakes(kubectl, [train, LATER])
    _step_8_a_pod_larger_than_every_node(kubectl, kubeconfig)


def _step_3_quotas(kubectl: Any) -> None:
    """A quota and its Queue; a second of its name refused; a child before its parent warned."""
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

    # names are cluster-wide: a second team-a elsewhere is refused at apply
    elsewhere = kq.namespace(kubectl, kq.unique("quickstart-other"))
    second = {**QUOTA, "metadata": {**QUOTA["metadata"], "namespace": elsewhere}}
    refused = kubectl.apply(second, check=False)
    assert refused.returncode != 0
    assert "denied the request" in refused.stderr, refused.stderr
    assert f"already exists in namespace {NS}" in refused.stderr, refused.stderr
    assert kq.get(kubectl, EQ, name, elsewhere) is None

    # a hierarchy applied child first: kubectl prints the webhook's warning, nothing is refused
    child, parent = CHILD["metadata"]["name"], PARENT["metadata"]["name"]
    child_ns = CHILD["metadata"]["namespace"]
    kubectl("create", "namespace", child_ns, check=False)
    warned = kubectl("apply", "-f", str(EXAMPLES / "team-b.yaml"))
    assert (f"Warning: metadata.labels[{QUOTA_PARENT_LABEL}]: parent quota {parent} does not "
            "exist (yet): units of this quota are not admitted until it does") in warned.stderr, (
        warned.stderr)
    assert warned.stdout.strip() == f"elasticquota.scheduling.sigs.k8s.io/{child} created"
    clean = kubectl("apply", "-f", str(EXAMPLES / "research.yaml"))
    assert "Warning" not in clean.stderr, clean.stderr
    kq.wait_for(lambda: (_condition(kq.get(kubectl, EQ, child, child_ns), "Active") or {})
                .get("status") == "True", what=f"{child} active once {parent} exists")


def _steps_4_and_5_jobs(kubectl: Any, kubeconfig: Path) -> str:
    """The Job held, admitted and resumed; one made without the label admitted once labelled."""
    # step 4's note: with the webhooks served, a labelled Job created running is held
    running = {**JOB, "metadata": {**JOB["metadata"], "name": "train-running"},
               "spec": {**JOB["spec"], "suspend": False}}
    stored = kubectl.json("create", "-f", "-", input=json.dumps(running))
    assert stored["spec"]["suspend"] is True
    kubectl("delete", "job", "train-running", "-n", NS)

    # step 4: the Job, suspended, with the quota label
    kubectl("apply", "-f", str(EXAMPLES / "job.yaml"))

    # step 5: admitted and resumed, as `kubectl get queueunits -A` prints it
    name, train = QUOTA["metadata"]["name"], JOB["metadata"]["name"]
    kq.wait_for(lambda: kq.phase(kubectl, NS, train) == "Dequeued", what="train admitted",
                state=lambda: kq.get(kubectl, QU, train, NS))
    # other tests in this control plane make units named train in their own namespaces
    (row,) = [r for r in _table(kubectl, "queueunits", "-A")
              if (r["NAMESPACE"], r["NAME"]) == (NS, train)]
    assert (row["PHASE"], row["QUEUE"], row["QUOTA"], row["PRIORITY"]) == (
        "Dequeued", name, name, "0")
    kq.wait_for(lambda: _admitted(kubectl, train), what="resumed")
    events = kq.wait_for(lambda: kq.events_for(kubectl, NS, train, "Admitted"))
    assert events[0]["message"] == f"admitted into quota {name} (checked {name})"
    unit = kq.get(kubectl, QU, train, NS)
    assert unit is not None
    job = kq.get(kubectl, "job", train, NS)
    assert job is not None and LAST_APPLIED_ANNOTATION in job["metadata"]["annotations"]
    assert LAST_APPLIED_ANNOTATION not in (unit["metadata"].get("annotations") or {})

    # step 4's "Forgot the label?": its unit waits without a queue until the Job is labelled
    unlabelled = {k: v for k, v in JOB["metadata"].items() if k != "labels"}
    kubectl.create({**JOB, "metadata": {**unlabelled, "name": LATER}})
    kq.wait_for(lambda: kq.phase(kubectl, NS, LATER) == "Enqueued", what="its unit, waiting")
    waiting = _koordqueue("explain", "-n", NS, LATER, f"--kubeconfig={kubeconfig}")
    assert "NoQuotaLabel" in waiting.stdout, waiting.stdout + waiting.stderr
    kubectl("label", "job", "-n", NS, LATER, f"{QUOTA_NAME_LABEL}={name}")
    kq.wait_for(lambda: _admitted(kubectl, LATER), what="admitted once labelled",
                state=lambda: kq.get(kubectl, QU, LATER, NS))
    labelled = kq.get(kubectl, QU, LATER, NS) or {}
    assert labelled["metadata"]["labels"][QUOTA_NAME_LABEL] == name
    return str(train)


def _step_7_mistakes(kubectl: Any, admitted: list[str]) -> None:
    """A bad edit denied at apply, then stored while the webhook is unreachable and refused by
    the controller: either way the last valid quota stays in force and nothing admitted is
    undone, and `kubectl describe elasticquota` says why."""
    name = QUOTA["metadata"]["name"]
    denied = kubectl("-n", NS, "patch", "elasticquota", name, "--type=merge", "-p", EDIT,
                     check=False)
    assert denied.returncode != 0
    assert ('admission webhook "elasticquotas.koord-queue.io" denied the request: '
            f'ElasticQuota "{name}" is invalid') in denied.stderr, denied.stderr
    assert EDIT_PROBLEM in denied.stderr, denied.stderr
    assert kubectl("get", EQ, name, "-n", NS, "-o", "jsonpath={.spec.max.cpu}").stdout == "4"
    assert _admitted(kubectl, *admitted)

    _webhook_unreachable(kubectl)
    kq.wait_for(lambda: kubectl("-n", NS, "patch", "elasticquota", name, "--type=merge", "-p",
                                EDIT, check=False).returncode == 0,
                what="the edit stored while the webhook is unreachable")
    valid = kq.wait_for(
        lambda: (c := _condition(kq.get(kubectl, EQ, name, NS), "Valid"))
        and c["status"] == "False" and c, what="Valid=False")
    assert valid["reason"] == "InvalidQuota"
    assert EDIT_PROBLEM in valid["message"], valid
    assert "the last valid definition stays in force" in valid["message"], valid
    described = kq.wait_for(
        lambda: (out := kubectl("describe", "elasticquota", name, "-n", NS).stdout)
        and "InvalidQuota" in out.split("Events:")[-1] and out, what="the event in describe")
    events = described.split("Events:")[-1]
    assert "Warning" in events and EDIT_PROBLEM in events, described
    conditions = described.split("Conditions:")[-1].split("Events:")[0]
    assert "Valid" in conditions and "InvalidQuota" in conditions, described
    quota = kq.get(kubectl, EQ, name, NS) or {}
    assert quota["spec"]["max"]["cpu"] == "1"  # stored, but not in force:
    assert quota["status"]["lastValid"]["spec"]["max"]["cpu"] == "4", quota["status"]
    assert _admitted(kubectl, *admitted)

    kubectl("apply", "-f", str(EXAMPLES / "quota.yaml"))  # the valid definition again
    kq.wait_for(lambda: (_condition(kq.get(kubectl, EQ, name, NS), "Valid") or {})
                .get("status") == "True", what="Valid again")
    assert "lastValid" not in (kq.get(kubectl, EQ, name, NS) or {})["status"]


def _step_8_a_pod_larger_than_every_node(kubectl: Any, kubeconfig: Path) -> None:
    """kube-scheduler's words wherever the operator looks: the pod's condition and event
    (`kubectl describe pod`), its PodGroup's condition, and explain."""
    if kq.get(kubectl, "node", NODE) is None:
        make_node(kubectl, NODE, "4")
    kubectl("apply", "-f", str(EXAMPLES / "too-big.yaml"))
    group, pod = (doc["metadata"]["name"] for doc in TOO_BIG)
    condition = kq.wait_for(lambda: scheduled_condition(kubectl, NS, pod), what="PodScheduled")
    message = condition["message"]
    assert INSUFFICIENT.match(message), message
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    events = kq.wait_for(lambda: [e for e in kq.events_for(kubectl, NS, pod, "FailedScheduling")
                                  if e["message"] == message], what="FailedScheduling")
    assert [e["type"] for e in events] == ["Warning"], events
    described = kubectl("describe", "pod", pod, "-n", NS).stdout
    assert message in described.split("Events:")[-1], described
    unschedulable = kq.wait_for(lambda: _condition(kq.get(kubectl, PG, group, NS),
                                                   "Unschedulable"), what="PodGroup condition")
    assert unschedulable["message"].endswith("; " + message), unschedulable
    explained = _koordqueue("explain", "-n", NS, f"pod/{pod}", f"--kubeconfig={kubeconfig}")
    assert explained.returncode == 0, explained.stderr
    fields = dict(line.split(":", 1) for line in explained.stdout.splitlines() if ":" in line)
    assert fields["Reason"].strip() == "Unschedulable", explained.stdout
    assert fields["Message"].strip() == message, explained.stdout


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
