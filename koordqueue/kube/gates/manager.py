"""GateManager: removes our scheduling gate from pods that passed the queue capacity check.

Why a worker pool with bounded queues: a session must never wait on API calls, and a burst of
thousands of passing pods must not grow memory without bound. Each pod always goes to the
same worker (hash of its uid), so operations on one pod are never concurrent. A full queue
drops the operation with a warning; the pod is still gated and passes again next session.

Removal is a JSON patch guarded by `test` ops on the resourceVersion and on the gate's
position, so a concurrent change (another gate added, the pod replaced) is never overwritten;
on conflict the pod is re-read and the rules checked again.

`report_expired` is the Kubernetes side of the reservation timeout: the pure ledger decides
which reservations expired; here each becomes a Warning event on its pod (the pod cannot be
gated again: Kubernetes only allows removing scheduling gates).
"""

from __future__ import annotations

import queue
import threading
import time
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from koordqueue.domain.names import EVENT_WARNING
from koordqueue.kube.api import POD, ApiError, KubeApi
from koordqueue.kube.scheduler import metrics
from koordqueue.kube.scheduler.convert import gate_names
from koordqueue.scheduler.gates import names
from koordqueue.scheduler.gates.reservation import Expiry, GateState, classify_gates, opted_in

log = structlog.get_logger(__name__)
MAX_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class GateOp:
    """Remove our gate from this pod (the uid guards against a re-created namesake)."""

    namespace: str
    name: str
    uid: str
    pod: dict[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)
    """The pod as the scheduler last saw it: the first attempt patches against it without a
    GET (a stale copy only costs one failed `test` and a re-read)."""


class Outcome:
    """Results of one removal (metric label values)."""

    REMOVED = "removed"
    GONE = "gone"
    NOT_GATED = "not-gated"
    OTHER_GATES = "other-gates"
    NOT_OPTED_IN = "not-opted-in"
    CONFLICT = "conflict-exhausted"
    ERROR = "error"


def removal_patch(pod: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The guarded JSON patch removing our gate, or None when rules say leave it."""
    gates = gate_names(pod)
    if classify_gates(gates) is not GateState.OURS_ONLY:
        return None
    if not opted_in((pod.get("metadata") or {}).get("annotations")):
        return None
    index = gates.index(names.GATE_NAME)
    return [
        {"op": "test", "path": "/metadata/resourceVersion",
         "value": pod["metadata"]["resourceVersion"]},
        {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": names.GATE_NAME},
        {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
    ]


class Recorder(Protocol):
    def record(self, obj: Mapping[str, Any], event_type: str, reason: str,
               message: str) -> bool: ...


def report_expired(
    recorder: Recorder, pods: Mapping[str, dict[str, Any]], expiries: Iterable[Expiry],
    timeout: float,
) -> int:
    """One `ReservationExpired` Warning event per expired reservation whose pod is known;
    returns how many were recorded (a pod gone meanwhile needs none)."""
    count = 0
    for e in expiries:
        pod = pods.get(e.uid)
        if pod is None:
            continue
        message = names.MSG_RESERVATION_EXPIRED.format(
            queue=e.queue, request=e.request, age=e.age, timeout=timeout)
        recorder.record(pod, EVENT_WARNING, names.REASON_RESERVATION_EXPIRED, message)
        log.info("gate reservation expired", pod=e.uid, queue=e.queue, age=round(e.age, 1))
        count += 1
    return count


class GateManager:
    """A pool of `workers` threads, each with a queue of `per_worker` pending operations."""

    def __init__(
        self, api: KubeApi, workers: int = names.DEFAULT_WORKERS,
        per_worker: int = names.QUEUE_PER_WORKER,
    ) -> None:
        self.api = api
        self.workers = max(1, workers)
        self._queues: list[queue.Queue[GateOp | None]] = [
            queue.Queue(maxsize=per_worker) for _ in range(self.workers)
        ]
        self._inflight: set[str] = set()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.idle = threading.Condition(self._lock)

    def start(self) -> None:
        for i, q in enumerate(self._queues):
            t = threading.Thread(target=self._run, args=(q,), name=f"kq-gate-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout: float = 10.0) -> None:
        for q in self._queues:
            try:
                q.put(None, timeout=timeout)
            except queue.Full:
                log.warning("gate worker queue still full at shutdown")
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()

    def enqueue(self, op: GateOp) -> bool:
        """Queue a removal without blocking; False when already queued or the queue is full."""
        with self._lock:
            if op.uid in self._inflight:
                return False
            self._inflight.add(op.uid)
        worker = self._queues[zlib.crc32(op.uid.encode()) % self.workers]
        try:
            worker.put_nowait(op)
        except queue.Full:
            # the caller logs once per session (names.WARN_QUEUE_FULL); the pod is still
            # gated and passes the check again next session
            self._done(op.uid)
            metrics.GATE_QUEUE_FULL.inc()
            return False
        return True

    def queued(self, uid: str) -> bool:
        """An operation for this pod is queued or running."""
        with self._lock:
            return uid in self._inflight

    def pending(self) -> int:
        with self._lock:
            return len(self._inflight)

    def wait_idle(self, timeout: float) -> bool:
        """Block until no operation is queued or running (tests, benchmarks)."""
        with self.idle:
            return self.idle.wait_for(lambda: not self._inflight, timeout)

    def _done(self, uid: str) -> None:
        with self._lock:
            self._inflight.discard(uid)
            if not self._inflight:
                self.idle.notify_all()

    def _run(self, q: queue.Queue[GateOp | None]) -> None:
        while True:
            op = q.get()
            if op is None:
                return
            try:
                outcome = self.remove(op)
            except Exception:
                log.exception("gate removal failed", pod=f"{op.namespace}/{op.name}")
                outcome = Outcome.ERROR
            finally:
                self._done(op.uid)
            metrics.GATE_REMOVALS.labels(outcome).inc()

    def remove(self, op: GateOp) -> str:
        """Remove our gate from one pod, re-reading on conflict; returns the outcome."""
        key = f"{op.namespace}/{op.name}"
        known = op.pod
        for attempt in range(MAX_ATTEMPTS):
            pod = known if known is not None else self.api.get(POD, op.name, op.namespace)
            known = None
            if pod is None or (pod.get("metadata") or {}).get("uid") != op.uid:
                return Outcome.GONE
            patch = removal_patch(pod)
            if patch is None:
                state = classify_gates(gate_names(pod))
                if state is GateState.OURS_AND_OTHERS:
                    return Outcome.OTHER_GATES
                if state is GateState.OURS_ONLY:
                    log.warning(names.WARN_GATE_WITHOUT_OPT_IN.format(pod=key))
                    return Outcome.NOT_OPTED_IN
                return Outcome.NOT_GATED
            try:
                self.api.json_patch(POD, op.name, patch, op.namespace)
            except ApiError as exc:
                # 409 Conflict, or 422 when a `test` op failed: the pod changed; re-read
                if exc.status in (409, 422):
                    continue
                if exc.retryable:
                    time.sleep(0.05 * 2**attempt)
                    continue
                if exc.not_found:
                    return Outcome.GONE
                raise
            log.debug("gate removed", pod=key)
            return Outcome.REMOVED
        log.warning("gate not removed: pod kept changing", pod=key)
        return Outcome.CONFLICT
