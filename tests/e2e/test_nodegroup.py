"""nodegroup on the real API server (issue 34 part 5), as an operator sees it: nodes labelled
`volcano.sh/nodegroup-name`, a Queue whose `spec.affinity` requires group "gpu" and avoids
group "cpu", a PodGroup of that queue whose two pods both land in group "gpu" (though the
"cpu" nodes come first by name and have more room), and a pod of a queue without affinity
left pending with a FailedScheduling event naming nodegroup. With nodegroup left out of
the conf the gang is bound to the "cpu" nodes and the second pod is bound too (checked).

The Queue CRD of crds/ carries `spec.affinity` (Volcano's schema for it); without it the API
server would prune the field and the queue would have no affinity. The module's scheduler
runs the conf below on the shared control plane; its nodes are tainted and its pods
tolerate the taint, so no other test's pod lands on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.scheduler.runner import SchedulerRunner
from koordqueue.scheduler.api import vc_names as vn
from tests.e2e.conf_scheduler import scheduler_with_conf
from tests.e2e.kq import events_for, get, namespace, unique, wait_for
from tests.e2e.test_scheduler_binding import make_node, node_of

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
    arguments:
      leastrequested.weight: 10
  - name: nodegroup
"""
TAINT = "kq-e2e/nodegroup"


@pytest.fixture(scope="module")
def scheduler(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[SchedulerRunner]:  # fmt: skip
    with scheduler_with_conf(kubeconfig, tmp_path_factory.mktemp("conf"), CONF) as runner:
        yield runner


def group_pod(kubectl: Any, ns: str, name: str, pool: str, group: str | None,
              queue: str | None = None) -> None:
    notes = {"scheduling.k8s.io/group-name": group} if group else {}
    if queue:
        notes["scheduling.volcano.sh/queue-name"] = queue
    kubectl.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": ns, "annotations": notes},
                    "spec": {"schedulerName": "volcano",
                             "nodeSelector": {"kq-test": pool},
                             "tolerations": [{"key": TAINT, "operator": "Exists"}],
                             "containers": [{"name": "main", "image": "busybox", "resources": {
                                 "requests": {"cpu": "1", "memory": "1Gi"}}}]}})


def test_queue_pods_land_in_their_node_group_and_others_are_refused(
    kubectl: Any, scheduler: SchedulerRunner,
) -> None:
    pool = unique("ng")
    # a-*: group "cpu" (8 cpu, first by name, least requested); b-*: group "gpu" (2 cpu)
    for name, cpu, group in (("a1", "8", "cpu"), ("a2", "8", "cpu"),
                             ("b1", "2", "gpu"), ("b2", "2", "gpu")):
        make_node(kubectl, f"{pool}-{name}", cpu,
                  labels={"kq-test": pool, vn.NODE_GROUP_NAME_LABEL: f"{pool}-{group}"})
        kubectl("taint", "node", f"{pool}-{name}", f"{TAINT}=x:NoSchedule")
    queue = f"{pool}-train"
    kubectl.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": queue},
                    "spec": {"weight": 1, "affinity": {
                        "nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                              [f"{pool}-gpu"]},
                        "nodeGroupAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution":
                                [f"{pool}-cpu"]}}}})
    shown = kubectl.json("get", "queue", queue)["spec"]["affinity"]
    assert shown["nodeGroupAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        f"{pool}-gpu"]  # kept by the CRD's schema, not pruned

    ns = namespace(kubectl, unique("ng"))
    kubectl.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": "train", "namespace": ns},
                    "spec": {"minMember": 2, "queue": queue}})
    for i in range(2):
        group_pod(kubectl, ns, f"train-{i}", pool, "train")

    def both_bound() -> set[str] | None:
        got = {node_of(kubectl, ns, f"train-{i}") for i in range(2)}
        return None if None in got else {h for h in got if h is not None}

    hosts = wait_for(both_bound, timeout=30, what="the gang bound")
    assert hosts <= {f"{pool}-b1", f"{pool}-b2"}, hosts
    wait_for(lambda: (get(kubectl, "podgroup", "train", ns) or {}).get("status", {})
             .get("phase") in ("Running", "Inqueue"), timeout=30, what="the PodGroup admitted")

    # a standalone pod of the default queue (no affinity): every node carries a group label
    group_pod(kubectl, ns, "stray", pool, None)
    events = wait_for(lambda: events_for(kubectl, ns, "stray", "FailedScheduling"),
                      timeout=30, what="stray's FailedScheduling event")
    message = str(events[0]["message"])
    assert vn.ERR_NODE_GROUP_AFFINITY_NOT_FOUND in message, message
    assert message.startswith("0/")
    assert node_of(kubectl, ns, "stray") is None
