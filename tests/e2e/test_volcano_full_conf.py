"""The scheduler on the real API server with a conf naming all six actions of Volcano v1.14.1
and all 24 of its plugins (issue 34's "a conf listing all ... loads and schedules";
tests/conformance/volcano/test_volcano_v1141_conf.py gives the lists). The runner starts
(every watch those plugins need: ResourceQuotas, HyperNodes, Numatopologies, PDBs) with
that conf in force, and a 2-pod gang's PodGroup goes Running with both pods bound, as
kubectl shows. With a plugin name koordqueue lacks in the conf the first load is rejected,
the default conf runs and the gang is still bound: only the conf check fails (checked).

Module scheduler on the shared control plane; its nodes are tainted and its pods tolerate
the taint, so no other test's pod lands on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.scheduler.runner import SchedulerRunner
from tests.conformance.volcano.test_volcano_v1141_conf import (
    IN_ORDER,
    NOT_BUILT,
    V1141_PLUGINS,
    _conf,
)
from tests.e2e.conf_scheduler import scheduler_with_conf
from tests.e2e.kq import get, namespace, unique, wait_for
from tests.e2e.test_scheduler_binding import make_node, node_of

TAINT = "kq-e2e/fullconf"


@pytest.fixture(scope="module")
def scheduler(kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[SchedulerRunner]:  # fmt: skip
    conf = _conf(IN_ORDER, tuple(p for p in V1141_PLUGINS if p not in NOT_BUILT))
    with scheduler_with_conf(kubeconfig, tmp_path_factory.mktemp("conf"), conf) as runner:
        yield runner


def test_a_gang_is_bound_under_every_built_volcano_plugin(
    kubectl: Any, scheduler: SchedulerRunner,
) -> None:
    # the conf is in force, not the default a rejected first load falls back to (as
    # Volcano's does): the runner never fails on a bad conf, so this is what tells them apart
    watcher = vars(scheduler.scheduler)["_watcher"]
    assert watcher.last_error is None and watcher.generation == 1
    assert list(watcher.current.actions) == list(IN_ORDER)
    pool = unique("full")
    for i in (1, 2):
        make_node(kubectl, f"{pool}-n{i}", "4", labels={"kq-test": pool})
        kubectl("taint", "node", f"{pool}-n{i}", f"{TAINT}=x:NoSchedule")
    ns = namespace(kubectl, unique("full"))
    kubectl.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": "g", "namespace": ns},
                    "spec": {"minMember": 2, "queue": "default",
                             "minResources": {"cpu": "6"}}})
    for i in (0, 1):
        kubectl.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"g-{i}", "namespace": ns, "annotations": {
                            "scheduling.k8s.io/group-name": "g"}},
                        "spec": {"schedulerName": "volcano",
                                 "nodeSelector": {"kq-test": pool},
                                 "tolerations": [{"key": TAINT, "operator": "Exists"}],
                                 "containers": [{"name": "main", "image": "busybox",
                                                 "resources": {"requests": {
                                                     "cpu": "3", "memory": "1Gi"}}}]}})
    nodes = {wait_for(lambda i=i: node_of(kubectl, ns, f"g-{i}"), timeout=30,
                      what=f"g-{i} bound") for i in (0, 1)}
    assert nodes == {f"{pool}-n1", f"{pool}-n2"}  # 3 cpu each: one per 4-cpu node
    group = wait_for(lambda: (get(kubectl, "podgroup", "g", ns) or {}).get("status", {})
                     .get("phase") == "Running" and get(kubectl, "podgroup", "g", ns),
                     timeout=30, what="g Running")
    assert group["status"]["phase"] == "Running"
