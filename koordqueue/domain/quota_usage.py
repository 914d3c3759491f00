"""What a quota tree reports: per-level CheckUsage states (`LevelState`, what explain
prints), a quota's usage split as Koord-Queue's ElasticQuotaInfo splits it, and the usage
annotations Koord-Queue keeps on a quota's Queue."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from koordqueue.domain.names import (
    QUEUE_CHILDREN_GUARANTEED_USED_ANNOTATION,
    QUEUE_CHILDREN_USED_ANNOTATION,
    QUEUE_GUARANTEED_USED_ANNOTATION,
    QUEUE_SELF_GUARANTEED_USED_ANNOTATION,
    QUEUE_SELF_USED_ANNOTATION,
    QUEUE_USED_ANNOTATION,
)
from koordqueue.domain.quantity import NANO, ceil_div
from koordqueue.domain.resources import Resources


@dataclass(frozen=True, slots=True)
class ResourceState:
    """One resource of one level for one request: `fits` is CheckUsage's own comparison
    (max × oversellrate − used >= request)."""

    resource: str
    limit: int
    used: int
    request: int
    fits: bool


@dataclass(frozen=True, slots=True)
class LevelState:
    """One quota of a chain for one request: its limited resources, and whether CheckUsage
    refuses the request at this level (a resource without room, or an empty max)."""

    quota: str
    parent: str
    resources: tuple[ResourceState, ...]
    empty_max: bool
    refuses: bool


@dataclass(frozen=True, slots=True)
class UsageSplit:
    """A quota's usage split as Koord-Queue's ElasticQuotaInfo splits it.

    `used` is the whole subtree; `self_used` the units admitted into this quota itself,
    `children_used` those admitted below it. `oversold_used` the units whose actual oversold
    type is `ForceQuotaOverSold`, `guaranteed_used` all others; each also split self/children.
    """

    used: Resources
    self_used: Resources
    children_used: Resources
    guaranteed_used: Resources
    self_guaranteed_used: Resources
    children_guaranteed_used: Resources
    oversold_used: Resources
    self_oversold_used: Resources
    children_oversold_used: Resources


def queue_usage_values(split: UsageSplit) -> dict[str, dict[str, int]]:
    """The six usage annotations Koord-Queue's queue controller keeps on a quota's Queue, as
    whole units per resource (Kubernetes `Quantity.Value()`: rounded up). Oversold usage is
    not among them upstream."""
    parts = {
        QUEUE_USED_ANNOTATION: split.used,
        QUEUE_GUARANTEED_USED_ANNOTATION: split.guaranteed_used,
        QUEUE_SELF_USED_ANNOTATION: split.self_used,
        QUEUE_SELF_GUARANTEED_USED_ANNOTATION: split.self_guaranteed_used,
        QUEUE_CHILDREN_USED_ANNOTATION: split.children_used,
        QUEUE_CHILDREN_GUARANTEED_USED_ANNOTATION: split.children_guaranteed_used,
    }
    return {
        key: {res: ceil_div(nanos, NANO) for res, nanos in amounts.items()}
        for key, amounts in parts.items()
    }


def render_usage(values: Mapping[str, int]) -> str:
    """A usage map as Go's `json.Marshal` writes it: keys sorted, no spaces."""
    return json.dumps(dict(values), sort_keys=True, separators=(",", ":"))


def changed_usage_annotations(
    current: Mapping[str, str], wanted: Mapping[str, Mapping[str, int]]
) -> dict[str, str]:
    """The annotations of `wanted` whose value differs from `current`, rendered.

    As Koord-Queue (`isQueueAnnotationDiff`), zero entries are ignored on both sides, so an
    absent annotation equals an all-zero usage. An unreadable current value is rewritten.
    """
    changed: dict[str, str] = {}
    for key, values in wanted.items():
        want = {res: v for res, v in values.items() if v}
        raw = current.get(key)
        have: object = {}
        if raw:
            try:
                have = json.loads(raw)
            except ValueError:
                have = None
        if not isinstance(have, dict) or {k: v for k, v in have.items() if v} != want:
            changed[key] = render_usage(values)
    return changed


@dataclass(frozen=True, slots=True)
class QuotaUsage:
    """Reporting row: a quota's limits, annotations and its subtree usage (with its split)."""

    name: str
    parent: str
    min: Resources
    max: Resources
    used: Resources
    admitted_units: int
    split: UsageSplit | None = None
    annotations: Mapping[str, str] = field(default_factory=dict, hash=False)
