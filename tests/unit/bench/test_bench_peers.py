"""The peers' configurations and objects bench_peers.py generates (no control plane, no Go)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench import bench_peers
from tests.e2e import kq


def test_sizes_parse_as_pods_by_nodes() -> None:
    assert bench_peers.parse_sizes("2000x100, 5000x500") == [(2000, 100), (5000, 500)]
    with pytest.raises(ValueError, match="PODSxNODES"):
        bench_peers.parse_sizes("2000")


def test_kube_scheduler_gets_one_volcano_profile_fast_client_and_no_election() -> None:
    config = bench_peers.scheduler_config("/tmp/kubeconfig")
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert [p["schedulerName"] for p in config["profiles"]] == ["volcano"]
    assert config["clientConnection"] == {
        "kubeconfig": "/tmp/kubeconfig",
        "qps": 5000,
        "burst": 5000,
    }
    assert config["leaderElection"] == {"leaderElect": False}


def test_kueue_runs_without_cert_manager_and_serves_webhooks_from_the_given_cert() -> None:
    config = bench_peers.kueue_config(cert_dir="/tmp/c", webhook_port=9443, health_port=8081)
    assert config["internalCertManagement"] == {"enable": False}
    assert config["webhook"] == {"host": "127.0.0.1", "port": 9443, "certDir": "/tmp/c"}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:8081"
    assert config["metrics"]["bindAddress"] == "0"
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["integrations"]["frameworks"] == ["batch/job"]


def test_cluster_queue_nominal_quota_is_the_quota_max_in_every_namespace() -> None:
    cq = bench_peers.cluster_queue("cq0", "20", "20Gi")
    assert cq["spec"]["namespaceSelector"] == {}
    (group,) = cq["spec"]["resourceGroups"]
    (flavor,) = group["flavors"]
    assert flavor["name"] == bench_peers.KUEUE_FLAVOR
    assert flavor["resources"] == [
        {"name": "cpu", "nominalQuota": "20"},
        {"name": "memory", "nominalQuota": "20Gi"},
    ]
    assert "cohort" not in cq["spec"]


def test_kueue_job_is_the_same_suspended_job_with_the_queue_name_label() -> None:
    ours = kq.job("j1", "bench", "bq3", cpu="1", memory="1Gi")
    theirs = bench_peers.kueue_job(ours, "lq3")
    assert theirs["metadata"]["labels"][bench_peers.KUEUE_QUEUE_LABEL] == "lq3"
    assert not any("koord" in key for key in theirs["metadata"]["labels"])
    assert theirs["spec"] == ours["spec"] and theirs["spec"]["suspend"] is True
    assert bench_peers.KUEUE_QUEUE_LABEL not in ours["metadata"]["labels"]  # input untouched


def test_table_reports_ratios_ours_over_peer() -> None:
    ours = {"p50": 0.3, "p99": 1.0, "throughput": 200.0, "cpu_ms": 2.0}
    peer = {"p50": 0.15, "p99": 0.5, "throughput": 210.0, "cpu_ms": 4.0}
    row = {"workload": "placement", "size": "2000/100", "peer_name": "kube-scheduler",
           "ours": ours, "peer": peer}  # fmt: skip
    text = bench_peers.table([row])
    assert "| placement vs kube-scheduler | 2000/100 " in text
    assert "0.3 / 0.15 (2.00x)" in text and "1.0 / 0.5 (2.00x)" in text
    assert "2.0 / 4.0 (0.50x)" in text


def test_medians_over_runs() -> None:
    runs = [{"p50": v, "p99": v, "throughput": v, "cpu_ms": v} for v in (1.0, 3.0, 2.0)]
    assert bench_peers.medians(runs) == {"p50": 2.0, "p99": 2.0, "throughput": 2.0, "cpu_ms": 2.0}


def test_metrics_cert_namespace_execs_the_peer_with_its_own_argv(tmp_path: Path) -> None:
    argv = bench_peers.metrics_cert_namespace(["/bin/kueue", "--config=x"], tmp_path)
    assert argv[:4] == ["unshare", "-m", "--propagation", "private"]
    assert argv[-2:] == ["/bin/kueue", "--config=x"]
    assert bench_peers.KUEUE_METRICS_CERT_DIR in argv[6] and 'exec "$@"' in argv[6]


def test_kueue_runs_its_controllers_with_the_shipped_concurrency() -> None:
    config = bench_peers.kueue_config(cert_dir="/c", webhook_port=1, health_port=2)
    concurrency = config["controller"]["groupKindConcurrency"]
    assert concurrency["Job.batch"] == 5 and concurrency["Workload.kueue.x-k8s.io"] == 5


def _cq(*conditions: tuple[str, str]) -> dict[str, object]:
    return {"status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}


def test_kueue_is_ready_to_admit_when_every_cluster_queue_is_active() -> None:
    assert bench_peers.all_active([_cq(("Active", "True")), _cq(("Active", "True"))])
    assert not bench_peers.all_active([_cq(("Active", "True")), _cq(("Active", "False"))])
    assert not bench_peers.all_active([_cq(("Active", "True")), {}])
    assert not bench_peers.all_active([])


def test_kueue_logs_at_info_unless_reconciles_are_asked_for() -> None:
    assert bench_peers.kueue_level(1) == "info"
    assert bench_peers.kueue_level(2) == "2"


def test_placement_targets_compare_against_the_peer_in_the_same_run() -> None:
    peer = {"p50": 0.2, "p99": 0.5, "throughput": 200.0, "cpu_ms": 2.0}
    assert bench_peers.placement_targets(dict(peer), peer) == {
        "p99_le_peer": True,
        "throughput_ge_peer": True,
        "cpu_per_pod_le_peer": True,
    }
    slower = {**peer, "p99": 0.6, "throughput": 199.0, "cpu_ms": 2.1}
    assert not any(bench_peers.placement_targets(slower, peer).values())


def test_kueue_profiles_are_the_shipped_one_and_the_best_one_and_rows_say_which() -> None:
    """Issue 36: Kueue is compared both as shipped (qps 50 / burst 100, 5 workers) and at its
    best on this box (qps 2000 / burst 4000, 50 Job and Workload workers)."""
    shipped, best = (bench_peers.KUEUE_PROFILES[n] for n in ("shipped", "best"))
    config = bench_peers.kueue_config(cert_dir="/c", webhook_port=1, health_port=2,
                                      qps=shipped["qps"], burst=shipped["burst"],
                                      concurrency=shipped["concurrency"])
    assert config["clientConnection"] == {"qps": 50, "burst": 100}
    assert config["controller"]["groupKindConcurrency"]["Job.batch"] == 5
    config = bench_peers.kueue_config(cert_dir="/c", webhook_port=1, health_port=2,
                                      qps=best["qps"], burst=best["burst"],
                                      concurrency=best["concurrency"])
    workers = config["controller"]["groupKindConcurrency"]
    assert config["clientConnection"] == {"qps": 2000, "burst": 4000}
    assert workers["Job.batch"] == workers["Workload.kueue.x-k8s.io"] == 50
    assert workers["ClusterQueue.kueue.x-k8s.io"] == 1  # the rest as shipped
    assert bench_peers.kueue_profile_line("best") == (
        "best (qps 2000 / burst 4000, Job 50 / Workload 50 workers)")
    assert bench_peers.KUEUE_SHIPPED_CONCURRENCY["Job.batch"] == 5  # not changed by `best`


def test_the_binder_binds_each_pending_pod_of_its_scheduler_to_a_fixed_node() -> None:
    from bench import binder

    nodes = [f"node{i}" for i in range(7)]
    assert binder.node_for("pod00001", nodes) == binder.node_for("pod00001", nodes)
    spread = {binder.node_for(f"pod{i:05d}", nodes) for i in range(200)}
    assert spread == set(nodes)
    pending = {"metadata": {"name": "p", "namespace": "bench", "uid": "u"},
               "spec": {"schedulerName": "volcano"}}
    assert binder.wants_binding(pending, "volcano")
    assert not binder.wants_binding(pending, "default-scheduler")
    assert not binder.wants_binding({**pending, "spec": {"schedulerName": "volcano",
                                                          "nodeName": "n"}}, "volcano")
    body = binder.binding(pending, "node3")
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "node3"}
    assert body["metadata"] == {"name": "p", "namespace": "bench", "uid": "u"}


def test_floor_lines_give_each_scheduler_as_multiples_of_the_binder() -> None:
    figures = {
        "koordqueue": {"p99": 0.4, "apiserver_cpu_ms": 3.0},
        "kube-scheduler": {"p99": 0.5, "apiserver_cpu_ms": 4.0},
        "binder": {"p99": 0.2, "apiserver_cpu_ms": 2.0},
    }
    lines = bench_peers.floor_lines("2000/100", figures)
    assert len(lines) == 2
    assert "koordqueue p99 0.4 s = 2.00x the binder's 0.2 s" in lines[0]
    assert "= 1.50x the binder's 2.0 ms" in lines[0]
    assert bench_peers.floor_lines("2000/100", {"koordqueue": figures["koordqueue"]}) == []


def test_table_puts_each_controllers_peak_rss_beside_cpu_per_job() -> None:
    ours = {"p50": 0.3, "p99": 1.0, "throughput": 200.0, "cpu_ms": 2.0, "peak_rss_mb": 120.0}
    peer = {"p50": 0.5, "p99": 5.0, "throughput": 150.0, "cpu_ms": 3.0, "peak_rss_mb": 150.0}
    row = {"workload": "admission", "size": "1000/10", "peer_name": "Kueue best",
           "ours": ours, "peer": peer}  # fmt: skip
    head, rule, line = bench_peers.table([row]).splitlines()
    assert head.endswith(
        "| CPU ms per item (ours / peer, ratio) | peak RSS MB (ours / peer, ratio) |"
    )
    assert rule.count("|") == head.count("|")
    assert line.endswith("| 2.0 / 3.0 (0.67x) | 120.0 / 150.0 (0.80x) |")


def test_medians_take_the_peak_rss_over_runs() -> None:
    runs = [{"p50": 1.0, "peak_rss_mb": mb, "rss_mb": mb - 10} for mb in (130.0, 110.0, 160.0)]
    assert bench_peers.medians(runs) == {"p50": 1.0, "peak_rss_mb": 130.0, "rss_mb": 120.0}


def test_memory_of_reads_the_process_peak_and_current_rss() -> None:
    import os

    from bench.burst import rss_mb

    held = bytearray(64 * 1024 * 1024)  # 64 MB resident at least once
    held[::4096] = b"x" * len(held[::4096])
    memory = bench_peers.memory_of(os.getpid())
    assert memory["peak_rss_mb"] >= memory["rss_mb"] >= 64
    assert rss_mb(0) == pytest.approx(rss_mb(os.getpid()), abs=8)
    del held
