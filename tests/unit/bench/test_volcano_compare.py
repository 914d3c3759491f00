"""bench/volcano_scenarios.py: the objects a scenario makes and the comparison of outcomes
(issue 24, part 4). No control plane, no Go."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench import bench_volcano
from bench.volcano_scenarios import (
    DIFFERENTIAL,
    GANG_SHAPES,
    GROUP_LABEL,
    NEWER_VOLCANO,
    SCENARIOS,
    Gang,
    Outcome,
    differences,
    outcome,
)
from koordqueue.scheduler.framework.config import parse_config


def test_volcanos_gang_benchmark_shapes() -> None:
    gang = SCENARIOS["gang"]
    assert (len(gang.gangs), gang.gangs[0].replicas, gang.gangs[0].min_member) == (10, 100, 100)
    assert (gang.nodes, gang.node_cpu, gang.node_memory_gi) == (100, 32, 256)
    assert (gang.gangs[0].cpu, gang.gangs[0].memory_gi) == (1, 1)
    large = SCENARIOS["gang-large"]
    assert (len(large.gangs), large.gangs[0].replicas, large.nodes) == (20, 250, 500)
    assert GANG_SHAPES == ["gang", "gang-large"]
    assert set(DIFFERENTIAL) == {"proportion", "capability", "gang-min-member", "priority",
                                 "overcommit", "closed-queue", "reclaim", "preempt",
                                 "nodegroup", "resourcequota", "network-topology",
                                 "deviceshare", "numa-aware", "task-topology", "tdm", "sla"}
    # v1.15 actions and arguments: by name only
    assert NEWER_VOLCANO == ["vgpu-exclusive", "gangreclaim", "gangpreempt"]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_configuration_is_one_we_accept(name: str) -> None:
    config = parse_config(SCENARIOS[name].conf, name)
    assert config.actions


def test_gang_objects_carry_min_resources_class_and_group_annotation() -> None:
    gang = Gang("g", "q", 3, 2, cpu=2, memory_gi=4, priority_class="hi")
    group = gang.group("ns")
    assert group["spec"] == {"minMember": 2, "queue": "q", "priorityClassName": "hi",
                             "minResources": {"cpu": "4", "memory": "8Gi"}}
    pods = gang.pods("ns")
    assert [p["metadata"]["name"] for p in pods] == ["g-0000", "g-0001", "g-0002"]
    assert pods[0]["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "g"}
    assert pods[0]["spec"]["schedulerName"] == "volcano"
    assert pods[0]["spec"]["priorityClassName"] == "hi"


def pod(job: str, i: int, node: str | None) -> dict[str, Any]:
    return {"metadata": {"name": f"{job}-{i}",
                         "annotations": {"scheduling.k8s.io/group-name": job}},
            "spec": {"nodeName": node} if node else {}}


def test_outcome_counts_bound_evicted_phases_and_conditions() -> None:
    scenario = SCENARIOS["reclaim"]  # qa-job: 8 pods in qa, qb-job: 4 pods in qb
    assert [(g.name, g.queue, g.replicas) for g in scenario.gangs] == [
        ("qa-job", "qa", 8), ("qb-job", "qb", 4)]
    pods = [pod("qa-job", i, f"n{i % 2}") for i in range(4)]
    pods += [pod("qb-job", i, "n1") for i in range(3)] + [pod("qb-job", 3, None)]
    groups = [{"metadata": {"name": "qa-job"}, "status": {"phase": "Running", "conditions": [
        {"type": "Scheduled", "status": "True", "reason": "r", "message": "ours",
         "lastTransitionTime": "2026-01-01T00:00:05Z"},
        {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
         "lastTransitionTime": "2026-01-01T00:00:01Z"}]}},
        {"metadata": {"name": "qb-job"}}]
    result = outcome(scenario, pods, groups)
    assert result.bound_by_queue == {"qa": 4, "qb": 3}
    assert result.bound_by_job == {"qa-job": 4, "qb-job": 3}
    assert result.evicted_by_job == {"qa-job": 4}  # 8 created, 4 listed
    assert result.phases == {"qa-job": "Running", "qb-job": ""}
    assert result.conditions["qa-job"] == (("Scheduled", "True", "r"),
                                           ("Unschedulable", "True", "NotEnoughResources"))
    assert result.nodes_used == 2
    assert result.current == {"qa-job": ("Scheduled", "True", "r")}


def test_gang_shapes_compare_the_current_condition_only() -> None:
    """A stale Unschedulable beside Scheduled is timing (a session saw the gang half made)."""
    stale = Outcome({}, {}, {}, {"a": "Running"},
                    {"a": (("Scheduled", "True", "r"), ("Unschedulable", "True", "N"))},
                    current={"a": ("Scheduled", "True", "r")})
    clean = Outcome({}, {}, {}, {"a": "Running"}, {"a": (("Scheduled", "True", "r"),)},
                    current={"a": ("Scheduled", "True", "r")})
    assert differences(stale, clean, current_only=True) == []
    assert len(differences(stale, clean)) == 1
    pending = Outcome({}, {}, {}, {"a": "Running"}, {}, current={"a": ("Unschedulable", "True",
                                                                      "N")})
    assert differences(pending, clean, current_only=True) == [
        "current condition of a: ours ('Unschedulable', 'True', 'N'), "
        "volcano ('Scheduled', 'True', 'r')"]


def base() -> Outcome:
    return Outcome({"q": 4}, {"a": 4}, {}, {"a": "Running"},
                   {"a": (("Scheduled", "True", "r"),)}, nodes_used=10)


def test_equal_outcomes_have_no_differences() -> None:
    assert differences(base(), base(), compare_nodes=True) == []


def test_each_kind_of_difference_is_named() -> None:
    other = Outcome({"q": 3}, {"a": 3}, {"a": 1}, {"a": "Inqueue"},
                    {"a": (("Unschedulable", "True", "NotEnoughResources"),)}, nodes_used=10)
    found = differences(other, base())
    assert found == [
        "bound in queue q: ours 3, volcano 4",
        "bound in job a: ours 3, volcano 4",
        "evicted from job a: ours 1, volcano 0",
        "phase of a: ours Inqueue, volcano Running",
        "conditions of a: ours [('Unschedulable', 'True', 'NotEnoughResources')], "
        "volcano [('Scheduled', 'True', 'r')]",
    ]


def test_nodes_used_may_differ_by_fifteen_percent_of_volcanos() -> None:
    def used(n: int) -> Outcome:
        return Outcome({}, {}, {}, {}, {}, nodes_used=n)

    assert differences(used(115), used(100), compare_nodes=True) == []
    assert differences(used(85), used(100), compare_nodes=True) == []
    assert differences(used(116), used(100), compare_nodes=True) == [
        "nodes used: ours 116, volcano 100 (more than 15% apart)"]
    assert differences(used(116), used(100)) == []  # only the gang shapes compare nodes


def test_node_groups_per_job_are_compared() -> None:
    """nodegroup's scenario: where each job's pods went, by the nodes' group label."""
    scenario = SCENARIOS["nodegroup"]
    labels = {f"n{i}": {GROUP_LABEL: "g1" if i < 2 else "g2"} for i in range(4)}
    pods = [pod("qa-job", i, f"n{2 + i % 2}") for i in range(4)]
    pods += [pod("qb-job", i, f"n{i}") for i in range(4)]  # n2, n3 are g2
    ours = outcome(scenario, pods, [], labels)
    assert ours.groups_by_job == {"qa-job": ("g2",), "qb-job": ("g1", "g2")}
    right = outcome(scenario, pods[:4] + [pod("qb-job", i, f"n{i % 2}") for i in range(4)], [],
                    labels)
    assert differences(ours, right) == [
        "node groups of qb-job: ours ['g1', 'g2'], volcano ['g1']"]
    assert bench_volcano.as_outcome(ours.as_dict()) == ours


