"""Release mode's pure pieces (bench/release.py, issue 36 point 4): the plan, the pending
tests, the quiet test and the summary. No control plane, no timing."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench import bench_peers, release
from bench.burst import Burst, writes_per_job
from koordqueue.kube.api import ELASTIC_QUOTA


def test_jobs_go_to_quota_i_mod_q_each_exactly_once() -> None:
    groups = release.jobs_by_quota(7, 3)
    assert groups == [("job00000", "job00003", "job00006"), ("job00001", "job00004"),
                      ("job00002", "job00005")]  # fmt: skip
    big = release.jobs_by_quota(5000, 50)
    names = [n for g in big for n in g]
    assert len(names) == len(set(names)) == 5000 and {len(g) for g in big} == {100}


def test_a_fitting_quota_holds_all_its_jobs_rounded_up() -> None:
    assert release.fitting_quota(1000, 10) == {"cpu": "100", "memory": "100Gi"}
    assert release.fitting_quota(7, 3) == {"cpu": "3", "memory": "3Gi"}
    assert release.ZERO_QUOTA == {"cpu": "0", "memory": "0"}


def test_koordqueue_plan_raises_each_elastic_quota_max_with_one_merge_patch() -> None:
    plan = release.elastic_quota_plan(1000, 10)
    assert [e.name for e in plan] == [f"bq{q}" for q in range(10)]
    assert {e.kind for e in plan} == {ELASTIC_QUOTA} and {e.namespace for e in plan} == {"default"}
    assert plan[3].patch == {"spec": {"max": {"cpu": "100", "memory": "100Gi"}}}
    assert plan[3].jobs[:2] == ("job00003", "job00013") and len(plan[3].jobs) == 100


def test_kueue_plan_replaces_resource_groups_whole_with_the_fitting_nominal_quota() -> None:
    """A merge patch replaces a list: the edit carries every resource group, as created."""
    plan = bench_peers.cluster_queue_plan(1000, 10)
    assert [e.name for e in plan] == [f"cq{q}" for q in range(10)]
    assert {e.kind for e in plan} == {bench_peers.CLUSTER_QUEUE}
    assert {e.namespace for e in plan} == {None}
    expected = bench_peers.cluster_queue("cq0", "100", "100Gi")["spec"]["resourceGroups"]
    assert plan[0].patch == {"spec": {"resourceGroups": expected}}
    held = bench_peers.cluster_queue("cq0", "0", "0")["spec"]["resourceGroups"]
    assert held[0]["flavors"][0]["resources"][0] == {"name": "cpu", "nominalQuota": "0"}


def test_a_record_belongs_to_its_owning_job_else_to_its_own_name() -> None:
    workload = {"metadata": {"name": "job-job00007-1a2b3", "ownerReferences": [
        {"kind": "Job", "name": "job00007"}]}}  # fmt: skip
    assert release.owner_job(workload) == "job00007"
    assert release.owner_job({"metadata": {"name": "job00008"}}) == "job00008"


def test_pending_is_an_enqueued_unit_or_a_workload_without_quota_reserved() -> None:
    assert release.unit_pending({"status": {"phase": "Enqueued"}})
    assert not release.unit_pending({"status": {}})  # created, first status not yet written
    assert not release.unit_pending({"status": {"phase": "Dequeued"}})
    waiting = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False"}]}}
    assert release.workload_pending(waiting)
    assert not release.workload_pending({"status": {}})  # not tried by the scheduler yet
    admitted = {"status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]}}
    assert not release.workload_pending(admitted)


def test_quiet_means_under_the_busy_cores_over_the_last_window() -> None:
    busy = [(0.0, 0.0), (0.5, 0.4), (1.0, 0.8)]  # 0.8 cores
    assert not release.quiet(busy, 1.0, 0.05)
    assert not release.quiet([(0.0, 0.0), (0.5, 0.0)], 1.0, 0.05)  # not a window yet
    settled = [*busy, (1.5, 0.81), (2.0, 0.82)]  # 0.02 cores over the last second
    assert release.quiet(settled, 1.0, 0.05)


def test_release_summary_counts_from_the_edit_not_from_the_creates() -> None:
    burst = Burst()
    names = [f"job{i:05d}" for i in range(100)]
    burst.created = dict.fromkeys(names, 100.0)  # the release start, for every Job
    burst.accepted = dict.fromkeys(names, 100.02)  # the quota edit answered
    burst.reached = {n: 100.0 + 0.01 * (i + 1) for i, n in enumerate(names)}
    burst.create_s, burst.total_s = 0.02, 1.0
    out = release.release_summary(burst)
    assert out["latency_s"]["p50"] == 0.505 and out["latency_s"]["p99"] == 0.99
    assert out["latency_s"]["max"] == 1.0
    assert out["total_s"] == 1.0 and out["throughput_per_s"] == 100.0
    assert out["stages_s"]["edit_call"] == {"p50": 0.02, "p99": 0.02}
    assert out["stages_s"]["edit_to_resume"]["p99"] == 0.97


def test_the_release_edits_are_not_counted_as_the_controllers_writes() -> None:
    plan = release.elastic_quota_plan(20, 2)
    own = release.own_edits(plan)
    assert own == Counter({"PATCH elasticquotas": 2})
    after = Counter({"PATCH elasticquotas": 2, "PATCH jobs": 20, "POST events": 20})
    writes = writes_per_job(Counter(), after, 20, 0, own)
    assert writes == {"PATCH jobs": 1.0, "POST events": 1.0, "total": 2.0}


def test_release_table_adds_wall_and_writes_and_medians_keep_them() -> None:
    runs = [{"p50": v, "p99": v, "throughput": v, "cpu_ms": v, "wall_s": v, "writes_total": v}
            for v in (1.0, 3.0, 2.0)]  # fmt: skip
    ours = bench_peers.medians(runs)
    assert ours["wall_s"] == 2.0 and ours["writes_total"] == 2.0
    peer = {**ours, "wall_s": 4.0, "writes_total": 5.6}
    row = {"workload": "admission", "size": "1000/10", "peer_name": "Kueue best",
           "ours": ours, "peer": peer}  # fmt: skip
    text = bench_peers.table([row], release=True)
    assert "| 2.0 / 4.0 (0.50x) | 2.0 / 5.6 |" in text
    assert text.splitlines()[1].count("---") == 8
    assert "wall" not in bench_peers.table([row])  # the normal mode's table as it was
