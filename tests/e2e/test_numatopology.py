"""numa-aware on Volcano's own Numatopology CRD (issue 34 part 4), as an operator sees it:
the CRD (crds/, byte for byte from Volcano's module zip) installed on the control plane,
`kubectl apply` of Numatopology objects as Volcano's resource exporter writes them
(`kubectl get numatopo` lists them), Guaranteed pods asking `volcano.sh/numa-topology-policy:
single-numa-node` bound only where one NUMA node holds their cpus, and the pod no NUMA node
can take left pending with a FailedScheduling event naming numa-aware.

Before part 4 the conf naming numa-aware did not load; with numa-aware left out of it the
first pod is bound to n1 by name order (its 6 free cpus are split 3 + 3 over its NUMA nodes)
and the third is bound too (n1 has the cpus in all).

The module's scheduler runs the conf below on the shared control plane; its nodes are
tainted and its pods tolerate the taint, so no other test's pod lands on them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.scheduler.runner import SchedulerRunner
from koordqueue.kube.scheduler.store import CachedKind
from koordqueue.scheduler.api import numa_names as nn
from tests.e2e.conf_scheduler import scheduler_with_conf
from tests.e2e.kq import events_for, namespace, unique, wait_for
from tests.e2e.test_scheduler_binding import node_of

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: numa-aware
    arguments:
      weight: 10
"""
TAINT = "kq-e2e/numa"


@pytest.fixture(scope="module")
def scheduler(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[SchedulerRunner]:  # fmt: skip
    with scheduler_with_conf(kubeconfig, tmp_path_factory.mktemp("conf"), CONF) as runner:
        yield runner


def node(kubectl: Any, name: str, pool: str) -> None:
    kubectl.create({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {"kq-test": pool}},
                    "spec": {"taints": [{"key": TAINT, "effect": "NoSchedule"}]}})
    resources = {"cpu": "16", "memory": "16Gi", "pods": "110"}
    status = {"status": {"capacity": resources, "allocatable": resources, "conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}]}}
    kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p",
            json.dumps(status))
    kubectl("taint", "node", name, "node.kubernetes.io/not-ready-", check=False)


def numatopology(kubectl: Any, name: str, free: str) -> None:
    """What the exporter writes for a 2-NUMA-node, 8-cpu node under single-numa-node."""
    kubectl.apply({
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {nn.CPU_MANAGER_POLICY: "static",
                         nn.TOPOLOGY_MANAGER_POLICY: "single-numa-node"},
            "resReserved": {"cpu": "0", "memory": "0"},
            "numares": {"cpu": {"allocatable": free, "capacity": 8}},
            "cpuDetail": {str(c): {"numa": c // 4, "socket": c // 4, "core": c // 2}
                          for c in range(8)},
        },
    })


def pod(kubectl: Any, ns: str, name: str, pool: str) -> None:
    """A Guaranteed 4-cpu pod asking for single-numa-node."""
    amounts = {"cpu": "4", "memory": "1Gi"}
    kubectl.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": ns,
                                 "annotations": {nn.NUMA_POLICY_KEY: "single-numa-node"}},
                    "spec": {"schedulerName": "volcano", "nodeSelector": {"kq-test": pool},
                             "tolerations": [{"key": TAINT, "operator": "Exists"}],
                             "containers": [{"name": "main", "image": "busybox", "resources": {
                                 "requests": amounts, "limits": amounts}}]}})


def test_guaranteed_pods_land_where_one_numa_node_holds_them(
    kubectl: Any, scheduler: SchedulerRunner,
) -> None:
    crd = kubectl.json("get", "crd", "numatopologies.nodeinfo.volcano.sh")
    assert crd["spec"]["names"]["shortNames"] == ["numatopo"]
    ns, pool = namespace(kubectl, unique("numa")), unique("npool")
    n1, n2 = f"{pool}-n1", f"{pool}-n2"
    for name in (n1, n2):
        node(kubectl, name, pool)
    numatopology(kubectl, n1, "1-3,5-7")  # 6 free: 3 on each NUMA node
    numatopology(kubectl, n2, "0-7")
    listed = kubectl("get", "numatopo", "--no-headers", "-o", "name").stdout
    assert f"numatopology.nodeinfo.volcano.sh/{n1}" in listed
    assert scheduler.scheduler is not None
    cache = scheduler.scheduler.cache
    wait_for(lambda: cache.count(CachedKind.NUMATOPOLOGY) >= 2, timeout=20,
             what="the scheduler's cache to hold the Numatopologies")

    pod(kubectl, ns, "a", pool)
    assert wait_for(lambda: node_of(kubectl, ns, "a"), timeout=30, what="a bound") == n2
    pod(kubectl, ns, "b", pool)  # NUMA 1 of n2; the scheduler keeps NUMA 0 taken
    assert wait_for(lambda: node_of(kubectl, ns, "b"), timeout=30, what="b bound") == n2

    pod(kubectl, ns, "c", pool)  # n1 and n2 have the cpus, no NUMA node has 4 free
    events = wait_for(lambda: events_for(kubectl, ns, "c", "FailedScheduling"),
                      timeout=30, what="c's FailedScheduling event")
    message = str(events[0]["message"])
    assert "numa-aware: container main cannot be assigned by numa" in message, message
    assert message.startswith("0/")
    assert node_of(kubectl, ns, "c") is None
