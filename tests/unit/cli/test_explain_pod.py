"""`koordqueue explain pod/NAME`: one test per pending reason, from dict-fed caches (no cluster).

The objects are API-shaped dicts fed into the scheduler adapter's own `SchedulerCache`, so
the snapshot, the dry session and the per-node reasons are exactly the scheduler's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koordqueue.cli import explain as cli_explain
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.kube.scheduler.explain_pod import PodVerdict, explain_pod, read_cluster
from koordqueue.scheduler import default_config, parse_config
from koordqueue.scheduler.gates import GATE_NAME, OPT_IN_ANNOTATION
from tests.unit.cli.helpers import run

NS = "team"
GANG_ANNOTATION = "scheduling.k8s.io/group-name"


def node(name: str, cpu: str = "4", *, labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None, cordoned: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": taints or []}
    if cordoned:
        spec["unschedulable"] = True
    resources = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "metadata": {"name": name, "labels": labels or {}, "resourceVersion": "1"},
        "spec": spec,
        "status": {"allocatable": resources, "capacity": resources,
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(name: str, cpu: str = "1", *, scheduler: str | None = "volcano",
        selector: dict[str, str] | None = None, group: str | None = None,
        gates: list[str] | None = None, annotations: dict[str, str] | None = None,
        node_name: str | None = None, phase: str = "Pending",
        affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    notes = dict(annotations or {})
    if group:
        notes[GANG_ANNOTATION] = group
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    if selector:
        spec["nodeSelector"] = selector
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node_name:
        spec["nodeName"] = node_name
    if affinity:
        spec["affinity"] = affinity
    return {
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "annotations": notes,
                     "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
        "status": {"phase": phase},
    }


def pod_group(name: str, min_member: int, queue: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS, "uid": f"pg-{name}"},
            "spec": {"minMember": min_member, "queue": queue}}


def queue(name: str = "default", capability: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": 1}
    if capability:
        spec["capability"] = capability
    return {"metadata": {"name": name}, "spec": spec}


def cache_of(nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
             groups: list[dict[str, Any]] | None = None,
             queues: list[dict[str, Any]] | None = None) -> SchedulerCache:
    cache = SchedulerCache("volcano")
    cache.replace(CachedKind.NODE, nodes)
    cache.replace(CachedKind.POD, pods)
    cache.replace(CachedKind.POD_GROUP, groups or [])
    cache.replace(CachedKind.QUEUE, [queue()] if queues is None else queues)
    return cache


def explain_one(target: dict[str, Any], nodes: list[dict[str, Any]],
                others: list[dict[str, Any]] | None = None, **kw: Any) -> Any:
    gates = kw.pop("gates_enabled", False)
    config = kw.pop("config", default_config())
    cache = cache_of(nodes, [target, *(others or [])], **kw)
    return explain_pod(target, cache, config, gates_enabled=gates)


def reasons(ex: Any) -> dict[str, tuple[str, ...]]:
    return {n.node: n.reasons for n in ex.nodes}


# --- per-node predicate reasons -------------------------------------------------------------


def test_too_big_for_every_node_gives_insufficient_cpu_per_node() -> None:
    ex = explain_one(pod("big", cpu="16"), [node("n1", "4"), node("n2", "8")])
    assert ex.verdict is PodVerdict.UNSCHEDULABLE
    assert reasons(ex) == {"n1": ("Insufficient cpu",), "n2": ("Insufficient cpu",)}
    assert ex.message == "0/2 nodes are available: 2 Insufficient cpu."
    assert ex.fitting_nodes == []
    assert ex.request == {"cpu": "16", "memory": "1Gi"}


def test_room_taken_by_a_bound_pod_counts() -> None:
    running = pod("running", cpu="3", node_name="n1", phase="Running")
    ex = explain_one(pod("p", cpu="2"), [node("n1", "4")], [running])
    assert reasons(ex) == {"n1": ("Insufficient cpu",)}


def test_node_selector_mismatch_and_insufficient_mix_into_one_message() -> None:
    ex = explain_one(pod("p", cpu="6", selector={"disk": "ssd"}),
                     [node("plain", "8"), node("ssd", "4", labels={"disk": "ssd"})])
    assert ex.verdict is PodVerdict.UNSCHEDULABLE
    assert reasons(ex) == {"plain": ("node(s) didn't match node selector",),
                           "ssd": ("Insufficient cpu",)}
    assert ex.message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match node selector."
    )


def test_untolerated_taint_and_cordoned_node() -> None:
    tainted = node("t", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    ex = explain_one(pod("p"), [tainted, node("c", cordoned=True)])
    assert reasons(ex) == {"t": ("node(s) had untolerated taint {gpu: yes}",),
                           "c": ("node(s) were unschedulable",)}
    assert ex.verdict is PodVerdict.UNSCHEDULABLE


def test_no_ready_nodes() -> None:
    """kube-scheduler's words for an empty cluster (ErrNoNodesAvailable; issue 33.9)."""
    ex = explain_one(pod("p"), [])
    assert ex.verdict is PodVerdict.UNSCHEDULABLE
    assert ex.message == "no nodes available to schedule pods"


