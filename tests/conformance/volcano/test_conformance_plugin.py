"""conformance plugin: volcano-sh/volcano pkg/scheduler/plugins/conformance/conformance_test.go,
TestConformancePlugin (one tier: conformance with preemptable; `ssn.Preemptable` of an empty
preemptor over two running pods).

The same filter serves reclaim (Volcano registers it as both); it is asserted here too. The
system-critical priority classes are checked as well (Volcano's filter names them beside the
kube-system namespace; the Go test covers the namespace only).
"""

from __future__ import annotations

import pytest

from koordqueue.scheduler.api import PodGroupPhase, TaskInfo, TaskStatus
from koordqueue.scheduler.framework import open_session

from .harness import build, node, pg, queue, rl, tiers

CONFIG = tiers(("conformance", {"Preemptable", "Reclaimable"}))


def _victims(candidates: list[TaskInfo]) -> tuple[list[str], list[str]]:
    snapshot = build(
        [node("test-node", rl("4", "4Gi"))],
        [],
        [pg("pg1", "q", 0, PodGroupPhase.INQUEUE)],
        [queue("q")],
    )
    session = open_session(snapshot, CONFIG)
    preemptor = TaskInfo("preemptor", "preemptor")
    preempted = session.preemptable(preemptor, candidates)
    reclaimed = session.reclaimable(preemptor, candidates)
    return [f"{t.namespace}/{t.name}" for t in preempted], [
        f"{t.namespace}/{t.name}" for t in reclaimed
    ]


def _running(namespace: str, priority_class: str = "") -> TaskInfo:
    return TaskInfo(
        f"{namespace}-test-pod",
        "test-pod",
        namespace,
        resreq=rl("1", "1Gi"),
        status=TaskStatus.RUNNING,
        node_name="test-node",
        priority_class_name=priority_class,
    )


def test_pods_in_kube_system_are_never_victims() -> None:
    """TestConformancePlugin, "conformance plugin": of test-pod in kube-system and test-pod in
    test-namespace only the latter is a victim. Fails with conformance switched off in the
    tier (checked with gang's victims in its place: both are victims)."""
    preempted, reclaimed = _victims([_running("kube-system"), _running("test-namespace")])
    assert preempted == ["test-namespace/test-pod"]
    assert reclaimed == ["test-namespace/test-pod"]


@pytest.mark.parametrize("priority_class", ["system-cluster-critical", "system-node-critical"])
def test_system_critical_pods_are_never_victims(priority_class: str) -> None:
    """Volcano's filter: a pod of either system-critical priority class, in any namespace.
    Fails with conformance switched off (checked, as above)."""
    preempted, reclaimed = _victims([_running("team", priority_class), _running("test-namespace")])
    assert preempted == reclaimed == ["test-namespace/test-pod"]
