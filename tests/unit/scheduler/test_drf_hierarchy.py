"""drf with enableHierarchy: the tree's shares (worked by hand from Volcano's drf.go
updateHierarchicalShare / compareQueues), queue order, reclaimable, bad annotations, and a
property that incremental updates equal a recomputation from scratch."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.kube.scheduler.convert import queue_info
from koordqueue.scheduler import ClusterSnapshot, parse_config
from koordqueue.scheduler.api import JobInfo, QueueInfo, TaskInfo
from koordqueue.scheduler.framework import open_session, run_actions
from koordqueue.scheduler.framework.indexed import index_snapshot
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.plugins.drf import HdrfTree, HierarchyPath, parse_hierarchy

from .builders import node, running, task


def amounts(cpu: str = "0", memory: str = "0") -> dict[str, int]:
    raw = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v != "0"}
    return Resources.of(raw).as_dict()


TOTAL = amounts("10", "10")
A = parse_hierarchy("root/a", "1/1")
A_HEAVY = parse_hierarchy("root/a", "1/4")
BX = parse_hierarchy("root/b/x", "1/1/1")
BY = parse_hierarchy("root/b/y", "1/1/1")


def example_tree(a: HierarchyPath = A, a_request: str = "10") -> HdrfTree:
    """ja (queue a): 2 cpu of `a_request`; jx (b/x): 4 memory of 10; jy (b/y): 1 cpu of 10."""
    tree = HdrfTree(TOTAL)
    tree.add_job("ja", a, amounts("2"), amounts(a_request))
    tree.add_job("jx", BX, amounts(memory="4"), amounts(memory="10"))
    tree.add_job("jy", BY, amounts("1"), amounts("10"))
    tree.recompute()
    return tree


def test_inner_node_scales_children_down_to_the_smallest_demanding_share() -> None:
    """b's children have shares .4 (x) and .1 (y): x is scaled to .1, so b holds 1 memory
    and 1 cpu (share .1); the root scales a (.2) to .1 and holds 2 cpu and 1 memory."""
    snap = example_tree().snapshot()
    cpu, mem = TOTAL["cpu"], TOTAL["memory"]
    share, saturated, allocated = snap[("root", "b")]
    assert share == pytest.approx(0.1)
    assert not saturated
    assert dict(allocated) == pytest.approx({"cpu": cpu / 10, "memory": mem / 10})
    share, _sat, allocated = snap[("root",)]
    assert share == pytest.approx(0.2)
    assert dict(allocated) == pytest.approx({"cpu": 2 * cpu / 10, "memory": mem / 10})


def test_queue_with_lower_share_per_weight_comes_first() -> None:
    """Equal weights: b (.1) before a (.2); a weighted 4 (.05) comes before b (.1)."""
    assert example_tree().compare(BX, A) < 0
    assert example_tree(A_HEAVY).compare(A_HEAVY, BX) < 0


def test_siblings_are_compared_below_their_common_parent() -> None:
    """x (.4) and y (.1) share node b: the walk goes past b and y comes first."""
    tree = example_tree()
    assert tree.compare(BY, BX) < 0
    assert tree.compare(BX, BX) == 0


def test_saturated_queue_comes_after_a_demanding_one() -> None:
    """ja got all it asked for (2 of 2 cpu): a is saturated and goes last even with a
    weight that gives it the lower weighted share."""
    tree = example_tree(A_HEAVY, a_request="2")
    assert tree.snapshot()[("root", "a")][1] is True
    assert tree.compare(A_HEAVY, BX) > 0


def test_job_asking_for_an_exhausted_resource_is_saturated() -> None:
    """When the jobs hold all the memory, a job that asks for memory is saturated."""
    tree = HdrfTree(TOTAL)
    tree.add_job("jm", A, amounts("1", "10"), amounts("5", "20"))
    tree.add_job("jc", BX, amounts("1"), amounts("5"))
    tree.recompute()
    snap = tree.snapshot()
    assert snap[("root", "a")][1] is True
    assert snap[("root", "b")][1] is False


# --- through a session ----------------------------------------------------------------------
def hq(name: str, hierarchy: str, weights: str) -> QueueInfo:
    return QueueInfo(name, hierarchy=hierarchy, hierarchy_weights=weights)


def open_drf(jobs: list[JobInfo], queues: list[QueueInfo], *, hierarchy: bool = True) -> Session:
    flag = "true" if hierarchy else "false"
    cfg = parse_config(
        f'actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n    enableHierarchy: {flag}\n'
    )
    return open_session(ClusterSnapshot([node("n1", "8", "64Gi")], jobs, queues), cfg)


def cluster(
    a_running: int,
    b_running: int,
    b_weights: str = "1/1",
    *,
    hierarchy: bool = True,
    b_more: bool = True,
) -> tuple[Session, TaskInfo, list[TaskInfo]]:
    """Queue a runs `a_running` 1-cpu tasks (one more pending), queue b `b_running` and
    the reclaimer pending (and one more pending task unless `b_more` is False) on an 8-cpu
    node."""
    a_tasks = [running(f"a{i}", "n1", "1", "0") for i in range(a_running)]
    b_tasks = [running(f"b{i}", "n1", "1", "0") for i in range(b_running)]
    reclaimer = task("bp", "1", "0")
    jobs = [
        JobInfo("ja", queue="qa", tasks=[*a_tasks, task("ap", "1", "0")]),
        JobInfo(
            "jb",
            queue="qb",
            tasks=[*b_tasks, reclaimer, *([task("bq", "1", "0")] if b_more else [])],
        ),
    ]
    queues = [hq("qa", "root/a", "1/1"), hq("qb", "root/b", b_weights)]
    session = open_drf(jobs, queues, hierarchy=hierarchy)
    victims = list(session.jobs["ja"].tasks[f"a{i}"] for i in range(a_running))
    return session, session.jobs["jb"].tasks["bp"], victims


def test_reclaim_takes_from_the_queue_that_stays_ahead() -> None:
    """a holds 4 of 8 cpu, b 1: after the move b has .25 and a .375, so a's task is taken."""
    session, reclaimer, candidates = cluster(4, 1)
    assert session.reclaimable(reclaimer, candidates[:1]) == candidates[:1]


