"""allocate: gang atomicity, pre-predicates, pipelining, overused queues, fit errors."""

from __future__ import annotations

from koordqueue.scheduler import run_session
from koordqueue.scheduler.api import (
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodGroupPhase,
    QueueInfo,
    TaskStatus,
)
from koordqueue.scheduler.framework import open_session, run_actions
from koordqueue.scheduler.framework.indexed import index_snapshot

from .builders import DEFAULT_TIERS, bound_nodes, config, job, node, running, snapshot, task

ALLOCATE = config("enqueue, allocate, backfill", *DEFAULT_TIERS)


def test_gang_job_with_min_available_2_where_only_one_task_fits_binds_nothing() -> None:
    gang = job("gang", [task("a", cpu="2"), task("b", cpu="2")], min_available=2)
    result = run_session(snapshot([node("n1", cpu="2")], [gang]), ALLOCATE)
    assert result.binds == ()
    assert result.pipelined == ()
    assert result.job_conditions["gang"].startswith("2/2 tasks in gang unschedulable")


def test_fragmented_gang_binds_nothing_and_reports_the_unplaced_task() -> None:
    gang = job("gang", [task(n, cpu="2") for n in ("a", "b", "c")], min_available=3)
    result = run_session(snapshot([node("n1", cpu="3"), node("n2", cpu="3")], [gang]), ALLOCATE)
    assert result.binds == ()
    assert result.fit_errors["c"].message() == "0/2 nodes are available: 2 Insufficient cpu."


def test_discarded_gang_leaves_node_resources_untouched() -> None:
    gang = job("gang", [task("a", cpu="2"), task("b", cpu="2")], min_available=2)
    session = open_session(snapshot([node("n1", cpu="2")], [gang]), ALLOCATE)
    run_actions(session)
    assert session.nodes["n1"].idle.milli("cpu") == 2000
    assert all(t.status is TaskStatus.PENDING for t in session.jobs["gang"].tasks.values())


def test_pre_predicate_failure_on_one_task_still_binds_the_job_when_min_available_is_met() -> None:
    broken = NodeAffinity((NodeSelectorTerm((NodeSelectorRequirement("zone", "Bogus", ("a",)),)),))
    tasks = [
        task("bad", affinity=broken, creation=0.0),
        task("ok1", creation=1.0),
        task("ok2", creation=2.0),
    ]
    result = run_session(
        snapshot([node("n1", cpu="4")], [job("j", tasks, min_available=2)]), ALLOCATE
    )
    assert sorted(b.task for b in result.binds) == ["ok1", "ok2"]
    assert "invalid node affinity operator" in result.fit_errors["bad"].message()


def test_task_pipelines_onto_releasing_resources() -> None:
    leaving = job("old", [running("r", "n1", cpu="4")])
    leaving.update_task_status(leaving.tasks["r"], TaskStatus.RELEASING)
    waiting = job("new", [task("p", cpu="4")])
    session = open_session(snapshot([node("n1", cpu="4")], [leaving, waiting]), ALLOCATE)
    run_actions(session)
    result = session.close()
    assert result.binds == ()
    assert [(r.task, r.node) for r in result.pipelined] == [("p", "n1")]
    assert session.jobs["new"].tasks["p"].status is TaskStatus.PIPELINED
    assert session.nodes["n1"].future_idle.milli("cpu") == 0


def test_overused_queue_is_skipped() -> None:
    queues = [QueueInfo("qa"), QueueInfo("qb")]
    holder = job("a-run", [running(f"r{i}", "n1") for i in range(6)], queue="qa")
    # qa holds 6 cpu / 6Gi; its share is 4 cpu / 6Gi (its request), so it is overused.
    more = job("a-more", [task("a-new", memory="0")], queue="qa")
    other = job("b", [task("b-new", cpu="4", node_selector={"zone": "nowhere"})], queue="qb")
    result = run_session(
        snapshot([node("n1", cpu="8", memory="32Gi")], [holder, more, other], queues), ALLOCATE
    )
    assert "a-new" not in bound_nodes(result)
    assert "a-new" not in result.fit_errors


def test_queue_that_is_not_overused_allocates() -> None:
    queues = [QueueInfo("qa"), QueueInfo("qb")]
    more = job("a-more", [task("a-new")], queue="qa")
    result = run_session(snapshot([node("n1", cpu="8", memory="32Gi")], [more], queues), ALLOCATE)
    assert bound_nodes(result) == {"a-new": "n1"}


def test_fit_errors_aggregate_reasons_across_nodes() -> None:
    """kube-scheduler's FitError.Error: "<count> <reason>" strings sorted as strings (so not
    by count: issue 33.9 made the order kube-scheduler's)."""
    nodes = [node("n1", cpu="1"), node("n2", cpu="1"), node("n3", cpu="8", labels={"zone": "b"})]
    pending = job("j", [task("t", cpu="2", node_selector={"zone": "a"})])
    result = run_session(snapshot(nodes, [pending]), ALLOCATE)
    assert result.fit_errors["t"].message() == (
        "0/3 nodes are available: 1 node(s) didn't match node selector, 2 Insufficient cpu."
    )


