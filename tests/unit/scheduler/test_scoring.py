"""Node scoring: binpack fills nodes, nodeorder spreads, drf orders jobs."""

from __future__ import annotations

from koordqueue.scheduler import parse_config, run_session

from .builders import bound_nodes, config, job, node, running, snapshot, task


def test_binpack_prefers_the_fuller_node() -> None:
    nodes = [node("empty", cpu="4"), node("busy", cpu="4")]
    jobs = [job("old", [running("r", "busy", cpu="2")]), job("new", [task("t")])]
    result = run_session(
        snapshot(nodes, jobs), config("allocate", ["gang"], ["predicates", "binpack"])
    )
    assert bound_nodes(result) == {"t": "busy"}


def test_binpack_resource_weights_decide_between_nodes() -> None:
    nodes = [node("cpu-full", cpu="4", memory="8Gi"), node("mem-full", cpu="4", memory="8Gi")]
    jobs = [
        job("old1", [running("c", "cpu-full", cpu="3", memory="1Gi")]),
        job("old2", [running("m", "mem-full", cpu="1", memory="6Gi")]),
        job("new", [task("t", cpu="500m", memory="1Gi")]),
    ]
    cfg = parse_config("""
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: binpack
    arguments:
      binpack.cpu: 0
      binpack.memory: 5
""")
    assert bound_nodes(run_session(snapshot(nodes, jobs), cfg)) == {"t": "mem-full"}


def test_least_allocated_nodeorder_prefers_the_emptier_node() -> None:
    nodes = [node("empty", cpu="4"), node("busy", cpu="4")]
    jobs = [job("old", [running("r", "busy", cpu="2")]), job("new", [task("t")])]
    result = run_session(
        snapshot(nodes, jobs), config("allocate", ["gang"], ["predicates", "nodeorder"])
    )
    assert bound_nodes(result) == {"t": "empty"}


def test_drf_orders_jobs_by_dominant_share() -> None:
    jobs = [
        job("big", [running("b-run", "n1", cpu="2"), task("b-new")], creation=0.0),
        job("small", [running("s-run", "n1", cpu="1"), task("s-new")], creation=1.0),
    ]
    result = run_session(
        snapshot([node("n1", cpu="4", memory="16Gi")], jobs),
        config("allocate", ["drf"], ["predicates"]),
    )
    assert bound_nodes(result) == {"s-new": "n1"}


def test_without_drf_the_older_job_goes_first() -> None:
    jobs = [
        job("big", [running("b-run", "n1", cpu="2"), task("b-new")], creation=0.0),
        job("small", [running("s-run", "n1", cpu="1"), task("s-new")], creation=1.0),
    ]
    result = run_session(
        snapshot([node("n1", cpu="4", memory="16Gi")], jobs), config("allocate", ["predicates"])
    )
    assert bound_nodes(result) == {"b-new": "n1"}
