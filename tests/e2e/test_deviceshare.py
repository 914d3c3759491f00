"""deviceshare on the real API server (issue 34 part 3), as an operator sees it: nodes as
Volcano's gpushare device plugin reports them (`volcano.sh/gpu-memory` and
`volcano.sh/gpu-number` in the node's capacity; the test writes them, there is no device
plugin here), a pod asking GPU memory bound to the node with a GPU that has it and carrying
Volcano's `volcano.sh/gpu-index` / `volcano.sh/predicate-time` annotations, and a pod asking
more memory than any one GPU has left pending with a FailedScheduling event naming the
device. Before part 3 the conf naming deviceshare did not load; with deviceshare left out of
it the first pod is bound to the node with the most memory in all (the small-GPU node here
has the same total) and the second is bound too (checked).

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
from koordqueue.scheduler.api import device_names as dn
from tests.e2e.conf_scheduler import scheduler_with_conf
from tests.e2e.kq import events_for, get, namespace, unique, wait_for
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
  - name: deviceshare
    arguments:
      deviceshare.GPUSharingEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 10
"""
TAINT = "kq-e2e/deviceshare"


@pytest.fixture(scope="module")
def scheduler(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[SchedulerRunner]:  # fmt: skip
    with scheduler_with_conf(kubeconfig, tmp_path_factory.mktemp("conf"), CONF) as runner:
        yield runner


def gpu_node(kubectl: Any, name: str, memory: str, gpus: str) -> None:
    """A node as Volcano's gpushare device plugin leaves it (capacity and allocatable)."""
    kubectl.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                    "spec": {"taints": [{"key": TAINT, "effect": "NoSchedule"}]}})
    resources = {"cpu": "8", "memory": "16Gi", "pods": "110",
                 dn.GPU_MEMORY: memory, dn.GPU_NUMBER: gpus}
    status = {"status": {"capacity": resources, "allocatable": resources, "conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}]}}
    kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p",
            json.dumps(status))
    kubectl("taint", "node", name, "node.kubernetes.io/not-ready-", check=False)


def gpu_pod(kubectl: Any, ns: str, name: str, memory: str, pool: str) -> None:
    kubectl.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"schedulerName": "volcano",
                             "nodeSelector": {"kq-test": pool},
                             "tolerations": [{"key": TAINT, "operator": "Exists"}],
                             "containers": [{"name": "main", "image": "busybox", "resources": {
                                 "requests": {"cpu": "1"},
                                 "limits": {dn.GPU_MEMORY: memory}}}]}})


def test_gpu_memory_pods_land_where_one_gpu_has_room_and_the_rest_are_refused(
    kubectl: Any, scheduler: SchedulerRunner,
) -> None:
    ns, pool = namespace(kubectl, unique("gpu")), unique("gpool")
    # "small": 4 GPUs of 8000; "large": 2 GPUs of 16000 (32000 in all on each)
    for name, gpus in (("small", "4"), ("large", "2")):
        gpu_node(kubectl, f"{pool}-{name}", "32000", gpus)
        kubectl("label", "node", f"{pool}-{name}", f"kq-test={pool}")
    gpu_pod(kubectl, ns, "train", "12000", pool)
    assert wait_for(lambda: node_of(kubectl, ns, "train"), timeout=30,
                    what="the GPU pod bound") == f"{pool}-large"
    annotations = (get(kubectl, "pod", "train", ns) or {})["metadata"]["annotations"]
    assert annotations[dn.GPU_INDEX] == "0"
    assert int(annotations[dn.PREDICATE_TIME]) > 0

    # 17000 fits the nodes' remaining totals (20000 and 32000) but no single GPU
    gpu_pod(kubectl, ns, "huge", "17000", pool)
    events = wait_for(lambda: events_for(kubectl, ns, "huge", "FailedScheduling"),
                      timeout=30, what="huge's FailedScheduling event")
    message = str(events[0]["message"])
    assert "deviceshare: GpuShare no enough gpu memory" in message, message
    assert dn.GPU_MEMORY in message and message.startswith("0/")
    assert node_of(kubectl, ns, "huge") is None
