"""HyperNodes (topology.volcano.sh/v1alpha1, Volcano's own CRD), a PodGroup's
networkTopology and the `volcano.sh/preemptable` key, converted for the scheduler core.

The CRD's schema and CEL rules already refuse most bad shapes at `kubectl apply` (a member
without a selector, two selectors, a negative tier). What can still be wrong, a member type
or selector this code does not know, drops that member with one warning naming the
HyperNode and the field; the rest of the HyperNode is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import structlog

from koordqueue.scheduler.api.hypernode import (
    MEMBER_HYPERNODE,
    MEMBER_NODE,
    MODE_HARD,
    MODE_SOFT,
    HyperNode,
    HyperNodeMember,
    MemberSelector,
    NetworkTopology,
)
from koordqueue.scheduler.api.selectors import LabelSelector, LabelSelectorRequirement

log = structlog.get_logger(__name__)

Obj = Mapping[str, Any]
BAD_MEMBER_WARNING: Final = "HyperNode {name}: spec.members[{index}] ignored: {detail}"
PREEMPTABLE_KEY: Final = "volcano.sh/preemptable"
BAD_PREEMPTABLE_WARNING: Final = "{key}: volcano.sh/preemptable={value!r} is not a boolean; false"
BAD_MODE_WARNING: Final = (
    "PodGroup {key}: spec.networkTopology.mode {mode!r} is neither hard nor soft; hard is used"
)


def _selector(raw: Obj | None) -> LabelSelector | None:
    if raw is None:
        return None
    labels = tuple(sorted((str(k), str(v)) for k, v in (raw.get("matchLabels") or {}).items()))
    expressions = tuple(
        LabelSelectorRequirement(
            str(e.get("key", "")), str(e.get("operator", "")),
            tuple(str(v) for v in e.get("values") or ()),
        )
        for e in raw.get("matchExpressions") or ()
    )  # fmt: skip
    return LabelSelector(labels, expressions)


def hyper_node(raw: Obj) -> HyperNode:
    """One HyperNode object as the core's data (bad members dropped, logged)."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    name = str(meta.get("name", ""))
    members: list[HyperNodeMember] = []
    for i, member in enumerate(spec.get("members") or ()):
        kind = str((member or {}).get("type", ""))
        sel = (member or {}).get("selector") or {}
        if kind not in (MEMBER_NODE, MEMBER_HYPERNODE):
            log.warning(BAD_MEMBER_WARNING.format(name=name, index=i, detail=f"type {kind!r}"))
            continue
        exact = (sel.get("exactMatch") or {}).get("name") if "exactMatch" in sel else None
        regex = (sel.get("regexMatch") or {}).get("pattern") if "regexMatch" in sel else None
        label = _selector(sel.get("labelMatch")) if "labelMatch" in sel else None
        if exact is None and regex is None and label is None:
            log.warning(BAD_MEMBER_WARNING.format(name=name, index=i, detail="no selector"))
            continue
        members.append(
            HyperNodeMember(
                kind,
                MemberSelector(
                    exact_match=None if exact is None else str(exact),
                    regex_match=None if regex is None else str(regex),
                    label_match=label,
                ),
            )
        )
    try:
        tier = int(spec.get("tier") or 0)
    except (TypeError, ValueError):
        log.warning("HyperNode ignored: spec.tier is not an integer", name=name)
        tier = 0
    return HyperNode(name, tier, tuple(members), str(spec.get("tierName") or ""))


def hyper_nodes(raws: Iterable[Obj]) -> tuple[HyperNode, ...]:
    """Every HyperNode converted, by name (the same from either snapshot build)."""
    return tuple(sorted((hyper_node(raw) for raw in raws), key=lambda h: h.name))


def preemptable(obj: Obj, *, default: bool = True) -> bool:
    """`volcano.sh/preemptable` of a pod or PodGroup: the annotation, else the label, else
    `default`; a value that is not a boolean reads as false, with a warning (Volcano's
    GetPodPreemptable / extractPreemptable). Gang eviction reads a PodGroup without the key
    as preemptable (IsJobPreemptableForGangEviction), preempt and reclaim a pod likewise."""
    meta = obj.get("metadata") or {}
    for where in ("annotations", "labels"):
        values = meta.get(where) or {}
        if PREEMPTABLE_KEY in values:
            value = str(values[PREEMPTABLE_KEY]).strip().lower()
            if value in ("true", "1", "t"):
                return True
            if value not in ("false", "0", "f"):
                log.warning(BAD_PREEMPTABLE_WARNING.format(
                    key=f"{meta.get('namespace', '')}/{meta.get('name', '')}", value=value))
            return False
    return default


def network_topology(group: Obj) -> NetworkTopology | None:
    """A PodGroup's `spec.networkTopology` (None when it has none). The CRD defaults the
    mode to hard; an unknown mode is read as hard, with a warning."""
    raw = (group.get("spec") or {}).get("networkTopology")
    if not isinstance(raw, Mapping):
        return None
    mode = str(raw.get("mode") or MODE_HARD)
    if mode not in (MODE_HARD, MODE_SOFT):
        meta = group.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        log.warning(BAD_MODE_WARNING.format(key=key, mode=mode))
        mode = MODE_HARD
    tier = raw.get("highestTierAllowed")
    allowed = int(tier) if isinstance(tier, int) and not isinstance(tier, bool) else None
    return NetworkTopology(mode, allowed, str(raw.get("highestTierName") or ""))


__all__ = ["hyper_node", "hyper_nodes", "network_topology", "preemptable"]
