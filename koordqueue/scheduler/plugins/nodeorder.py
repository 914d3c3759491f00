"""nodeorder: least-allocated, most-allocated and balanced-allocation scores, vectorised."""

from __future__ import annotations

import numpy as np

from koordqueue.domain.resources import CPU, MEMORY, Resources
from koordqueue.scheduler.api import TaskInfo
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.placement import SMALL, FloatArray, IntArray
from koordqueue.scheduler.framework.session import Session

MAX_NODE_SCORE = 100.0


class NodeOrderPlugin(Plugin):
    """Kubernetes-style resource scores over cpu and memory, each times its weight.

    Arguments: `leastrequested.weight` (1), `mostrequested.weight` (0),
    `balancedresource.weight` (1).
    """

    name = "nodeorder"

    def on_session_open(self, session: Session) -> None:
        least_w = self.arguments.get_float("leastrequested.weight", 1.0)
        most_w = self.arguments.get_float("mostrequested.weight", 0.0)
        balanced_w = self.arguments.get_float("balancedresource.weight", 1.0)
        if least_w == most_w == balanced_w == 0:
            return
        tensor = session.tensor
        rows = [tensor.index[d] for d in (CPU, MEMORY) if d in tensor.index]
        if not rows:
            return
        requests: dict[Resources, FloatArray] = {}

        py_alloc, py_used, py_pip = tensor.py_allocatable, tensor.py_used, tensor.py_pipelined
        n_rows = len(rows)

        def score_one(req: list[float], i: int) -> float:
            least = most = 0.0
            fractions = []
            for r in rows:
                alloc = py_alloc[r][i]
                requested = py_used[r][i] + py_pip[r][i] + req[r]
                frac = requested / alloc if alloc > 0 else 1.0
                if frac <= 1.0:
                    least += (1.0 - frac) * MAX_NODE_SCORE
                    most += frac * MAX_NODE_SCORE
                fractions.append(min(frac, 1.0))
            std = abs(fractions[0] - fractions[1]) / 2.0 if n_rows == 2 else 0.0
            return (
                least_w * least / n_rows
                + most_w * most / n_rows
                + balanced_w * (1.0 - std) * MAX_NODE_SCORE
            )

        scalar_requests: dict[Resources, list[float]] = {}

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
            fractions = []
            least = np.zeros(len(idx), dtype=np.float64)
            most = np.zeros(len(idx), dtype=np.float64)
            for r in rows:
                alloc = tensor.allocatable[r, idx]
                requested = tensor.used[r, idx] + tensor.pipelined[r, idx] + req[r]
                safe = np.where(alloc > 0, alloc, 1.0)
                frac = np.where(alloc > 0, requested / safe, 1.0)
                fits = frac <= 1.0
                least += np.where(fits, (1.0 - frac) * MAX_NODE_SCORE, 0.0)
                most += np.where(fits, frac * MAX_NODE_SCORE, 0.0)
                fractions.append(np.minimum(frac, 1.0))
            n = len(rows)
            if least_w:
                total += least_w * least / n
            if most_w:
                total += most_w * most / n
            if balanced_w:
                if n == 2:
                    std = np.abs(fractions[0] - fractions[1]) / 2.0
                else:
                    std = np.zeros(len(idx), dtype=np.float64)
                total += balanced_w * (1.0 - std) * MAX_NODE_SCORE
            return total

        session.add_batch_node_order_fn(self.name, score)
