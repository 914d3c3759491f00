"""Property (issue 26): for random TrainJobs on random runtimes, the unit asks for the sum over
pod sets of count x per-pod request, computed here from the generated numbers (replicas,
parallelism, numNodes, the requests; not from the integration's pod sets), and its podSet
lists the same counts; a negative count anywhere is refused, never turned into a unit."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.integrations import TRAIN_JOB, InvalidJobError, queue_unit_for
from koordqueue.domain.resources import Resources
from tests.unit.integrations.trainer_kinds import replicated_job, runtime, trainjob

counts = st.integers(min_value=0, max_value=20)
millicores = st.integers(min_value=1, max_value=8000)
mebibytes = st.integers(min_value=1, max_value=4096)
Shape = tuple[int, int, int, int, bool]
"""(replicas, parallelism, millicores, MiB, requests given as limits only)."""
shapes = st.tuples(counts, counts, millicores, mebibytes, st.booleans())
ROLES = ("plain", "dataset-initializer", "model-initializer")


def pod_template(milli: int, mib: int, limits_only: bool) -> dict[str, Any]:
    key = "limits" if limits_only else "requests"
    resources = {key: {"cpu": f"{milli}m", "memory": f"{mib}Mi"}}
    return {"spec": {"containers": [{"name": "node", "resources": resources}]}}


def expected(pods: list[tuple[int, int, int]]) -> Resources:
    cpu = sum(c * m for c, m, _ in pods)
    mem = sum(c * b for c, _, b in pods)
    return Resources.parse({"cpu": f"{cpu}m", "memory": f"{mem}Mi"}).nonzero()


@settings(max_examples=80, deadline=None)
@given(
    trainer=shapes,
    others=st.lists(st.tuples(st.sampled_from(ROLES), shapes), max_size=4),
    policy_nodes=st.one_of(st.none(), counts),
    num_nodes=st.one_of(st.none(), counts),
    per_node=st.one_of(st.none(), st.tuples(millicores, mebibytes)),
)
def test_trainjob_unit_is_the_sum_over_the_runtimes_pod_sets(
    trainer: Shape,
    others: list[tuple[str, Shape]],
    policy_nodes: int | None,
    num_nodes: int | None,
    per_node: tuple[int, int] | None,
) -> None:
    jobs, pods = [], []
    replicas, parallelism, milli, mib, limits = trainer
    jobs.append(replicated_job("node", replicas=replicas, parallelism=parallelism,
                               ancestor="trainer", pod_template=pod_template(milli, mib, limits)))
    nodes = parallelism if policy_nodes is None else policy_nodes  # mlPolicy.numNodes first
    nodes = nodes if num_nodes is None else num_nodes  # then the TrainJob's
    if per_node is not None:
        milli, mib = per_node
    pods.append((nodes, milli, mib))  # the trainer runs one replica
    for i, (role, (replicas, parallelism, milli, mib, limits)) in enumerate(others):
        ancestor = None if role == "plain" else role
        template = pod_template(milli, mib, limits)
        jobs.append(replicated_job(f"job{i}", replicas=replicas, parallelism=parallelism,
                                   ancestor=ancestor, pod_template=template))
        pods.append(((replicas if role == "plain" else 1) * parallelism, milli, mib))
    ml_policy = None if policy_nodes is None else {"numNodes": policy_nodes, "torch": {}}
    resources = None
    if per_node is not None:
        resources = {"requests": {"cpu": f"{per_node[0]}m", "memory": f"{per_node[1]}Mi"}}
    job = trainjob(num_nodes=num_nodes, resources_per_node=resources)
    rt = runtime(*jobs, ml_policy=ml_policy)
    (ref,) = TRAIN_JOB.references(job)
    unit = queue_unit_for(TRAIN_JOB.resolved({ref: rt}), [job])
    assert Resources.parse(unit["spec"]["resource"]) == expected(pods)
    assert [p["count"] for p in unit["spec"]["podSet"]] == [c for c, _, _ in pods]


@settings(max_examples=30, deadline=None)
@given(st.integers(max_value=-1), st.sampled_from(["numNodes", "replicas", "parallelism"]))
def test_a_negative_count_is_refused(value: int, where: str) -> None:
    job = trainjob(num_nodes=value if where == "numNodes" else 1)
    worker = replicated_job(
        "w",
        replicas=value if where == "replicas" else 1,
        parallelism=value if where == "parallelism" else 1,
    )
    rt = runtime(replicated_job("node", ancestor="trainer"), worker)
    (ref,) = TRAIN_JOB.references(job)
    try:
        queue_unit_for(TRAIN_JOB.resolved({ref: rt}), [job])
    except InvalidJobError as exc:
        assert "must not be negative" in str(exc) and where in exc.field
    else:
        raise AssertionError("a negative count made a unit")
