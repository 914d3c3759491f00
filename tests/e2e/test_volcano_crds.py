"""Our scheduler on Volcano's own CRDs (issue 24: parts 1 and 2), as an operator sees it.

A control plane of its own (the session's has our CRDs, whose podgroups serve /status) with
Volcano's podgroups and queues CRDs installed: the exact upstream YAML vendored in
tests/crds/volcano/ (podgroups there have no status subresource). `kubectl get podgroups`
must show each PodGroup's phase; a PodGroup's PriorityClass must decide which gang gets the
room; overcommit must move a PodGroup that cannot be placed yet but fits 1.2 x the cluster to
Inqueue. Before issue 24 the first and third showed no phase at all, and the gang created
first won the second.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.scheduler.runner import SchedulerRunner
from koordqueue.kube.settings import ControllerSettings
from tests.controlplane.harness import ControlPlane
from tests.e2e.conftest import Kubectl, install_crds
from tests.e2e.kq import namespace, unique, wait_for
from tests.e2e.test_scheduler_binding import TEST_LABEL, make_node, make_pod, node_of

VOLCANO_CRDS = Path(__file__).resolve().parents[1] / "crds" / "volcano"


@pytest.fixture(scope="module")
def volcano(control_plane: ControlPlane) -> Iterator[tuple[Kubectl, SchedulerRunner]]:
    with ControlPlane(control_plane.binaries) as cp:
        assert cp.kubeconfig is not None
        kubectl = Kubectl(control_plane.binaries.kubectl, cp.kubeconfig)
        install_crds(kubectl, VOLCANO_CRDS)
        settings = ControllerSettings(kubeconfig=str(cp.kubeconfig), schedule_period=0.2,
                                      metrics_port=0, log_format="console")
        with SchedulerRunner(settings) as runner:
            yield kubectl, runner


def podgroup(kubectl: Kubectl, ns: str, name: str, min_member: int, *,
             priority_class: str | None = None, min_resources: dict[str, str] | None = None
             ) -> None:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "default"}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_resources:
        spec["minResources"] = min_resources
    kubectl.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": ns}, "spec": spec})


def shown_phases(kubectl: Kubectl, ns: str) -> dict[str, str]:
    """NAME -> STATUS as `kubectl get podgroups` prints them (Volcano's printer columns)."""
    lines = kubectl("get", "podgroups", "-n", ns, "--no-headers",
                    "-o", "custom-columns=NAME:.metadata.name,STATUS:.status.phase").stdout
    return dict(line.split()[:2] for line in lines.splitlines() if line.strip())


def status_column(kubectl: Kubectl, ns: str) -> dict[str, str]:
    """The STATUS column of the default `kubectl get podgroups` table."""
    out = kubectl("get", "podgroups", "-n", ns).stdout.splitlines()
    if not out:
        return {}
    header = out[0]
    start = header.index("STATUS")  # by position: an empty cell prints nothing at all
    after = start + len("STATUS")
    rest = header[after:]
    end = after + (len(rest) - len(rest.lstrip())) if rest.strip() else None  # next column
    return {line.split()[0]: (line[start:end].split() or ["<empty>"])[0]
            for line in out[1:] if line.strip()}


def test_kubectl_get_podgroups_shows_the_phases(volcano: tuple[Kubectl, SchedulerRunner]) -> None:
    kubectl, _ = volcano
    ns, pool = namespace(kubectl, unique("vc")), unique("pool")
    make_node(kubectl, f"{pool}-1", "4", labels={TEST_LABEL: pool})
    podgroup(kubectl, ns, "fits", 2)
    # minResources as Volcano's job controller sets them: far beyond overcommit, so it stays
    # Pending (a PodGroup without minResources is let into Inqueue at once, as in Volcano)
    podgroup(kubectl, ns, "too-big", 2, min_resources={"cpu": "128"})
    for name in ("f0", "f1"):
        make_pod(kubectl, ns, name, cpu="1", selector={TEST_LABEL: pool}, group="fits")
    for name in ("b0", "b1"):
        make_pod(kubectl, ns, name, cpu="64", selector={TEST_LABEL: pool}, group="too-big")
    wait_for(lambda: status_column(kubectl, ns) == {"fits": "Running", "too-big": "Pending"},
             what="phases in kubectl get podgroups", state=lambda: status_column(kubectl, ns))
    shown = kubectl.json("get", "podgroup", "too-big", "-n", ns)
    (condition,) = shown["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Unschedulable", "True", "NotEnoughResources")
    assert condition["message"].startswith("2/2 tasks in gang unschedulable")
    fits = kubectl.json("get", "podgroup", "fits", "-n", ns)
    # (an Unschedulable written while only one pod existed may stay beside it: Volcano keeps
    # a condition that no longer holds too)
    scheduled = [c for c in fits["status"]["conditions"] if c["type"] == "Scheduled"]
    assert [c["status"] for c in scheduled] == ["True"]


def test_the_priority_class_decides_which_gang_gets_the_room(
    volcano: tuple[Kubectl, SchedulerRunner],
) -> None:
    kubectl, _ = volcano
    ns, pool = namespace(kubectl, unique("vc")), unique("pool")
    high, low = unique("high"), unique("low")
    for name, value in ((high, 1000), (low, 10)):
        kubectl.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": name}, "value": value})
    podgroup(kubectl, ns, "first", 2, priority_class=low)  # created first: wins on age alone
    for name in ("l0", "l1"):
        make_pod(kubectl, ns, name, cpu="2", selector={TEST_LABEL: pool}, group="first")
    podgroup(kubectl, ns, "second", 2, priority_class=high)
    for name in ("h0", "h1"):
        make_pod(kubectl, ns, name, cpu="2", selector={TEST_LABEL: pool}, group="second")
    waiting = {"Pending", "Inqueue"}  # no node yet: seen (a phase written), none placed
    wait_for(lambda: len(shown_phases(kubectl, ns)) == 2
             and set(shown_phases(kubectl, ns).values()) <= waiting,
             what="both gangs seen, neither placed", state=lambda: shown_phases(kubectl, ns))
    make_node(kubectl, f"{pool}-1", "4", labels={TEST_LABEL: pool})  # room for one gang
    wait_for(lambda: node_of(kubectl, ns, "h0") and node_of(kubectl, ns, "h1"),
             what="the higher class's gang bound")
    assert [node_of(kubectl, ns, n) for n in ("l0", "l1")] == [None, None]
    wait_for(lambda: shown_phases(kubectl, ns).get("second") == "Running",
             what="second Running", state=lambda: shown_phases(kubectl, ns))


def test_overcommit_moves_a_podgroup_to_inqueue(volcano: tuple[Kubectl, SchedulerRunner]) -> None:
    kubectl, _ = volcano
    ns, pool = namespace(kubectl, unique("vc")), unique("pool")
    make_node(kubectl, f"{pool}-1", "4", labels={TEST_LABEL: pool})
    # two 3-cpu pods never fit one 4-cpu node together, but 4 cpu of minResources are within
    # overcommit's 1.2 x the cluster's cpu; 400 cpu are not
    podgroup(kubectl, ns, "within", 2, min_resources={"cpu": "4"})
    podgroup(kubectl, ns, "beyond", 2, min_resources={"cpu": "400"})
    for group, prefix in (("within", "w"), ("beyond", "b")):
        for i in range(2):
            make_pod(kubectl, ns, f"{prefix}{i}", cpu="3", selector={TEST_LABEL: pool},
                     group=group)
    wait_for(lambda: status_column(kubectl, ns) == {"within": "Inqueue", "beyond": "Pending"},
             what="overcommit's verdicts in kubectl get podgroups",
             state=lambda: status_column(kubectl, ns))
