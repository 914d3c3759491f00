"""predicates: selector, taints/tolerations, required node affinity, host ports, cordon."""

from __future__ import annotations

import pytest

from koordqueue.scheduler import run_session
from koordqueue.scheduler.api import (
    HostPort,
    NodeAffinity,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    TaskInfo,
    Toleration,
)
from koordqueue.scheduler.plugins.predicates import term_matches

from .builders import bound_nodes, config, job, node, running, snapshot, task

PREDICATES = config("allocate", ["gang"], ["predicates"])


def _place(nodes: list[NodeInfo], pending: TaskInfo) -> dict[str, str]:
    return bound_nodes(run_session(snapshot(nodes, [job("j", [pending])]), PREDICATES))


def test_node_selector_picks_the_labelled_node() -> None:
    nodes = [node("a", labels={"disk": "hdd"}), node("b", labels={"disk": "ssd"})]
    assert _place(nodes, task("t", node_selector={"disk": "ssd"})) == {"t": "b"}


def test_untolerated_taint_blocks_the_node() -> None:
    nodes = [node("tainted", taints=[Taint("gpu", "true", "NoSchedule")])]
    result = run_session(snapshot(nodes, [job("j", [task("t")])]), PREDICATES)
    assert (
        result.fit_errors["t"].message()
        == "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: true}."
    )


def test_matching_toleration_allows_the_tainted_node() -> None:
    nodes = [node("tainted", taints=[Taint("gpu", "true", "NoSchedule")])]
    assert _place(nodes, task("t", tolerations=(Toleration("gpu", "Equal", "true"),))) == {
        "t": "tainted"
    }


def test_exists_toleration_with_empty_key_tolerates_everything() -> None:
    nodes = [node("tainted", taints=[Taint("a", "1", "NoExecute"), Taint("b", "2", "NoSchedule")])]
    assert _place(nodes, task("t", tolerations=(Toleration("", "Exists"),))) == {"t": "tainted"}


def test_prefer_no_schedule_taint_does_not_block() -> None:
    nodes = [node("soft", taints=[Taint("x", "", "PreferNoSchedule")])]
    assert _place(nodes, task("t")) == {"t": "soft"}


LABELS = {"n1": {"rank": "1"}, "n3": {"rank": "3"}, "bare": {}}


@pytest.mark.parametrize(
    ("operator", "values", "matching"),
    [
        ("In", ("2", "3"), {"n3"}),
        ("NotIn", ("1", "2"), {"n3", "bare"}),
        ("Exists", (), {"n1", "n3"}),
        ("DoesNotExist", (), {"bare"}),
        ("Gt", ("2",), {"n3"}),
        ("Lt", ("2",), {"n1"}),
    ],
)
def test_required_node_affinity_operators_select_the_matching_nodes(
    operator: str, values: tuple[str, ...], matching: set[str]
) -> None:
    term = NodeSelectorTerm((NodeSelectorRequirement("rank", operator, values),))
    assert {name for name, labels in LABELS.items() if term_matches(term, labels)} == matching


def test_required_node_affinity_places_the_task_on_a_matching_node() -> None:
    nodes = [node(name, labels=labels) for name, labels in LABELS.items()]
    term = NodeSelectorTerm((NodeSelectorRequirement("rank", "Gt", ("2",)),))
    assert _place(nodes, task("t", affinity=NodeAffinity((term,)))) == {"t": "n3"}


def test_affinity_terms_are_ored() -> None:
    terms = (
        NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("x",)),)),
        NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("b",)),)),
    )
    nodes = [node("a", labels={"zone": "a"}), node("b", labels={"zone": "b"})]
    assert _place(nodes, task("t", affinity=NodeAffinity(terms))) == {"t": "b"}


def test_host_port_in_use_excludes_the_node() -> None:
    nodes = [node("a"), node("b")]
    jobs = [
        job("web", [running("w", "a", host_ports=(HostPort(80),))]),
        job("j", [task("t", host_ports=(HostPort(80),))]),
    ]
    result = run_session(snapshot(nodes, jobs), PREDICATES)
    assert bound_nodes(result) == {"t": "b"}


def test_two_tasks_with_the_same_host_port_land_on_different_nodes() -> None:
    nodes = [node("a", cpu="8"), node("b", cpu="8")]
    tasks = [task("t1", host_ports=(HostPort(8080),)), task("t2", host_ports=(HostPort(8080),))]
    bound = bound_nodes(run_session(
        snapshot(nodes, [job("j", tasks, min_available=2)]), PREDICATES
    ))
    assert sorted(bound.values()) == ["a", "b"]


def test_cordoned_node_is_skipped() -> None:
    nodes = [node("cordoned", unschedulable=True), node("ok", cpu="1")]
    assert _place(nodes, task("t")) == {"t": "ok"}


def test_node_with_all_pod_slots_taken_is_skipped() -> None:
    from koordqueue.domain.resources import Resources
    from koordqueue.scheduler.api import NodeInfo

    full = NodeInfo("full", Resources.of(cpu="8", memory="8Gi", pods="1"))
    roomy = NodeInfo("roomy", Resources.of(cpu="1", memory="8Gi", pods="10"))
    jobs = [job("old", [running("r", "full", cpu="100m")]), job("j", [task("t", cpu="100m")])]
    result = run_session(snapshot([full, roomy], jobs), PREDICATES)
    assert bound_nodes(result) == {"t": "roomy"}
