"""network-topology-aware on Volcano's own HyperNode CRD (issue 34 part 1), as an operator sees
it: `kubectl apply` of Volcano's HyperNodes (exact, pattern and label members), a PodGroup
with `networkTopology: {mode: hard, highestTierAllowed: 1}` whose pods all land in one rack,
one that no rack can hold (its pods stay pending, and `kubectl describe` shows the PodGroup's
Unschedulable condition naming network-topology-aware and the racks tried), and the watch:
a rack grown by relabelling a node lets the refused gang in.

A control plane of its own with the CRDs of tests/crds/volcano/ (Volcano's podgroups,
queues and hypernodes, byte for byte from its module zip). Before issue 34 the scheduler
read no HyperNode and no networkTopology: the first gang split over the racks by node name
and the second was bound across them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.scheduler.runner import SchedulerRunner
from koordqueue.kube.scheduler.store import CachedKind
from tests.controlplane.harness import ControlPlane
from tests.e2e.conf_scheduler import scheduler_with_conf
from tests.e2e.conftest import Kubectl, install_crds
from tests.e2e.kq import namespace, unique, wait_for
from tests.e2e.test_scheduler_binding import make_node, make_pod, node_of

VOLCANO_CRDS = Path(__file__).resolve().parents[1] / "crds" / "volcano"
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
  - name: network-topology-aware
"""


@pytest.fixture(scope="module")
def topology(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[Kubectl, SchedulerRunner]]:  # fmt: skip
    with ControlPlane(control_plane.binaries) as cp:
        assert cp.kubeconfig is not None
        kubectl = Kubectl(control_plane.binaries.kubectl, cp.kubeconfig)
        install_crds(kubectl, VOLCANO_CRDS)
        conf = tmp_path_factory.mktemp("conf")
        with scheduler_with_conf(cp.kubeconfig, conf, CONF) as runner:
            yield kubectl, runner


def hyper_node(kubectl: Kubectl, name: str, tier: int, members: list[dict[str, Any]]) -> None:
    kubectl.apply({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                   "metadata": {"name": name}, "spec": {"tier": tier, "members": members}})


def podgroup(kubectl: Kubectl, ns: str, name: str, min_member: int) -> None:
    kubectl.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"minMember": min_member, "queue": "default",
                             "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}})


def test_gangs_stay_in_one_rack_through_volcano_hypernodes(
    topology: tuple[Kubectl, SchedulerRunner],
) -> None:
    kubectl, runner = topology
    pool = unique("rk")
    # rack-a by name pattern (n1, n3), rack-b by label (n2, n4); 3 cpu per node, so a
    # 2 x 2-cpu gang needs two nodes: by name order it would take n1 and n2, one per rack
    for name, rack in (("n1", "a"), ("n2", "b"), ("n3", "a"), ("n4", "b")):
        make_node(kubectl, f"{pool}-{name}", "3", labels={"rack": f"{pool}-{rack}"})
    hyper_node(kubectl, f"{pool}-rack-a", 1,
               [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^{pool}-n[135]$"}}}])
    hyper_node(kubectl, f"{pool}-rack-b", 1,
               [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {
                   "rack": f"{pool}-b"}}}}])
    hyper_node(kubectl, f"{pool}-spine", 2, [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"{pool}-rack-a"}}},
        {"type": "HyperNode", "selector": {"exactMatch": {"name": f"{pool}-rack-b"}}},
    ])  # fmt: skip
    shown = kubectl("get", "hypernodes", "--no-headers",
                    "-o", "custom-columns=NAME:.metadata.name,TIER:.spec.tier").stdout
    tiers = dict(line.split()[:2] for line in shown.splitlines() if line.strip())
    assert (tiers[f"{pool}-rack-a"], tiers[f"{pool}-spine"]) == ("1", "2")
    assert runner.scheduler is not None
    cache = runner.scheduler.cache
    wait_for(lambda: cache.count(CachedKind.HYPER_NODE) >= 3, timeout=20,
             what="the scheduler's cache to hold the HyperNodes")

    ns = namespace(kubectl, unique("topo"))
    podgroup(kubectl, ns, "fits", 2)
    for i in range(2):
        make_pod(kubectl, ns, f"fits-{i}", cpu="2", group="fits")
    def both_bound() -> set[str] | None:
        got = {node_of(kubectl, ns, f"fits-{i}") for i in range(2)}
        return {h for h in got if h is not None} if None not in got else None

    hosts = wait_for(both_bound, timeout=30, what="the gang bound")
    rack_of = {f"{pool}-n1": "a", f"{pool}-n3": "a", f"{pool}-n2": "b", f"{pool}-n4": "b"}
    racks = {rack_of[h] for h in hosts}
    assert len(hosts) == 2 and len(racks) == 1, hosts  # n1 and n3, or n2 and n4

    # three 2-cpu pods need three nodes: no rack has them, so nothing is bound
    podgroup(kubectl, ns, "wide", 3)
    for i in range(3):
        make_pod(kubectl, ns, f"wide-{i}", cpu="2", group="wide")

    def refused() -> str | None:
        group = kubectl.json("get", "podgroup", "wide", "-n", ns)
        for cond in (group.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Unschedulable" and "network-topology-aware" in str(
                cond.get("message")
            ):
                return str(cond["message"])
        return None

    message = wait_for(
        refused, timeout=30, what="the wide gang's Unschedulable condition",
        state=lambda: kubectl.json("get", "podgroup", "wide", "-n", ns).get("status"),
    )
    assert f"fits in no hyperNode of tier <= 1 (tried {pool}-rack-a, {pool}-rack-b)" in message
    assert all(node_of(kubectl, ns, f"wide-{i}") is None for i in range(3))
    described = kubectl("describe", "podgroup", "wide", "-n", ns).stdout
    assert "network-topology-aware" in described

    # a third node in both racks (named into rack-a's pattern, labelled into rack-b): the
    # free rack now has three free nodes, and the watch brings the gang in there
    make_node(kubectl, f"{pool}-n5", "3", labels={"rack": f"{pool}-b"})
    def all_bound() -> set[str | None] | None:
        got = {node_of(kubectl, ns, f"wide-{i}") for i in range(3)}
        return got if None not in got else None

    wide = wait_for(all_bound, timeout=30, what="the wide gang bound")
    free = [n for n, r in rack_of.items() if r not in racks]
    assert wide == {*free, f"{pool}-n5"}, wide
