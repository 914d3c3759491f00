"""The session's copy-on-write views over an indexed snapshot's jobs and nodes.

A session shares the snapshot's objects and copies one only when it writes it: these
mappings put the session's own copies over the shared ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from koordqueue.scheduler.api.job_info import JobInfo
from koordqueue.scheduler.api.node_info import NodeInfo
from koordqueue.scheduler.api.queue_info import QueueInfo


class JobView(MutableMapping[str, JobInfo]):
    """The session's jobs over an indexed snapshot: its own copies over the snapshot's
    shared jobs, without the jobs of queues the session does not know.

    Why a view: copying a mapping of every job in the cluster at open is what made a
    session grow with the cluster; lookups by uid stay O(1), full iteration (for plugins
    that want every job) sorts once.
    """

    __slots__ = ("_base", "_order", "_own", "_queues")

    def __init__(
        self, base: Mapping[str, JobInfo], queues: Mapping[str, QueueInfo], own: dict[str, JobInfo]
    ) -> None:
        self._base = base
        self._queues = queues
        self._own = own
        self._order: list[str] | None = None

    def __getitem__(self, uid: str) -> JobInfo:
        job = self._own.get(uid)
        if job is not None:
            return job
        job = self._base[uid]
        if job.queue not in self._queues:
            raise KeyError(uid)
        return job

    def get(self, uid: str, default: Any = None) -> Any:
        job = self._own.get(uid)
        if job is not None:
            return job
        job = self._base.get(uid)
        return job if job is not None and job.queue in self._queues else default

    def __contains__(self, uid: object) -> bool:
        return self.get(uid) is not None  # type: ignore[arg-type]

    def __setitem__(self, uid: str, job: JobInfo) -> None:
        self._own[uid] = job

    def __delitem__(self, uid: str) -> None:
        raise TypeError("a session never drops a job")

    def _uids(self) -> list[str]:
        if self._order is None:
            queues = self._queues
            self._order = sorted(u for u, j in self._base.items() if j.queue in queues)
        return self._order

    def __iter__(self) -> Iterator[str]:
        return iter(self._uids())

    def __len__(self) -> int:
        return len(self._uids())


class NodeView(MutableMapping[str, NodeInfo]):
    """The session's nodes by name over an indexed snapshot: its own copies over the
    index's shared nodes. Why: copying a 5,000-entry mapping at every open (and having the
    collector walk the young copy) cost as much as the lookups it served."""

    __slots__ = ("_base", "_own")

    def __init__(self, base: Mapping[str, NodeInfo]) -> None:
        self._base = base
        self._own: dict[str, NodeInfo] = {}

    def __getitem__(self, name: str) -> NodeInfo:
        node = self._own.get(name)
        return node if node is not None else self._base[name]

    def get(self, name: str, default: Any = None) -> Any:
        node = self._own.get(name)
        return node if node is not None else self._base.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._base or name in self._own

    def __setitem__(self, name: str, node: NodeInfo) -> None:
        if name not in self._base:
            raise KeyError(name)  # a session never adds a node
        self._own[name] = node

    def __delitem__(self, name: str) -> None:
        raise TypeError("a session never drops a node")

    def __iter__(self) -> Iterator[str]:
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)

