"""Property (issue 26): for random specs of Koord-Queue's further kinds and Kueue's
training-operator kinds, the unit asks for the
sum over pod sets of count x per-pod request, computed here from the generated numbers (not
from the integration's pod sets), and its podSet lists the same counts; a negative count is
refused, never turned into a unit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.integrations import (
    JAX_JOB,
    MPI_JOB_V1ALPHA1,
    PADDLE_JOB,
    RAY_CLUSTER,
    RAY_JOB,
    SPARK_APPLICATION,
    TF_JOB,
    XGBOOST_JOB,
    Integration,
    InvalidJobError,
    queue_unit_for,
)
from koordqueue.domain.resources import Resources
from tests.unit.integrations.kq_kinds import (
    kubeflow_job,
    mpijob_v1alpha1,
    pod_template,
    raycluster,
    rayjob,
    spark_role,
    sparkapp,
    tfjob,
)

counts = st.integers(min_value=0, max_value=40)
millicores = st.integers(min_value=1, max_value=8000)
mebibytes = st.integers(min_value=1, max_value=4096)
limits_only = st.booleans()


def template(milli: int, mib: int, limits: bool) -> dict[str, Any]:
    return pod_template(f"{milli}m", f"{mib}Mi", limits_only=limits)


def expected(pods: list[tuple[int, int, int]]) -> Resources:
    """(count, millicores, MiB) per pod set -> the total, computed from the numbers."""
    cpu = sum(c * m for c, m, _ in pods)
    mem = sum(c * b for c, _, b in pods)
    return Resources.parse({"cpu": f"{cpu}m", "memory": f"{mem}Mi"}).nonzero()


def check(integration: Integration, obj: dict[str, Any], pods: list[tuple[int, int, int]]) -> None:
    unit = queue_unit_for(integration, [obj])
    assert Resources.parse(unit["spec"]["resource"]) == expected(pods)
    assert [p["count"] for p in unit["spec"]["podSet"]] == [c for c, _, _ in pods]


role_shapes = st.tuples(counts, millicores, mebibytes, limits_only)


@settings(max_examples=60, deadline=None)
@given(st.lists(role_shapes, min_size=1, max_size=5))
def test_tfjob_unit_is_the_sum_over_roles(shapes: list[tuple[int, int, int, bool]]) -> None:
    roles = TF_JOB.roles[: len(shapes)]
    specs = {r: (c, template(m, b, lim)) for r, (c, m, b, lim) in zip(roles, shapes, strict=True)}
    check(TF_JOB, tfjob(roles=specs), [(c, m, b) for c, m, b, _ in shapes])


@pytest.mark.parametrize("integration", [XGBOOST_JOB, PADDLE_JOB, JAX_JOB], ids=lambda i: i.name)
@settings(max_examples=40, deadline=None)
@given(shapes=st.lists(role_shapes, min_size=1, max_size=2), written_reversed=st.booleans())
def test_kueue_training_unit_is_the_sum_over_roles(
    integration: Any, shapes: list[tuple[int, int, int, bool]], written_reversed: bool
) -> None:
    """Whatever order the roles are written in, the pod sets follow the operator's order."""
    roles = integration.roles[: len(shapes)]
    shapes = shapes[: len(roles)]  # JAXJob: Worker only
    specs = {r: (c, template(m, b, lim)) for r, (c, m, b, lim) in zip(roles, shapes, strict=True)}
    if written_reversed:
        specs = dict(reversed(specs.items()))
    obj = kubeflow_job(integration.workload.kind, roles=specs)
    check(integration, obj, [(c, m, b) for c, m, b, _ in shapes])


@settings(max_examples=60, deadline=None)
@given(role_shapes, st.lists(st.tuples(role_shapes, st.integers(1, 4)), max_size=4))
def test_ray_units_are_head_plus_workers_times_hosts(
    head: tuple[int, int, int, bool], workers: list[tuple[tuple[int, int, int, bool], int]]
) -> None:
    _, hm, hb, hl = head
    groups = [(f"g{i}", c, template(m, b, lim)) for i, ((c, m, b, lim), _) in enumerate(workers)]
    pods = [(1, hm, hb)] + [(c * h, m, b) for (c, m, b, _), h in workers]
    for build, integration in ((rayjob, RAY_JOB), (raycluster, RAY_CLUSTER)):
        obj = build(head=template(hm, hb, hl), workers=groups)
        cluster = obj["spec"].get("rayClusterSpec", obj["spec"])
        for group, (_, hosts) in zip(cluster["workerGroupSpecs"], workers, strict=True):
            group["numOfHosts"] = hosts
        check(integration, obj, pods)


@settings(max_examples=60, deadline=None)
@given(
    st.booleans(),
    st.integers(1, 16),
    mebibytes,
    st.integers(1, 16),
    mebibytes,
    counts,
)
def test_spark_unit_is_driver_plus_executors(
    cluster: bool, d_cores: int, d_mib: int, e_cores: int, e_mib: int, instances: int
) -> None:
    app = sparkapp(
        mode="cluster" if cluster else "client",
        driver=spark_role(d_cores, f"{d_mib}m"),
        executor=spark_role(e_cores, f"{e_mib}m"),
        instances=instances,
    )
    pods = [(1, d_cores * 1000, d_mib)] if cluster else []
    check(SPARK_APPLICATION, app, [*pods, (instances, e_cores * 1000, e_mib)])


@settings(max_examples=60, deadline=None)
@given(role_shapes)
def test_mpijob_v1alpha1_unit_is_replicas_times_the_template(
    shape: tuple[int, int, int, bool],
) -> None:
    count, milli, mib, limits = shape
    job = mpijob_v1alpha1(replicas=count, template=template(milli, mib, limits))
    check(MPI_JOB_V1ALPHA1, job, [(count, milli, mib)])


@settings(max_examples=40, deadline=None)
@given(st.integers(max_value=-1), st.sampled_from(["tf", "ray", "spark", "mpi"]))
def test_a_negative_count_is_refused(count: int, kind: str) -> None:
    builds: dict[str, tuple[Integration, dict[str, Any]]] = {
        "tf": (TF_JOB, tfjob(roles={"Worker": (count, pod_template())})),
        "ray": (RAY_JOB, rayjob(workers=[("w", count, pod_template())])),
        "spark": (SPARK_APPLICATION, sparkapp(instances=count)),
        "mpi": (MPI_JOB_V1ALPHA1, mpijob_v1alpha1(replicas=count)),
    }
    integration, obj = builds[kind]
    with pytest.raises(InvalidJobError, match="must not be negative"):
        queue_unit_for(integration, [obj])
