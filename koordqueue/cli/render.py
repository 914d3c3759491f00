"""Plain-text and JSON renderings of simulation results (no third-party table library needed)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from koordqueue.domain.names import EVENT_NORMAL
from koordqueue.simulation.simulator import SimulationResult


def table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """A fixed-width text table, like `kubectl get`."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["   ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    return "\n".join(lines)


def simulation_table(result: SimulationResult) -> str:
    scenario = result.scenario
    out = [
        f"scenario {scenario.name}: {len(scenario.quotas)} quotas, "
        f"{len(scenario.units)} units, {scenario.steps} steps, "
        f"oversellrate {scenario.oversell_rate}"
    ]
    if scenario.description:
        out.append(scenario.description.strip())
    for record in result.steps:
        out.append("")
        out.append(f"== step {record.step}")
        rows = [[e.type, e.reason, e.unit, e.message] for e in record.events]
        rows += [
            [EVENT_NORMAL, "Finished", key, "released its quota"] for key in record.finished
        ]
        if rows:
            out.append(table(rows, ["type", "reason", "object", "message"]))
        else:
            out.append("(no change)")
        usage = [
            [u.name, u.parent, str(u.min), str(u.max), str(u.used), str(u.admitted_units)]
            for u in record.usage
        ]
        out.append(table(usage, ["quota", "parent", "min", "max", "used", "units"]))
    out.append("")
    final = result.final_phases()
    messages = result.final_messages()
    out.append(
        table(
            sorted([k, v, messages.get(k, "")] for k, v in final.items()),
            ["unit", "phase", "message"],
        )
    )
    return "\n".join(out)


def simulation_json(result: SimulationResult) -> str:
    doc: dict[str, Any] = {
        "scenario": result.scenario.name,
        "steps": [
            {
                "step": record.step,
                "events": [
                    {"type": e.type, "reason": e.reason, "object": e.unit, "message": e.message}
                    for e in record.events
                ],
                "admitted": record.admitted,
                "finished": record.finished,
                "running": record.running,
                "placements": record.placements,
                "waiting": record.waiting,
                "usage": {
                    u.name: {
                        "parent": u.parent,
                        "min": u.min.to_quantities(),
                        "max": u.max.to_quantities(),
                        "used": u.used.to_quantities(),
                        "units": u.admitted_units,
                    }
                    for u in record.usage
                },
            }
            for record in result.steps
        ],
        "final": result.final_phases(),
        "messages": result.final_messages(),
        "queueErrors": result.queue_errors,
    }
    return json.dumps(doc, indent=2, sort_keys=True)
