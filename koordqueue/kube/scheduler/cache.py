"""SchedulerCache: the last seen Pods, Nodes, PodGroups and Queues, and snapshots of them.

Level-triggered: watch events replace whole objects and a periodic relist replaces whole
kinds, so a missed event is repaired by the next relist. Binds the scheduler has sent but not
yet seen come back are "assumed" (Volcano's binding state) so the next session does not give
their room away.

`work` is set by every event that may let a session place something it could not place before
(a new pending pod, freed room, a node or queue change, a failed bind), so the loop runs a
session then instead of at the next period. Our own binds coming back do not set it.

The cache is the lock around two parts: the object store (`store.py`: raw objects, indexes,
change marks) and the snapshot builder (`snapshot.py`: conversions, updated key by key).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koordqueue.kube.scheduler import names
from koordqueue.kube.scheduler.full_build import full_build
from koordqueue.kube.scheduler.snapshot import Built, SnapshotBuilder, exchanged
from koordqueue.kube.scheduler.store import CachedKind, ObjectStore
from koordqueue.scheduler.api.node_usage import NodeUsage

__all__ = ["ASSUME_TTL", "Built", "CachedKind", "SchedulerCache", "exchanged"]
# (Built, CachedKind and exchanged are re-exported for tests and tools that read the cache)

ASSUME_TTL = 30.0
"""Seconds a sent bind is assumed before the cache gives up waiting for the pod update."""


class SchedulerCache:
    """Thread-safe object store fed by watch events and relists, and snapshots of it.

    Besides the raw objects it keeps their conversions (nodes with other schedulers' pods,
    jobs with their tasks, queues) and the keys that changed since the last `build`, with a
    generation number that every change moves; `build` redoes only those keys and hands out
    the same Built when nothing moved.
    """

    def __init__(
        self, scheduler_name: str = names.DEFAULT_SCHEDULER_NAME,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.scheduler_name = scheduler_name
        self._clock = clock
        self._lock = threading.Lock()
        self._store = ObjectStore(scheduler_name)
        self._builder = SnapshotBuilder(self._store)
        self._built_generation = -1
        self._built: Built | None = None
        self._built_gates = False
        self.work = threading.Event()
        """Set when something may be placeable that was not; the session loop clears it."""

    @property
    def generation(self) -> int:
        """Moves with every change a snapshot could see."""
        return self._store.generation

    # --- feeding -------------------------------------------------------------------------
    def on_event(self, kind: CachedKind, event_type: str | None, obj: Mapping[str, Any]) -> None:
        """Fold one watch event (ADDED/MODIFIED/DELETED, or None for a listing) in."""
        with self._lock:
            old, new = self._store.fold(kind, event_type, obj)
        if self._store.is_work(kind, old, new):
            self.work.set()

    def replace(self, kind: CachedKind, objs: Iterable[Mapping[str, Any]]) -> None:
        """A full listing of `kind` replaces what the cache had (only the differences are
        marked as changed)."""
        with self._lock:
            self._store.replace(kind, objs)

    def assume(self, uid: str, node: str) -> None:
        """A bind was sent: treat the pod as Binding on `node` until the update arrives."""
        with self._lock:
            self._store.assume(uid, node, self._clock() + ASSUME_TTL)

    def forget(self, uid: str) -> None:
        """A bind failed: the pod is pending again."""
        with self._lock:
            self._store.drop_assumed(uid)
        self.work.set()

    def numa_allocated(self, allocated: Mapping[str, Mapping[str, frozenset[int]]]) -> None:
        """numa-aware gave these cpus to pods bound: the next snapshots see them taken until
        the exporter's Numatopology reports them (kube/scheduler/numa.py NumaView)."""
        with self._lock:
            if self._builder.numa_allocated(allocated):
                self._built = None

    def set_node_usage(self, readings: Mapping[str, NodeUsage]) -> None:
        """The metrics source's latest readings: the next snapshot carries them."""
        with self._lock:
            if self._builder.set_node_usage(readings):
                self._built = None

    def nodes(self) -> list[dict[str, Any]]:
        """The raw Node objects (the metrics poller reads their allocatable)."""
        with self._lock:
            return list(self._store.objs[CachedKind.NODE].values())

    def pods(self) -> list[dict[str, Any]]:
        """The raw Pod objects kept: ours, and others' while they hold a node (a snapshot
        reads where they run and who owns them)."""
        with self._lock:
            return list(self._store.objs[CachedKind.POD].values())

    def get(self, kind: CachedKind, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._store.objs[kind].get(key)

    def count(self, kind: CachedKind) -> int:
        with self._lock:
            return len(self._store.objs[kind])

    # --- snapshot --------------------------------------------------------------------------
    def build(self, *, gates_enabled: bool = False) -> Built:
        """A ClusterSnapshot of ready nodes, queues and our pods grouped into jobs, updated
        from the last one for the keys that changed since."""
        with self._lock:
            self._store.expire(self._clock())
            generation = self._store.generation
            if (
                self._built is not None and self._built_generation == generation
                and self._built_gates == gates_enabled
            ):
                return self._built
            built = self._builder.build(generation, gates_enabled=gates_enabled)
            self._built, self._built_generation = built, generation
            self._built_gates = gates_enabled
            return built

    def rebuild(self, *, gates_enabled: bool = False) -> Built:
        """A snapshot converted from scratch from the stored objects (the reference the
        incremental `build` must equal; tests)."""
        with self._lock:
            objs = {k: list(v.values()) for k, v in self._store.objs.items()}
            assumed = {u: n for u, (n, _e) in self._store.assumed.items()}
            usage = self._builder.node_usage
        return full_build(objs, assumed, self.scheduler_name, gates_enabled=gates_enabled,
                          node_usage=usage)