def test_the_gpus_each_job_holds_are_compared() -> None:
    """A bound pod's GPUs from its vGPU ids (each uuid) or gpushare index, per job."""
    scenario = SCENARIOS["vgpu-exclusive"]
    train = [pod("train", i, f"node000{i}") for i in range(2)]
    for i, p in enumerate(train):
        p["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"] = f"GPU-node{i}-a,NVIDIA,2000,0:"
    shared = pod("free", 0, "node0000")
    shared["metadata"]["annotations"]["volcano.sh/gpu-index"] = "0,2"
    ours = outcome(scenario, [*train, shared], [])
    assert ours.gpus_by_job == {"train": ("node0000/GPU-node0-a", "node0001/GPU-node1-a"),
                                "free": ("node0000/0", "node0000/2")}
    assert bench_volcano.as_outcome(ours.as_dict()) == ours
    train[1]["metadata"]["annotations"]["volcano.sh/vgpu-ids-new"] = "GPU-node0-a,NVIDIA,2000,0:"
    assert differences(ours, outcome(scenario, [*train, shared], [])) == [
        "GPUs of train: ours ['node0000/GPU-node0-a', 'node0001/GPU-node1-a'], "
        "volcano ['node0000/GPU-node0-a', 'node0001/GPU-node0-a']"]