def test_reclaim_spares_a_queue_that_would_fall_behind() -> None:
    """a holds 2, b 3: after the move b has .5 and a .125, so nothing is taken."""
    session, reclaimer, candidates = cluster(2, 3)
    assert session.reclaimable(reclaimer, candidates[:1]) == []


def test_reclaim_refused_when_it_would_saturate_the_reclaimer() -> None:
    """As in the first case, but the reclaimer is its job's last pending task: with it the
    job has all it asked for, its queue is saturated and goes last, so nothing is taken
    (Volcano's compareQueues puts saturated nodes after demanding ones)."""
    session, reclaimer, candidates = cluster(4, 1, b_more=False)
    assert session.reclaimable(reclaimer, candidates[:1]) == []


def test_reclaim_divides_shares_by_weight() -> None:
    """As above but b weighs 8: .5 / 8 < .125, so a's task is taken."""
    session, reclaimer, candidates = cluster(2, 3, b_weights="1/8")
    assert session.reclaimable(reclaimer, candidates[:1]) == candidates[:1]


def test_reclaim_leaves_the_tree_as_it_found_it() -> None:
    """A reclaim question is hypothetical: the shares afterwards are unchanged."""
    session, reclaimer, candidates = cluster(4, 1)
    tree = session.plugins["drf"].tree  # type: ignore[attr-defined]
    before = tree.snapshot()
    session.reclaimable(reclaimer, candidates)
    assert tree.snapshot() == before


def test_without_hierarchy_drf_neither_orders_queues_nor_reclaims() -> None:
    """enableHierarchy off (Volcano's default): no queue order from drf (the name decides)
    and no reclaimable answer; on, b (.125) comes before a (.5)."""
    session, _reclaimer, _candidates = cluster(4, 1)
    assert session.queue_order_less(session.queues["qb"], session.queues["qa"])
    flat, reclaimer, candidates = cluster(4, 1, hierarchy=False)
    assert flat.queue_order_less(flat.queues["qa"], flat.queues["qb"])
    assert flat.reclaimable(reclaimer, candidates) == []
    assert flat.plugins["drf"].tree is None  # type: ignore[attr-defined]


def test_allocation_moves_the_queue_order() -> None:
    """The event handler updates the tree: b (nothing yet) comes before a (2 of 8 cpu) until
    b's 3-cpu task is allocated (.375)."""
    jobs = [
        JobInfo("ja", queue="qa", tasks=[running("a0", "n1", "2", "0"), task("ap", "1", "0")]),
        JobInfo("jb", queue="qb", tasks=[task("big", "3", "0"), task("bp", "1", "0")]),
    ]
    session = open_drf(jobs, [hq("qa", "root/a", "1/1"), hq("qb", "root/b", "1/1")])
    qa, qb = session.queues["qa"], session.queues["qb"]
    assert session.queue_order_less(qb, qa)
    session.allocate_task(session.jobs["jb"].tasks["big"], session.nodes["n1"])
    assert session.queue_order_less(qa, qb)
    session.unallocate_task(session.jobs["jb"].tasks["big"])
    assert session.queue_order_less(qb, qa)