def test_invalid_affinity_is_a_pre_predicate_failure_on_every_node() -> None:
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "Near", "values": ["a"]}]}]}}}
    ex = explain_one(pod("p", affinity=affinity), [node("n1"), node("n2")])
    assert ex.verdict is PodVerdict.PRE_PREDICATE
    assert all("invalid node affinity operator 'Near'" in r[0] for r in reasons(ex).values())


def test_a_pod_that_fits_would_bind_in_the_dry_session_and_nothing_is_applied() -> None:
    target = pod("p", cpu="2", selector={"disk": "ssd"})
    cache = cache_of([node("plain"), node("ssd", labels={"disk": "ssd"})], [target])
    ex = explain_pod(target, cache, default_config())
    assert ex.verdict is PodVerdict.WOULD_BIND
    assert ex.dry_run_node == "ssd"
    assert [n.node for n in ex.nodes if n.fits] == ["ssd"]
    assert ex.message is None
    # dry: the cache holds no assumed bind, the next build still sees the pod pending
    again = explain_pod(target, cache, default_config())
    assert again.verdict is PodVerdict.WOULD_BIND


def test_scheduler_conf_is_used_for_the_dry_session() -> None:
    no_predicates = parse_config(
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
    )
    target = pod("p", selector={"disk": "ssd"})
    assert explain_one(target, [node("n1")]).verdict is PodVerdict.UNSCHEDULABLE
    ex = explain_one(target, [node("n1")], config=no_predicates)
    assert ex.verdict is PodVerdict.WOULD_BIND


# --- scheduler name, bound, finished ---------------------------------------------------------


def test_other_scheduler_is_named() -> None:
    ex = explain_one(pod("p", scheduler=None), [node("n1")])
    assert ex.verdict is PodVerdict.OTHER_SCHEDULER
    assert ex.scheduler_name == "default-scheduler"
    assert "not 'volcano'" in ex.summary
    assert ex.nodes == []


def test_bound_pod() -> None:
    ex = explain_one(pod("p", node_name="n1"), [node("n1")])
    assert ex.verdict is PodVerdict.BOUND
    assert ex.node_name == "n1"
    assert "already bound to node n1" in ex.summary


def test_finished_pod() -> None:
    ex = explain_one(pod("p", node_name="n1", phase="Succeeded"), [node("n1")])
    assert ex.verdict is PodVerdict.FINISHED


# --- scheduling gates -------------------------------------------------------------------------


def test_foreign_gate_is_never_removed_by_us() -> None:
    ex = explain_one(pod("p", gates=["example.com/wait", GATE_NAME],
                         annotations={OPT_IN_ANNOTATION: "true"}), [node("n1")])
    assert ex.verdict is PodVerdict.FOREIGN_GATES
    assert ex.foreign_gates == ["example.com/wait"]
    assert ex.our_gate and ex.opted_in
    assert "example.com/wait" in ex.summary


