"""pdb plugin: cases of volcano-sh/volcano pkg/scheduler/plugins/pdb/pdb_test.go,
TestPreemptableAndReclaimableFn (one tier: pdb with preemptable, reclaimable and victim
switched on; two pods test-pod1 and test-pod2 of namespace default labelled
volcano.sh/job-name=job-1; each case asks Preemptable, Reclaimable and VictimTasks).

The PDBs are built through the kube adapter (convert.pod_disruption_budget) from the same
objects the case puts in its informer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from koordqueue.domain.resources import Resources
from koordqueue.kube.scheduler.convert import pod_disruption_budget
from koordqueue.scheduler import ClusterSnapshot
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.session import Session

from .harness import tiers

LABEL = "volcano.sh/job-name"
CONFIG = tiers(("pdb", {"Preemptable", "Reclaimable", "Victim"}))


def _pdb(allowed: int) -> Mapping[str, Any]:
    return {
        "metadata": {"name": "test-pdb", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {LABEL: "job-1"}}},
        "status": {"disruptionsAllowed": allowed},
    }


def _session(pdbs: Sequence[Mapping[str, Any]]) -> tuple[Session, list[TaskInfo]]:
    """makePod(test-pod1/test-pod2, {job-name: job-1}) in one job; the PDBs in the snapshot."""
    tasks = [
        TaskInfo(f"default-{name}", name, "default", resreq=Resources(), labels={LABEL: "job-1"})
        for name in ("test-pod1", "test-pod2")
    ]
    job = JobInfo("default/job-1", "job-1", namespace="default", queue="q", tasks=tasks)
    snapshot = ClusterSnapshot(
        (), [job], [QueueInfo("q")], pdbs=tuple(pod_disruption_budget(p) for p in pdbs)
    )
    session = open_session(snapshot, CONFIG)
    job_tasks = session.jobs[job.uid].tasks
    return session, [job_tasks["default-test-pod1"], job_tasks["default-test-pod2"]]


CASES = [
    pytest.param([], ["test-pod1", "test-pod2"], id="test without pdbs"),
    pytest.param([_pdb(0)], [], id="test with pdbs(can evict 0 pod)"),
    pytest.param([_pdb(1)], ["test-pod1"], id="test with pdbs(can evict 1 pod)"),
]


@pytest.mark.parametrize(("pdbs", "expected"), CASES)
def test_preemptable_drops_victims_that_would_violate_a_pdb(
    pdbs: list[Mapping[str, Any]], expected: list[str]
) -> None:
    """pdb_test.go TestPreemptableAndReclaimableFn, each case, (e) Preemptable."""
    session, preemptees = _session(pdbs)
    preemptor = TaskInfo("preemptor", "preemptor", resreq=Resources())
    assert [t.name for t in session.preemptable(preemptor, preemptees)] == expected


@pytest.mark.parametrize(("pdbs", "expected"), CASES)
def test_reclaimable_drops_victims_that_would_violate_a_pdb(
    pdbs: list[Mapping[str, Any]], expected: list[str]
) -> None:
    """pdb_test.go TestPreemptableAndReclaimableFn, each case, (f) Reclaimable."""
    session, preemptees = _session(pdbs)
    reclaimer = TaskInfo("reclaimer", "reclaimer", resreq=Resources())
    assert [t.name for t in session.reclaimable(reclaimer, preemptees)] == expected


@pytest.mark.parametrize(("pdbs", "expected"), CASES)
def test_victim_tasks_drop_victims_that_would_violate_a_pdb(
    pdbs: list[Mapping[str, Any]], expected: list[str]
) -> None:
    """pdb_test.go TestPreemptableAndReclaimableFn, each case, (g) VictimTasks."""
    session, preemptees = _session(pdbs)
    assert sorted(t.name for t in session.victim_tasks(preemptees)) == expected
