"""Fit errors read as kube-scheduler writes them (issue 33.9).

The expected strings are kube-scheduler's FitError.Error() rendering (pkg/scheduler/framework
types.go), written out by hand: "0/N nodes are available:", then the pre-filter message or the
"<count> <reason>" strings sorted as strings (so "10 ..." sorts before "2 ..."), each part
ending in ".", then, when preemption found nothing, " preemption: " and its own summary.
"""

from __future__ import annotations

from koordqueue.scheduler import run_session
from koordqueue.scheduler.api.fit_errors import FitErrors, preemption_answer

from .builders import DEFAULT_TIERS, config, job, node, running, snapshot, task


def test_reasons_are_sorted_as_strings_not_by_count() -> None:
    reasons = {f"n{i}": ("Insufficient cpu",) for i in range(10)}
    reasons |= {f"m{i}": ("node(s) didn't match node selector",) for i in range(2)}
    errors = FitErrors(12, reasons)
    assert errors.message() == (
        "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) didn't match node selector."
    )
    two = FitErrors(3, {"a": ("Insufficient cpu",), "b": ("Insufficient cpu",),
                        "c": ("node(s) were unschedulable",)})
    assert two.message() == (
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu."
    )


def test_a_node_short_of_two_resources_counts_for_each() -> None:
    errors = FitErrors(2, {"a": ("Insufficient cpu", "Insufficient memory"),
                           "b": ("Insufficient cpu",)})
    assert errors.message() == (
        "0/2 nodes are available: 1 Insufficient memory, 2 Insufficient cpu."
    )


def test_a_pre_filter_rejection_is_named_once_not_counted_per_node() -> None:
    errors = FitErrors.all_nodes(["a", "b", "c"], "invalid node affinity operator Near")
    assert errors.message() == "0/3 nodes are available: invalid node affinity operator Near."
    assert errors.node_reasons["b"] == ("invalid node affinity operator Near",)


def test_an_empty_cluster_says_kube_schedulers_words() -> None:
    assert FitErrors(0).message() == "no nodes available to schedule pods"


def test_the_preemption_answer_follows_after_a_space() -> None:
    errors = FitErrors(3, {n: ("Insufficient cpu",) for n in "abc"})
    answer = preemption_answer(["a", "b", "c"], {"b", "c"})
    assert errors.with_preemption(answer).message() == (
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
        "1 Preemption is not helpful for scheduling, 2 No preemption victims found for "
        "incoming pod."
    )
    never = preemption_answer(["a"], (), never=True)
    assert FitErrors(1, {"a": ("Insufficient cpu",)}).with_preemption(never).message() == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to "
        "preemptionPolicy=Never."
    )


PREEMPT = config("enqueue, allocate, preempt", *DEFAULT_TIERS)
ALLOCATE = config("enqueue, allocate", *DEFAULT_TIERS)


def test_a_failed_preemption_attempt_adds_its_answer_to_the_condition() -> None:
    """Fails before issue 33.9: the message ended after the filter summary. n2 fails the
    selector (evictions would not help), n1 is short of cpu and holds only a task of higher
    priority (no victim)."""
    jobs = [
        job("high", [running("h", "n1", cpu="2")], priority=10),
        job("new", [task("p", cpu="2", node_selector={"zone": "a"})], priority=5),
    ]
    nodes = [node("n1", cpu="2", labels={"zone": "a"}), node("n2", cpu="8")]
    without = run_session(snapshot(nodes, jobs), ALLOCATE)
    assert without.fit_errors["p"].message() == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match node selector."
    )
    result = run_session(snapshot(nodes, jobs), PREEMPT)
    assert result.evictions == ()
    assert result.fit_errors["p"].message() == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match node selector. "
        "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
        "1 Preemption is not helpful for scheduling."
    )