def test_our_gate_without_opt_in() -> None:
    ex = explain_one(pod("p", gates=[GATE_NAME]), [node("n1")], gates_enabled=True)
    assert ex.verdict is PodVerdict.GATE_WITHOUT_OPT_IN
    assert not ex.opted_in
    assert "never removes it" in ex.summary


def test_foreign_and_our_gate_without_opt_in_notes_both() -> None:
    ex = explain_one(pod("p", gates=[GATE_NAME, "example.com/wait"]), [node("n1")])
    assert ex.verdict is PodVerdict.FOREIGN_GATES
    assert any("never be un-gated" in n for n in ex.notes)


def test_our_gate_with_opt_in_and_the_feature_off() -> None:
    ex = explain_one(pod("p", gates=[GATE_NAME], annotations={OPT_IN_ANNOTATION: "true"}),
                     [node("n1")])
    assert ex.verdict is PodVerdict.GATED
    assert "SchedulingGatesQueueAdmission=true" in ex.summary
    # the nodes are still evaluated: where it would go once un-gated
    assert ex.fitting_nodes == ["n1"]


def test_our_gate_released_when_the_queue_has_room() -> None:
    ex = explain_one(pod("p", gates=[GATE_NAME], annotations={OPT_IN_ANNOTATION: "true"}),
                     [node("n1")], gates_enabled=True)
    assert ex.verdict is PodVerdict.GATE_RELEASE


def test_our_gate_waits_for_queue_capacity() -> None:
    target = pod("p", cpu="2", gates=[GATE_NAME], annotations={OPT_IN_ANNOTATION: "true"})
    ex = explain_one(target, [node("n1", "8")], gates_enabled=True,
                     queues=[queue(capability={"cpu": "1"})])
    assert ex.verdict is PodVerdict.WAITING_FOR_QUEUE
    assert "queue default" in ex.summary


# --- PodGroup, queue, gang --------------------------------------------------------------------


def test_missing_pod_group() -> None:
    ex = explain_one(pod("p", group="nowhere"), [node("n1")])
    assert ex.verdict is PodVerdict.POD_GROUP_NOT_FOUND
    assert ex.pod_group == f"{NS}/nowhere" and ex.pod_group_exists is False


def test_missing_queue_drops_the_job() -> None:
    ex = explain_one(pod("p", group="g"), [node("n1")], groups=[pod_group("g", 1, "gone")])
    assert ex.verdict is PodVerdict.QUEUE_NOT_FOUND
    assert ex.queue == "gone" and ex.queue_exists is False
    assert "dropped" in ex.summary


def test_missing_default_queue_drops_a_standalone_pod() -> None:
    ex = explain_one(pod("p"), [node("n1")], queues=[])
    assert ex.verdict is PodVerdict.QUEUE_NOT_FOUND
    assert ex.queue == "default"


def test_gang_min_available_keeps_a_fitting_pod_from_binding() -> None:
    members = [pod(f"m{i}", cpu="3", group="g") for i in range(2)]
    ex = explain_one(members[0], [node("n1", "4")], members[1:], groups=[pod_group("g", 2)])
    assert ex.verdict is PodVerdict.GANG_NOT_READY
    assert ex.fitting_nodes == ["n1"]
    assert ex.gang is not None
    assert (ex.gang.min_available, ex.gang.tasks, ex.gang.placed_in_dry_run) == (2, 2, 0)
    assert ex.gang.condition is not None and "2/2 tasks in gang unschedulable" in ex.gang.condition


def test_gang_with_fewer_pods_than_min_member() -> None:
    ex = explain_one(pod("m0", group="g"), [node("n1")], groups=[pod_group("g", 3)])
    assert ex.verdict is PodVerdict.JOB_INVALID
    assert "valid: 1, min: 3" in ex.summary


def test_gang_that_fits_would_bind() -> None:
    members = [pod(f"m{i}", cpu="1", group="g") for i in range(2)]
    ex = explain_one(members[0], [node("n1", "4")], members[1:], groups=[pod_group("g", 2)])
    assert ex.verdict is PodVerdict.WOULD_BIND
    assert ex.gang is not None and ex.gang.placed_in_dry_run == 2


