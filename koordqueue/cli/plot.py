"""`simulate --plot`: a PNG timeline of each quota's usage against its min and max.

matplotlib is an optional dependency (the `plot` extra): it is imported only here, only when a
plot is asked for, with the Agg backend so it works on headless machines and in CI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from koordqueue.simulation.simulator import SimulationResult
from koordqueue.simulation.whatif import WhatIf


class PlotUnavailableError(RuntimeError):
    """matplotlib is not installed; the message says how to get it."""


@dataclass(frozen=True, slots=True)
class Series:
    """One quota's timeline in whole units of the plotted resource (cores, bytes, GPUs)."""

    quota: str
    steps: tuple[int, ...]
    used: tuple[float, ...]
    min: float | None
    max: float | None


def timeline(result: SimulationResult, resource: str = "cpu") -> list[Series]:
    """Per quota, used `resource` after every step, and its min and max (None when unset)."""
    used: dict[str, list[float]] = {}
    limits: dict[str, tuple[float | None, float | None]] = {}
    steps = tuple(record.step for record in result.steps)
    for record in result.steps:
        for row in record.usage:
            used.setdefault(row.name, []).append(row.used.get_nanos(resource) / 1e9)
            limits[row.name] = (
                row.min[resource] / 1e9 if resource in row.min else None,
                row.max[resource] / 1e9 if resource in row.max else None,
            )
    return [
        Series(name, steps, tuple(values), *limits[name])
        for name, values in sorted(used.items())
        if len(values) == len(steps)
    ]


def write_timeline_plot(result: SimulationResult, path: Path, resource: str = "cpu") -> Path:
    """Write one panel per quota (used as a step line, min and max dashed) to `path`."""
    try:
        import matplotlib
    except ImportError as exc:
        raise PlotUnavailableError(
            "--plot needs matplotlib: pip install 'koordqueue[plot]'"
        ) from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    series = timeline(result, resource)
    columns = min(3, max(1, len(series)))
    rows = max(1, math.ceil(len(series) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(4.5 * columns, 3.2 * rows), squeeze=False)
    try:
        for ax in axes.flat[len(series):]:
            ax.set_visible(False)
        for ax, s in zip(axes.flat, series, strict=False):
            ax.step(s.steps, s.used, where="post", label="used", color="tab:blue")
            if s.max is not None:
                ax.axhline(s.max, linestyle="--", color="tab:red", label="max")
            if s.min is not None:
                ax.axhline(s.min, linestyle=":", color="tab:green", label="min")
            ax.set_title(s.quota)
            ax.set_xlabel("step")
            ax.set_ylabel(resource)
            top = max([*s.used, s.max or 0.0, s.min or 0.0, 1.0])
            ax.set_ylim(0, top * 1.15)
            ax.legend(loc="upper right", fontsize="small")
        fig.suptitle(f"scenario {result.scenario.name}: {resource} used vs min/max per quota")
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)
    return path


def write_whatif_plot(result: WhatIf, path: Path, resource: str = "cpu") -> Path:
    """One panel per quota: used before (dashed) and after (solid) the edits, max of both."""
    try:
        import matplotlib
    except ImportError as exc:
        raise PlotUnavailableError(
            "--plot needs matplotlib: pip install 'koordqueue[plot]'"
        ) from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    before = {s.quota: s for s in timeline(result.before, resource)}
    after = {s.quota: s for s in timeline(result.after, resource)}
    names = sorted(set(before) | set(after))
    columns = min(3, max(1, len(names)))
    rows = max(1, math.ceil(len(names) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(4.5 * columns, 3.2 * rows), squeeze=False)
    try:
        for ax in axes.flat[len(names):]:
            ax.set_visible(False)
        for ax, name in zip(axes.flat, names, strict=False):
            top = 1.0
            for world, s, style in (("before", before.get(name), "--"),
                                    ("after", after.get(name), "-")):
                if s is None:
                    continue
                ax.step(s.steps, s.used, where="post", linestyle=style, label=f"used {world}")
                if s.max is not None:
                    ax.axhline(s.max, linestyle=style, color="tab:red", linewidth=0.8,
                               label=f"max {world}")
                top = max([top, *s.used, s.max or 0.0])
            ax.set_title(name)
            ax.set_xlabel("step")
            ax.set_ylabel(resource)
            ax.set_ylim(0, top * 1.15)
            ax.legend(loc="upper right", fontsize="x-small")
        fig.suptitle(f"what-if: {resource} used per quota, before (dashed) and after the edits")
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)
    return path