# --- bad annotations --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("hierarchy", "weights", "segments", "parsed"),
    [
        ("", "", (), ()),
        ("root/a/b", "1/2/3", ("a", "b"), (2.0, 3.0)),
        ("root/a", "1/0.5", ("a",), (1.0,)),  # below 1 counts as 1 (Volcano)
        ("root/a/b", "1/2", ("a", "b"), (2.0, 1.0)),  # a missing weight
        ("root/a", "1/x", ("a",), (1.0,)),  # not a number
        ("root/a", "1/nan", ("a",), (1.0,)),
        ("root//a", "1/2/3", (), ()),  # an empty element: no path
    ],
)
def test_parse_hierarchy(
    hierarchy: str, weights: str, segments: tuple[str, ...], parsed: tuple[float, ...]
) -> None:
    """Volcano's reading, with a default of 1 where Volcano panics or reads garbage."""
    path = parse_hierarchy(hierarchy, weights)
    assert (path.segments, path.weights) == (segments, parsed)


@pytest.mark.parametrize(
    ("hierarchy", "weights", "problem"),
    [
        ("root/a/b", "1/2", "has 3 elements but hierarchy-weights '1/2' has 2"),
        ("root/a", "", "has 2 elements but hierarchy-weights '' has 0"),
        ("root/a", "1/x", "'x' is not a number"),
        ("root/a", "1/inf", "'inf' is not finite"),
        ("root//a", "1/1/1", "empty path element"),
    ],
)
def test_bad_annotations_warn_and_do_not_crash(hierarchy: str, weights: str, problem: str) -> None:
    """A malformed annotation becomes a session warning; ordering and reclaim still run."""
    jobs = [JobInfo("j1", queue="q1", tasks=[running("t1", "n1", "1", "0"), task("p1", "1", "0")])]
    session = open_drf(jobs, [hq("q1", hierarchy, weights), hq("q2", "root/c", "1/1")])
    assert any(problem in w and "drf: queue q1" in w for w in session.warnings), session.warnings
    session.queue_order_less(session.queues["q1"], session.queues["q2"])
    pending = session.jobs["j1"].tasks["p1"]
    assert session.reclaimable(pending, [session.jobs["j1"].tasks["t1"]]) == []


def test_good_annotations_give_no_warning() -> None:
    session = open_drf([], [hq("q1", "root/a", "1/3")])
    assert session.warnings == []


def test_queue_conversion_reads_the_annotations() -> None:
    """The kube adapter passes both annotations to QueueInfo."""
    q = queue_info(
        {
            "metadata": {
                "name": "q",
                "annotations": {
                    "volcano.sh/hierarchy": "root/eng",
                    "volcano.sh/hierarchy-weights": "1/2",
                },
            },
            "spec": {},
        }
    )
    assert (q.hierarchy, q.hierarchy_weights) == ("root/eng", "1/2")
    assert queue_info({"metadata": {"name": "p"}}).hierarchy == ""


def test_enable_hierarchy_switch_is_read_from_yaml() -> None:
    """`enableHierarchy` (and Volcano's `enabledHierarchy` spelling) turn the tree on."""
    for key in ("enableHierarchy", "enabledHierarchy"):
        cfg = parse_config(f"tiers:\n- plugins:\n  - name: drf\n    {key}: true\n")
        session = open_session(ClusterSnapshot([], [], [QueueInfo("default")]), cfg)
        assert session.plugins["drf"].tree is not None  # type: ignore[attr-defined]


