"""binpack: prefer nodes that end up fuller, with a weight per resource (Volcano's binpack).

Volcano's arithmetic, operation for operation, so that summed with nodeorder's integer
scores the same nodes win: per requested resource with a weight, (used + request) x weight /
allocatable; the sum divided by the summed weights, times 100 x `binpack.weight`. `used` is
what the node's running, bound, allocated and releasing tasks hold (Volcano's `node.Used`,
which leaves pipelined tasks out); a resource the node cannot hold makes the whole score 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Final

import numpy as np

from koordqueue.domain.resources import CPU, MEMORY, Resources
from koordqueue.scheduler.api import TaskInfo
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.placement import SMALL, FloatArray, IntArray, ScalarScore
from koordqueue.scheduler.framework.session import Session

MAX_NODE_SCORE: Final = 100
BINPACK_WEIGHT: Final = "binpack.weight"
BINPACK_CPU: Final = "binpack.cpu"
BINPACK_MEMORY: Final = "binpack.memory"
BINPACK_RESOURCES: Final = "binpack.resources"


def int_argument(arguments: Mapping[str, object], key: str, default: int) -> int:
    """An integer argument as Volcano's `Arguments.GetInt` reads it: only an integer value
    counts; anything else (a float, a string, a bool) leaves the default."""
    value = arguments.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def parse_weights(arguments: Mapping[str, object]) -> tuple[int, dict[str, int]]:
    """`binpack.weight` (1) and the per-resource weights: `binpack.cpu`, `binpack.memory`
    (1 each) and the resources listed in `binpack.resources: "a, b"` with their
    `binpack.resources.<name>` weights (1 each); a negative resource weight counts as 1."""
    weight = int_argument(arguments, BINPACK_WEIGHT, 1)
    listed = arguments.get(BINPACK_RESOURCES)
    weights: dict[str, int] = {}
    for name in (n.strip() for n in (listed if isinstance(listed, str) else "").split(",")):
        if name:
            weights[name] = int_argument(arguments, f"{BINPACK_RESOURCES}.{name}", 1)
    weights[CPU] = int_argument(arguments, BINPACK_CPU, 1)
    weights[MEMORY] = int_argument(arguments, BINPACK_MEMORY, 1)
    return weight, {k: (1 if v < 0 else v) for k, v in weights.items()}


class BinpackPlugin(Plugin):
    """Registers Volcano's binpack score when `binpack.weight` is not 0."""

    name = "binpack"
    quiet = True

    def on_session_open(self, session: Session) -> None:
        weight, weights = parse_weights(self.arguments)
        if weight == 0:
            return
        tensor = session.tensor
        py_alloc, py_used = tensor.py_allocatable, tensor.py_used
        # per request: its (row, amount, weight) for the weighted resources it asks for, in
        # the request's order, and the weights of those the tensor has no row for (no node
        # has them: they add their weight and nothing else)
        shapes: dict[Resources, tuple[list[tuple[int, float, int]], int]] = {}

        def shape(request: Resources) -> tuple[list[tuple[int, float, int]], int]:
            found = shapes.get(request)
            if found is None:
                vector = tensor.vector(request).tolist()
                rows: list[tuple[int, float, int]] = []
                absent = 0
                for name, amount in request.items():
                    w = weights.get(name)
                    if amount == 0 or w is None:
                        continue
                    r = tensor.index.get(name)
                    if r is None:
                        absent += w
                    else:
                        rows.append((r, vector[r], w))
                found = shapes[request] = (rows, absent)
            return found

        def score_one(rows: list[tuple[int, float, int]], absent: int, i: int) -> float:
            score = 0.0
            weight_sum = absent
            for r, amount, w in rows:
                capacity = py_alloc[r][i]
                if capacity != 0 and w != 0:
                    final = amount + py_used[r][i]
                    if final > capacity:
                        return 0.0
                    score += final * w / capacity
                weight_sum += w
            if weight_sum > 0:
                score /= weight_sum
            return score * float(MAX_NODE_SCORE * weight)

        def score(task: TaskInfo, idx: IntArray) -> FloatArray:
            rows, absent = shape(task.request)
            if len(idx) <= SMALL:
                return np.array([score_one(rows, absent, i) for i in idx.tolist()])
            total = np.zeros(len(idx), dtype=np.float64)
            fits = np.ones(len(idx), dtype=np.bool_)
            weight_sum = absent
            for r, amount, w in rows:
                capacity = tensor.allocatable[r, idx]
                if w != 0:
                    final = amount + tensor.used[r, idx]
                    held = capacity != 0
                    fits &= ~held | (final <= capacity)
                    total += np.where(held, final * w / np.where(held, capacity, 1.0), 0.0)
                weight_sum += w
            if weight_sum > 0:
                total /= weight_sum
            out: FloatArray = np.where(fits, total * float(MAX_NODE_SCORE * weight), 0.0)
            return out

        def prepare(task: TaskInfo) -> Callable[[int], float]:
            rows, absent = shape(task.request)
            return partial(score_one, rows, absent)

        session.add_batch_node_order_fn(self.name, ScalarScore(score, prepare))