def test_pod_group_not_enqueued_when_the_queue_cannot_take_min_resources() -> None:
    group = pod_group("g", 1)
    group["spec"]["minResources"] = {"cpu": "4"}
    ex = explain_one(pod("m0", group="g"), [node("n1", "8")], groups=[group],
                     queues=[queue(capability={"cpu": "1"})])
    assert ex.verdict is PodVerdict.NOT_ENQUEUED
    assert ex.pod_group_phase == "Pending"


def test_queue_capability_refuses_a_pod_that_fits_a_node() -> None:
    ex = explain_one(pod("p", cpu="2"), [node("n1", "8")],
                     queues=[queue(capability={"cpu": "1"})])
    assert ex.verdict is PodVerdict.QUEUE_REFUSED
    assert ex.fitting_nodes == ["n1"]
    # what the pod's condition says: the gang's words, then the queue's refusal (issue 33.9)
    assert ex.message == (
        "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; "
        "queue default cannot take the request (capability reached)"
    )


# --- reading is read-only ------------------------------------------------------------------


class FakeApi:
    """Answers GET/LIST from dicts and fails on anything else."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects
        self.calls: list[str] = []

    def get(self, kind: Any, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        self.calls.append(f"GET {kind.plural}")
        for obj in self.objects.get(kind.plural, []):
            m = obj["metadata"]
            if m["name"] == name and m.get("namespace") == namespace:
                return obj
        return None

    def list_objects(self, kind: Any, namespace: str | None = None) -> list[dict[str, Any]]:
        self.calls.append(f"LIST {kind.plural}")
        return list(self.objects.get(kind.plural, []))

    def list_with_version(
        self, kind: Any, namespace: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        return self.list_objects(kind, namespace), "1"

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"explain must only read, but called {name}")


def test_read_cluster_only_gets_and_lists() -> None:
    target = pod("p", cpu="16")
    api = FakeApi({"pods": [target], "nodes": [node("n1")], "queues": [queue()]})
    found, cache = read_cluster(api, NS, "p", "volcano")  # type: ignore[arg-type]
    assert found == target
    assert all(c.split()[0] in ("GET", "LIST") for c in api.calls)
    assert explain_pod(found, cache, default_config()).verdict is PodVerdict.UNSCHEDULABLE
    missing, _ = read_cluster(api, NS, "nope", "volcano")  # type: ignore[arg-type]
    assert missing is None


# --- the CLI ------------------------------------------------------------------------------------


@pytest.fixture
def fake_cluster(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Replace the cluster read with dicts: {"pods": [...], "nodes": [...], ...}."""
    objects: dict[str, Any] = {"pods": [], "nodes": [node("n1", "4"), node("n2", "2")],
                               "queues": [queue()], "podgroups": []}

    def read_pod(namespace: str, name: str, kubeconfig: str | None, context: str | None,
                 scheduler_name: str) -> Any:
        target = next((p for p in objects["pods"] if p["metadata"]["name"] == name
                       and p["metadata"]["namespace"] == namespace), None)
        if target is None:
            return None
        cache = SchedulerCache(scheduler_name)
        cache.replace(CachedKind.NODE, objects["nodes"])
        cache.replace(CachedKind.POD, objects["pods"])
        cache.replace(CachedKind.POD_GROUP, objects["podgroups"])
        cache.replace(CachedKind.QUEUE, objects["queues"])
        return target, cache, "cluster fake", objects.get("expired_at")

    monkeypatch.setattr(cli_explain, "read_pod", read_pod)
    return objects


def test_cli_table_lists_every_node_with_its_reason(
    capsys: pytest.CaptureFixture[str], fake_cluster: dict[str, Any]
) -> None:
    fake_cluster["pods"].append(pod("big", cpu="3", selector={"disk": "ssd"}))
    r = run(capsys, "explain", "-n", NS, "pod/big")
    assert r.code == 0, r.err
    fields = dict(ln.split(":", 1) for ln in r.out.split("\n\n")[0].splitlines())
    assert fields["Reason"].strip() == "Unschedulable"
    assert fields["Scheduler"].strip() == "volcano"
    assert fields["Queue"].strip() == "default"
    assert fields["Message"].strip() == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match node selector."
    )
    rows = {ln.split()[0]: ln for ln in r.out.split("\n\n")[1].splitlines()[1:]}
    assert rows["n1"].split()[1] == "NO" and "didn't match node selector" in rows["n1"]
    assert rows["n2"].split()[1] == "NO" and "Insufficient cpu" in rows["n2"]


