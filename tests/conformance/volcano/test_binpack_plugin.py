"""binpack plugin: cases of volcano-sh/volcano pkg/scheduler/plugins/binpack/binpack_test.go,
TestArguments and TestNode (one tier: binpack with node order; scores read as
`ssn.NodeOrderFn(task, node)`).

TestNode's p1 and p2 are Pending with a node name (Volcano reads them as Bound); here they
are Running on that node: both hold the node's resources, which is all the score reads.
"""

from __future__ import annotations

import pytest

from koordqueue.scheduler.api import PodGroupPhase
from koordqueue.scheduler.plugins.binpack import parse_weights

from .harness import build, node, node_order_scores, pg, pod, queue, rl, tiers

GPU = "nvidia.com/gpu"
FOO = "example.com/foo"
PODS = {"pods": "10"}


def test_arguments_weights_with_negative_resource_weight_counted_as_one() -> None:
    """TestArguments: binpack.weight 10, cpu 5, memory 2, gpu 7 and example.com/foo -3 (read
    as 1); no other resource gets a weight. Fails when a negative weight is kept (checked
    by taking out the clamp in parse_weights)."""
    weight, weights = parse_weights(
        {
            "binpack.weight": 10,
            "binpack.cpu": 5,
            "binpack.memory": 2,
            "binpack.resources": "nvidia.com/gpu, example.com/foo",
            "binpack.resources.nvidia.com/gpu": 7,
            "binpack.resources.example.com/foo": -3,
        }
    )
    assert weight == 10
    assert weights == {"cpu": 5, "memory": 2, GPU: 7, FOO: 1}


def _scores(arguments: dict[str, object]) -> dict[str, dict[str, float]]:
    nodes = [
        node("n1", rl("2", "4Gi", PODS)),
        node("n2", rl("4", "16Gi", {**PODS, GPU: "4"})),
        node("n3", rl("2", "4Gi", {**PODS, FOO: "16"})),
    ]
    pods = [
        pod("p1", "n1", True, rl("1", "1Gi"), "pg1"),
        pod("p2", "n3", True, rl("1.5", "0Gi"), "pg1"),
        pod("p3", "", False, rl("2", "10Gi", {GPU: "2"}), "pg1"),
        pod("p4", "", False, rl("3", "4Gi", {FOO: "3"}), "pg1"),
    ]
    snapshot = build(nodes, pods, [pg("pg1", "c1", 0, PodGroupPhase.INQUEUE)], [queue("c1")], "c1")
    config = tiers(("binpack", {"NodeOrder"}), arguments={"binpack": arguments})
    return node_order_scores(snapshot, config)


CASE1 = {
    "c1/p1": {"n1": 700.0, "n2": 137.5, "n3": 0.0},
    "c1/p2": {"n1": 0.0, "n2": 375.0, "n3": 0.0},
    "c1/p3": {"n1": 0.0, "n2": 531.25, "n3": 0.0},
    "c1/p4": {"n1": 0.0, "n2": 173.076923076, "n3": 0.0},
}
CASE2 = {
    "c1/p1": {"n1": 75.0, "n2": 15.625, "n3": 0.0},
    "c1/p2": {"n1": 0.0, "n2": 37.5, "n3": 0.0},
    "c1/p3": {"n1": 0.0, "n2": 50.5, "n3": 0.0},
    "c1/p4": {"n1": 0.0, "n2": 50.0, "n3": 0.0},
}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {
                "binpack.weight": 10,
                "binpack.cpu": 2,
                "binpack.memory": 3,
                "binpack.resources": '"nvidia.com/gpu, example.com/foo"',
                "binpack.resources.nvidia.com/gpu": 7,
                "binpack.resources.example.com/foo": 8,
            },
            CASE1,
        ),
        (
            {
                "binpack.weight": 1,
                "binpack.cpu": 1,
                "binpack.memory": 1,
                "binpack.resources": "nvidia.com/gpu",
                "binpack.resources.nvidia.com/gpu": 23,
            },
            CASE2,
        ),
    ],
    ids=["weights 10/2/3/7/8", "weights 1/1/1/23"],
)
def test_node_scores(arguments: dict[str, object], expected: dict[str, dict[str, float]]) -> None:
    """TestNode, both "single job" cases (to within 1e-8). Fails with binpack off (every
    score 0), and with the old rule that a resource the node cannot hold only adds nothing
    (c1/p1 on n3: 150 instead of 0; checked against the previous binpack.py)."""
    scores = _scores(arguments)
    assert scores.keys() == expected.keys()
    for task, per_node in expected.items():
        assert scores[task] == pytest.approx(per_node, abs=1e-8), task
