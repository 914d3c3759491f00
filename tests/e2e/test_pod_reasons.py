"""Reasons a person can act on, on the real API server (issue 33.9).

A gang of pods larger than every node: the scheduler runs and writes its conditions and
events; `kubectl` must then show kube-scheduler's words, "0/N nodes are available: N
Insufficient cpu.", in each pod's PodScheduled condition and its one FailedScheduling event,
at the end of the PodGroup's Unschedulable condition and its one Unschedulable event, and
`koordqueue explain pod/NAME` must print the pod's condition message exactly. Before issue
33.9 the second member said "gang not ready" and explain said something else again.

Other tests' nodes share the cluster: the pods ask for more cpu than any node has, so every
ready node answers "Insufficient cpu" (a node's resources are checked first, as in Volcano)
and N is however many ready nodes there are.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.scheduler.runner import SchedulerRunner
from koordqueue.kube.settings import ControllerSettings
from tests.e2e.kq import events_for, get, namespace, unique, wait_for
from tests.e2e.test_scheduler_binding import make_node, make_pod, scheduled_condition

KOORDQUEUE = Path(sys.executable).parent / "koordqueue"
PODGROUPS = "podgroups.scheduling.volcano.sh"
SUMMARY = re.compile(r"^0/(\d+) nodes are available: (\d+) Insufficient cpu\.$")


@pytest.fixture(scope="module")
def scheduler(kubeconfig: Path) -> Iterator[SchedulerRunner]:
    settings = ControllerSettings(kubeconfig=str(kubeconfig), schedule_period=0.2,
                                  metrics_port=0, log_format="console")
    with SchedulerRunner(settings) as runner:
        yield runner


def group_condition(kubectl: Any, ns: str, name: str) -> dict[str, Any] | None:
    group = get(kubectl, PODGROUPS, name, ns) or {}
    for cond in (group.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Unschedulable":
            return dict(cond)
    return None


def explain_pod(kubeconfig: Path, ns: str, name: str) -> dict[str, Any]:
    proc = subprocess.run(
        [str(KOORDQUEUE), "explain", "--kubeconfig", str(kubeconfig), "-n", ns, f"pod/{name}",
         "-o", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def test_a_gang_larger_than_every_node_says_insufficient_cpu_everywhere_once(
    kubectl: Any, kubeconfig: Path, scheduler: SchedulerRunner
) -> None:
    ns, pool = namespace(kubectl, unique("reasons")), unique("pool")
    for suffix in ("a", "b", "c"):
        make_node(kubectl, f"{pool}-{suffix}", "2", labels={"kq-test": pool})
    kubectl.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": "huge", "namespace": ns},
                    "spec": {"minMember": 2, "queue": "default"}})
    for name in ("huge-0", "huge-1"):
        make_pod(kubectl, ns, name, cpu="1000", group="huge")

    def summary(name: str) -> dict[str, Any] | None:
        """The condition once it gives the session's cause (a session that saw one member
        only says "Not enough valid tasks" first: seen in a clean-clone CI under load)."""
        cond = scheduled_condition(kubectl, ns, name)
        return cond if cond and SUMMARY.match(cond.get("message") or "") else None

    conditions = [wait_for(lambda n=name: summary(n), what=name,
                           state=lambda n=name: scheduled_condition(kubectl, ns, n))
                  for name in ("huge-0", "huge-1")]
    message = conditions[0]["message"]
    match = SUMMARY.match(message)
    assert match is not None and match.group(1) == match.group(2), message
    assert int(match.group(1)) >= 3
    assert [(c["status"], c["reason"], c["message"]) for c in conditions] == [
        ("False", "Unschedulable", message)] * 2
    group = wait_for(lambda: group_condition(kubectl, ns, "huge"), what="PodGroup condition")
    assert group["status"] == "True" and group["message"].endswith("; " + message)

    time.sleep(3.0)  # fifteen more sessions at 0.2 s: the cause stays the same
    for name in ("huge-0", "huge-1"):
        # (a member created before the other first said "Not enough valid tasks": another
        # cause, said once too)
        failed = events_for(kubectl, ns, name, "FailedScheduling")
        assert [(e["type"], e["count"]) for e in failed if e["message"] == message] == [
            ("Warning", 1)], failed
        assert all(e["count"] == 1 for e in failed), failed
        explained = explain_pod(kubeconfig, ns, name)
        assert explained["verdict"] == "Unschedulable"
        assert explained["message"] == message
        assert explained["condition"]["message"] == message
    said = events_for(kubectl, ns, "huge", "Unschedulable")
    assert [(e["type"], e["count"]) for e in said if e["message"] == group["message"]] == [
        ("Warning", 1)], said
    assert all(e["count"] == 1 for e in said), said
