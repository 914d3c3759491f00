"""bench/peers_report.py: placement runs gathered from bench_peers logs, issue 28's targets and
the scaling curve; bench_peers' writes per pod (no control plane)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench import bench_peers, peers_report


def _run(who: str, size: str, p99: float, cpu: float, tput: float, api: float) -> str:
    return json.dumps({"workload": "placement", "who": who, "size": size, "p50": p99 / 2,
                       "p99": p99, "throughput": tput, "cpu_ms": cpu, "apiserver_cpu_ms": api})


LOG = [
    "calibration: py-ref 26.0 ms CPU",
    _run("koordqueue", "2000/100", 0.10, 0.8, 400.0, 3.0),
    '{"stages_s": {"create_call": {"p50": 0.02}}}',
    _run("kube-scheduler", "2000/100", 0.20, 1.2, 350.0, 3.5),
    _run("binder", "2000/100", 0.05, 0.3, 500.0, 2.5),
    _run("koordqueue", "2000/100", 0.30, 1.0, 300.0, 3.2),
    _run("kube-scheduler", "2000/100", 0.25, 1.3, 340.0, 3.4),
    _run("binder", "2000/100", 0.06, 0.3, 520.0, 2.4),
    _run("koordqueue", "2000/100", 0.12, 0.9, 390.0, 3.1),
    _run("kube-scheduler", "2000/100", 0.22, 1.1, 345.0, 3.6),
    _run("binder", "2000/100", 0.07, 0.3, 510.0, 2.6),
    "| placement vs kube-scheduler | 2000/100 | ... |",
    _run("koordqueue", "10000/1000", 0.5, 1.5, 200.0, 5.0),
    _run("kube-scheduler", "10000/1000", 0.6, 2.0, 190.0, 4.0),
]


def test_runs_are_read_by_size_and_component_skipping_other_lines() -> None:
    runs = peers_report.read_runs(LOG)
    assert sorted(runs) == ["10000/1000", "2000/100"]
    assert [len(runs["2000/100"][w]) for w in ("koordqueue", "kube-scheduler", "binder")] == [
        3, 3, 3]
    assert "binder" not in runs["10000/1000"]


def test_medians_are_per_figure_over_the_runs() -> None:
    m = peers_report.medians(peers_report.read_runs(LOG)["2000/100"]["koordqueue"])
    assert m["p99"] == 0.12 and m["cpu_ms"] == 0.9 and m["throughput"] == 390.0
    assert m["apiserver_cpu_ms"] == 3.1


def test_issue28_targets_are_the_ratios_the_issue_asks() -> None:
    peer = {"p99": 1.0, "cpu_ms": 1.0, "throughput": 100.0}
    assert all(peers_report.issue28_targets(
        {"p99": 0.6, "cpu_ms": 0.8, "throughput": 110.0}, peer).values())
    held = peers_report.issue28_targets({"p99": 0.61, "cpu_ms": 0.81, "throughput": 109.0}, peer)
    assert held == {"p99_le_0.6x": False, "cpu_per_pod_le_0.8x": False,
                    "throughput_ge_1.1x": False}


def test_size_table_and_curve_rows_go_by_cluster_size() -> None:
    runs = peers_report.read_runs(LOG)
    table = peers_report.size_table(runs)
    assert table[2].startswith("| 2000/100 | 3 / 3 | 0.12 / 0.22 (0.55x) | 0.9 / 1.2 (0.75x)")
    assert "p99_le_0.6x True, cpu_per_pod_le_0.8x True, throughput_ge_1.1x True" in table[2]
    assert table[3].startswith("| 10000/1000 | 1 / 1 |")
    curve = peers_report.curve(runs)
    assert curve[2] == ("| 2000/100 | 0.9 / 1.2 | 0.12 / 0.22 | 3.1 / 3.5 / 2.5 "
                        "| 2.00x, 3.67x | 1.24x, 1.40x |")
    assert curve[3].endswith("| n/a, n/a | n/a, n/a |")  # no binder at that size


def test_writes_per_pod_take_out_the_benchmarks_own_creates() -> None:
    before = Counter({"POST pods": 10, "POST events": 3})
    after = Counter({"POST pods": 2010, "POST pods/binding": 2000, "POST events": 2003,
                     "PATCH events": 20})
    writes = bench_peers.writes_per_pod(before, after, 2000, 2000)
    assert writes == {"POST events": 1.0, "POST pods/binding": 1.0, "PATCH events": 0.01,
                      "total": 2.01}
