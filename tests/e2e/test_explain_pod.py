"""`koordqueue explain pod/NAME` against the real API server (issue 7: "why is my pod pending").

No scheduler runs here: explain reads the cluster itself and runs a dry session, so every
situation is made with plain objects. Nodes are Node objects whose allocatable and Ready
condition are written through the status subresource (no kubelet). Other tests' nodes share
the cluster, so each test labels its own nodes and asserts on them (and on counts of all).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import kq

KOORDQUEUE = Path(sys.executable).parent / "koordqueue"
LABEL = "kq-explain-pod"
OUR_GATE = "scheduling.volcano.sh/queue-allocation-gate"
VOLCANO_QUEUES = "queues.scheduling.volcano.sh"


def make_node(kubectl: Any, name: str, cpu: str, labels: dict[str, str]) -> None:
    kubectl.create({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels}})
    resources = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    status = {"status": {"capacity": resources, "allocatable": resources, "conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}]}}
    kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p",
            json.dumps(status))
    # the TaintNodesByCondition admission taints new nodes not-ready; no kubelet clears it
    kubectl("taint", "node", name, "node.kubernetes.io/not-ready-", check=False)


def make_pod(kubectl: Any, ns: str, name: str, cpu: str = "1", *,
             scheduler: str = "volcano", selector: dict[str, str] | None = None,
             gates: list[str] | None = None, annotations: dict[str, str] | None = None,
             node_name: str | None = None) -> None:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }
    if selector:
        spec["nodeSelector"] = selector
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node_name:
        spec["nodeName"] = node_name
    kubectl.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": ns,
                                 "annotations": annotations or {}},
                    "spec": spec})


def explain(
    kubeconfig: Path, ns: str, target: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KOORDQUEUE), "explain", "--kubeconfig", str(kubeconfig), "-n", ns, target, *extra],
        capture_output=True, text=True, timeout=60, check=False,
    )


def explain_json(kubeconfig: Path, ns: str, target: str, *extra: str) -> dict[str, Any]:
    proc = explain(kubeconfig, ns, target, *extra, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def by_node(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["node"]: n for n in doc["nodes"]}


@pytest.fixture
def scope(kubectl: Any) -> tuple[str, str]:
    """A fresh namespace, a node label value owned by this test, and the default queue."""
    if kq.get(kubectl, VOLCANO_QUEUES, "default") is None:
        kubectl.apply({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                       "metadata": {"name": "default"},
                       "spec": {"weight": 1, "reclaimable": True}}, check=False)
        assert kq.get(kubectl, VOLCANO_QUEUES, "default") is not None
    return kq.namespace(kubectl, kq.unique("xpod")), kq.unique("pool")


def test_pod_too_big_for_every_node(kubectl: Any, kubeconfig: Path,
                                    scope: tuple[str, str]) -> None:
    ns, pool = scope
    make_node(kubectl, f"{pool}-a", "2", {LABEL: pool})
    make_node(kubectl, f"{pool}-b", "4", {LABEL: pool})
    make_pod(kubectl, ns, "huge", cpu="1000")

    doc = explain_json(kubeconfig, ns, "pod/huge")
    assert doc["verdict"] == "Unschedulable"
    nodes = by_node(doc)
    assert nodes[f"{pool}-a"]["reasons"] == ["Insufficient cpu"]
    assert nodes[f"{pool}-b"]["reasons"] == ["Insufficient cpu"]
    assert all(n["reasons"] == ["Insufficient cpu"] for n in doc["nodes"])
    total = len(doc["nodes"])
    assert doc["message"] == f"0/{total} nodes are available: {total} Insufficient cpu."
    assert doc["queue"] == "default" and doc["queue_exists"] is True

    table = explain(kubeconfig, ns, "pod/huge")  # the default table output
    assert table.returncode == 0, table.stderr
    assert f"0/{total} nodes are available: {total} Insufficient cpu." in table.stdout
    row = next(ln for ln in table.stdout.splitlines() if ln.startswith(f"{pool}-a "))
    assert row.split()[1] == "NO" and "Insufficient cpu" in row


def test_node_selector_mismatch(kubectl: Any, kubeconfig: Path,
                                scope: tuple[str, str]) -> None:
    ns, pool = scope
    make_node(kubectl, f"{pool}-plain", "8", {LABEL: pool})
    make_node(kubectl, f"{pool}-ssd", "1", {LABEL: pool, "disk": "ssd"})
    make_pod(kubectl, ns, "picky", cpu="2", selector={LABEL: pool, "disk": "ssd"})

    doc = explain_json(kubeconfig, ns, "pod/picky")
    assert doc["verdict"] == "Unschedulable"
    nodes = by_node(doc)
    assert nodes[f"{pool}-plain"]["reasons"] == ["node(s) didn't match node selector"]
    assert nodes[f"{pool}-ssd"]["reasons"] == ["Insufficient cpu"]
    total = len(doc["nodes"])  # every other node lacks the label: selector mismatch
    counts = {"Insufficient cpu": 1, "node(s) didn't match node selector": total - 1}
    # kube-scheduler's order: the "<count> <reason>" strings sorted as strings (issue 33.9)
    histogram = ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))
    assert doc["message"] == f"0/{total} nodes are available: {histogram}."


def test_gated_pod(kubectl: Any, kubeconfig: Path, scope: tuple[str, str]) -> None:
    ns, pool = scope
    make_node(kubectl, f"{pool}-a", "4", {LABEL: pool})
    make_pod(kubectl, ns, "held", selector={LABEL: pool}, gates=["example.com/hold"])
    make_pod(kubectl, ns, "no-opt-in", selector={LABEL: pool}, gates=[OUR_GATE])
    make_pod(kubectl, ns, "opted-in", selector={LABEL: pool}, gates=[OUR_GATE],
             annotations={OUR_GATE: "true"})

    held = explain_json(kubeconfig, ns, "pod/held")
    assert held["verdict"] == "ForeignSchedulingGates"
    assert held["foreign_gates"] == ["example.com/hold"] and held["our_gate"] is False

    no_opt = explain_json(kubeconfig, ns, "pod/no-opt-in")
    assert no_opt["verdict"] == "GateWithoutOptIn"
    assert no_opt["our_gate"] is True and no_opt["opted_in"] is False

    off = explain_json(kubeconfig, ns, "--pod", "opted-in")  # the --pod spelling
    assert off["verdict"] == "Gated" and off["opted_in"] is True
    assert by_node(off)[f"{pool}-a"]["fits"] is True  # where it goes once un-gated
    on = explain_json(kubeconfig, ns, "--pod", "opted-in",
                      "--feature-gates", "SchedulingGatesQueueAdmission=true")
    assert on["verdict"] == "GateWouldBeRemoved"

    pod = kq.get(kubectl, "pod", "opted-in", ns)
    assert pod is not None and pod["spec"]["schedulingGates"] == [{"name": OUR_GATE}]


def test_bound_pod(kubectl: Any, kubeconfig: Path, scope: tuple[str, str]) -> None:
    ns, pool = scope
    make_node(kubectl, f"{pool}-a", "4", {LABEL: pool})
    make_pod(kubectl, ns, "placed", node_name=f"{pool}-a")

    doc = explain_json(kubeconfig, ns, "pod/placed")
    assert doc["verdict"] == "Bound"
    assert doc["node_name"] == f"{pool}-a"
    table = explain(kubeconfig, ns, "pod/placed")
    assert table.returncode == 0
    assert f"already bound to node {pool}-a" in table.stdout


def test_fitting_pod_is_only_dry_run_and_other_cases(
    kubectl: Any, kubeconfig: Path, scope: tuple[str, str]
) -> None:
    ns, pool = scope
    make_node(kubectl, f"{pool}-a", "4", {LABEL: pool})
    # a scheduler name no running scheduler uses: nothing but explain looks at this pod
    make_pod(kubectl, ns, "fits", scheduler="kq-explain-e2e", selector={LABEL: pool})
    before = kq.get(kubectl, "pod", "fits", ns)
    assert before is not None

    doc = explain_json(kubeconfig, ns, "pod/fits", "--scheduler-name", "kq-explain-e2e")
    assert doc["verdict"] == "WouldBind" and doc["dry_run_node"] == f"{pool}-a"
    after = kq.get(kubectl, "pod", "fits", ns)
    assert after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert not after["spec"].get("nodeName")

    other = explain_json(kubeconfig, ns, "pod/fits")  # koordqueue runs as "volcano"
    assert other["verdict"] == "OtherScheduler"

    missing = explain(kubeconfig, ns, "pod/ghost")
    assert missing.returncode == 1
    assert f"pod {ns}/ghost not found" in missing.stderr
