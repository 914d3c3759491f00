"""What `koordqueue dashboard` shows: pure functions from API objects to one JSON-ready state.

The page (dashboard_static/) only lays this state out, so what a person sees is decided here
and tested here. Nothing is worked out a second time: usage is what the controller writes on
each quota's Queue (the six Koord-Queue usage annotations, kube/quota_status.py); the pending
units, their order and the reason each waits are the visibility API's answer as served (the
controller's own last round, domain/pending.py); admitted units are the QueueUnits whose
phase the controller set to an admitted one; events are those the controller recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from koordqueue.cli.plugin_view import QuotaNode, quota_tree
from koordqueue.domain import names
from koordqueue.domain.quantity import NANO, InvalidQuantityError, format_nanos, parse_nanos
from koordqueue.domain.queue_unit import ADMITTED_PHASES

EVENT_COMPONENT: Final = "koord-queue"
"""The controller's events carry it as `source.component` (kube/events.py COMPONENT)."""
EVENTS_SHOWN: Final = 40
ADMITTED_SHOWN: Final = 200
PENDING_SHOWN_PER_QUEUE: Final = 100
ADMITTED: Final = frozenset(phase.value for phase in ADMITTED_PHASES)
BYTE_RESOURCES: Final = ("memory", "storage", "ephemeral-storage", "hugepages-")
"""Resources shown with binary suffixes (1Gi rather than 1073741824)."""


def _nanos(value: object) -> int:
    """A quantity in nano-units; an unreadable one counts as 0 (the page shows the text)."""
    try:
        return parse_nanos(value)
    except InvalidQuantityError:
        return 0


def _text(resource: str, nanos: int) -> str:
    binary = resource.startswith(BYTE_RESOURCES)
    return format_nanos(nanos, "BinarySI" if binary else "DecimalSI")


def _usage(annotations: Mapping[str, str], key: str) -> dict[str, int]:
    """A usage annotation (a JSON map of whole units) in nano-units; unreadable: empty."""
    try:
        value = json.loads(annotations.get(key) or "{}")
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): int(v) * NANO for k, v in value.items() if isinstance(v, int) and v}


def _percent(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 1) if whole > 0 else 0.0


def resource_row(
    resource: str, *, minimum: int, maximum: int | None, used: int, self_used: int,
    guaranteed: int,
) -> dict[str, Any]:
    """One resource of one quota: amounts as text, and the bar's segments in percent of the
    bar's length (the largest of max, used and min, so usage past max shows as overflow).

    Oversold usage is the usage not counted as guaranteed (Koord-Queue's OverSoldUsed is
    Used - GuaranteedUsed); children's usage is the subtree's minus the quota's own.
    """
    oversold = max(0, used - guaranteed)
    scale = max(maximum or 0, used, minimum)
    return {
        "resource": resource,
        "min": _text(resource, minimum),
        "max": "-" if maximum is None else _text(resource, maximum),
        "used": _text(resource, used),
        "self": _text(resource, self_used),
        "children": _text(resource, max(0, used - self_used)),
        "guaranteed": _text(resource, used - oversold),
        "oversold": _text(resource, oversold),
        "bar": {
            "guaranteed": _percent(used - oversold, scale),
            "oversold": _percent(oversold, scale),
            "min": _percent(minimum, scale),
            "max": None if maximum is None else _percent(maximum, scale),
        },
        "overMax": maximum is not None and used > maximum,
        "overMin": used > minimum,
    }


def _walk(nodes: Sequence[QuotaNode], depth: int = 0) -> Iterable[tuple[int, QuotaNode]]:
    for node in nodes:
        yield depth, node
        yield from _walk(node.children, depth + 1)


def quota_rows(
    quotas: Iterable[Mapping[str, Any]],
    queues: Iterable[Mapping[str, Any]],
    pending: Mapping[str, int] | None,
    queue_namespace: str = names.QUEUE_NAMESPACE,
) -> list[dict[str, Any]]:
    """The quota tree, depth first (children by name), one row per quota with its resources."""
    own_queues = [
        q for q in queues
        if (q.get("metadata") or {}).get("namespace", queue_namespace) == queue_namespace
    ]
    annotations = {
        str(q["metadata"]["name"]): (q["metadata"].get("annotations") or {}) for q in own_queues
    }
    rows: list[dict[str, Any]] = []
    for depth, node in _walk(quota_tree(quotas, own_queues, pending)):
        marks = annotations.get(node.name, {})
        used = _usage(marks, names.QUEUE_USED_ANNOTATION)
        self_used = _usage(marks, names.QUEUE_SELF_USED_ANNOTATION)
        guaranteed = _usage(marks, names.QUEUE_GUARANTEED_USED_ANNOTATION)
        minimum = {k: _nanos(v) for k, v in node.min.items()}
        maximum = {k: _nanos(v) for k, v in node.max.items()}
        resources = sorted(set(minimum) | set(maximum) | set(used))
        rows.append({
            "name": node.name,
            "namespace": node.namespace,
            "parent": node.parent,
            "depth": depth,
            "held": node.held,
            "pending": node.pending,
            "hasQueue": node.name in annotations,
            "resources": [
                resource_row(res, minimum=minimum.get(res, 0), maximum=maximum.get(res),
                             used=used.get(res, 0), self_used=self_used.get(res, 0),
                             guaranteed=guaranteed.get(res, 0))
                for res in resources
            ],
        })
    return rows


