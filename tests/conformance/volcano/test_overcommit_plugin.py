"""overcommit plugin: cases of volcano-sh/volcano
pkg/scheduler/plugins/overcommit/overcommit_test.go, TestOvercommitPlugin (one tier:
overcommit with job enqueued; for the case's one PodGroup, `ssn.JobEnqueued` then
`ssn.JobEnqueueable`). Nodes n1 (2 cpu, 4Gi) and n2 (4 cpu, 16Gi):
6 cpu in all.

The PodGroup is already Inqueue and JobEnqueued counts it once more, so "enqueueable" asks
whether 2 + 2 + 2 cpu fit 6 x factor. That holds with any factor of at least 1, so the two
cases that expect True would pass with the factor ignored; each therefore also asks for a
second PodGroup of 3 cpu, which with pg1's 4 fits 6 x 1.2 = 7.2 and not 6 (fails with the
factor ignored, and with 0.8 taken as given instead of the default 1.2: both checked). "when the
required resources of pg are too large" fails with the plugin off (checked). "when pg does not
fill MinResources" expects a permit, which the plugin off also gives; it fails if a PodGroup
without minResources is rejected (checked by making the plugin reject it).
"""

from __future__ import annotations

import pytest

from koordqueue.scheduler.api import JobInfo, PodGroupPhase
from koordqueue.scheduler.framework import open_session

from .harness import build, node, pg, queue, rl, tiers

INQUEUE = PodGroupPhase.INQUEUE
NODES = [node("n1", rl("2", "4Gi")), node("n2", rl("4", "16Gi"))]
NORMAL = rl("2000m", "2G")
HUGE = rl("20000m", "20G")
SMALL = rl("200m", "0.5G")
NS = "test-namespace"


def _enqueueable(
    factor: float, min_resources: object, capability: object, more: bool
) -> list[bool]:
    """JobEnqueued + JobEnqueueable for pg1, then (with `more`) JobEnqueueable for a 3-cpu
    PodGroup `extra`."""
    groups = [pg("pg1", "c1", 2, INQUEUE, min_resources, namespace=NS)]  # type: ignore[arg-type]
    if more:
        groups.append(pg("extra", "c1", 1, PodGroupPhase.PENDING, rl("3000m", "1G"), namespace=NS))
    snapshot = build(NODES, [], groups, [queue("c1", None, capability)], namespace=NS)  # type: ignore[arg-type]
    config = tiers(
        ("overcommit", {"JobEnqueued"}), arguments={"overcommit": {"overcommit-factor": factor}}
    )
    session = open_session(snapshot, config)
    job: JobInfo = session.jobs[f"{NS}/pg1"]
    session.job_enqueued(job)
    answers = [session.job_enqueueable(job)]
    if more:
        answers.append(session.job_enqueueable(session.jobs[f"{NS}/extra"]))
    return answers


@pytest.mark.parametrize("factor", [1.2, 0.8], ids=["more than 0", "less than 0 (default 1.2)"])
def test_a_podgroup_within_factor_times_capacity_is_enqueueable(factor: float) -> None:
    """TestOvercommitPlugin, "overCommitFactor is more than 0" (1.2) and "overCommitFactor is
    less than 0" (0.8, below 1: the default 1.2 applies)."""
    assert _enqueueable(factor, NORMAL, None, more=False) == [True]
    assert _enqueueable(factor, NORMAL, None, more=True) == [True, True]


def test_a_podgroup_larger_than_factor_times_capacity_is_not_enqueueable() -> None:
    """TestOvercommitPlugin, "when the required resources of pg are too large"."""
    assert _enqueueable(1.2, HUGE, None, more=False) == [False]


def test_a_podgroup_without_min_resources_is_enqueueable() -> None:
    """TestOvercommitPlugin, "when pg does not fill MinResources" (queue capability 200m /
    0.5G)."""
    assert _enqueueable(1.2, None, SMALL, more=False) == [True]
