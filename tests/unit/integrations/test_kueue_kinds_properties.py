"""Property (issue 26): for random specs of Kueue's further kinds, the unit asks for the sum
over pod sets of count x per-pod request, computed here from the generated numbers (not from
the integration's pod sets), and its podSet lists the same counts; a negative count is
refused, never turned into a unit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.integrations import (
    APPWRAPPER,
    Integration,
    InvalidJobError,
    queue_unit_for,
)
from koordqueue.domain.resources import Resources
from tests.unit.integrations.kueue_kinds import appwrapper, component

counts = st.integers(min_value=0, max_value=40)
millicores = st.integers(min_value=1, max_value=8000)
mebibytes = st.integers(min_value=1, max_value=4096)
Shape = tuple[int, int, int, bool]
"""(count, millicores, MiB, requests given as limits only)."""
shapes = st.tuples(counts, millicores, mebibytes, st.booleans())


def pod_template(milli: int, mib: int, limits_only: bool) -> dict[str, Any]:
    resources = {"cpu": f"{milli}m", "memory": f"{mib}Mi"}
    key = "limits" if limits_only else "requests"
    return {"spec": {"containers": [{"name": "c", "resources": {key: resources}}]}}


def expected(pods: list[tuple[int, int, int]]) -> Resources:
    """(count, millicores, MiB) per pod set -> the total, computed from the numbers."""
    cpu = sum(c * m for c, m, _ in pods)
    mem = sum(c * b for c, _, b in pods)
    return Resources.parse({"cpu": f"{cpu}m", "memory": f"{mem}Mi"}).nonzero()


def check(integration: Integration, obj: dict[str, Any], pods: list[tuple[int, int, int]]) -> None:
    unit = queue_unit_for(integration, [obj])
    assert Resources.parse(unit["spec"]["resource"]) == expected(pods)
    assert [p["count"] for p in unit["spec"]["podSet"]] == [c for c, _, _ in pods]


def _job(parallelism: int, completions: int | None, shape: Shape) -> dict[str, Any]:
    _, milli, mib, limits = shape
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "template": pod_template(milli, mib, limits),
    }
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "spec": spec}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("job"), shapes, st.one_of(st.none(), counts)),
            st.tuples(st.just("declared"), shapes, st.none()),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_appwrapper_unit_is_the_sum_over_its_wrapped_pod_sets(
    parts: list[tuple[str, Shape, int | None]],
) -> None:
    components, pods = [], []
    for how, shape, completions in parts:
        count, milli, mib, _ = shape
        if how == "job":  # inferred: min(parallelism, completions)
            components.append(component(_job(count, completions, shape)))
            pods.append((count if completions is None else min(count, completions), milli, mib))
        else:  # declared: the replicas given, the Job's own numbers ignored
            declared = [{"path": "template.spec.template", "replicas": count}]
            components.append(component(_job(99, None, shape), declared))
            pods.append((count, milli, mib))
    check(APPWRAPPER, appwrapper(*components), pods)


@pytest.mark.parametrize("count", [-1, -40])
def test_appwrapper_negative_replicas_are_refused(count: int) -> None:
    declared = [{"path": "template.spec.template", "replicas": count}]
    obj = appwrapper(component(_job(1, None, (1, 100, 64, False)), declared))
    with pytest.raises(InvalidJobError, match="must not be negative"):
        queue_unit_for(APPWRAPPER, [obj])