# --- property -------------------------------------------------------------------------------
QUEUE_PATHS = [
    parse_hierarchy("root/a", "1/2"),
    parse_hierarchy("root/b/x", "1/1/3"),
    parse_hierarchy("root/b/y", "1/1/1"),
    parse_hierarchy("", ""),
]
JOBS = [(f"j{i}", QUEUE_PATHS[i % len(QUEUE_PATHS)]) for i in range(6)]
REQUESTS = [amounts(str(2 + i % 3), str(1 + i % 2)) for i in range(len(JOBS))]
UNIT = amounts("1", "1")
UNIT_CPU = amounts("1")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, len(JOBS) - 1), st.booleans(), st.booleans()),
        max_size=25,
    )
)
def test_incremental_updates_equal_recomputation(steps: list[tuple[int, bool, bool]]) -> None:
    """After any sequence of allocations and releases the tree equals one built from the
    final allocations (the whole-tree recomputation Volcano does on every event)."""
    total = amounts("6", "5")
    tree = HdrfTree(total)
    for (uid, path), request in zip(JOBS, REQUESTS, strict=True):
        tree.add_job(uid, path, {}, request)
    tree.recompute()
    held = {uid: {"cpu": 0, "memory": 0} for uid, _ in JOBS}
    for i, grow, cpu_only in steps:
        uid = JOBS[i][0]
        delta = UNIT_CPU if cpu_only else UNIT
        sign = 1 if grow or held[uid]["cpu"] == 0 else -1
        if sign < 0 and not cpu_only and held[uid]["memory"] == 0:
            delta = UNIT_CPU
        tree.change(uid, delta, sign)
        for name, amount in delta.items():
            held[uid][name] += sign * amount
    fresh = HdrfTree(total)
    for (uid, path), request in zip(JOBS, REQUESTS, strict=True):
        fresh.add_job(uid, path, {k: v for k, v in held[uid].items() if v}, request)
    fresh.recompute()
    assert _rounded(tree) == _rounded(fresh)


def _rounded(tree: HdrfTree) -> dict[tuple[str, ...], tuple[float, bool, dict[str, float]]]:
    # amounts equal as numbers: a leaf's 0 may be held as a key or be absent
    return {
        path: (round(share, 12), sat, {k: round(v, 3) for k, v in alloc if v})
        for path, (share, sat, alloc) in tree.snapshot().items()
    }


# --- through the reclaim action ---------------------------------------------------------------
def reclaim_outcome(a_weights: str, *, hierarchy: bool) -> list[str]:
    """Queue qa runs four 1-cpu tasks on a full 4-cpu node (one more pending), qb has one
    pending task; the reclaim action with conformance, gang, drf and proportion."""
    drf = "\n    enableHierarchy: true" if hierarchy else ""
    cfg = parse_config(
        'actions: "reclaim"\ntiers:\n- plugins:\n  - name: conformance\n  - name: gang\n'
        f"  - name: drf{drf}\n  - name: proportion\n"
    )
    a_tasks = [running(f"a{i}", "n1", "1", "1Gi") for i in range(4)]
    jobs = [
        JobInfo("ja", queue="qa", tasks=[*a_tasks, task("a9", "1", "1Gi")]),
        JobInfo("jb", queue="qb", tasks=[task("b0", "1", "1Gi")]),
    ]
    queues = [hq("qa", "root/a", a_weights), hq("qb", "root/b", "1/1")]
    session = open_session(ClusterSnapshot([node("n1", "4", "8Gi")], jobs, queues), cfg)
    run_actions(session)
    return sorted(e.name for e in session.close().evictions)


def test_reclaim_action_asks_the_tree() -> None:
    """Proportion alone lets qb take one of qa's tasks; with enableHierarchy and qa weighing
    8, qa's weighted share after the move (.375 / 8) is below qb's (.25), so drf refuses and,
    its answer being intersected in the tier, nothing is evicted."""
    assert len(reclaim_outcome("1/8", hierarchy=False)) == 1
    assert reclaim_outcome("1/8", hierarchy=True) == []
    assert len(reclaim_outcome("1/1", hierarchy=True)) == 1


def test_indexed_snapshot_builds_the_same_tree() -> None:
    """The kube cache hands sessions an indexed snapshot (jobs shared, not copied): the tree
    and the queue order are the same as with a plain one."""
    jobs = [
        JobInfo("ja", queue="qa", tasks=[running("a0", "n1", "2", "0"), task("ap", "1", "0")]),
        JobInfo("jb", queue="qb", tasks=[running("b0", "n1", "1", "0"), task("bp", "1", "0")]),
        JobInfo("done", queue="qb", tasks=[running("d0", "n1", "1", "0")]),
    ]
    queues = [hq("qa", "root/a", "1/1"), hq("qb", "root/b", "1/1")]
    cfg = parse_config("tiers:\n- plugins:\n  - name: drf\n    enableHierarchy: true\n")
    plain = ClusterSnapshot([node("n1", "8", "64Gi")], jobs, queues)
    trees = [
        open_session(snap, cfg).plugins["drf"].tree.snapshot()  # type: ignore[attr-defined]
        for snap in (plain, index_snapshot(plain))
    ]
    assert trees[0] == trees[1]
    assert trees[0][("root", "b")][0] == pytest.approx(2 / 8)
