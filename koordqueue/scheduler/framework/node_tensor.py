"""The session's nodes mirrored into numpy arrays: per-node resource amounts as
(dimension, node) float arrays in milli-units, refreshed node by node as the session
places and evicts (`NodeTensor.refresh`). The placement engine (`placement.py`) filters and
scores over these arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol, cast

import numpy as np
import numpy.typing as npt

from koordqueue.domain.quantity import MILLI_NANO, NANO
from koordqueue.domain.resources import PODS, Resources
from koordqueue.scheduler.api.node_info import NodeInfo

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]

_TOUCHED_MAX: Final = 256
"""Request objects `NodeTensor.refresh` remembers by identity (pods converted from the API
carry their own equal ones: past this many the table starts over)."""


class Items(Protocol):
    """A writable flat float64 / bool buffer (an array's `.data` memoryview)."""

    def __setitem__(self, index: int, value: float, /) -> None: ...


def items_of(array: FloatArray | BoolArray) -> Items:
    """`array`'s buffer for item writes: a memoryview of a contiguous 1-d array writes one
    item in ~27 ns against ~47 ns for numpy's `array[i] = x` (the same stored value)."""
    return cast(Items, array.data)


_Row = tuple[
    str,
    Items,
    Items,
    Items,
    Items,
    Items,
    list[float],
    list[float],
    list[float],
    list[float],
]


class NodeTensor:
    """Per-node resource amounts as (dimension, node) float arrays in milli-units."""

    def __init__(self, nodes: Sequence[NodeInfo], dims: Sequence[str]) -> None:
        self.nodes = list(nodes)
        self.dims = list(dims)
        self.index = {d: i for i, d in enumerate(self.dims)}
        self.size = len(self.nodes)
        for i, node in enumerate(self.nodes):
            node.index = i

        def matrix(rows: list[dict[str, int]] | list[Resources]) -> FloatArray:
            out = np.zeros((len(self.dims), self.size), dtype=np.float64)
            for r, d in enumerate(self.dims):
                out[r, :] = [row.get(d, 0) for row in rows]
            return out / MILLI_NANO

        accounts = [n.accounting() for n in self.nodes]
        self.allocatable = matrix([n.allocatable for n in self.nodes])
        self.idle = matrix([a[0] for a in accounts])
        self.used = matrix([a[1] for a in accounts])
        self.releasing = matrix([a[2] for a in accounts])
        self.pipelined = matrix([a[3] for a in accounts])
        self.future = self.idle + self.releasing - self.pipelined
        self.pod_count = np.array([n.pod_count for n in self.nodes], dtype=np.float64)
        """Tasks holding or reserving a pod slot per node (against the `pods` allocatable)."""
        self.pod_limit = np.array(
            [
                n.allocatable.get_nanos(PODS) / NANO if PODS in n.allocatable else np.inf
                for n in self.nodes
            ],
            dtype=np.float64,
        )
        # Python mirrors for the scalar path (a handful of changed nodes per placement).
        self.py_pod_count: list[int] = [n.pod_count for n in self.nodes]
        self.py_pod_limit: list[float] = self.pod_limit.tolist()
        self.py_allocatable: list[list[float]] = self.allocatable.tolist()
        self.py_idle: list[list[float]] = self.idle.tolist()
        self.py_used: list[list[float]] = self.used.tolist()
        self.py_pipelined: list[list[float]] = self.pipelined.tolist()
        self.py_future: list[list[float]] = self.future.tolist()
        self.changes: list[int] = []
        """Indices of nodes changed so far in this session (a log, for cache refresh)."""
        self._touched: dict[tuple[str, ...], list[_Row]] = {}
        """Per request, the rows of its dimensions (`refresh`)."""
        self._touched_by_id: dict[int, tuple[Resources, list[_Row]]] = {}
        """Per request object (by id, the object kept), its `_touched` rows."""
        self._views: tuple[Items, list[_Row]] | None = None
        self.static: dict[object, Any] = {}
        """Per-node vectors that depend only on the nodes' names, labels, taints and cordon
        (plugins' static masks), shared with copies: a cache keeps one tensor per node
        layout and clears this when a replaced node's static fields differ."""

    def vector(self, res: Resources) -> FloatArray:
        """A resource list as a dimension vector (unknown dimensions are dropped)."""
        out = np.zeros(len(self.dims), dtype=np.float64)
        for name, amount in res.items():
            r = self.index.get(name)
            if r is not None:
                out[r] = amount / MILLI_NANO
        return out

    def refresh(self, node: NodeInfo, touched: Resources | None = None) -> None:
        """Copy one node's exact accounting into the arrays and log the change.

        `touched` marks an allocation (a task taking idle resources): only the idle, used
        and future-idle amounts of the resources it requests changed, so only those are
        copied (releasing and pipelined amounts are as the last refresh left them).
        """
        i = node.index
        views = self._views
        if views is None:
            views = self._row_views()
        count = node.pod_count
        self.py_pod_count[i] = count
        views[0][i] = count
        idle, used, releasing, pipelined = node.accounting()
        if touched is not None:
            # Pods of one shape share their request object: its rows are found by identity
            # (kept with it, so the id is not reused while cached), else by its names.
            hit = self._touched_by_id.get(id(touched))
            if hit is not None and hit[0] is touched:
                found = hit[1]
            else:
                names = tuple(touched)  # equal requests of other pods: one list per names
                known = self._touched.get(names)
                if known is None:
                    index, rows = self.index, views[1]
                    known = self._touched[names] = [rows[index[d]] for d in names if d in index]
                found = known
                if len(self._touched_by_id) >= _TOUCHED_MAX:
                    self._touched_by_id.clear()
                self._touched_by_id[id(touched)] = (touched, found)
            for d, a_row, u_row, _rel, _pip, fut_row, py_a, py_u, _py_pip, py_fut in found:
                a = idle.get(d, 0) / MILLI_NANO
                u = used.get(d, 0) / MILLI_NANO
                fut = a + releasing.get(d, 0) / MILLI_NANO - pipelined.get(d, 0) / MILLI_NANO
                a_row[i] = a
                u_row[i] = u
                fut_row[i] = fut
                py_a[i] = a
                py_u[i] = u
                py_fut[i] = fut
            self.changes.append(i)
            return
        for d, a_row, u_row, rel_row, pip_row, fut_row, py_a, py_u, py_pip, py_fut in views[1]:
            a = idle.get(d, 0) / MILLI_NANO
            u = used.get(d, 0) / MILLI_NANO
            rel = releasing.get(d, 0) / MILLI_NANO
            pip = pipelined.get(d, 0) / MILLI_NANO
            fut = a + rel - pip
            a_row[i] = a
            u_row[i] = u
            rel_row[i] = rel
            pip_row[i] = pip
            fut_row[i] = fut
            py_a[i] = a
            py_u[i] = u
            py_pip[i] = pip
            py_fut[i] = fut
        self.changes.append(i)

    def _row_views(self) -> tuple[Items, list[_Row]]:
        """The pod counts' buffer, and per dimension its name and the rows `refresh` writes
        (array buffers, see `items_of`, and mirrors), bound once per tensor."""
        views = self._views
        if views is None:
            views = self._views = (
                items_of(self.pod_count),
                [
                    (
                        d,
                        items_of(self.idle[r]),
                        items_of(self.used[r]),
                        items_of(self.releasing[r]),
                        items_of(self.pipelined[r]),
                        items_of(self.future[r]),
                        self.py_idle[r],
                        self.py_used[r],
                        self.py_pipelined[r],
                        self.py_future[r],
                    )
                    for r, d in enumerate(self.dims)
                ],
            )
        return views

    def copy(self) -> NodeTensor:
        """A copy a session may write (arrays and mirrors copied, nodes shared, no changes
        logged): a cache keeps one tensor per node layout and hands each session a copy
        instead of re-reading every node (issue 19)."""
        out = NodeTensor.__new__(NodeTensor)
        out.nodes = list(self.nodes)
        out.dims = self.dims
        out.index = self.index
        out.size = self.size
        out.allocatable = self.allocatable.copy()
        out.idle = self.idle.copy()
        out.used = self.used.copy()
        out.releasing = self.releasing.copy()
        out.pipelined = self.pipelined.copy()
        out.future = self.future.copy()
        out.pod_count = self.pod_count.copy()
        out.pod_limit = self.pod_limit.copy()
        out.py_pod_count = self.py_pod_count[:]
        out.py_pod_limit = self.py_pod_limit
        out.py_allocatable = [row[:] for row in self.py_allocatable]
        out.py_idle = [row[:] for row in self.py_idle]
        out.py_used = [row[:] for row in self.py_used]
        out.py_pipelined = [row[:] for row in self.py_pipelined]
        out.py_future = [row[:] for row in self.py_future]
        out.changes = []
        out._touched = {}
        out._touched_by_id = {}
        out._views = None
        out.static = self.static
        return out