def test_cli_table_for_a_pod_that_fits(
    capsys: pytest.CaptureFixture[str], fake_cluster: dict[str, Any]
) -> None:
    fake_cluster["pods"].append(pod("p", cpu="3"))
    r = run(capsys, "explain", "-n", NS, "pod/p")
    assert r.code == 0, r.err
    assert "WouldBind" in r.out and "Message:" not in r.out
    rows = {ln.split()[0]: ln.split() for ln in r.out.split("\n\n")[1].splitlines()[1:]}
    assert rows["n1"][1:3] == ["yes", "fits"]
    assert rows["n2"][1] == "NO"


def test_cli_json_and_the_pod_flag(
    capsys: pytest.CaptureFixture[str], fake_cluster: dict[str, Any]
) -> None:
    fake_cluster["pods"].append(pod("big", cpu="16"))
    r = run(capsys, "explain", "-n", NS, "--pod", "big", "-o", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["verdict"] == "Unschedulable"
    assert doc["message"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert {n["node"]: n["reasons"] for n in doc["nodes"]} == {
        "n1": ["Insufficient cpu"], "n2": ["Insufficient cpu"]}
    assert doc["source"] == "cluster fake" and doc["scheduler_conf"] == "default"


def test_cli_scheduler_conf_file(
    capsys: pytest.CaptureFixture[str], fake_cluster: dict[str, Any], tmp_path: Path
) -> None:
    fake_cluster["pods"].append(pod("p", selector={"disk": "ssd"}))
    conf = tmp_path / "sched.yaml"
    conf.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    r = run(capsys, "explain", "-n", NS, "pod/p", "--scheduler-conf", conf, "-o", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["verdict"] == "WouldBind"


def test_cli_not_found_is_exit_1(
    capsys: pytest.CaptureFixture[str], fake_cluster: dict[str, Any]
) -> None:
    r = run(capsys, "explain", "-n", NS, "pod/ghost")
    assert r.code == 1
    assert f"pod {NS}/ghost not found" in r.err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["pod/"], "pod must be"),
        (["unit", "--pod", "p"], "either NAME or --pod"),
        (["--pod", "p", "--scenario", "x.yaml"], "needs a live cluster"),
        (["--pod", "p", "--feature-gates", "Nope=true"], "unknown feature gate"),
        (["--pod", "p", "--feature-gates", "SchedulingGatesQueueAdmission"], "expected Name="),
        (["--pod", "p", "--scheduler-conf", "/nonexistent/sched.yaml"], "cannot read"),
        ([], "is required"),
    ],
)
def test_cli_bad_input_is_exit_2(
    capsys: pytest.CaptureFixture[str], fake_cluster: dict[str, Any], argv: list[str],
    needle: str,
) -> None:
    r = run(capsys, "explain", *argv)
    assert r.code == 2
    assert needle in r.err


def test_cli_bad_scheduler_conf_names_the_file(
    capsys: pytest.CaptureFixture[str], fake_cluster: dict[str, Any], tmp_path: Path
) -> None:
    conf = tmp_path / "bad.yaml"
    conf.write_text("actions: [\n")
    r = run(capsys, "explain", "--pod", "p", "--scheduler-conf", conf)
    assert r.code == 2
    assert str(conf) in r.err


def test_cli_bad_kubeconfig_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    r = run(capsys, "explain", "pod/p", "--kubeconfig", tmp_path / "missing")
    assert r.code == 2
    assert "cannot load kubeconfig" in r.err


def test_troubleshooting_covers_every_pod_verdict() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "troubleshooting.md").read_text("utf-8")
    missing = [v.value for v in PodVerdict if f"`{v.value}`" not in text]
    assert not missing
