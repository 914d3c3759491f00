"""Inter-pod counts and static node masks cost in proportion to use (issue 19, part 1): the
walk over every task for existing pods' terms is skipped when the index says no pod carries
any, the label index is built on first use, and static masks are kept with the node tensor
across sessions. None of that may change a decision: these tests fail if the lazy path
skips counts it needed or reuses a mask it should have dropped."""

from __future__ import annotations

from koordqueue.scheduler import default_config, run_session
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.selectors import LabelSelector
from koordqueue.scheduler.api.task_info import PodAffinity, PodAffinityTerm
from koordqueue.scheduler.framework.indexed import SnapshotIndex, index_snapshot
from koordqueue.scheduler.framework.session import open_session
from koordqueue.scheduler.interpod import InterPodAffinity, PodCounts, pod_counts
from tests.unit.scheduler.builders import job, node, running, snapshot, task

HOST = "kubernetes.io/hostname"
WEB = LabelSelector((("app", "web"),))


def host(name: str) -> NodeInfo:
    return node(name, "8", "16Gi", labels={HOST: name})


def one_per_host() -> PodAffinity:
    return PodAffinity(anti_required=(PodAffinityTerm(HOST, WEB, frozenset({"default"})),))


def test_existing_required_anti_affinity_repels_a_pod_without_terms_on_an_indexed_snapshot(
) -> None:
    # The pending pod has no terms and spreads nothing: only the guard's own term (symmetry)
    # keeps it off n0, where least-allocated alone would put it (n1 is busy).
    guard = running("guard", "n0", labels={"app": "db"}, pod_affinity=one_per_host())
    busy = running("busy", "n1", cpu="3")
    jobs = [job("g", [guard]), job("b", [busy]), job("j", [task("p", labels={"app": "web"})])]
    indexed = index_snapshot(snapshot([host("n0"), host("n1")], jobs))
    assert indexed.index.affinity_pods == 1
    result = run_session(indexed, default_config())
    assert {b.name: b.node for b in result.binds} == {"p": "n1"}


def test_the_index_counts_pods_with_affinity_terms_as_nodes_are_replaced_and_dropped() -> None:
    index = SnapshotIndex()
    n0 = host("n0")
    n0.add_task(running("guard", "n0", pod_affinity=one_per_host()))
    n0.add_task(running("plain", "n0"))
    index.put_node(n0)
    assert index.affinity_pods == 1
    again = n0.clone()  # the guard left: the node is made anew without it
    again.add_task(running("plain", "n0"))
    index.put_node(again)
    assert index.affinity_pods == 0
    index.put_node(n0)
    index.drop_node("n0")
    assert index.affinity_pods == 0


def test_a_pod_evicted_before_the_counts_are_first_used_no_longer_counts() -> None:
    # The counts' label index is built lazily; a web pod evicted earlier in the session is
    # still on its node (Releasing) but must not repel a pod with anti-affinity to web pods.
    victim = running("victim", "n0", labels={"app": "web"})
    jobs = [job("v", [victim]), job("j", [task("p", pod_affinity=one_per_host())])]
    session = open_session(index_snapshot(snapshot([host("n0")], jobs)), default_config())
    ipa = InterPodAffinity(pod_counts(session))
    session.evict_task(session.jobs["v"].tasks["victim"])
    mask = ipa.filter(session.jobs["j"].tasks["p"])
    assert mask is not None and bool(mask[0])


def test_static_masks_are_kept_for_an_unchanged_layout_and_dropped_when_labels_change() -> None:
    index = SnapshotIndex()
    nodes = [host("n0"), host("n1")]
    for n in nodes:
        index.put_node(n)
    tensor = index.tensor_for(nodes, ["cpu"])
    tensor.static["mask"] = "kept"
    same = nodes[0].clone()  # same allocatable object and labels: same layout
    index.put_node(same)
    nodes = [same, nodes[1]]
    assert index.tensor_for(nodes, ["cpu"]).static.get("mask") == "kept"
    relabelled = nodes[1].clone()
    relabelled.labels = {HOST: "n1", "zone": "z2"}
    index.put_node(relabelled)
    assert "mask" not in index.tensor_for([same, relabelled], ["cpu"]).static


def test_a_node_label_change_under_the_same_layout_changes_the_node_selector_verdict() -> None:
    # Two sessions through one index: the first caches the selector's mask, then n1 gains
    # the label; the second session must see it.
    nodes = [host("n0"), host("n1")]
    picky = job("j", [task("p", node_selector={"disk": "ssd"})])
    config = default_config()
    first = index_snapshot(snapshot(nodes, [picky]))
    assert not run_session(first, config).binds
    relabelled = first.nodes[1].clone()
    relabelled.labels = {HOST: "n1", "disk": "ssd"}
    first.index.put_node(relabelled)
    second = type(first)(
        nodes=[first.nodes[0], relabelled], jobs=first.jobs, queues=first.queues,
        namespace_labels=first.namespace_labels, index=first.index,
    )
    assert [b.node for b in run_session(second, config).binds] == ["n1"]


def test_counts_first_made_after_a_placement_still_see_that_pods_terms() -> None:
    # The index said no pod carries terms, but the session has since placed one that does:
    # counts made now must walk the nodes rather than trust the index.
    jobs = [job("j", [task("guard", pod_affinity=one_per_host())])]
    session = open_session(index_snapshot(snapshot([host("n0"), host("n1")], jobs)),
                           default_config())
    session.allocate_task(session.jobs["j"].tasks["guard"], session.nodes["n0"])
    assert PodCounts(session).has_owners
