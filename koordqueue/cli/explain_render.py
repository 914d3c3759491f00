"""What `koordqueue explain` prints: a unit's or a pod's explanation as a table or JSON.

Only rendering: the explanations come from `koordqueue.simulation.explain` (units) and
`koordqueue.kube.scheduler.explain_pod` (pods); cli/explain.py gathers the objects.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from koordqueue.cli.render import table
from koordqueue.domain.names import ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION
from koordqueue.domain.quota import is_oversold
from koordqueue.simulation.explain import ClusterView, Explanation, fmt

if TYPE_CHECKING:  # the kube modules are imported only when a pod is explained
    from koordqueue.kube.scheduler.explain_pod import PodExplanation


SPLIT_PARTS = ("used", "self", "children", "guaranteed", "oversold")


def _usage_split(ex: Explanation, view: ClusterView) -> list[dict[str, str]]:
    """Per quota on the unit's chain and resource: usage split as Koord-Queue keeps it."""
    rows: list[dict[str, str]] = []
    for level in ex.chain:
        s = view.engine.tree.usage_split(level.quota)
        parts = {
            "used": s.used, "self": s.self_used, "children": s.children_used,
            "guaranteed": s.guaranteed_used, "oversold": s.oversold_used,
        }
        for res in sorted(set(s.used) | {c.resource for c in level.checks}):
            row = {"quota": level.quota, "resource": res}
            row.update({part: fmt(res, parts[part].get_nanos(res)) for part in SPLIT_PARTS})
            rows.append(row)
    return rows


def _counts_as(ex: Explanation, view: ClusterView) -> str | None:
    """How the unit's usage counts once admitted, from its actual-oversold-type annotation."""
    unit = next((u for u in view.engine.units() if u.key == ex.unit), None)
    if unit is None:
        return None
    value = unit.annotations.get(ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION)
    kind = "oversold" if is_oversold(unit.annotations) else "guaranteed"
    return kind if value is None else f"{kind} ({ACTUAL_QUOTA_OVERSOLD_TYPE_ANNOTATION}={value})"


def render_json(ex: Explanation, view: ClusterView) -> str:
    doc = ex.to_dict()
    doc["source"] = view.source
    doc["usageSplit"] = _usage_split(ex, view)
    doc["countsAs"] = _counts_as(ex, view)
    return json.dumps(doc, indent=2, sort_keys=True)


def _queue_line(ex: Explanation, view: ClusterView) -> str:
    if ex.queue is None:
        return "-"
    where = f"{view.queue_namespace}/{ex.queue}"
    if not ex.queue_exists:
        return f"{where} (does not exist)"
    policy = f"policy {ex.policy}"
    if ex.queue_error:
        policy += ", not served (AddQueueFail)"
    return f"{where} ({policy})"


def _position_line(ex: Explanation) -> str:
    if ex.position is None:
        return "-"
    line = f"{ex.position} of {ex.queue_length} waiting"
    if ex.ahead:
        shown = ", ".join(ex.ahead[:5]) + (", ..." if len(ex.ahead) > 5 else "")
        line += f"; ahead: {shown}"
    return line


