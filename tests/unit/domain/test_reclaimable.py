"""Reclaimable pods (issue 35 point 6): Kueue's rule for a batch/v1 Job (its
job_controller_test TestReclaimablePods cases, transcribed), counts that only grow while held,
and what a unit then holds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.integrations import BatchJob, JobSet
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import (
    InvalidQueueUnitError,
    Phase,
    QueueUnit,
    queue_unit_from_object,
)
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.reclaimable import (
    InvalidReclaimablePodsError,
    PodSetShare,
    ReclaimablePod,
    job_reclaimable_pods,
    merged,
    parse_reclaimable_pods,
    reclaimed,
)
from koordqueue.domain.resources import Resources


@pytest.mark.parametrize(
    ("parallelism", "completions", "succeeded", "want"),
    [
        (1, None, 0, ()),  # parallelism 1: never
        (1, 4, 3, ()),
        (2, 4, 0, ()),  # nothing succeeded
        (2, 4, 1, ()),  # 3 remain >= 2 run at once
        (2, 4, 2, ()),  # 2 remain
        (2, 4, 3, (ReclaimablePod("main", 1),)),  # 1 remains: one pod's share back
        (2, None, 1, (ReclaimablePod("main", 1),)),  # completions = parallelism
        (3, 5, 4, (ReclaimablePod("main", 2),)),
        (3, 3, 3, (ReclaimablePod("main", 3),)),  # all done
    ],
)
def test_a_jobs_reclaimable_pods_follow_kueues_rule(
    parallelism: int, completions: int | None, succeeded: int, want: tuple[ReclaimablePod, ...]
) -> None:
    assert job_reclaimable_pods("main", parallelism, completions, succeeded) == want


def test_the_job_integration_names_the_jobs_pod_set() -> None:
    job = {"metadata": {"name": "train"}, "spec": {"parallelism": 4, "completions": 6},
           "status": {"succeeded": 3}}
    assert BatchJob().reclaimable_pods([job]) == (ReclaimablePod("train", 1),)


def _jobset(status: list[dict[str, object]]) -> dict[str, object]:
    def replicated(name: str, replicas: int, parallelism: int, completions: int) -> object:
        return {"name": name, "replicas": replicas, "template": {"spec": {
            "parallelism": parallelism, "completions": completions, "template": {}}}}

    return {"metadata": {"name": "js"},
            "spec": {"replicatedJobs": [replicated("driver", 1, 1, 1),
                                        replicated("workers", 3, 4, 2)]},
            "status": {"replicatedJobsStatus": status}}


def test_a_jobsets_reclaimable_pods_follow_kueues_rule() -> None:
    """Kueue's jobset ReclaimablePods: per replicated Job, succeeded child Jobs x pods per
    replica (min(parallelism, completions)), once 0 < succeeded <= replicas."""
    assert JobSet().reclaimable_pods([_jobset([])]) == ()
    assert JobSet().reclaimable_pods([_jobset([
        {"name": "driver", "succeeded": 0}, {"name": "workers", "succeeded": 2},
    ])]) == (ReclaimablePod("workers", 4),)
    assert JobSet().reclaimable_pods([_jobset([
        {"name": "driver", "succeeded": 1}, {"name": "workers", "succeeded": 4},
    ])]) == (ReclaimablePod("driver", 1),)  # 4 > 3 replicas: not counted


def test_counts_only_grow_while_held() -> None:
    held = (ReclaimablePod("a", 2), ReclaimablePod("b", 1))
    assert merged(held, (ReclaimablePod("a", 1), ReclaimablePod("c", 3))) == (
        ReclaimablePod("a", 2), ReclaimablePod("b", 1), ReclaimablePod("c", 3))
    assert merged((), (ReclaimablePod("a", 0),)) == ()


@pytest.mark.parametrize(
    ("raw", "field"),
    [("x", "status.reclaimablePods"), ([1], "status.reclaimablePods[0]"),
     ([{"count": 1}], "status.reclaimablePods[0].name"),
     ([{"name": "a", "count": -1}], "status.reclaimablePods[0].count"),
     ([{"name": "a", "count": "2"}], "status.reclaimablePods[0].count")],
)
def test_bad_reclaimable_pods_are_refused_naming_the_field(raw: object, field: str) -> None:
    with pytest.raises(InvalidReclaimablePodsError) as info:
        parse_reclaimable_pods(raw)
    assert info.value.field == field


@given(st.integers(0, 10), st.integers(0, 12), st.integers(1, 4000))
def test_the_share_back_is_min_of_reclaimable_and_count_times_the_pod(
    count: int, pods: int, milli: int
) -> None:
    request = Resources.parse({"cpu": f"{milli}m"})
    share = reclaimed([PodSetShare("w", count, request)], [ReclaimablePod("w", pods)])
    assert share == request * min(pods, count)
    assert reclaimed([PodSetShare("w", count, request)], [ReclaimablePod("other", pods)]) == {}


def _unit_object(reclaimable: object = None) -> dict[str, object]:
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    obj: dict[str, object] = {
        "metadata": {"name": "j", "namespace": "ns", "uid": "u-j",
                     "labels": {QUOTA_NAME_LABEL: "q"}},
        "spec": {"resource": {"cpu": "4"},
                 "podSet": [{"name": "j", "count": 4, "template": template}]},
        "status": {"phase": "Running"},
    }
    if reclaimable is not None:
        obj["status"] = {"phase": "Running", "reclaimablePods": reclaimable}
    return obj


def test_a_unit_holds_its_request_less_the_reclaimed_pods() -> None:
    assert queue_unit_from_object(_unit_object()).resource == Resources.parse({"cpu": "4"})
    unit = queue_unit_from_object(_unit_object([{"name": "j", "count": 3}]))
    assert unit.resource == Resources.parse({"cpu": "1"})


def test_a_bad_reclaimable_entry_refuses_the_unit_naming_the_field() -> None:
    with pytest.raises(InvalidQueueUnitError, match=r"status.reclaimablePods\[0\].count"):
        queue_unit_from_object(_unit_object([{"name": "j", "count": -2}]))


def _engine(cpu: str = "4") -> AdmissionEngine:
    engine = AdmissionEngine()
    engine.upsert_quota(QuotaSpec("q", max=Resources.parse({"cpu": cpu})))
    engine.upsert_queue("q", "Block", {})
    return engine


def _unit(name: str, cpu: str, phase: Phase = Phase.ENQUEUED, created: float = 1.0) -> QueueUnit:
    return QueueUnit("ns", name, f"u-{name}", Resources.parse({"cpu": cpu}),
                     labels={QUOTA_NAME_LABEL: "q"}, phase=phase, created=created)


def test_pods_finishing_give_their_share_back_and_a_waiting_unit_gets_in() -> None:
    """Fails without the engine's give-back: the waiting unit stays out."""
    engine = _engine()
    engine.upsert_unit(_unit("big", "4"))
    engine.upsert_unit(_unit("next", "2", created=2.0))
    result = engine.run_round(10.0)
    assert [u.name for u, _ in result.admitted] == ["big"]
    engine.upsert_unit(_unit("big", "4", Phase.RUNNING))
    assert [u.name for u, _ in engine.run_round(11.0).admitted] == []  # Block: next blocks q
    engine.upsert_unit(_unit("big", "2", Phase.RUNNING))  # two of its pods reclaimable
    assert engine.tree.used("q") == Resources.parse({"cpu": "2"})
    assert [u.name for u, _ in engine.run_round(12.0).admitted] == ["next"]
    assert engine.tree.used("q") == Resources.parse({"cpu": "4"})


def test_an_admitted_unit_asking_for_more_keeps_what_it_holds() -> None:
    engine = _engine()
    engine.upsert_unit(_unit("u", "2"))
    engine.run_round(10.0)
    engine.upsert_unit(_unit("u", "3", Phase.RUNNING))
    assert engine.tree.used("q") == Resources.parse({"cpu": "2"})
