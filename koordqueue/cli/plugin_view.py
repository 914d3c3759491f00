"""What `kubectl koordqueue` prints: pure functions from API objects to rows and documents.

The quota tree comes from the ElasticQuotas (min, max, parent) and their Queues (the usage
annotations the controller writes, quota_status.py); pending units come from the visibility
API as served (positions and reasons read from the admission round's record there, never
worked out here).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from koordqueue.cli.render import table
from koordqueue.domain import names

TREE_INDENT: Final = "  "
MESSAGE_WIDTH: Final = 60
"""Table cells longer than this are cut (-o json|yaml carry the whole message)."""


@dataclass(slots=True)
class QuotaNode:
    name: str
    namespace: str
    parent: str
    min: dict[str, str]
    max: dict[str, str]
    used: dict[str, Any]
    self_used: dict[str, Any]
    children_used: dict[str, Any]
    held: bool = False
    pending: int | None = None
    children: list[QuotaNode] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "namespace": self.namespace, "parent": self.parent,
            "min": self.min, "max": self.max, "used": self.used, "selfUsed": self.self_used,
            "childrenUsed": self.children_used, "held": self.held, "pending": self.pending,
            "children": [c.to_dict() for c in self.children],
        }


def _usage(annotations: Mapping[str, str], key: str) -> dict[str, Any]:
    raw = annotations.get(key)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return {k: v for k, v in value.items() if v} if isinstance(value, dict) else {}


def quota_tree(
    quotas: Iterable[Mapping[str, Any]],
    queues: Iterable[Mapping[str, Any]],
    pending: Mapping[str, int] | None = None,
) -> list[QuotaNode]:
    """The roots of the quota tree (children sorted by name), each with its Queue's usage."""
    by_queue = {
        str(q["metadata"]["name"]): (q["metadata"].get("annotations") or {}) for q in queues
    }
    nodes: dict[str, QuotaNode] = {}
    for quota in quotas:
        meta = quota.get("metadata") or {}
        name = str(meta.get("name") or "")
        spec = quota.get("spec") or {}
        labels = meta.get("labels") or {}
        annotations = by_queue.get(name, {})
        nodes[name] = QuotaNode(
            name=name,
            namespace=str(meta.get("namespace") or ""),
            parent=str(labels.get(names.QUOTA_PARENT_LABEL) or ""),
            min={k: str(v) for k, v in (spec.get("min") or {}).items()},
            max={k: str(v) for k, v in (spec.get("max") or {}).items()},
            used=_usage(annotations, names.QUEUE_USED_ANNOTATION),
            self_used=_usage(annotations, names.QUEUE_SELF_USED_ANNOTATION),
            children_used=_usage(annotations, names.QUEUE_CHILDREN_USED_ANNOTATION),
            held=annotations.get(names.STOP_POLICY_ANNOTATION) == names.STOP_POLICY_HOLD,
            pending=None if pending is None else pending.get(name, 0),
        )
    roots: list[QuotaNode] = []
    for node in sorted(nodes.values(), key=lambda n: n.name):
        parent = nodes.get(node.parent)
        if parent is None or parent is node or node.parent == names.ROOT_QUOTA:
            roots.append(node)
        else:
            parent.children.append(node)
    return roots


def _walk(nodes: Sequence[QuotaNode], depth: int = 0) -> Iterable[tuple[int, QuotaNode]]:
    for node in nodes:
        yield depth, node
        yield from _walk(node.children, depth + 1)


def _amounts(values: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(values.items())) or "-"


def quota_table(roots: Sequence[QuotaNode]) -> str:
    rows = [
        [
            TREE_INDENT * depth + node.name, node.namespace, _amounts(node.min),
            _amounts(node.max), _amounts(node.used), _amounts(node.self_used),
            _amounts(node.children_used),
            "-" if node.pending is None else str(node.pending),
            "Hold" if node.held else "",
        ]
        for depth, node in _walk(roots)
    ]
    headers = ["name", "namespace", "min", "max", "used", "self", "children", "pending",
               "stop"]
    return table(rows, headers)


def _cut(text: str, width: int = MESSAGE_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _position(value: object) -> str:
    return "-" if value is None else str(value)


def unit_table(items: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            str(i["metadata"]["namespace"]), str(i["metadata"]["name"]), str(i["quotaName"]),
            _position(i.get("position")), _position(i.get("positionInQueue")),
            _position(i.get("positionInQuota")), str(i.get("priority", 0)),
            _amounts(i.get("request") or {}), str(i.get("phase", "")),
            str(i.get("reason", "")), _cut(str(i.get("message", ""))),
        ]
        for i in items
    ]
    headers = ["namespace", "name", "quota", "position", "in-queue", "in-quota", "priority",
               "request", "phase", "reason", "message"]
    return table(rows, headers)


def dump(document: object, output: str) -> str:
    """-o json|yaml."""
    if output == "yaml":
        return yaml.safe_dump(document, sort_keys=False).rstrip()
    return json.dumps(document, indent=2)


def top_frame(
    roots: Sequence[QuotaNode], items: Sequence[Mapping[str, Any]], header: str, rows: int
) -> str:
    """One screen of `top`: the quota tree, then the head of the pending list."""
    shown = items[:rows]
    more = f"\n... {len(items) - len(shown)} more pending" if len(items) > len(shown) else ""
    return "\n".join([header, "", quota_table(roots), "",
                      unit_table(shown) if shown else "no pending units"]) + more
