"""The scheduler adapter on the real control plane: binds, gangs, Unschedulable conditions.

Nodes are plain Node objects (no kubelet): status.allocatable/capacity and a Ready condition
are written through the status subresource; bound pods stay Pending, which is all we need.
Every test uses its own namespace and labels its own nodes, so tests never see each other.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.scheduler.runner import SchedulerRunner
from koordqueue.kube.settings import ControllerSettings
from tests.e2e.kq import get, namespace, unique, wait_for

TEST_LABEL = "kq-test"


def make_node(kubectl: Any, name: str, cpu: str, memory: str = "8Gi",
              labels: dict[str, str] | None = None) -> None:
    kubectl.create({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels or {}}})
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    status = {"status": {"capacity": resources, "allocatable": resources, "conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}]}}
    kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p",
            json.dumps(status))
    # the TaintNodesByCondition admission taints new nodes not-ready; no kubelet clears it
    kubectl("taint", "node", name, "node.kubernetes.io/not-ready-", check=False)


def make_pod(kubectl: Any, ns: str, name: str, cpu: str = "1", memory: str = "1Gi", *,
             selector: dict[str, str] | None = None, group: str | None = None,
             annotations: dict[str, str] | None = None,
             gates: list[str] | None = None) -> None:
    notes = dict(annotations or {})
    if group:
        notes["scheduling.k8s.io/group-name"] = group
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if selector:
        spec["nodeSelector"] = selector
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    kubectl.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": ns, "annotations": notes},
                    "spec": spec})


def node_of(kubectl: Any, ns: str, name: str) -> str | None:
    pod = get(kubectl, "pod", name, ns)
    return ((pod or {}).get("spec") or {}).get("nodeName")


def scheduled_condition(kubectl: Any, ns: str, name: str) -> dict[str, Any] | None:
    pod = kubectl.json("get", "pod", name, "-n", ns)
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled":
            return dict(cond)
    return None


@pytest.fixture(scope="module")
def scheduler(kubeconfig: Path) -> Iterator[SchedulerRunner]:
    settings = ControllerSettings(kubeconfig=str(kubeconfig), schedule_period=0.2,
                                  metrics_port=0, log_format="console")
    with SchedulerRunner(settings) as runner:
        yield runner


@pytest.fixture
def scope(kubectl: Any) -> tuple[str, str]:
    """A fresh namespace and a node label value owned by one test."""
    ns = namespace(kubectl, unique("sched"))
    return ns, unique("pool")


def test_pod_binds_to_the_node_with_room(kubectl: Any, scheduler: SchedulerRunner,
                                          scope: tuple[str, str]) -> None:
    ns, pool = scope
    make_node(kubectl, f"{pool}-small", "1", labels={TEST_LABEL: pool})
    make_node(kubectl, f"{pool}-big", "4", labels={TEST_LABEL: pool})
    make_pod(kubectl, ns, "p", cpu="2", selector={TEST_LABEL: pool})
    assert wait_for(lambda: node_of(kubectl, ns, "p"), what="pod bound") == f"{pool}-big"


def test_node_selector_picks_the_labelled_node(kubectl: Any, scheduler: SchedulerRunner,
                                                scope: tuple[str, str]) -> None:
    ns, pool = scope
    make_node(kubectl, f"{pool}-a", "4", labels={TEST_LABEL: pool})
    make_node(kubectl, f"{pool}-b", "4", labels={TEST_LABEL: pool, "disk": "ssd"})
    make_pod(kubectl, ns, "p", selector={TEST_LABEL: pool, "disk": "ssd"})
    assert wait_for(lambda: node_of(kubectl, ns, "p"), what="pod bound") == f"{pool}-b"


def test_gang_binds_nothing_until_every_member_fits_then_all(
    kubectl: Any, scheduler: SchedulerRunner, scope: tuple[str, str]
) -> None:
    ns, pool = scope
    make_node(kubectl, f"{pool}-1", "3", labels={TEST_LABEL: pool})
    kubectl.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": "gang", "namespace": ns},
                    "spec": {"minMember": 2, "queue": "default"}})
    for name in ("m0", "m1"):
        make_pod(kubectl, ns, name, cpu="2", selector={TEST_LABEL: pool}, group="gang")
    time.sleep(2.0)  # ten sessions at 0.2 s
    assert [node_of(kubectl, ns, n) for n in ("m0", "m1")] == [None, None]
    make_node(kubectl, f"{pool}-2", "3", labels={TEST_LABEL: pool})
    nodes = wait_for(
        lambda: all(node_of(kubectl, ns, n) for n in ("m0", "m1"))
        and {node_of(kubectl, ns, n) for n in ("m0", "m1")},
        what="both gang members bound",
    )
    assert nodes == {f"{pool}-1", f"{pool}-2"}
    group = get(kubectl, "podgroups.scheduling.volcano.sh", "gang", ns) or {}
    wait_for(lambda: (get(kubectl, "podgroups.scheduling.volcano.sh", "gang", ns) or {})
             .get("status", {}).get("phase") == "Running", what="PodGroup Running",
             state=lambda: group)


def test_unplaceable_pod_gets_unschedulable_with_the_fit_errors(
    kubectl: Any, scheduler: SchedulerRunner, scope: tuple[str, str]
) -> None:
    ns, pool = scope
    make_node(kubectl, f"{pool}-x", "4", labels={TEST_LABEL: pool})
    make_pod(kubectl, ns, "p", selector={TEST_LABEL: "no-such-pool"})
    cond = wait_for(lambda: scheduled_condition(kubectl, ns, "p"), what="PodScheduled")
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    assert "node(s) didn't match node selector" in cond["message"]
    assert cond["message"].startswith("0/")
