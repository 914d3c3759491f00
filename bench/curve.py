"""The cost curve's pure pieces (issue 36 point 3; bench/bench_curve.py runs them live).

Two curves, both systems: CPU per admitted Job and p99 against (a) the number of quotas, as a
three-level hierarchy (ours: ElasticQuotas `top` -> `mid<m>` -> leaves `bq<q>` through the
label quota.scheduling.koordinator.sh/parent; Kueue: Cohorts `top` -> `mid<m>` through
`spec.parentName`, leaf ClusterQueues `cq<q>` in `mid<m>` through `spec.cohortName`), and (b)
the pending depth (Jobs held under leaves of 0, then quota freed step by step at a fixed rate).

Here: the hierarchy and its objects, the release plans (timed edits), the attribution of
un-suspends to the edits that made room, the figures, and the table and plot.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.bench_peers import CLUSTER_QUEUE, KUEUE_GROUP, KUEUE_VERSION, cluster_queue
from bench.burst import latency_figures
from bench.release import ZERO_QUOTA, Edit, jobs_by_quota
from koordqueue.domain.names import QUOTA_IS_PARENT_LABEL
from koordqueue.kube.api import ELASTIC_QUOTA, Kind
from tests.e2e import kq

COHORT = Kind(KUEUE_GROUP, KUEUE_VERSION, "cohorts", "Cohort", False)
QUOTA_NAMESPACE = "default"
KOORDQUEUE = "koordqueue"


# --------------------------------------------------------------------------- the hierarchy


@dataclass(frozen=True)
class Hierarchy:
    """Three levels: one `top`, `mids` in the middle, `leaves` under them (they hold Jobs)."""

    top: str
    mids: tuple[str, ...]
    leaves: tuple[str, ...]
    parent: Mapping[str, str]
    """Each mid's and leaf's parent name (the top's is the implicit root)."""

    def children(self, name: str) -> list[str]:
        return [child for child, parent in self.parent.items() if parent == name]


def hierarchy(leaves: int, leaf_prefix: str = "bq") -> Hierarchy:
    """`leaves` leaves under round(sqrt(leaves)) mids under one top: leaf q goes to mid
    q * mids // leaves (contiguous, sizes differing by at most one)."""
    if leaves < 1:
        raise ValueError("a hierarchy needs at least one leaf")
    mids = max(1, round(math.sqrt(leaves)))
    mid_names = tuple(f"mid{m}" for m in range(mids))
    leaf_names = tuple(f"{leaf_prefix}{q}" for q in range(leaves))
    parent = {m: "top" for m in mid_names}
    parent.update({leaf: mid_names[q * mids // leaves] for q, leaf in enumerate(leaf_names)})
    return Hierarchy("top", mid_names, leaf_names, parent)


def amount(jobs: int) -> dict[str, str]:
    """Room for `jobs` Jobs of 1 cpu / 1Gi (the benchmarks' Job)."""
    return {"cpu": str(jobs), "memory": f"{jobs}Gi" if jobs else "0"}


def elastic_quotas(tree: Hierarchy, parents_max: int) -> list[list[dict[str, Any]]]:
    """koordqueue's ElasticQuotas, level by level (create in this order): the top and mids
    marked is-parent with max room for `parents_max` Jobs (never the binding limit), the
    leaves at max 0 (they hold everything until the release). No min anywhere."""
    room = amount(parents_max)
    is_parent = {QUOTA_IS_PARENT_LABEL: "true"}
    top = kq.quota(tree.top, QUOTA_NAMESPACE, max_=room, labels=is_parent)
    mids = [
        kq.quota(m, QUOTA_NAMESPACE, max_=room, parent=tree.top, labels=is_parent)
        for m in tree.mids
    ]
    leaves = [
        kq.quota(leaf, QUOTA_NAMESPACE, max_=dict(ZERO_QUOTA), parent=tree.parent[leaf])
        for leaf in tree.leaves
    ]
    return [[top], mids, leaves]


def cohort(name: str, parent: str | None) -> dict[str, Any]:
    """A Kueue v1beta2 Cohort (no quota of its own: it pools its members')."""
    spec = {"parentName": parent} if parent else {}
    return {
        "apiVersion": COHORT.api_version,
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


def kueue_objects(tree: Hierarchy) -> list[list[tuple[Kind, dict[str, Any]]]]:
    """Kueue's side, level by level: Cohort `top`, Cohorts `mid<m>` under it, and one
    ClusterQueue per leaf at nominalQuota 0 in its mid's cohort (v1beta2 `spec.cohortName`)."""
    cohorts = [(COHORT, cohort(tree.top, None))] + [
        (COHORT, cohort(m, tree.top)) for m in tree.mids
    ]
    queues = []
    for leaf in tree.leaves:
        body = cluster_queue(leaf, "0", "0")
        body["spec"]["cohortName"] = tree.parent[leaf]
        queues.append((CLUSTER_QUEUE, body))
    return [cohorts, queues]


# --------------------------------------------------------------------------- release plans


@dataclass(frozen=True)
class TimedEdit:
    """One quota edit `at_s` after the release starts, making room for `freed` more Jobs."""

    at_s: float
    edit: Edit
    freed: int


def leaf_patch(system: str, jobs: int) -> dict[str, Any]:
    """The merge patch that gives one leaf room for `jobs` Jobs (Kueue: the whole
    resourceGroups list, as a merge patch replaces lists)."""
    if system == KOORDQUEUE:
        return {"spec": {"max": amount(jobs)}}
    room = amount(jobs)
    groups = cluster_queue("", room["cpu"], room["memory"])["spec"]["resourceGroups"]
    return {"spec": {"resourceGroups": groups}}


def leaf_edit(system: str, leaf: str, jobs: int) -> Edit:
    if system == KOORDQUEUE:
        return Edit(ELASTIC_QUOTA, leaf, QUOTA_NAMESPACE, leaf_patch(system, jobs), ())
    return Edit(CLUSTER_QUEUE, leaf, None, leaf_patch(system, jobs), ())


def quotas_plan(system: str, tree: Hierarchy, jobs: int) -> list[TimedEdit]:
    """Curve (a): every leaf raised at once to fit all its Jobs (job i in leaf i % leaves)."""
    groups = jobs_by_quota(jobs, len(tree.leaves))
    return [
        TimedEdit(0.0, leaf_edit(system, leaf, len(groups[q])), len(groups[q]))
        for q, leaf in enumerate(tree.leaves)
    ]


@dataclass(frozen=True)
class Step:
    """One step of the slow release: at `at_s`, leaf `leaf` gets room for `capacity` Jobs in
    all (`freed` more than before)."""

    at_s: float
    leaf: int
    capacity: int
    freed: int


def step_schedule(
    leaves: int, per_leaf: int, rate: float, interval_s: float, window_s: float
) -> list[Step]:
    """Curve (b): every `interval_s` for `window_s`, one leaf (round robin) gets room for
    rate * interval_s more Jobs; refuses a plan that would free more than a leaf holds."""
    per_step = round(rate * interval_s)
    count = round(window_s / interval_s)
    if per_step < 1 or count < 1:
        raise ValueError("the schedule frees nothing: raise the rate, interval or window")
    capacity = [0] * leaves
    steps = []
    for s in range(count):
        leaf = s % leaves
        capacity[leaf] += per_step
        if capacity[leaf] > per_leaf:
            raise ValueError(
                f"leaf {leaf} would get room for {capacity[leaf]} Jobs; it holds "
                f"{per_leaf}: lower the rate or the window, or deepen"
            )
        steps.append(Step(round(s * interval_s, 6), leaf, capacity[leaf], per_step))
    return steps


def depth_plan(system: str, tree: Hierarchy, steps: list[Step]) -> list[TimedEdit]:
    return [
        TimedEdit(s.at_s, leaf_edit(system, tree.leaves[s.leaf], s.capacity), s.freed)
        for s in steps
    ]


# --------------------------------------------------------------------------- figures


def attribute(
    sent: Sequence[tuple[float, int]], resumed: Iterable[float]
) -> tuple[list[float], int]:
    """Latencies of the un-suspends from the edits that made room for them.

    `sent`: (when an edit was sent, how many Jobs it made room for). Jobs are alike (1 cpu /
    1Gi), and either system may pick any waiting Job (Kueue may even borrow a sibling's room in
    the cohort), so the k-th un-suspend overall is charged to the edit that brought the room
    sent so far to k: the earliest room goes to the earliest un-suspend, for both systems
    alike. Returns the latencies and how many un-suspends found no room (should be 0).
    """
    edits = sorted(sent)
    out: list[float] = []
    over = 0
    index, room = 0, 0
    for at in sorted(resumed):
        while room <= len(out) and index < len(edits):
            room += edits[index][1]
            index += 1
        if room <= len(out):
            over += 1
            continue
        out.append(at - edits[index - 1][0])
    return out, over


def figures(
    latencies: list[float],
    *,
    cpu_s: float,
    apiserver_cpu_s: float,
    wall_s: float,
    admitted: int,
) -> dict[str, Any]:
    """The headline of one run: latency percentiles, CPU per admitted Job (controller and API
    server, ms), the wall from the first edit to the last un-suspend."""
    lat = (
        latency_figures(latencies)
        if latencies
        else {"p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    )
    per = max(admitted, 1)
    return {
        **lat,
        "admitted": admitted,
        "wall_s": round(wall_s, 2),
        "cpu_ms": round(1000 * cpu_s / per, 3),
        "cpu_s": round(cpu_s, 2),
        "apiserver_cpu_ms": round(1000 * apiserver_cpu_s / per, 3),
    }


# --------------------------------------------------------------------------- table and plot

CURVE_NAMES = {"quotas": "quotas (3-level hierarchy / cohorts)", "depth": "pending depth"}
SHOWN = ("p50", "p99", "cpu_ms", "apiserver_cpu_ms", "wall_s", "rss_mb", "writes_total")


def system_label(system: str) -> str:
    if system == KOORDQUEUE:
        return "koordqueue"
    return f"Kueue v0.17.0 {system.removeprefix('kueue-')}"


def point_medians(
    results: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, int, str], dict[str, Any]]:
    """(curve, point, system) -> medians of each figure over its runs, with `runs`."""
    grouped: dict[tuple[str, int, str], list[Mapping[str, Any]]] = {}
    for r in results:
        grouped.setdefault((r["curve"], int(r["point"]), r["system"]), []).append(r)
    out: dict[tuple[str, int, str], dict[str, Any]] = {}
    for key, runs in sorted(grouped.items()):
        med: dict[str, Any] = {"runs": len(runs), "jobs": runs[0].get("jobs")}
        for k in SHOWN:
            values = [r[k] for r in runs if r.get(k) is not None]
            if values:
                med[k] = round(statistics.median(values), 3)
        out[key] = med
    return out


def _ratio(ours: Any, peer: Any) -> str:
    return f"{ours / peer:.2f}x" if isinstance(ours, (int, float)) and peer else "n/a"


def curve_table(results: Iterable[Mapping[str, Any]]) -> str:
    """Markdown: one row per (curve, point, system), medians, then koordqueue / Kueue ratios
    of p99 and CPU per Job at each point on the koordqueue row."""
    meds = point_medians(results)
    lines = [
        "| curve | point | Jobs | system | runs | p50 s | p99 s | CPU ms / admitted Job "
        "| API server CPU ms / Job | wall s | RSS MB | ratio p99 / CPU (ours / Kueue) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (curve, point, system), m in meds.items():
        ratio = ""
        if system == KOORDQUEUE:
            peers = [
                v for (c, p, s), v in meds.items() if c == curve and p == point and s != system
            ]
            if peers:
                ratio = (
                    f"{_ratio(m.get('p99'), peers[0].get('p99'))} / "
                    f"{_ratio(m.get('cpu_ms'), peers[0].get('cpu_ms'))}"
                )
        label = f"{point:,} quotas" if curve == "quotas" else f"{point:,} pending"
        lines.append(
            f"| {CURVE_NAMES.get(curve, curve)} | {label} | {m.get('jobs')} "
            f"| {system_label(system)} | {m['runs']} | {m.get('p50', '')} | {m.get('p99', '')} "
            f"| {m.get('cpu_ms', '')} | {m.get('apiserver_cpu_ms', '')} | {m.get('wall_s', '')} "
            f"| {m.get('rss_mb', '')} | {ratio} |"
        )
    return "\n".join(lines)


def series(
    results: Iterable[Mapping[str, Any]], curve: str, figure: str
) -> dict[str, list[tuple[int, float]]]:
    """system -> [(point, median figure)] sorted by point, for one curve."""
    out: dict[str, list[tuple[int, float]]] = {}
    for (c, point, system), m in point_medians(results).items():
        if c == curve and figure in m:
            out.setdefault(system, []).append((point, float(m[figure])))
    return {s: sorted(v) for s, v in out.items()}


def plot(results: list[Mapping[str, Any]], path: str, title: str = "") -> None:
    """A 2 x 2 PNG: CPU ms per admitted Job and p99 s (rows) against quotas and pending depth
    (columns), one line per system, log-scaled x."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for col, curve in enumerate(("quotas", "depth")):
        for row, (figure, ylabel) in enumerate(
            (("cpu_ms", "controller CPU ms / admitted Job"), ("p99", "p99 edit -> un-suspend, s"))
        ):
            ax = axes[row][col]
            drawn = series(results, curve, figure)
            if not drawn:
                ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes)
            for system, points in drawn.items():
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, marker="o", label=system_label(system))
            ax.set_xscale("log")
            ax.set_ylim(bottom=0)
            ax.set_xlabel("quotas (leaves)" if curve == "quotas" else "Jobs pending")
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            if drawn:
                ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
