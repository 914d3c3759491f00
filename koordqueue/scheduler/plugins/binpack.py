"""binpack: prefer nodes that end up fuller, with a weight per resource."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from koordqueue.domain.resources import CPU, MEMORY, Resources
from koordqueue.scheduler.api import TaskInfo
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.placement import SMALL, FloatArray, IntArray, ScalarScore
from koordqueue.scheduler.framework.session import Session

MAX_NODE_SCORE = 100.0


def parse_weights(plugin: Plugin) -> dict[str, float]:
    """`binpack.cpu`, `binpack.memory` (1 each) plus `binpack.resources: "a, b"` with
    `binpack.resources.<name>` weights (1 each); negative weights count as 1."""
    args = plugin.arguments
    weights = {
        CPU: args.get_float("binpack.cpu", 1.0),
        MEMORY: args.get_float("binpack.memory", 1.0),
    }
    for name in (n.strip() for n in args.get_str("binpack.resources", "").split(",")):
        if name:
            weights[name] = args.get_float(f"binpack.resources.{name}", 1.0)
    return {k: (1.0 if v < 0 else v) for k, v in weights.items()}


class BinpackPlugin(Plugin):
    """Score = weighted mean over requested resources of (used + request) / allocatable,
    times 100 and `binpack.weight`; a resource that would not fit contributes 0."""

    name = "binpack"
    quiet = True

    def on_session_open(self, session: Session) -> None:
        weight = self.arguments.get_float("binpack.weight", 1.0)
        weights = parse_weights(self)
        tensor = session.tensor
        rows = [(tensor.index[d], w) for d, w in weights.items() if d in tensor.index and w > 0]
        if weight <= 0 or not rows:
            return
        requests: dict[Resources, FloatArray] = {}

        py_alloc, py_used, py_pip = tensor.py_allocatable, tensor.py_used, tensor.py_pipelined
        scalar_requests: dict[Resources, list[float]] = {}

        def score_one(req: list[float], i: int) -> float:
            total = weight_sum = 0.0
            for r, w in rows:
                if req[r] <= 0:
                    continue
                alloc = py_alloc[r][i]
                final = py_used[r][i] + py_pip[r][i] + req[r]
                if alloc > 0 and final <= alloc:
                    total += final * w / alloc
                weight_sum += w
            return total * (MAX_NODE_SCORE * weight / weight_sum) if weight_sum > 0 else 0.0

        def score(task: TaskInfo, idx: IntArray) -> FloatArray:
            if len(idx) <= SMALL:
                sreq = scalar_requests.get(task.request)
                if sreq is None:
                    sreq = scalar_requests[task.request] = tensor.vector(task.request).tolist()
                return np.array([score_one(sreq, i) for i in idx.tolist()], dtype=np.float64)
            req = requests.get(task.request)
            if req is None:
                req = requests[task.request] = tensor.vector(task.request)
            total = np.zeros(len(idx), dtype=np.float64)
            weight_sum = 0.0
            for r, w in rows:
                if req[r] <= 0:
                    continue
                alloc = tensor.allocatable[r, idx]
                final = tensor.used[r, idx] + tensor.pipelined[r, idx] + req[r]
                ok = (alloc > 0) & (final <= alloc)
                total += np.where(ok, final * w / np.where(alloc > 0, alloc, 1.0), 0.0)
                weight_sum += w
            if weight_sum > 0:
                total *= MAX_NODE_SCORE * weight / weight_sum
            return total

        def prepare(task: TaskInfo) -> Callable[[int], float]:
            sreq = scalar_requests.get(task.request)
            if sreq is None:
                sreq = scalar_requests[task.request] = tensor.vector(task.request).tolist()
            return partial(score_one, sreq)

        session.add_batch_node_order_fn(self.name, ScalarScore(score, prepare))
