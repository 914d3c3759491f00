"""What Koord-Queue's debug endpoint `GET /apis/v1/elasticquota` reports, from our quota tree.

Koord-Queue (`--enableApiHandler`, port 19876) answers a JSON object keyed by quota name:
`Count` (units held in the quota itself), `Max`, `Min`, `Used` and its splits (`SelfUsed`,
`ChildrenUsed`, `GuaranteedUsed`, `SelfGuaranteedUsed`, `ChildrenGuaranteedUsed`,
`OverSoldUsed`, `SelfOverSoldUsed`, `ChildrenOverSoldUsed`), each a map resource -> milli-units
(five cores are 5000), and `Items`, the units held keyed `namespace/name` (`Name`,
`Resource`, `Priority`, `OversoldType`, `ActualOversoldType`, `CreationTimestamp`,
`InReserveCache`). The same keys here, read from the tree the admission rounds check: the
endpoint states what CheckUsage believes is reserved, to reconcile it with the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import (
    ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION,
    QUOTA_OVERSOLD_TYPE_ANNOTATION,
)
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.quota_tree import QuotaUsage
from koordqueue.domain.resources import Resources

ZERO_TIME: Final = "0001-01-01T00:00:00Z"
"""How Go's metav1.Time writes an unknown time (the zero value, not null)."""


def milli_map(amounts: Resources) -> dict[str, int]:
    """resource -> milli-units, rounded up (Koord-Queue's maps hold MilliValue)."""
    return {name: amounts.milli(name) for name in sorted(amounts) if amounts.get_nanos(name)}


def _timestamp(epoch: float) -> str:
    if epoch <= 0:
        return ZERO_TIME
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def unit_item(unit: QueueUnit) -> dict[str, Any]:
    """One held unit as Koord-Queue's ElasticQuotaUnitDebugInfo. Every unit the tree holds
    is reserved, so `InReserveCache` is true."""
    return {
        "Name": unit.name,
        "Resource": unit.resource.to_quantities(),
        "Priority": unit.priority,
        "OversoldType": unit.annotations.get(QUOTA_OVERSOLD_TYPE_ANNOTATION, ""),
        "ActualOversoldType": unit.annotations.get(ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION, ""),
        "CreationTimestamp": _timestamp(unit.created),
        "InReserveCache": True,
    }


def elastic_quota_debug_info(
    rows: Iterable[QuotaUsage], held: Iterable[tuple[QueueUnit, str]]
) -> dict[str, dict[str, Any]]:
    """quota -> its debug info; `rows` the tree's report, `held` each unit the tree holds
    with the quota it was admitted into (an unknown quota's units are left out)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        split = row.split
        parts: Mapping[str, Resources] = (
            {} if split is None else {
                "Used": split.used, "SelfUsed": split.self_used,
                "ChildrenUsed": split.children_used, "GuaranteedUsed": split.guaranteed_used,
                "SelfGuaranteedUsed": split.self_guaranteed_used,
                "ChildrenGuaranteedUsed": split.children_guaranteed_used,
                "OverSoldUsed": split.oversold_used, "SelfOverSoldUsed": split.self_oversold_used,
                "ChildrenOverSoldUsed": split.children_oversold_used,
            }
        )
        info: dict[str, Any] = {
            "Count": row.admitted_units,
            "Max": milli_map(row.max),
            "Min": milli_map(row.min),
        }
        info["Used"] = milli_map(row.used)
        for key, amounts in parts.items():
            info[key] = milli_map(amounts)
        info["Items"] = {}
        out[row.name] = info
    for unit, quota in sorted(held, key=lambda pair: pair[0].key):  # (Go sorts map keys)
        holder = out.get(quota)
        if holder is not None:
            holder["Items"][unit.key] = unit_item(unit)
    return out


def quota_view(engine: AdmissionEngine) -> dict[str, dict[str, Any]]:
    """The endpoint's answer, read from `engine` (call on the thread that owns it)."""
    tree = engine.tree
    held = []
    for uid in tree.admitted_uids():
        unit, quota = engine.unit(uid), tree.reserved_quota(uid)
        if unit is not None and quota is not None:
            held.append((unit, quota))
    return elastic_quota_debug_info(tree.report(), held)
