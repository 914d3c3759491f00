"""What Volcano's queue, SLA and protection plugins read off API objects (nodegroup, sla,
cdp, task-topology, resourcequota): a Queue's `spec.affinity` and limits annotation, the
PodGroup annotations sla and task-topology read, a pod's task name, cool-down label /
annotation and when it was scheduled, and ResourceQuotas' status.

Kept apart from convert.py so that those plugins' fields stay in one place; only the keys
`vc_names` lists are kept, so tasks and jobs carry no copy of every annotation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import structlog

from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import strategy_fit_names as sn
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.api.queue_info import NodeGroupAffinity
from koordqueue.scheduler.api.resource_quota import ResourceQuotaStatus
from koordqueue.scheduler.api.task_info import NO_LABELS

Obj = Mapping[str, Any]
log = structlog.get_logger(__name__)

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _names(raw: object) -> list[str]:
    return [str(v) for v in raw] if isinstance(raw, list) else []


def node_group_affinity(spec: Mapping[str, Any]) -> NodeGroupAffinity | None:
    """A Queue's `spec.affinity` (nodeGroupAffinity / nodeGroupAntiAffinity), or None."""
    affinity = spec.get("affinity")
    if not isinstance(affinity, Mapping):
        return None
    pro = affinity.get("nodeGroupAffinity")
    anti = affinity.get("nodeGroupAntiAffinity")
    pro = pro if isinstance(pro, Mapping) else {}
    anti = anti if isinstance(anti, Mapping) else {}
    return NodeGroupAffinity(
        required=frozenset(_names(pro.get(_REQUIRED))),
        preferred=tuple(dict.fromkeys(_names(pro.get(_PREFERRED)))),
        anti_required=frozenset(_names(anti.get(_REQUIRED))),
        anti_preferred=frozenset(_names(anti.get(_PREFERRED))),
    )


def node_group_limits(annotations: Mapping[str, Any]) -> str | None:
    """The raw `volcano.sh/nodegroup-resource-limits` annotation (parsed by the plugin,
    which reports a bad one), or None."""
    raw = annotations.get(vn.NODE_GROUP_LIMITS_ANNOTATION)
    return None if raw is None else str(raw)


def kept(sources: tuple[object, ...], keys: frozenset[str]) -> Mapping[str, str]:
    """The `keys` found in the first of `sources` (label / annotation maps) naming them."""
    found: dict[str, str] = {}
    for source in sources:
        if not isinstance(source, Mapping):
            continue
        for key in keys:
            if key not in found and key in source:
                found[key] = str(source[key])
    return found or NO_LABELS


def job_annotations(metadata: Mapping[str, Any]) -> Mapping[str, str]:
    """The PodGroup annotations sla, task-topology and tdm read (tdm's
    `volcano.sh/preemptable`: the annotation, else the label, as Volcano's
    extractPreemptable)."""
    found = kept((metadata.get("annotations"),), vn.JOB_ANNOTATIONS)
    if vn.PREEMPTABLE in found:
        return found
    label = kept((metadata.get("labels"),), frozenset({vn.PREEMPTABLE}))
    return {**found, **label} if label else found


def _truthy(value: object) -> bool | None:
    """Go's strconv.ParseBool, None when it is not a boolean."""
    text = str(value)
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    return None


def revocable_zone(annotations: object) -> str:
    """Volcano's GetPodRevocableZone: "*" when the `volcano.sh/revocable-zone` annotation
    is "*", or when it is absent and `volcano.sh/preemptable` is true; else ""."""
    if not isinstance(annotations, Mapping):
        return ""
    if vn.REVOCABLE_ZONE in annotations:
        return "*" if annotations[vn.REVOCABLE_ZONE] == "*" else ""
    if vn.PREEMPTABLE in annotations and _truthy(annotations[vn.PREEMPTABLE]):
        return "*"
    return ""


def task_vc(metadata: Mapping[str, Any]) -> Mapping[str, str]:
    """The pod labels / annotations cdp reads, labels first (Volcano's order), and tdm's
    revocable zone (under `volcano.sh/revocable-zone`, only when "*")."""
    found = kept((metadata.get("labels"), metadata.get("annotations")), vn.TASK_ANNOTATIONS)
    if revocable_zone(metadata.get("annotations")):
        return {**found, vn.REVOCABLE_ZONE: "*"}
    return found


def task_role(metadata: Mapping[str, Any]) -> str:
    """Volcano's getTaskRole: the pod's `volcano.sh/task-spec` annotation, else label."""
    for source in (metadata.get("annotations"), metadata.get("labels")):
        if isinstance(source, Mapping) and source.get(vn.TASK_SPEC):
            return str(source[vn.TASK_SPEC])
    return ""


def scheduled_at(pod: Obj) -> float | None:
    """When the pod's PodScheduled condition turned True (epoch seconds), or None."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if not isinstance(condition, Mapping) or condition.get("type") != "PodScheduled":
            continue
        if condition.get("status") != "True":
            return None
        value = condition.get("lastTransitionTime")
        if not isinstance(value, str) or not value:
            return None
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _quantities(raw: object, where: str) -> Resources:
    """A resource list; one that does not parse counts as empty (and is logged)."""
    if not isinstance(raw, Mapping):
        return Resources()
    try:
        return Resources.parse(raw, where)
    except InvalidQuantityError as exc:
        log.warning("ignoring invalid ResourceQuota quantities", field=where, error=str(exc))
        return Resources()


def resource_quotas(raws: Iterable[Obj]) -> tuple[ResourceQuotaStatus, ...]:
    """Every ResourceQuota's status (hard, used), ordered by namespace/name (the same from
    either build): what the quota controller writes, as Volcano's cache keeps it."""
    quotas = []
    for raw in raws:
        metadata = raw.get("metadata") or {}
        status = raw.get("status") or {}
        namespace, name = str(metadata.get("namespace", "")), str(metadata.get("name", ""))
        quotas.append(ResourceQuotaStatus(
            namespace, name, _quantities(status.get("hard"), f"{namespace}/{name} status.hard"),
            _quantities(status.get("used"), f"{namespace}/{name} status.used")))
    return tuple(sorted(quotas, key=lambda q: (q.namespace, q.name)))


def strategy_fit(metadata: Obj) -> tuple[str, str] | None:
    """A pod's resource-strategy-fit annotations (type, weights JSON), None without a type."""
    notes = metadata.get("annotations") or {}
    kind = notes.get(sn.SCORING_TYPE_KEY)
    if not kind:
        return None
    return str(kind), str(notes.get(sn.SCORING_WEIGHT_KEY) or "")