def test_the_vgpu_scenario_registers_one_card_a_node_and_labels_the_rules_pods() -> None:
    """vgpu-exclusive: each node's register names one card and offers the three vGPU
    resources; train and late pods carry the rule's label, free's do not."""
    scenario = SCENARIOS["vgpu-exclusive"]
    assert scenario.volcano_from == "v1.15.1"
    registers = [a["volcano.sh/node-vgpu-register"] for a in scenario.node_annotations.values()]
    assert [r.count(":") for r in registers] == [1, 1]
    assert all(set(c) >= {"volcano.sh/vgpu-number", "volcano.sh/vgpu-memory",
                          "volcano.sh/vgpu-cores"} for c in scenario.node_capacity.values())
    labels = {g.name: g.pods()[0]["metadata"]["labels"].get("app") for g in scenario.gangs}
    assert labels == {"train": "train", "late": "train", "free": None}


def test_the_topology_scenario_names_volcanos_hypernodes_and_the_gangs_limit() -> None:
    scenario = SCENARIOS["network-topology"]
    tiers = {o["metadata"]["name"]: o["spec"]["tier"] for o in scenario.objects}
    assert tiers == {"s0": 1, "s1": 1, "spine": 2}
    assert scenario.gangs[0].group()["spec"]["networkTopology"] == {
        "mode": "hard", "highestTierAllowed": 1}
    # s0 has 8 cpu, s1 12: only s1 takes the gang's 6 x 2 cpu
    assert sum(1 for i in range(scenario.nodes) if scenario.node_labels[i][
        "bench-switch"] == "s1") * scenario.node_cpu == 12


def test_the_device_and_numa_scenarios_ask_what_only_one_node_has() -> None:
    """deviceshare: 12000 MiB fits no 8000 MiB GPU of node0, one 16000 MiB GPU of node1;
    numa-aware: 4 cpus fit no NUMA node of node0 (3 free on each), one of node1."""
    ds = SCENARIOS["deviceshare"]
    per_gpu = {i: int(c["volcano.sh/gpu-memory"]) // int(c["volcano.sh/gpu-number"])
               for i, c in ds.node_capacity.items()}
    assert per_gpu == {0: 8000, 1: 16000}
    limits = ds.gangs[0].pods()[0]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["volcano.sh/gpu-memory"] == "12000"
    numa = SCENARIOS["numa-aware"]
    assert [o["spec"]["numares"]["cpu"]["allocatable"] for o in numa.objects] == [
        "1-3,5-7", "0-7"]
    pod = numa.gangs[0].pods()[0]
    assert pod["metadata"]["annotations"]["volcano.sh/numa-topology-policy"] == \
        "single-numa-node"
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"]  # Guaranteed: the cpu manager's pods


def test_task_topology_pods_carry_their_task_and_the_group_its_affinity() -> None:
    gang = SCENARIOS["task-topology"].gangs[0]
    assert [p["metadata"]["annotations"]["volcano.sh/task-spec"] for p in gang.pods()] == [
        "ps", "worker", "ps", "worker"]
    assert gang.group()["metadata"]["annotations"] == {
        "volcano.sh/task-topology-affinity": "ps,worker"}


def test_an_in_cluster_identity_is_never_overwritten(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    """The peer's in-cluster files (deviceshare) refuse to replace existing ones."""
    target = tmp_path / "serviceaccount"
    target.mkdir()
    monkeypatch.setattr(bench_volcano, "IN_CLUSTER", target)
    with pytest.raises(RuntimeError, match="not overwriting"), \
            bench_volcano.in_cluster(object(), object()):
        pass


def test_the_resource_quota_is_invisible_to_the_api_servers_pod_admission() -> None:
    """Scoped to Terminating pods: the scenario's pods (no activeDeadlineSeconds) are not
    charged at creation, so only the schedulers' enqueue check reads it."""
    quota = SCENARIOS["resourcequota"].objects[0]
    assert quota["spec"]["scopes"] == ["Terminating"]
    assert all("activeDeadlineSeconds" not in p["spec"]
               for g in SCENARIOS["resourcequota"].gangs for p in g.pods())


def test_outcomes_round_trip_through_the_json_lines() -> None:
    assert bench_volcano.as_outcome(base().as_dict()) == base()


def test_vc_scheduler_runs_the_scenario_file_on_loopback_without_election() -> None:
    argv = bench_volcano.vc_argv("/bin/vc", "/k", Path("/c.conf"), 1, 2)
    assert "--scheduler-conf=/c.conf" in argv and "--leader-elect=false" in argv
    assert "--healthz-address=127.0.0.1:1" in argv and "--listen-address=127.0.0.1:2" in argv
