"""The cost curve's pure pieces (bench/curve.py, issue 36 point 3): the hierarchy and its
objects for both systems, the release plans and step schedule, the attribution of
un-suspends to edits, the figures, the table and the plot. No control plane, no timing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench import bench_peers, curve
from koordqueue.domain.names import QUOTA_IS_PARENT_LABEL, QUOTA_PARENT_LABEL
from koordqueue.domain.quota_validation import facts_of
from koordqueue.kube.api import ELASTIC_QUOTA


def test_a_hierarchy_has_one_top_about_sqrt_mids_and_contiguous_leaves() -> None:
    for leaves, mids in ((1, 1), (10, 3), (100, 10), (1000, 32)):
        tree = curve.hierarchy(leaves)
        assert len(tree.mids) == mids and len(tree.leaves) == leaves
        assert {tree.parent[m] for m in tree.mids} == {"top"}
        sizes = [len(tree.children(m)) for m in tree.mids]
        assert sum(sizes) == leaves and max(sizes) - min(sizes) <= 1
        # contiguous: a mid's leaves are a run of leaf indices
        for m in tree.mids:
            idx = [int(leaf.removeprefix("bq")) for leaf in tree.children(m)]
            assert idx == list(range(idx[0], idx[0] + len(idx)))
    with pytest.raises(ValueError):
        curve.hierarchy(0)


def test_elastic_quotas_are_three_levels_parents_marked_leaves_held_at_zero() -> None:
    tree = curve.hierarchy(10)
    top, mids, leaves = curve.elastic_quotas(tree, 1000)
    assert [q["metadata"]["name"] for q in top] == ["top"]
    assert QUOTA_PARENT_LABEL not in top[0]["metadata"]["labels"]
    for q in top + mids:
        assert q["metadata"]["labels"][QUOTA_IS_PARENT_LABEL] == "true"
        assert q["spec"]["max"] == {"cpu": "1000", "memory": "1000Gi"}
    assert {facts_of(q).parent for q in mids} == {"top"}
    assert [facts_of(q).parent for q in leaves] == [tree.parent[f"bq{i}"] for i in range(10)]
    assert all(q["spec"]["max"] == {"cpu": "0", "memory": "0"} for q in leaves)
    assert all(q["spec"]["min"] == {} and q["metadata"]["namespace"] == "default"
               for q in top + mids + leaves)  # fmt: skip


def test_kueue_objects_are_cohorts_by_parent_name_and_cluster_queues_by_cohort_name() -> None:
    tree = curve.hierarchy(10)
    cohorts, queues = curve.kueue_objects(tree)
    assert [(k, b["metadata"]["name"], b["spec"].get("parentName")) for k, b in cohorts] == [
        (curve.COHORT, "top", None), (curve.COHORT, "mid0", "top"),
        (curve.COHORT, "mid1", "top"), (curve.COHORT, "mid2", "top")]  # fmt: skip
    assert curve.COHORT.api_version == "kueue.x-k8s.io/v1beta2"
    assert curve.COHORT.plural == "cohorts"
    for kind, body in queues:
        assert kind == bench_peers.CLUSTER_QUEUE
        assert body["spec"]["cohortName"] == tree.parent[body["metadata"]["name"]]
        nominal = body["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        assert [r["nominalQuota"] for r in nominal] == ["0", "0"]


def test_the_quotas_plan_raises_every_leaf_at_once_to_fit_its_jobs() -> None:
    tree = curve.hierarchy(3)
    ours = curve.quotas_plan(curve.KOORDQUEUE, tree, 7)
    assert [(t.at_s, t.edit.name, t.freed) for t in ours] == [
        (0.0, "bq0", 3), (0.0, "bq1", 2), (0.0, "bq2", 2)]  # fmt: skip
    assert ours[0].edit.kind == ELASTIC_QUOTA and ours[0].edit.namespace == "default"
    assert ours[0].edit.patch == {"spec": {"max": {"cpu": "3", "memory": "3Gi"}}}
    kueue = curve.quotas_plan("kueue-best", tree, 7)
    assert kueue[1].edit.kind == bench_peers.CLUSTER_QUEUE and kueue[1].edit.namespace is None
    expected = bench_peers.cluster_queue("", "2", "2Gi")["spec"]["resourceGroups"]
    assert kueue[1].edit.patch == {"spec": {"resourceGroups": expected}}
    # a merge patch leaves spec.cohortName alone: the patch does not carry it
    assert "cohortName" not in kueue[1].edit.patch["spec"]


def test_the_step_schedule_frees_rate_jobs_per_second_round_robin() -> None:
    steps = curve.step_schedule(leaves=3, per_leaf=100, rate=20, interval_s=0.5, window_s=3)
    assert [s.at_s for s in steps] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert [s.leaf for s in steps] == [0, 1, 2, 0, 1, 2]
    assert [s.capacity for s in steps] == [10, 10, 10, 20, 20, 20]
    assert {s.freed for s in steps} == {10}
    assert sum(s.freed for s in steps) / 3.0 == 20  # Jobs per second over the window
    with pytest.raises(ValueError, match="holds"):
        curve.step_schedule(leaves=3, per_leaf=15, rate=20, interval_s=0.5, window_s=3)
    with pytest.raises(ValueError, match="frees nothing"):
        curve.step_schedule(leaves=3, per_leaf=15, rate=0.1, interval_s=0.5, window_s=3)


def test_the_depth_plan_sends_each_steps_cumulative_room_to_its_leaf() -> None:
    tree = curve.hierarchy(2)
    steps = curve.step_schedule(2, 50, 10, 1.0, 4)
    plan = curve.depth_plan(curve.KOORDQUEUE, tree, steps)
    assert [(t.at_s, t.edit.name, t.edit.patch["spec"]["max"]["cpu"], t.freed) for t in plan] == [
        (0.0, "bq0", "10", 10), (1.0, "bq1", "10", 10),
        (2.0, "bq0", "20", 10), (3.0, "bq1", "20", 10)]  # fmt: skip


def test_attribution_charges_the_kth_resume_to_the_edit_that_brought_room_to_k() -> None:
    sent = [(10.0, 2), (0.0, 2), (5.0, 1)]  # unsorted on purpose
    latencies, over = curve.attribute(sent, [7.0, 0.5, 1.0, 12.0, 6.0, 13.0])
    # sorted resumes 0.5, 1.0 -> edit @0; 6.0 -> edit @5; 7.0, 12.0 -> edit @10; 13.0: no room
    assert latencies == [0.5, 1.0, 1.0, -3.0, 2.0] and over == 1
    assert curve.attribute([], [1.0]) == ([], 1)
    assert curve.attribute([(0.0, 3)], []) == ([], 0)


def test_figures_are_per_admitted_job() -> None:
    f = curve.figures([0.1, 0.2, 0.3, 0.4], cpu_s=2.0, apiserver_cpu_s=4.0, wall_s=1.234,
                      admitted=4)  # fmt: skip
    assert f["p50"] == 0.25 and f["p99"] == 0.4 and f["max"] == 0.4
    assert f["cpu_ms"] == 500.0 and f["apiserver_cpu_ms"] == 1000.0 and f["wall_s"] == 1.23
    empty = curve.figures([], cpu_s=1.0, apiserver_cpu_s=0.0, wall_s=0.0, admitted=0)
    assert empty["p99"] == 0.0 and empty["cpu_ms"] == 1000.0


def _result(curve_name: str, point: int, system: str, p99: float, cpu: float) -> dict:
    return {
        "curve": curve_name,
        "point": point,
        "system": system,
        "jobs": 1000,
        "p50": p99 / 2,
        "p99": p99,
        "cpu_ms": cpu,
        "apiserver_cpu_ms": 5.0,
        "wall_s": 3.0,
        "rss_mb": 100.0,
    }


RESULTS = [
    _result("quotas", 10, "koordqueue", 1.0, 2.0),
    _result("quotas", 10, "koordqueue", 3.0, 4.0),
    _result("quotas", 10, "koordqueue", 2.0, 100.0),
    _result("quotas", 10, "kueue-best", 4.0, 3.0),
    _result("quotas", 1000, "koordqueue", 5.0, 6.0),
    _result("quotas", 1000, "kueue-best", 10.0, 3.0),
    _result("depth", 1000, "koordqueue", 0.5, 1.5),
    _result("depth", 10000, "kueue-best", 2.0, 3.0),
]


def test_medians_per_point_and_system_with_the_run_count() -> None:
    meds = curve.point_medians(RESULTS)
    assert meds[("quotas", 10, "koordqueue")]["runs"] == 3
    assert meds[("quotas", 10, "koordqueue")]["p99"] == 2.0
    assert meds[("quotas", 10, "koordqueue")]["cpu_ms"] == 4.0
    assert meds[("quotas", 1000, "kueue-best")]["runs"] == 1


def test_the_table_names_kueues_profile_and_gives_ours_over_kueue() -> None:
    text = curve.curve_table(RESULTS)
    lines = text.splitlines()
    assert lines[0].startswith("| curve | point | Jobs | system | runs |")
    assert len(lines) == 2 + 6
    row = next(line for line in lines if "| 10 quotas |" in line and "koordqueue |" in line)
    assert "| 3 |" in row and row.endswith("| 0.50x / 1.33x |")
    assert any("Kueue v0.17.0 best" in line for line in lines)
    # a point with only one system has no ratio
    assert next(line for line in lines if "1,000 pending" in line).endswith("|  |")


def test_series_and_the_plot(tmp_path: Path) -> None:
    s = curve.series(RESULTS, "quotas", "p99")
    assert s == {"koordqueue": [(10, 2.0), (1000, 5.0)], "kueue-best": [(10, 4.0), (1000, 10.0)]}
    pytest.importorskip("matplotlib")
    out = tmp_path / "curve.png"
    curve.plot(RESULTS, str(out), "title")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
