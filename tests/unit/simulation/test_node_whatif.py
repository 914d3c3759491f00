"""`whatif --nodes`: dry scheduling sessions before and after node and queue edits
(simulation/node_whatif.py, issue 29 part 3)."""

from __future__ import annotations

import pytest

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.framework import ClusterSnapshot
from koordqueue.scheduler.framework.indexed import index_snapshot
from koordqueue.simulation.node_whatif import apply_node_edits, node_what_if, parse_node_edit
from koordqueue.simulation.whatif import EditError

CPU = Resources.of


def job(uid: str, queue: str, cpus: list[int], node: str | None = None) -> JobInfo:
    tasks = [
        TaskInfo(f"{uid}-{i}", f"{uid}-{i}", "ns", uid, CPU(cpu=str(c)),
                 status=TaskStatus.RUNNING if node else TaskStatus.PENDING, node_name=node)
        for i, c in enumerate(cpus)
    ]
    return JobInfo(uid, uid, namespace="ns", queue=queue, min_available=len(cpus), tasks=tasks)


def cluster(capability: str | None = None) -> ClusterSnapshot:
    cap = CPU(cpu=capability) if capability else None
    return ClusterSnapshot(
        nodes=[NodeInfo("n1", CPU(cpu="4")), NodeInfo("n2", CPU(cpu="1"))],
        jobs=[job("web", "a", [2, 2], node="n1"), job("train", "b", [2, 2])],
        queues=[QueueInfo("a"), QueueInfo("b", capability=cap)],
    )


Fates = dict[str, list[tuple[str, str, str]]]


def fates(snapshot: ClusterSnapshot, *edits: tuple[str, str]) -> Fates:
    result = node_what_if(snapshot, [parse_node_edit(k, v) for k, v in edits])
    return {q: [(c.pod, c.before, c.after) for c in changes]
            for q, changes in result.by_queue().items()}


def test_added_nodes_place_the_gang_that_waited() -> None:
    assert fates(cluster(), ("add-nodes", "1=cpu=4")) == {"b": [
        ("ns/train-0", "pending", "placed on whatif-node-1"),
        ("ns/train-1", "pending", "placed on whatif-node-1"),
    ]}


def test_a_drained_nodes_pods_are_pending_again_and_placed_where_they_fit() -> None:
    got = fates(cluster(), ("add-nodes", "2=cpu=4"), ("drain-node", "n1"))
    assert [(pod, before) for pod, before, _ in got["a"]] == [
        ("ns/web-0", "on n1"), ("ns/web-1", "on n1")]
    assert all(after.startswith("placed on whatif-node-") for _, _, after in got["a"])
    assert len(got["b"]) == 2  # and train places too


def test_a_drained_node_without_room_elsewhere_leaves_its_pods_pending() -> None:
    """Queue a's fair share (proportion: half of the 5 cpu left with queue b asking) is below
    web's 4-cpu gang: it waits."""
    assert fates(cluster(), ("add-nodes", "1=cpu=4"), ("drain-node", "n1"))["a"] == [
        ("ns/web-0", "on n1", "pending"), ("ns/web-1", "on n1", "pending")]


def test_a_queue_capability_holds_its_jobs_back() -> None:
    """Room on a new node, but queue b may use 2 cpu: the 4-cpu gang stays pending; with the
    capability raised it places (the proportion plugin reads it)."""
    assert fates(cluster(capability="2"), ("add-nodes", "1=cpu=4")) == {}
    assert fates(cluster(capability="2"), ("add-nodes", "1=cpu=4"),
                 ("queue-capability", "b=cpu=8"))["b"][0][2] == "placed on whatif-node-1"


def test_added_nodes_carry_their_labels() -> None:
    edited = apply_node_edits(cluster(), [parse_node_edit("add-nodes", "2=cpu=4;zone=a,x=y")])
    assert [(n.name, n.labels) for n in edited.nodes[2:]] == [
        ("whatif-node-1", {"zone": "a", "x": "y"}), ("whatif-node-2", {"zone": "a", "x": "y"})]


@pytest.mark.parametrize("edits", [
    (("add-nodes", "1=cpu=4"),),
    (("add-nodes", "2=cpu=4"), ("drain-node", "n1")),
    (("add-nodes", "1=cpu=4"), ("drain-node", "n1")),
])
def test_the_scheduler_caches_indexed_snapshot_gives_the_same_fates(
    edits: tuple[tuple[str, str], ...],
) -> None:
    """`whatif --nodes` reads the cluster through the scheduler's cache, which builds an
    IndexedSnapshot: a session on one reads nodes and jobs from its index, so the edits
    must not be left on lists the session never reads (the e2e found the added node unused)."""
    want = fates(cluster(), *edits)
    assert want and fates(index_snapshot(cluster()), *edits) == want


def test_edits_leave_the_snapshot_untouched() -> None:
    snapshot = cluster()
    apply_node_edits(snapshot, [parse_node_edit("drain-node", "n1")])
    assert [t.node_name for t in snapshot.jobs[0].tasks.values()] == ["n1", "n1"]
    assert [n.name for n in snapshot.nodes] == ["n1", "n2"]


@pytest.mark.parametrize(("kind", "raw", "says"), [
    ("drain-node", "n9", "no node 'n9' in the cluster (nodes: n1, n2)"),
    ("add-nodes", "two=cpu=4", "N must be an integer, got 'two'"),
    ("add-nodes", "2=cpu=lots", "'lots': does not match the quantity syntax"),
    ("queue-weight", "zz=2", "no queue 'zz' in the cluster (queues: a, b)"),
    ("queue-weight", "a=0", "must be an integer >= 1, got '0'"),
    ("queue-capability", "a", "expected QUEUE=cpu=8, got 'a'"),
    ("add-nodes", "1=cpu=4;zone", "labels are KEY=VALUE[,...], got 'zone'"),
])
def test_bad_node_edits_name_the_edit(kind: str, raw: str, says: str) -> None:
    with pytest.raises(EditError) as caught:
        apply_node_edits(cluster(), [parse_node_edit(kind, raw)])
    assert str(caught.value).startswith(f"edit --{kind} {raw}: ") and says in str(caught.value)
