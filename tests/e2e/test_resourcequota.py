"""resourcequota on the real API server (issue 34 part 5), as an operator sees it: a namespace
ResourceQuota of 4 cpu, a PodGroup whose minResources (3 cpu) would take the namespace past
it left Pending with an Unschedulable condition naming resourcequota and the quota, and a
PodGroup that fits enqueued and its pod bound. With resourcequota left out of the conf both
PodGroups are enqueued and both pods bound (checked).

The test control plane runs no kube-controller-manager, so no quota controller: the test
writes the quota's `status.hard` as that controller would (the API server's quota admission
then keeps `status.used` as pods are created, 1 cpu each here: 2 of 4 used). The plugin
reads the status, as Volcano's does. Module scheduler on the shared control plane; its node
is tainted and its pods tolerate the taint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.scheduler.runner import SchedulerRunner
from tests.e2e.conf_scheduler import scheduler_with_conf
from tests.e2e.kq import get, namespace, unique, wait_for
from tests.e2e.test_scheduler_binding import make_node, node_of

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: resourcequota
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""
TAINT = "kq-e2e/resourcequota"


@pytest.fixture(scope="module")
def scheduler(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[SchedulerRunner]:  # fmt: skip
    with scheduler_with_conf(kubeconfig, tmp_path_factory.mktemp("conf"), CONF) as runner:
        yield runner


def group(kubectl: Any, ns: str, name: str, min_cpu: str) -> None:
    kubectl.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"minMember": 1, "queue": "default",
                             "minResources": {"cpu": min_cpu}}})


def pod(kubectl: Any, ns: str, name: str, pool: str) -> None:
    kubectl.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"{name}-0", "namespace": ns, "annotations": {
                        "scheduling.k8s.io/group-name": name}},
                    "spec": {"schedulerName": "volcano", "nodeSelector": {"kq-test": pool},
                             "tolerations": [{"key": TAINT, "operator": "Exists"}],
                             "containers": [{"name": "main", "image": "busybox", "resources": {
                                 "requests": {"cpu": "1", "memory": "1Gi"}}}]}})


def test_a_podgroup_past_its_namespace_quota_stays_pending_and_says_why(
    kubectl: Any, scheduler: SchedulerRunner,
) -> None:
    pool = unique("rq")
    make_node(kubectl, f"{pool}-n1", "16", labels={"kq-test": pool})
    kubectl("taint", "node", f"{pool}-n1", f"{TAINT}=x:NoSchedule")
    ns = namespace(kubectl, unique("rq"))
    kubectl.create({"apiVersion": "v1", "kind": "ResourceQuota",
                    "metadata": {"name": "team", "namespace": ns},
                    "spec": {"hard": {"cpu": "4"}}})
    kubectl("patch", "resourcequota", "team", "-n", ns, "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": {"hard": {"cpu": "4"},
                                                          "used": {"cpu": "0"}}}))
    # the pods first: a PodGroup created while the quota's used is still 0 would fit (3 of 4)
    # and be enqueued before its pod is counted, as Volcano would enqueue it too
    pod(kubectl, ns, "big", pool)
    pod(kubectl, ns, "small", pool)
    used = kubectl.json("get", "resourcequota", "team", "-n", ns)["status"]["used"]["cpu"]
    assert used == "2", used  # the admission counted both pods
    group(kubectl, ns, "big", "3")
    group(kubectl, ns, "small", "1")

    assert wait_for(lambda: node_of(kubectl, ns, "small-0"), timeout=30,
                    what="small's pod bound") == f"{pool}-n1"

    def refused() -> dict[str, Any] | None:
        group = get(kubectl, "podgroup", "big", ns) or {}
        for cond in (group.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Unschedulable" and "resourcequota" in str(
                cond.get("message")
            ):
                return group
        return None

    big = wait_for(refused, timeout=30, what="big's Unschedulable condition",
                   state=lambda: (get(kubectl, "podgroup", "big", ns) or {}).get("status"))
    assert big["status"]["phase"] == "Pending"
    message = next(c["message"] for c in big["status"]["conditions"]
                   if c["type"] == "Unschedulable")
    assert "resource quota insufficient, requested: cpu=3, used: cpu=2, limited: cpu=4" in (
        message), message
    assert f"ResourceQuota {ns}/team" in message
    assert node_of(kubectl, ns, "big-0") is None
    small = get(kubectl, "podgroup", "small", ns) or {}
    assert small["status"]["phase"] in ("Inqueue", "Running")
