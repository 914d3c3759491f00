"""`koordqueue snapshot --nodes` (simulation/snapshot_nodes.py): the nodes and what runs on
them, carried so that the replay places pods around what already runs (issue 29 point 1:
running pods' requests)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import NodeInfo
from koordqueue.scheduler.api.task_info import Taint
from koordqueue.simulation.scenario import parse_scenario
from koordqueue.simulation.simulator import SimulationResult, simulate
from koordqueue.simulation.snapshot import snapshot_from_objects
from koordqueue.simulation.snapshot_nodes import LiveNodes
from koordqueue.simulation.whatif import apply_edits, parse_edit
from tests.unit.simulation.test_snapshot import NOW, quota, unit

POOL = {"pool": "p"}


def node(name: str, cpu: str, pods: str = "110", **kw: Any) -> NodeInfo:
    return NodeInfo(name, Resources.parse({"cpu": cpu, "pods": pods}), labels=POOL, **kw)


def job_unit(name: str, cpu: str, pods: int, *, phase: str | None = None,
             selector: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    """A Job's QueueUnit: owned by the Job (uid job-<name>), one pod set of `pods` pods."""
    obj = unit(name, "a", cpu, phase=phase, message=f"{name} says", **kw)
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": f"job-{name}"}]
    per_pod = f"{int(cpu) * 1000 // pods}m"
    template = {"containers": [{"name": "m", "resources": {"requests": {"cpu": per_pod}}}]}
    if selector is not None:
        template["nodeSelector"] = selector
    obj["spec"]["podSet"] = [{"name": "main", "count": pods, "template": {"spec": template}}]
    return obj


def pod(name: str, node_name: str | None, cpu: str, owner: str | None = None,
        phase: str = "Running") -> dict[str, Any]:
    refs = [{"kind": "Job", "name": owner, "uid": f"job-{owner}"}] if owner else []
    spec: dict[str, Any] = {
        "containers": [{"name": "m", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "ownerReferences": refs},
            "spec": spec, "status": {"phase": phase}}


def cluster(**kw: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """a (2 pods of 1 cpu) and b (1 cpu) run; c (1 cpu) is admitted and has no pod yet;
    `other` (no unit's) holds 1 cpu on n2; d waits for the quota (4 cpu)."""
    return ([quota("a", "4")], [], [
        job_unit("a", "2", 2, phase="Running", age=90, selector=POOL),
        job_unit("b", "1", 1, phase="Running", age=80, selector=POOL),
        job_unit("c", "1", 1, phase="Dequeued", age=70, selector=POOL),
        job_unit("d", "1", 1, age=60, **kw),
    ])


LIVE = LiveNodes(
    [node("n1", "2"), node("n2", "2")],
    [pod("a-x", "n1", "1", "a"), pod("a-y", "n1", "1", "a"), pod("b-x", "n2", "1", "b"),
     pod("other", "n2", "1"), pod("gone", "n2", "1", phase="Succeeded"),
     pod("pending", None, "1", "d")],
)


def replayed(snap_yaml: str) -> SimulationResult:
    return simulate(parse_scenario(snap_yaml, "snap"))


def test_running_pods_and_other_pods_are_carried_and_the_replay_places_around_them() -> None:
    """n1 runs a's two pods, n2 b's and a pod of no unit: c, admitted, finds no room and
    stays Dequeued (as live, where the scheduler leaves its pod pending); a and b are not
    placed again."""
    snap = snapshot_from_objects(*cluster(), now=NOW, nodes=LIVE)
    units = {u["name"]: u for u in snap.doc["units"]}
    assert units["a"]["runningPods"] == [
        {"name": "a-x", "node": "n1", "request": {"cpu": "1"}},
        {"name": "a-y", "node": "n1", "request": {"cpu": "1"}}]
    assert units["b"]["runningPods"] == [{"name": "b-x", "node": "n2", "request": {"cpu": "1"}}]
    assert "runningPods" not in units["c"] and "runningPods" not in units["d"]
    assert units["c"]["nodeSelector"] == POOL
    assert snap.doc["nodes"] == [
        {"name": "n1", "allocatable": {"cpu": "2", "pods": "110"}, "labels": POOL},
        {"name": "n2", "allocatable": {"cpu": "2", "pods": "110"}, "labels": POOL,
         "occupied": {"pods": 1, "request": {"cpu": "1"}}},
    ]
    assert snap.notes[1:] == ["QueueUnit ns/c is admitted and none of its pods runs on a node "
                          "(or they are not its own: docs/whatif.md): the replay places them"]
    result = replayed(snap.to_yaml())
    assert result.final_phases() == {"ns/a": "Running", "ns/b": "Running", "ns/c": "Dequeued",
                                     "ns/d": "Enqueued"}
    assert not any(r.placements for r in result.steps)
    (why,) = {e.message for r in result.steps for e in r.events if e.unit == "ns/c"}
    assert "Insufficient cpu" in why


def test_with_room_left_the_admitted_unit_is_placed_beside_what_runs() -> None:
    """n2 bigger: c's pod goes where there is room, and c runs."""
    live = LiveNodes([node("n1", "2"), node("n2", "3")], LIVE.pods)
    result = replayed(snapshot_from_objects(*cluster(), now=NOW, nodes=live).to_yaml())
    assert result.final_phases()["ns/c"] == "Running"
    assert {p: n for r in result.steps for p, n in r.placements.get("ns/c", {}).items()} == {
        "c-0": "n2"}


def test_without_nodes_the_snapshot_says_nothing_of_placement() -> None:
    snap = snapshot_from_objects(*cluster(), now=NOW)
    assert "nodes" not in snap.doc
    assert not any({"runningPods", "nodeSelector", "tolerations"} & set(u)
                   for u in snap.doc["units"])
    assert replayed(snap.to_yaml()).final_phases()["ns/c"] == "Dequeued"  # (no placement)


def test_what_cannot_be_carried_is_a_note() -> None:
    bad = pod("bad", "n1", "lots", "a")
    objects = cluster(selector={"pool": "p"})
    objects[2][3]["spec"]["podSet"].append({"name": "other", "count": 1, "template": {
        "spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}],
                 "nodeSelector": {"zone": "z"}, "tolerations": [{"operator": "Exists"}],
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "zone", "operator": "In", "values": ["z"]}]}]}}}}}})
    live = LiveNodes([node("n1", "2")], [pod("far", "n9", "1", "a"), bad],
                     ["node n3 is not Ready: left out (the scheduler places nothing there)"])
    snap = snapshot_from_objects(*objects, now=NOW, nodes=live)
    text = "\n".join(snap.notes)
    assert "node n3 is not Ready" in text
    assert "Pod ns/far runs on node n9, which is not among the ready nodes read: left out" in text
    assert "Pod ns/bad: " in text and "'lots'" in text and "counted as requesting nothing" in text
    assert "QueueUnit ns/d: its pod sets ask for different nodeSelectors: none carried" in text
    assert "QueueUnit ns/d: its pod sets tolerate different taints: none carried" in text
    assert "QueueUnit ns/d: its required node affinity is not carried" in text
    units = {u["name"]: u for u in snap.doc["units"]}
    assert units["a"]["runningPods"] == [{"name": "bad", "node": "n1", "request": {}}]
    assert not {"nodeSelector", "tolerations"} & set(units["d"])
    replayed(snap.to_yaml())  # (and the file is a scenario)


