"""Statement: a transaction of allocate / pipeline / evict operations (SPEC 3.6).

Operations change only session state until `commit`; `commit` turns allocations into binds
and evictions into eviction decisions (pipelined tasks stay session-only reservations);
`discard` undoes the operations in reverse order, firing the opposite events.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Final, NamedTuple

from koordqueue.scheduler.api import NodeInfo, TaskInfo, TaskStatus

if TYPE_CHECKING:
    from koordqueue.scheduler.framework.session import Session


class OpKind(Enum):
    """What a statement operation did."""

    ALLOCATE = "allocate"
    PIPELINE = "pipeline"
    EVICT = "evict"


# Members as module constants: read per placement, and on CPython 3.11 a member read off its
# enum class costs ~0.11 us against ~0.01 us for a module global.
_ALLOCATE: Final = OpKind.ALLOCATE
_PIPELINE: Final = OpKind.PIPELINE
_EVICT: Final = OpKind.EVICT
_PENDING: Final = TaskStatus.PENDING


class Operation(NamedTuple):
    """One recorded operation; `previous` is the status to restore on discard.

    A NamedTuple: one is made per placement, and it is several times cheaper to build than
    a frozen dataclass.
    """

    kind: OpKind
    task: TaskInfo
    node: str
    reason: str = ""
    previous: TaskStatus = TaskStatus.PENDING


class Statement:
    """Operations that become visible outside the session only when committed."""

    __slots__ = ("_done", "operations", "session")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.operations: list[Operation] = []
        self._done = False

    def allocate(self, task: TaskInfo, node: NodeInfo) -> None:
        """Take idle resources of `node` for `task` (status Allocated)."""
        self.session.allocate_task(task, node)
        # `Operation(_ALLOCATE, task, node.name)` without the generated `__new__`'s frame
        # (~0.2 vs ~0.37 us; once per placement): every field given, defaults spelled out.
        self.operations.append(tuple.__new__(Operation, (_ALLOCATE, task, node.name, "", _PENDING)))

    def pipeline(self, task: TaskInfo, node: NodeInfo) -> None:
        """Reserve future-idle resources of `node` for `task` (status Pipelined)."""
        self.session.pipeline_task(task, node)
        self.operations.append(Operation(_PIPELINE, task, node.name))

    def evict(self, task: TaskInfo, reason: str) -> None:
        """Mark a running task Releasing; its resources become future idle."""
        previous = task.status
        self.session.evict_task(task)
        self.operations.append(Operation(_EVICT, task, task.node_name or "", reason, previous))

    def merge(self, other: Statement) -> None:
        """Take over another open statement's operations (its changes stay applied).

        Why: reclaim tries one node at a time in its own statement and keeps only the node
        that worked, as part of the job's statement (Volcano's `Statement.Merge`).
        """
        other._finish()
        self.operations.extend(other.operations)

    def commit(self) -> None:
        """Bind allocations and send evictions; pipelined tasks remain reservations."""
        self._finish()
        jobs: dict[str, None] = {}
        for op in self.operations:
            if op.kind is _ALLOCATE:
                self.session.dispatch_bind(op.task)
                jobs[op.task.job] = None
            elif op.kind is _EVICT:
                self.session.record_eviction(op.task, op.node, op.reason)
        # Allocations of the same job kept by an earlier, only-pipelined statement (e.g.
        # allocate, then backfill completing the gang) are bound together with this one.
        for uid in jobs:
            self.session.dispatch_allocated(uid)

    def discard(self) -> None:
        """Undo everything in reverse order, firing deallocate (or allocate) events."""
        self._finish()
        for op in reversed(self.operations):
            if op.kind is _EVICT:
                self.session.unevict_task(op.task, op.previous)
            else:
                self.session.unallocate_task(op.task)

    def _finish(self) -> None:
        if self._done:
            raise RuntimeError("statement already committed or discarded")
        self._done = True
