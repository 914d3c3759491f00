"""predicates: selector, taints/tolerations, required node affinity, host ports, cordon."""

from __future__ import annotations

import pytest

from koordqueue.scheduler import run_session
from koordqueue.scheduler.api import (
    HostPort,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)

from .builders import config, job, node, running, snapshot, task

PREDICATES = config("allocate", ["gang"], ["predicates"])


def _place(nodes: list, pending: object) -> dict[str, str]:  # type: ignore[type-arg]
    return run_session(snapshot(nodes, [job("j", [pending])]), PREDICATES).bound_nodes()  # type: ignore[list-item]


def test_node_selector_picks_the_labelled_node() -> None:
    nodes = [node("a", labels={"disk": "hdd"}), node("b", labels={"disk": "ssd"})]
    assert _place(nodes, task("t", node_selector={"disk": "ssd"})) == {"t": "b"}


def test_untolerated_taint_blocks_the_node() -> None:
    nodes = [node("tainted", taints=[Taint("gpu", "true", "NoSchedule")])]
    result = run_session(snapshot(nodes, [job("j", [task("t")])]), PREDICATES)
    assert result.fit_errors["t"].message() == "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: true}."


def test_matching_toleration_allows_the_tainted_node() -> None:
    nodes = [node("tainted", taints=[Taint("gpu", "true", "NoSchedule")])]
    assert _place(nodes, task("t", tolerations=(Toleration("gpu", "Equal", "true"),))) == {"t": "tainted"}


def test_exists_toleration_with_empty_key_tolerates_everything() -> None:
    nodes = [node("tainted", taints=[Taint("a", "1", "NoExecute"), Taint("b", "2", "NoSchedule")])]
    assert _place(nodes, task("t", tolerations=(Toleration("", "Exists"),))) == {"t": "tainted"}


def test_prefer_no_schedule_taint_does_not_block() -> None:
    nodes = [node("soft", taints=[Taint("x", "", "PreferNoSchedule")])]
    assert _place(nodes, task("t")) == {"t": "soft"}


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [
        ("In", ("2", "3"), "n3"),
        ("NotIn", ("1", "2"), "n3"),
        ("Exists", (), "n1"),
        ("DoesNotExist", (), "bare"),
        ("Gt", ("2",), "n3"),
        ("Lt", ("2",), "n1"),
    ],
)
def test_required_node_affinity_operators(operator: str, values: tuple[str, ...], expected: str) -> None:
    nodes = [node("n1", labels={"rank": "1"}), node("n3", labels={"rank": "3"}), node("bare")]
    # fill the nodes that must not win, so the only feasible node is the expected one
    affinity = NodeAffinity((NodeSelectorTerm((NodeSelectorRequirement("rank", operator, values),)),))
    bound = run_session(
        snapshot(nodes, [job("j", [task("t", affinity=affinity)])]), PREDICATES
    ).bound_nodes()
    feasible = {
        "In": {"n3"}, "NotIn": {"n3", "bare"}, "Exists": {"n1", "n3"}, "DoesNotExist": {"bare"},
        "Gt": {"n3"}, "Lt": {"n1"},
    }[operator]
    assert expected in feasible
    assert bound["t"] in feasible


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
    assert result.bound_nodes() == {"t": "b"}


def test_two_tasks_with_the_same_host_port_land_on_different_nodes() -> None:
    nodes = [node("a", cpu="8"), node("b", cpu="8")]
    tasks = [task("t1", host_ports=(HostPort(8080),)), task("t2", host_ports=(HostPort(8080),))]
    bound = run_session(snapshot(nodes, [job("j", tasks, min_available=2)]), PREDICATES).bound_nodes()
    assert sorted(bound.values()) == ["a", "b"]


def test_cordoned_node_is_skipped() -> None:
    nodes = [node("cordoned", unschedulable=True), node("ok", cpu="1")]
    assert _place(nodes, task("t")) == {"t": "ok"}