def _amounts(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(values.items())) or "-"


def pending_queues(
    items: Sequence[Mapping[str, Any]], held: Iterable[str] = (),
    shown: int = PENDING_SHOWN_PER_QUEUE,
) -> list[dict[str, Any]]:
    """The visibility API's pending units grouped by queue (queues by name), each queue's
    units in the answer's order: the order the next round tries them, units no round tries
    (null positions) last. Positions and reasons are copied, never computed."""
    held_queues = set(held)
    by_queue: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        meta = item.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        queue = str(item.get("queueName") or "")
        by_queue.setdefault(queue, []).append({
            "key": f"{namespace}/{name}",
            "namespace": namespace,
            "name": name,
            "position": item.get("position"),
            "positionInQueue": item.get("positionInQueue"),
            "positionInQuota": item.get("positionInQuota"),
            "priority": item.get("priority", 0),
            "request": _amounts(item.get("request") or {}),
            "phase": str(item.get("phase") or ""),
            "reason": str(item.get("reason") or ""),
            "message": str(item.get("message") or ""),
        })
    return [
        {"name": queue, "held": queue in held_queues, "total": len(units),
         "units": units[:shown]}
        for queue, units in sorted(by_queue.items())
    ]


def admitted_units(units: Iterable[Mapping[str, Any]],
                   shown: int = ADMITTED_SHOWN) -> tuple[list[dict[str, Any]], int]:
    """QueueUnits in an admitted phase, by quota then namespace/name; (first `shown`, total)."""
    rows: list[dict[str, Any]] = []
    for unit in units:
        status = unit.get("status") or {}
        phase = str(status.get("phase") or "")
        if phase not in ADMITTED:
            continue
        meta = unit.get("metadata") or {}
        labels = meta.get("labels") or {}
        rows.append({
            "key": f"{meta.get('namespace') or 'default'}/{meta.get('name')}",
            "namespace": str(meta.get("namespace") or "default"),
            "name": str(meta.get("name") or ""),
            "quota": str(labels.get(names.QUOTA_NAME_LABEL) or ""),
            "phase": phase,
            "priority": (unit.get("spec") or {}).get("priority", 0),
            "request": _amounts((unit.get("spec") or {}).get("resource") or {}),
            "since": str(status.get("admissionTime") or ""),
        })
    rows.sort(key=lambda r: (r["quota"], r["namespace"], r["name"]))
    return rows[:shown], len(rows)


def _event_time(event: Mapping[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime")
               or (event.get("metadata") or {}).get("creationTimestamp") or "")


def is_controller_event(event: Mapping[str, Any]) -> bool:
    source = (event.get("source") or {}).get("component")
    return EVENT_COMPONENT in (source, event.get("reportingComponent"))


def recent_events(events: Iterable[Mapping[str, Any]],
                  shown: int = EVENTS_SHOWN) -> list[dict[str, Any]]:
    """The controller's events, newest first."""
    rows = []
    for event in events:
        if not is_controller_event(event):
            continue
        target = event.get("involvedObject") or {}
        rows.append({
            "time": _event_time(event),
            "type": str(event.get("type") or ""),
            "reason": str(event.get("reason") or ""),
            "object": f"{target.get('kind', '')}/"
                      + "/".join(p for p in (target.get("namespace"), target.get("name")) if p),
            "message": str(event.get("message") or ""),
            "count": int(event.get("count") or 1),
        })
    rows.sort(key=lambda r: (r["time"], r["object"], r["reason"]), reverse=True)
    return rows[:shown]


def dashboard_state(
    quotas: Sequence[Mapping[str, Any]],
    queues: Sequence[Mapping[str, Any]],
    units: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    pending: Mapping[str, Any] | None,
    *,
    quota_pending: Mapping[str, int] | None = None,
    pending_error: str | None = None,
    queue_namespace: str = names.QUEUE_NAMESPACE,
    cluster: str = "",
) -> dict[str, Any]:
    """Everything the page shows. `pending`: the visibility API's PendingUnitsSummary (None
    when it did not answer: `pending_error` says why, and no order is shown);
    `quota_pending`: its count of pending units per quota, the quota's subtree included (as
    `kubectl koordqueue list quotas` shows it; None: not known)."""
    items: list[Mapping[str, Any]] = list((pending or {}).get("items") or [])
    counts = None if pending is None or quota_pending is None else quota_pending
    rows = quota_rows(quotas, queues, counts, queue_namespace)
    admitted, admitted_total = admitted_units(units)
    return {
        "cluster": cluster,
        "round": (pending or {}).get("round"),
        "visibilityError": pending_error,
        "quotas": rows,
        "pending": pending_queues(items, (r["name"] for r in rows if r["held"])),
        "pendingTotal": int((pending or {}).get("total") or len(items)),
        "admitted": admitted,
        "admittedTotal": admitted_total,
        "events": recent_events(events),
    }