def test_best_effort_tasks_are_placed_by_backfill_not_allocate() -> None:
    be = job("be", [task("t", cpu="0", memory="0")])
    only_allocate = config("enqueue, allocate", *DEFAULT_TIERS)
    assert run_session(snapshot([node("n1")], [be]), only_allocate).binds == ()
    assert bound_nodes(run_session(snapshot([node("n1")], [be]), ALLOCATE)) == {"t": "n1"}


def test_scheduling_gated_tasks_are_not_allocated() -> None:
    gated = job("g", [task("t", scheduling_gated=True)])
    assert run_session(snapshot([node("n1")], [gated]), ALLOCATE).binds == ()


def test_higher_priority_job_is_allocated_first() -> None:
    low = job("low", [task("l", cpu="2")], priority=1, creation=0.0)
    high = job("high", [task("h", cpu="2")], priority=9, creation=1.0)
    result = run_session(snapshot([node("n1", cpu="2")], [low, high]), ALLOCATE)
    assert bound_nodes(result) == {"h": "n1"}


def test_bound_job_moves_podgroup_to_running() -> None:
    result = run_session(snapshot([node("n1")], [job("j", [task("t")])]), ALLOCATE)
    assert [(u.job, u.new) for u in result.phase_updates] == [("j", PodGroupPhase.RUNNING)]


def test_job_of_missing_queue_is_dropped_with_a_warning() -> None:
    orphan = job("o", [task("t")], queue="ghost")
    result = run_session(snapshot([node("n1")], [orphan]), ALLOCATE)
    assert result.binds == ()
    assert result.warnings == ("job o dropped: queue ghost does not exist",)


def test_placed_tasks_of_a_dropped_job_still_hold_their_node() -> None:
    """A job of a missing queue is not scheduled, but its running pod takes its room (as in
    Volcano, whose snapshot leaves the job out and keeps its pods on the node). Before, the
    session took them off: a 1-cpu pod bound onto a node with 900m free. Fails without the
    fix on both session paths (plain snapshot here, indexed below)."""
    orphan = job("o", [running("held", "n1", cpu="100m"), task("waits", cpu="100m")],
                 queue="ghost")
    newcomer = job("j", [task("t", cpu="1")])
    plain = snapshot([node("n1", cpu="1")], [orphan, newcomer])
    for snap in (plain, index_snapshot(plain)):
        session = open_session(snap, ALLOCATE)
        assert session.nodes["n1"].idle.milli("cpu") == 900
        run_actions(session)
        result = session.close()
        assert result.binds == ()
        assert result.fit_errors["t"].message() == "0/1 nodes are available: 1 Insufficient cpu."


def test_not_ready_nodes_are_not_used() -> None:
    result = run_session(snapshot([node("n1", ready=False)], [job("j", [task("t")])]), ALLOCATE)
    assert result.binds == ()


def test_session_records_action_and_plugin_durations() -> None:
    result = run_session(
        snapshot([node("n1")], [job("j", [task("t")])]), ALLOCATE, profile_callbacks=True
    )
    assert set(result.action_durations) == {"enqueue", "allocate", "backfill"}
    assert set(result.plugin_durations) == {p for tier in DEFAULT_TIERS for p in tier}
    assert result.plugin_durations["nodeorder"].callbacks > 0


def test_role_minimums_hold_back_a_gang_missing_a_role() -> None:
    tasks = [task("ps", cpu="8", role="ps"), task("w1", role="worker"), task("w2", role="worker")]
    gang = job("j", tasks, min_available=2, task_min_available={"ps": 1, "worker": 1})
    result = run_session(snapshot([node("n1", cpu="4")], [gang]), ALLOCATE)
    assert result.binds == ()


def test_role_minimums_are_ignored_when_min_available_is_below_their_sum() -> None:
    tasks = [task("ps", cpu="8", role="ps"), task("w1", role="worker"), task("w2", role="worker")]
    gang = job("j", tasks, min_available=1, task_min_available={"ps": 1, "worker": 1})
    result = run_session(snapshot([node("n1", cpu="4")], [gang]), ALLOCATE)
    assert sorted(bound_nodes(result)) == ["w1", "w2"]


def test_unplaceable_task_does_not_stop_other_tasks_when_min_available_can_still_be_met() -> None:
    tasks = [
        task("picky", node_selector={"zone": "x"}, creation=0.0),
        task("s1", creation=1.0),
        task("s2", creation=2.0),
    ]
    result = run_session(
        snapshot([node("n1", cpu="4")], [job("j", tasks, min_available=2)]), ALLOCATE
    )
    assert sorted(bound_nodes(result)) == ["s1", "s2"]
    assert result.fit_errors["picky"].message() == (
        "0/1 nodes are available: 1 node(s) didn't match node selector."
    )


def test_tasks_identical_to_a_failed_one_share_its_fit_error() -> None:
    picky = [task(f"p{i}", node_selector={"zone": "x"}, creation=float(i)) for i in range(3)]
    tasks = [task("ok", creation=-1.0), *picky]
    result = run_session(
        snapshot([node("n1", cpu="4")], [job("j", tasks, min_available=1)]), ALLOCATE
    )
    assert bound_nodes(result) == {"ok": "n1"}
    assert {t: e.message() for t, e in result.fit_errors.items()} == {
        f"p{i}": "0/1 nodes are available: 1 node(s) didn't match node selector." for i in range(3)
    }
