"""Placement runs of bench_peers.py gathered across invocations: issue 28's targets and the
scaling curve (CPU per pod and p99 against cluster size) for both schedulers.

    python bench/peers_report.py LOG [LOG ...]

On a shared box each size runs in its own `bench_peers.py --what placement --sizes S` under the
benchmark lock, so others can interleave; this reads the JSON line each run printed (one per
scheduler per run) from those logs, and prints, per size, the medians, issue 28's ratios
(koordqueue / kube-scheduler: p99 <= 0.6x, CPU per pod <= 0.8x, throughput >= 1.1x), the
figures as multiples of the binder's floor, and the curve over sizes.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

PEER = "kube-scheduler"
FLOOR = "binder"
KEYS = ("p50", "p99", "throughput", "cpu_ms", "apiserver_cpu_ms", "writes_total")

Runs = dict[str, dict[str, list[dict[str, Any]]]]
"""size ("2000/100") -> component -> its runs' JSON lines, in the order they ran."""


def read_runs(lines: Iterable[str]) -> Runs:
    """The placement runs among bench_peers.py's output lines (other lines are skipped)."""
    runs: Runs = {}
    for raw in lines:
        text = raw.strip()
        if not text.startswith("{"):
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError:
            continue
        if not isinstance(row, dict) or row.get("workload") != "placement" or "who" not in row:
            continue
        runs.setdefault(row["size"], {}).setdefault(row["who"], []).append(row)
    return runs


def medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in runs), 3) for k in KEYS
            if runs and all(k in r for r in runs)}  # fmt: skip


def issue28_targets(ours: dict[str, float], peer: dict[str, float]) -> dict[str, bool]:
    """Issue 28 part 1, koordqueue / kube-scheduler on the same medians."""
    def r(key: str) -> float:  # to the 3 decimals printed: 110 / 100 is 1.1, not below it
        return round(ours[key] / peer[key], 3) if peer[key] else float("inf")

    return {
        "p99_le_0.6x": r("p99") <= 0.6,
        "cpu_per_pod_le_0.8x": r("cpu_ms") <= 0.8,
        "throughput_ge_1.1x": r("throughput") >= 1.1,
    }


def _x(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "n/a"


def _pods(size: str) -> int:
    return int(size.partition("/")[0])


def size_table(runs: Runs) -> list[str]:
    """Per size: medians of each component and the ratios, koordqueue first."""
    out = [
        "| size | runs | p99 s (ours / peer) | CPU ms per pod (ours / peer) "
        "| throughput /s (ours / peer) | issue 28 targets |",
        "|---|---|---|---|---|---|",
    ]
    for size in sorted(runs, key=_pods):
        by = runs[size]
        if "koordqueue" not in by or PEER not in by:
            continue
        o, p = medians(by["koordqueue"]), medians(by[PEER])
        held = issue28_targets(o, p)
        out.append(
            f"| {size} | {len(by['koordqueue'])} / {len(by[PEER])} "
            f"| {o['p99']} / {p['p99']} ({_x(o['p99'], p['p99'])}) "
            f"| {o['cpu_ms']} / {p['cpu_ms']} ({_x(o['cpu_ms'], p['cpu_ms'])}) "
            f"| {o['throughput']} / {p['throughput']} ({_x(o['throughput'], p['throughput'])}) "
            f"| {', '.join(f'{k} {v}' for k, v in held.items())} |"
        )
    return out


def curve(runs: Runs) -> list[str]:
    """The scaling curve: each scheduler's CPU per pod and p99 by cluster size (medians), and
    both schedulers' p99 and API server CPU as multiples of the binder's (the floor)."""
    out = [
        "| size | CPU ms per pod: koordqueue / kube-scheduler | p99 s: koordqueue / "
        "kube-scheduler | API server CPU ms per pod: koordqueue / kube-scheduler / binder "
        "| p99 / binder's: koordqueue, kube-scheduler | API server CPU / binder's: koordqueue, "
        "kube-scheduler |",
        "|---|---|---|---|---|---|",
    ]
    for size in sorted(runs, key=_pods):
        by = runs[size]
        o = medians(by.get("koordqueue", []))
        p = medians(by.get(PEER, []))
        f = medians(by.get(FLOOR, []))
        out.append(
            f"| {size} | {o.get('cpu_ms')} / {p.get('cpu_ms')} "
            f"| {o.get('p99')} / {p.get('p99')} "
            f"| {o.get('apiserver_cpu_ms')} / {p.get('apiserver_cpu_ms')} / "
            f"{f.get('apiserver_cpu_ms')} "
            f"| {_x(o.get('p99'), f.get('p99'))}, {_x(p.get('p99'), f.get('p99'))} "
            f"| {_x(o.get('apiserver_cpu_ms'), f.get('apiserver_cpu_ms'))}, "
            f"{_x(p.get('apiserver_cpu_ms'), f.get('apiserver_cpu_ms'))} |"
        )
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    lines: list[str] = []
    for path in argv:
        lines += Path(path).read_text().splitlines()
    runs = read_runs(lines)
    print("\n".join(size_table(runs)))
    print()
    print("\n".join(curve(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