def render_table(ex: Explanation, view: ClusterView) -> str:
    """A kubectl-describe-like block, then the parent-chain check as a table."""
    quota = "-"
    if ex.quota is not None:
        quota = ex.quota if ex.quota_exists else f"{ex.quota} (does not exist)"
        if ex.quota_exists and ex.quota_copies > 1:
            quota = f"{ex.quota} (in force: namespace {ex.quota_namespace})"
        elif ex.quota_refused:
            quota = f"{ex.quota} (refused: no definition in force)"
    fields: list[tuple[str, str]] = [
        ("Unit", ex.unit),
        ("Source", view.source or "-"),
        ("Phase", ex.phase or "-"),
        ("Reason", ex.reason.value),
        ("Why", ex.summary),
    ]
    if ex.message:
        fields.append(("Message", ex.message))
    fields += [
        ("Resolution", ex.resolution or "-"),
        ("Quota", quota),
        ("Queue", _queue_line(ex, view)),
        ("Position", _position_line(ex)),
        ("Request", str(ex.request)),
    ]
    if ex.status_message:
        fields.append(("Status", ex.status_message))
    counts_as = _counts_as(ex, view)
    if counts_as is not None:
        fields.append(("Counts as", counts_as))
    fields += [("Note", note) for note in ex.notes]
    width = max(len(label) for label, _ in fields) + 2
    lines = [f"{label + ':':<{width}}{value}" for label, value in fields]
    if ex.chain:
        rows = []
        for depth, level in enumerate(ex.chain):
            blocking = level.quota == ex.blocking_quota
            if level.empty_max:
                rows.append([str(depth), level.quota, "-", "(empty max)", "-", "-", "-",
                             "BLOCKS" if blocking else ""])
            for c in level.checks:
                verdict = "yes" if c.fits else "NO"
                if blocking and not c.fits:
                    verdict = "NO <- blocks"
                rows.append([str(depth), level.quota, c.resource, fmt(c.resource, c.limit),
                             fmt(c.resource, c.used), fmt(c.resource, c.request),
                             fmt(c.resource, c.free), verdict])
        lines.append("")
        lines.append(table(rows, ["level", "quota", "resource", "max*rate", "used", "request",
                                  "free", "fits"]))
        split = _usage_split(ex, view)
        if split:
            lines.append("")
            lines.append(table([[r["quota"], r["resource"], *(r[p] for p in SPLIT_PARTS)]
                                for r in split], ["quota", "resource", *SPLIT_PARTS]))
    return "\n".join(lines)


def render_pod_table(ex: PodExplanation, source: str, conf: str) -> str:
    """A kubectl-describe-like block, then one row per node (why it does not fit)."""
    gates = ", ".join(ex.gates) if ex.gates else "-"
    if ex.gates:
        gates += f" (opt-in annotation: {'yes' if ex.opted_in else 'no'})"
    scheduler = ex.scheduler_name
    if ex.scheduler_name != ex.expected_scheduler:
        scheduler += f" (not ours: koordqueue runs as {ex.expected_scheduler})"
    group = "-"
    if ex.pod_group is not None:
        group = ex.pod_group if ex.pod_group_exists else f"{ex.pod_group} (does not exist)"
        if ex.pod_group_phase:
            group += f" (phase {ex.pod_group_phase})"
    queue = "-"
    if ex.queue is not None:
        queue = ex.queue if ex.queue_exists else f"{ex.queue} (does not exist: job dropped)"
    fields: list[tuple[str, str]] = [
        ("Pod", ex.pod),
        ("Source", f"{source} (dry session, scheduler conf: {conf})"),
        ("Phase", ex.phase),
        ("Scheduler", scheduler),
        ("Node", ex.node_name or "-"),
        ("Gates", gates),
        ("PodGroup", group),
        ("Queue", queue),
        ("Request", ", ".join(f"{k}={v}" for k, v in sorted(ex.request.items())) or "-"),
        ("Reason", ex.verdict.value),
        ("Why", ex.summary),
    ]
    if ex.message:
        fields.append(("Message", ex.message))
    if ex.gang is not None and ex.gang.min_available > 1:
        g = ex.gang
        fields.append(("Gang", f"minAvailable {g.min_available}, {g.tasks} pod(s), {g.ready} "
                               f"ready, {g.placed_in_dry_run} placed by the dry session"))
        if g.condition:
            fields.append(("Gang status", g.condition))
    if ex.condition:
        c = ex.condition
        fields.append(("PodScheduled", f"{c['status']} {c['reason']}: {c['message']}".strip()))
    fields += [("Note", note) for note in ex.notes]
    width = max(len(label) for label, _ in fields) + 2
    lines = [f"{label + ':':<{width}}{value}" for label, value in fields]
    if ex.nodes:
        rows = []
        for n in ex.nodes:
            if n.fits:
                verdict = "fits (once releasing pods are gone)" if n.future_only else "fits"
                rows.append([n.node, "yes", verdict])
            else:
                rows.append([n.node, "NO", "; ".join(n.reasons)])
        lines.append("")
        lines.append(table(rows, ["node", "fits", "reason"]))
    return "\n".join(lines)