def test_a_pod_group_unit_owns_its_pods_and_taints_and_tolerations_come_along() -> None:
    """A pod group's unit is owned by its pods; the node's taint is carried, and so is the
    unit's toleration of it, so the replay places the rest of the group there."""
    group = unit("g", "a", "2", phase="Dequeued", message="in")
    group["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "g-0", "uid": "uid-g-0"}]
    template = {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}],
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    group["spec"]["podSet"] = [{"name": "main", "count": 2, "template": {"spec": template}}]
    tainted = node("t", "2", taints=(Taint("gpu", "", "NoSchedule"),))
    live = LiveNodes([tainted, node("cordoned", "8", unschedulable=True)],
                     [pod("g-0", "t", "1")])
    snap = snapshot_from_objects([quota("a", "4")], [], [group], now=NOW, nodes=live)
    (entry,) = snap.doc["units"]
    assert entry["runningPods"] == [{"name": "g-0", "node": "t", "request": {"cpu": "1"}}]
    assert entry["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert snap.doc["nodes"][0]["unschedulable"] is True
    assert snap.doc["nodes"][1]["taints"] == [{"key": "gpu", "effect": "NoSchedule"}]
    result = replayed(snap.to_yaml())
    assert result.final_phases() == {"ns/g": "Running"}
    assert result.steps[0].placements == {"ns/g": {"g-1": "t"}}
    entry.pop("tolerations")  # (the taint then refuses the rest of the group)
    assert replayed(snap.to_yaml()).final_phases() == {"ns/g": "Dequeued"}


@settings(max_examples=60, deadline=None)
@given(
    caps=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    runs=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 2), st.booleans()), max_size=5),
    want=st.integers(1, 3),
)
def test_the_replay_places_a_new_pod_only_where_what_runs_leaves_room(
    caps: list[int], runs: list[tuple[int, int, bool]], want: int,
) -> None:
    """Random nodes, each running pods of admitted units or of no unit (as the snapshot
    carries them); an admitted unit with no pod yet runs in the replay exactly when some
    node's cpu left after what runs there is at least its request, and nothing that runs
    moves."""
    nodes = [node(f"n{i}", str(c)) for i, c in enumerate(caps)]
    used = [0] * len(caps)
    units, pods = [], []
    for i, (at, cpu, owned) in enumerate(runs):
        if at >= len(caps) or used[at] + cpu > caps[at]:
            continue
        used[at] += cpu
        if owned:
            units.append(job_unit(f"r{i}", str(cpu), 1, phase="Running", age=90 - i))
        pods.append(pod(f"r{i}-x", f"n{at}", str(cpu), f"r{i}" if owned else None))
    units.append(job_unit("new", str(want), 1, phase="Dequeued", age=10))
    snap = snapshot_from_objects([quota("a", "100")], [], units, now=NOW,
                                 nodes=LiveNodes(nodes, pods))
    result = replayed(snap.to_yaml())
    room = any(c - u >= want for c, u in zip(caps, used, strict=True))
    assert result.final_phases()["ns/new"] == ("Running" if room else "Dequeued")
    assert set(result.steps[0].placements) <= {"ns/new"}


def test_units_a_whatif_adds_like_a_running_one_have_no_pods_running() -> None:
    """`--add` copies a unit's kind (quota, request, priority), not its live state: a copy of
    a running unit arrives waiting, with no running pods and no admissions."""
    snap = snapshot_from_objects(*cluster(), now=NOW, nodes=LIVE)
    scenario = apply_edits(parse_scenario(snap.to_yaml()), [parse_edit("add", "ns/a=1")])
    (copy,) = [u for u in scenario.units if u.name == "a-whatif-1"]
    assert (copy.phase, copy.running_pods, copy.admissions) == ("Enqueued", (), ())
    assert copy.pods == 2 and copy.node_selector == POOL
