"""A unit's pod sets in a scenario (issue 29 point 1: workloads' pod sets).

`pods: N` splits a unit's request evenly, right for a Job whose pods are alike. A workload
whose pod sets ask for different requests (a PyTorchJob's master and workers) says each one:
`podSets: [{name, count, request}]`, the per-pod request its template asks for (read as the
controller reads it, domain/unit_share.py). Placement (a scenario with nodes) places each pod
with its own set's request; admission still counts `resource`, the unit's total, as the
controller does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koordqueue.domain.reclaimable import PodSetShare
from koordqueue.simulation.scenario_fields import (
    ScenarioError,
    int_field,
    line_of,
    list_field,
    maps_of,
    name_field,
    resources_field,
)

POD_SETS_FIELD = "podSets"
_POD_SET_KEYS = {"name", "count", "request"}


def heterogeneous(shares: Iterable[PodSetShare]) -> tuple[PodSetShare, ...]:
    """The pod sets worth saying one by one: those with pods, when their requests differ
    (alike, an even split of the total is exact: `pods` says it); else ()."""
    listed = tuple(s for s in shares if s.count > 0)
    return listed if len({s.request for s in listed}) > 1 else ()


def pod_sets_field(source: str, u: Mapping[str, Any], where: str) -> tuple[PodSetShare, ...]:
    """A unit's `podSets` (not with `pods`)."""
    listed = list_field(source, u, POD_SETS_FIELD)
    if listed and "pods" in u:
        raise ScenarioError(source, line_of(u, POD_SETS_FIELD), f"{where}.{POD_SETS_FIELD}",
                            "give pods or podSets, not both")
    out: list[PodSetShare] = []
    for at, entry in maps_of(source, u, POD_SETS_FIELD, listed, _POD_SET_KEYS, where):
        name = name_field(source, entry, at)
        if any(s.name == name for s in out):
            raise ScenarioError(source, line_of(entry, "name"), f"{at}.name",
                                f"duplicate pod set {name!r}")
        count = int_field(source, entry, "count", at, 1) or 0
        if count < 1:
            raise ScenarioError(source, line_of(entry, "count"), f"{at}.count", "must be >= 1")
        request = resources_field(source, entry, "request", at)
        if not request:
            raise ScenarioError(source, line_of(entry, "request"), f"{at}.request",
                                "must ask for some resource")
        out.append(PodSetShare(name, count, request))
    return tuple(out)


def pod_set_entries(shares: Iterable[PodSetShare]) -> list[dict[str, Any]]:
    """`podSets` as a snapshot writes them."""
    return [{"name": s.name, "count": s.count, "request": s.request.to_quantities()}
            for s in shares]
