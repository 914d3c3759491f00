"""Scheduler: snapshot the cache, run a session, apply its decisions.

Applying: binds through the pods/binding subresource, off the session's path: each placement
is assumed in the cache when the session commits (the next session sees it as allocated), the
binds go out in batches from a worker pool, each batch's requests in flight together, and are
never waited for; a failed bind forgets the assumption, records `FailedScheduling` and wakes
the loop, so the pod is placed again (kube-scheduler's assume / bind cycle). A successful bind
records `Scheduled`, batched after its batch's binds (batch_writes.py), or after a burst of
binds (event_lane.py); other events go through an asynchronous, aggregating, rate-limited
recorder. Evictions by delete (uid-guarded), `PodScheduled=False, reason=Unschedulable` with
the aggregated fit errors on pods left unplaced (only when the condition changes), PodGroup
phase and gang condition (podgroup_status.py), and, with the SchedulingGatesQueueAdmission
feature gate, gate removals for pods that passed the queue capacity check; these are awaited
before the next session.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import structlog

from koordqueue.kube.api import (
    HYPER_NODE,
    NAMESPACE,
    NODE,
    NUMATOPOLOGY,
    POD,
    POD_DISRUPTION_BUDGET,
    POD_GROUP,
    PRIORITY_CLASS,
    RESOURCE_QUOTA,
    VOLCANO_QUEUE,
    ApiError,
    Kind,
    KubeApi,
    Listing,
)
from koordqueue.kube.causes import PostedCauses
from koordqueue.kube.events import AsyncEventRecorder, EventRecorder
from koordqueue.kube.gates.manager import GateManager, GateOp, report_expired
from koordqueue.kube.gcfreeze import GcFreezer
from koordqueue.kube.scheduler import convert, metrics, names
from koordqueue.kube.scheduler.batch_writes import BatchWriter
from koordqueue.kube.scheduler.cache import SchedulerCache
from koordqueue.kube.scheduler.devices import stamped
from koordqueue.kube.scheduler.event_lane import EventLane
from koordqueue.kube.scheduler.features import parse_feature_gates
from koordqueue.kube.scheduler.node_metrics import NodeMetricsPoller, make_source, node_allocatable
from koordqueue.kube.scheduler.podgroup_status import PodGroupStatusWriter, StatusWrite
from koordqueue.kube.scheduler.snapshot import Built
from koordqueue.kube.scheduler.store import CachedKind
from koordqueue.kube.settings import SchedulerSettings
from koordqueue.scheduler import Bind, SchedulerConfig, SessionResult
from koordqueue.scheduler.api import JobInfo
from koordqueue.scheduler.api.numa import by_node
from koordqueue.scheduler.framework import (
    Arguments,
    ConfigWatcher,
    PluginOption,
    Tier,
    default_config,
    open_session,
    run_actions,
)
from koordqueue.scheduler.gates import FEATURE_GATE, Expiry, GateView, ReservationClock
from koordqueue.scheduler.gates import names as gate_names
from koordqueue.scheduler.gates.plugin import QueueAllocationGatePlugin

log = structlog.get_logger(__name__)
BIND_BATCH = 4
"""Binds per pool work item: a session's binds go out as at most `binders` items of at least
this many, one after another on one thread's connection. A work item per bind cost ~7 % of
the scheduler's GIL time in a 5,000-pod burst (a Future, a lock handoff, a GIL switch each)."""
MULTI_BATCH = 32
"""Binds per pool work item when they go out together (batch_writes.py), from one thread."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class Round:
    """What one scheduling round decided and did (tests and the benchmark read it)."""

    result: SessionResult
    released: list[str] = field(default_factory=list)
    expired: list[Expiry] = field(default_factory=list)
    """Gate reservations released by --gate-reservation-timeout this round."""
    binds: list[Future[list[bool]]] = field(default_factory=list)
    """The bind batches this round sent (one result per bind, in the session's order); they
    complete after the round (`wait_for_binds`)."""
    conditions_written: int = 0
    seconds: float = 0.0

    def wait_for_binds(self, timeout: float | None = None) -> tuple[int, int]:
        """(bound, failed): waits for this round's binds (tests and benchmarks only)."""
        results = [ok for f in self.binds for ok in f.result(timeout)]
        return sum(results), len(results) - sum(results)


def with_gate_plugin(
    config: SchedulerConfig, view: GateView, clock: ReservationClock | None = None,
    now: float = 0.0,
) -> SchedulerConfig:
    """The configuration plus a last tier holding the gate plugin with this session's view
    (and, with a reservation timeout, the clock remembering reservations' ages)."""
    arguments: dict[str, object] = {"view": view}
    if clock is not None and clock.timeout > 0:
        arguments.update(clock=clock, now=now)
    option = PluginOption(gate_names.PLUGIN_NAME, Arguments(arguments))
    return dataclasses.replace(config, tiers=(*config.tiers, Tier((option,))))


def unschedulable_message(pod: dict[str, Any]) -> tuple[str, str, str] | None:
    """(status, reason, message) of the pod's PodScheduled condition, if any."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == names.POD_SCHEDULED:
            return (
                str(cond.get("status", "")), str(cond.get("reason", "")),
                str(cond.get("message", "")),
            )
    return None


class Scheduler:
    """The session loop's body; thread-safe to call `run_once` from one thread at a time."""

    def __init__(
        self,
        api: KubeApi,
        settings: SchedulerSettings | None = None,
        *,
        cache: SchedulerCache | None = None,
        recorder: EventRecorder | None = None,
        gates: GateManager | None = None,
        binders: int = 16,
        gc_freeze: bool = False,
    ) -> None:
        self.api = api
        self.settings = settings or SchedulerSettings()
        self.cache = cache or SchedulerCache(self.settings.scheduler_name)
        self.recorder = recorder or EventRecorder(api)
        self.events = AsyncEventRecorder(self.recorder)
        """Scheduled / FailedScheduling / Evict events: written off the session's path."""
        features = parse_feature_gates(self.settings.feature_gates)
        self.gates_enabled = features[FEATURE_GATE]
        if self.gates_enabled and gates is None:
            gates = GateManager(api, self.settings.gate_removal_worker_num)
        self.gates = gates
        self.reservations = ReservationClock(self.settings.gate_reservation_timeout)
        """--gate-reservation-timeout's memory across sessions; its `now` is injectable."""
        self._default_config: SchedulerConfig | None = None
        self._metrics: NodeMetricsPoller | None = None
        """Pulls node load when the conf has a `metrics` section (usage, rescheduling)."""
        self._watcher = (
            ConfigWatcher(self.settings.scheduler_conf) if self.settings.scheduler_conf else None
        )
        self._pool = ThreadPoolExecutor(max_workers=binders, thread_name_prefix="kq-bind")
        self.writer = BatchWriter(api)
        """Binds and their `Scheduled` events, a batch in flight together."""
        post_all, record_all = self.writer.post_all, self.events.record_all
        self.lane = EventLane(lambda ev, at: record_all(ev, post_all, at=at))
        """`Scheduled` events held while a burst of binds goes out (event_lane.py)."""
        self._binders = binders
        self._inflight: set[Future[list[bool]]] = set()
        self._inflight_lock = threading.Lock()
        self._written: dict[str, str] = {}  # pod uid -> Unschedulable message we last wrote
        self.causes = PostedCauses()
        """FailedScheduling (pods) and Unschedulable (PodGroups) events: once per cause."""
        self.podgroups = PodGroupStatusWriter(api)
        """PodGroup phase and conditions, on `/status` or on the object (Volcano's CRD)."""
        self._warned: set[str] = set()
        self._last_warnings: set[str] = set()
        self.ready = threading.Event()
        self.gc = GcFreezer(gc_freeze)
        """Freezes the cache's objects out of the collector's full passes (the CLI turns it
        on; off for embedding, where the process is not the scheduler's alone)."""

    # --- lifecycle ------------------------------------------------------------------------
    def start(self) -> dict[Kind, Listing]:
        """Ensure the default queue exists, fill the cache, start the gate workers; the
        listings the cache was filled from, for watches to continue from."""
        listings = self.relist()
        self.take_over()
        return listings

    def take_over(self) -> None:
        """Start deciding: the cache is filled (by `start`, or by a warm standby's watches)."""
        self.ensure_default_queue()
        if self.gates is not None:
            self.gates.start()
        self.ready.set()

    def close(self) -> None:
        if self._metrics is not None:
            self._metrics.stop()
        if self.gates is not None:
            self.gates.stop()
        self._pool.shutdown(wait=True)
        self.lane.close()
        self.events.close()

    def drain(self) -> None:
        """Wait until every bind and event sent so far is written (tests, shutdown)."""
        self._pool.submit(lambda: None).result()  # FIFO: earlier submissions have started
        with self._inflight_lock:
            pending = list(self._inflight)
        for future in pending:
            future.result()
        self.lane.flush()
        self.events.flush()

    def ensure_default_queue(self) -> None:
        """Jobs default to the queue "default"; create it (weight 1) when missing."""
        if self.api.get(VOLCANO_QUEUE, names.DEFAULT_QUEUE) is not None:
            return
        body = {
            "apiVersion": VOLCANO_QUEUE.api_version, "kind": VOLCANO_QUEUE.kind,
            "metadata": {"name": names.DEFAULT_QUEUE},
            "spec": {"weight": names.DEFAULT_QUEUE_WEIGHT, "reclaimable": True},
        }
        try:
            self.api.create(VOLCANO_QUEUE, body)
            log.info("created the default queue")
        except ApiError as exc:
            if exc.not_found:  # the Queue CRD is not installed: nothing can be scheduled
                log.warning("scheduling.volcano.sh Queues are not served; install crds/")
            elif exc.status != 409:
                raise

    def relist(self) -> dict[Kind, Listing]:
        """Replace the cache's contents with fresh listings (repairs missed events).

        A kind the server does not serve (Volcano CRDs not installed) lists as empty.
        """
        listings: dict[Kind, Listing] = {}
        for kind in (
            CachedKind.NAMESPACE, CachedKind.NODE, CachedKind.QUEUE, CachedKind.POD_GROUP,
            CachedKind.PDB, CachedKind.PRIORITY_CLASS, CachedKind.HYPER_NODE,
            CachedKind.RESOURCE_QUOTA, CachedKind.NUMATOPOLOGY, CachedKind.POD,
        ):
            rest = convert_kind(kind)
            try:
                listings[rest] = self.api.list_with_version(rest)
            except ApiError as exc:
                # PDBs feed only the opt-in pdb plugin, PriorityClasses only PodGroup jobs'
                # priorities: a ClusterRole from before they were read (403) must not stop
                # the scheduler
                if not exc.not_found and not (kind in OPTIONAL_KINDS and exc.status == 403):
                    raise
                log.warning("resource not served; treated as empty", kind=kind.value)
                listings[rest] = ([], "")
            self.cache.replace(kind, listings[rest][0])
        self.gc.after_relist()
        return listings

    def base_config(self) -> SchedulerConfig:
        """The conf file's configuration (re-read when it changed), else the default."""
        if self._watcher is not None:
            self._watcher.poll()
            return self._watcher.current
        # parsed once: the same object every session (a YAML parse per session was ~1 ms,
        # and the quiet-job memo compares configurations)
        if self._default_config is None:
            self._default_config = default_config()
        return self._default_config

    def sync_metrics(self, config: SchedulerConfig) -> None:
        """Run the node metrics poller the conf's `metrics` section asks for (restarted
        when the section changes, stopped when it goes)."""
        current = self._metrics.config if self._metrics is not None else None
        if config.metrics == current:
            return
        if self._metrics is not None:
            self._metrics.stop()
            self._metrics = None
            self.cache.set_node_usage({})
        if config.metrics is not None:
            cache = self.cache
            self._metrics = NodeMetricsPoller(
                config.metrics, make_source(config.metrics, self.api),
                lambda: node_allocatable(cache.nodes()), cache.set_node_usage)
            self._metrics.start()
            log.info("pulling node metrics", type=config.metrics.type,
                     address=config.metrics.address, interval_s=config.metrics.interval)

    def config(self, view: GateView, now: float = 0.0) -> SchedulerConfig:
        base = self.base_config()
        self.sync_metrics(base)
        if not self.gates_enabled:
            return base
        return with_gate_plugin(base, view, self.reservations, now)

    # --- one round --------------------------------------------------------------------------
    def run_once(self) -> Round:
        started = time.perf_counter()
        built = self.cache.build(gates_enabled=self.gates_enabled)
        for key in built.gate_without_opt_in:
            if key not in self._warned:
                self._warned.add(key)
                log.warning(gate_names.WARN_GATE_WITHOUT_OPT_IN.format(pod=key))
        view, now = built.view, 0.0
        if self.gates_enabled and self.reservations.timeout > 0:
            now = self.reservations.now()
            view = self.reservations.effective(view, now)
        session = open_session(built.snapshot, self.config(view, now))
        run_actions(session)
        result = session.close()
        plugin = session.plugins.get(gate_names.PLUGIN_NAME)
        gate_plugin = plugin if isinstance(plugin, QueueAllocationGatePlugin) else None
        released = list(gate_plugin.released) if gate_plugin is not None else []
        self._observe(result)
        outcome = Round(result, released)
        if gate_plugin is not None and gate_plugin.expired:
            outcome.expired = list(gate_plugin.expired)
            report_expired(self.events, built.pods, outcome.expired, self.reservations.timeout)
        apply_start = time.perf_counter()
        self.apply(built, result, released, outcome)
        metrics.APPLY_DURATION.observe(time.perf_counter() - apply_start)
        outcome.seconds = time.perf_counter() - started
        self.gc.after_pass()
        return outcome

    def _observe(self, result: SessionResult) -> None:
        metrics.SESSION_DURATION.observe(result.duration)
        for action, seconds in result.action_durations.items():
            metrics.ACTION_DURATION.labels(action).observe(seconds)
        for plugin, timing in result.plugin_durations.items():
            metrics.PLUGIN_DURATION.labels(plugin, "open").observe(timing.open)
            metrics.PLUGIN_DURATION.labels(plugin, "close").observe(timing.close)
            metrics.PLUGIN_DURATION.labels(plugin, "callbacks").observe(timing.callbacks)
        warnings = set(result.warnings)
        for warning in warnings - self._last_warnings:
            log.warning(warning)
        self._last_warnings = warnings

    # --- applying decisions ----------------------------------------------------------------
    def apply(self, built: Built, result: SessionResult, released: list[str], out: Round) -> None:
        futures: list[tuple[object, Future[bool]]] = []
        for bind in result.binds:
            self.cache.assume(bind.task, bind.node)
        if result.numa_assigned:
            self.cache.numa_allocated(by_node(result.numa_assigned))
        binds = self._annotate(built, result) if result.bind_annotations else result.binds
        size = MULTI_BATCH if self.writer.transport is not None else BIND_BATCH
        for batch in bind_batches(binds, self._binders, size):
            work = [(bind, built.pods.get(bind.task)) for bind in batch]
            sent = self._pool.submit(self._bind_batch, work)
            with self._inflight_lock:
                self._inflight.add(sent)
            sent.add_done_callback(self._bind_done)
            out.binds.append(sent)
        for ev in result.evictions:
            futures.append((ev, self._pool.submit(self._evict, ev.namespace, ev.name, ev.task,
                                                  ev.reason)))
        bound_now = {b.task for b in result.binds}
        job_of = built.pending  # a pod with a node is never unschedulable: only these
        unplaced = 0
        for uid in list(job_of):
            pod = built.pods[uid]
            message = self._unschedulable(result, uid, pod, bound_now, job_of)
            if message is None:
                continue
            unplaced += 1
            if self._written.get(uid) == message:
                continue
            current = unschedulable_message(pod)
            if current == ("False", names.REASON_UNSCHEDULABLE, message):
                self._written[uid] = message  # written before (a restart): said already
                self.causes.seen(uid, names.REASON_FAILED_SCHEDULING, message)
                continue
            futures.append((uid, self._pool.submit(self._set_unschedulable, pod, message)))
            out.conditions_written += 1
        metrics.UNSCHEDULABLE.set(unplaced)
        for write in self.podgroups.due(built.groups, snapshot_jobs(built), result):
            futures.append((write, self._pool.submit(self._write_group_status, write)))
        if self.gates is not None:
            refused = 0
            for uid in released:
                gated = built.pods.get(uid)
                if gated is not None:
                    m = convert.meta(gated)
                    op = GateOp(str(m.get("namespace")), str(m.get("name")), uid, gated)
                    refused += not self.gates.enqueue(op) and not self.gates.queued(uid)
            if refused:
                log.warning(gate_names.WARN_QUEUE_FULL.format(count=refused))
            out.released = released
        for _what, future in futures:  # evictions, conditions, phases (binds are not awaited)
            future.result()
        for uid in list(self._written):
            if uid not in built.pods:
                del self._written[uid]
        self.causes.keep(built.pods, built.groups)

    def _unschedulable(
        self, result: SessionResult, uid: str, pod: dict[str, Any],
        bound_now: set[str], job_of: dict[str, str],
    ) -> str | None:
        """The Unschedulable message for a pod left pending, or None."""
        if uid in bound_now or (pod.get("spec") or {}).get("nodeName"):
            return None
        if (pod.get("spec") or {}).get("schedulingGates"):
            return None  # gated pods wait for their gate, never "Unschedulable" (SPEC 3.5)
        if convert.pod_status(pod).value != "Pending":
            return None
        return result.pod_cause(uid, job_of.get(uid))

    def _annotate(self, built: Built, result: SessionResult) -> list[Bind]:
        """Write the annotations binds carry (deviceshare's GPU ids, stamped with Volcano's
        times) before the binds go out, as Volcano patches a pod before binding it. Awaited
        (in parallel): the next session must read them from the cache, or it would give the
        same GPU again. A pod whose patch fails is not bound; it is placed again."""
        sent = {
            bind.task: self._pool.submit(self._write_annotations, bind, annotations)
            for bind in result.binds
            if (annotations := result.bind_annotations.get(bind.task))
        }
        kept: list[Bind] = []
        for bind in result.binds:
            future = sent.get(bind.task)
            if future is None or future.result():
                kept.append(bind)
                continue
            pod = built.pods.get(bind.task)
            if pod is not None:
                self.events.record(pod, names.EVENT_WARNING, names.REASON_FAILED_SCHEDULING,
                                   names.ANNOTATE_FAILED_MESSAGE.format(node=bind.node))
        return kept

    def _write_annotations(self, bind: Bind, annotations: Mapping[str, str]) -> bool:
        patch = {"metadata": {"uid": bind.task, "annotations": stamped(annotations)}}
        try:
            pod = self.api.request(
                "PATCH", POD.path(bind.namespace, bind.name), body=patch,
                content_type="application/merge-patch+json",
            )
        except ApiError as exc:
            self.cache.forget(bind.task)
            log.warning("bind annotations not written", pod=f"{bind.namespace}/{bind.name}",
                        error=str(exc))
            return False
        self.cache.on_event(CachedKind.POD, "MODIFIED", pod)
        return True

    def _bind_done(self, future: Future[list[bool]]) -> None:
        with self._inflight_lock:
            self._inflight.discard(future)

    def _bind_batch(self, work: list[tuple[Bind, dict[str, Any] | None]]) -> list[bool]:
        """The batch's binds in flight together, then the `Scheduled` events of those that
        succeeded, together too (batch_writes.py), from this thread: the events keep pace
        with the binds (one writer thread behind 16 binders fell behind a burst and dropped
        events), and no bind waits behind an event. In a burst of binds the lane holds the
        events instead and writes them after it (event_lane.py)."""
        answers = self.writer.post_all([
            (POD.path(bind.namespace, bind.name, "binding"), binding(bind)) for bind, _ in work
        ])
        results = [self._bound(bind, pod, answer)
                   for (bind, pod), answer in zip(work, answers, strict=True)]  # fmt: skip
        scheduled = [
            (pod, names.EVENT_NORMAL, names.REASON_SCHEDULED, names.SCHEDULED_MESSAGE.format(
                namespace=bind.namespace, name=bind.name, node=bind.node))
            for (bind, pod), ok in zip(work, results, strict=True) if ok and pod is not None
        ]
        if self.lane.offer(scheduled, len(work)) and scheduled:
            self.events.record_all(scheduled, self.writer.post_all)
        return results

    def _bound(
        self, bind: Bind, pod: dict[str, Any] | None, answer: dict[str, Any] | ApiError
    ) -> bool:
        """A bind's bookkeeping once its answer is in."""
        namespace, name, uid, node = bind.namespace, bind.name, bind.task, bind.node
        if isinstance(answer, ApiError):
            self.cache.forget(uid)  # pending again: the woken loop places it anew
            metrics.BINDS.labels("error").inc()
            log.warning("bind failed", pod=f"{namespace}/{name}", node=node, error=str(answer))
            if pod is not None:
                self.events.record(pod, names.EVENT_WARNING, names.REASON_FAILED_SCHEDULING,
                                   names.BIND_FAILED_MESSAGE.format(node=node, error=answer))
            return False
        metrics.BINDS.labels("ok").inc()
        self._written.pop(uid, None)
        self.causes.forget(uid, names.REASON_FAILED_SCHEDULING)  # placed: the cause is over
        return True

    def _evict(self, namespace: str, name: str, uid: str, reason: str) -> bool:
        pod = self.cache.get(CachedKind.POD, uid)
        try:
            self.api.delete(POD, name, namespace, uid=uid)
        except ApiError as exc:
            log.warning("eviction failed", pod=f"{namespace}/{name}", error=str(exc))
            return False
        metrics.EVICTIONS.labels(reason).inc()
        if pod is not None:
            self.events.record(
                pod,
                names.EVENT_WARNING,
                names.REASON_EVICT,
                names.EVICT_MESSAGE.format(reason=reason),
            )
        return True

    def _set_unschedulable(self, pod: dict[str, Any], message: str) -> bool:
        m = convert.meta(pod)
        namespace, name, uid = str(m.get("namespace")), str(m.get("name")), str(m.get("uid"))
        patch = {"status": {"conditions": [{
            "type": names.POD_SCHEDULED, "status": "False",
            "reason": names.REASON_UNSCHEDULABLE, "message": message,
            "lastTransitionTime": _now(),
        }]}}
        try:
            # strategic merge: conditions merge by type, others' conditions are kept
            self.api.request(
                "PATCH", POD.path(namespace, name, "status"), body=patch,
                content_type="application/strategic-merge-patch+json",
            )
        except ApiError as exc:
            if not exc.not_found:
                log.warning("condition not written", pod=f"{namespace}/{name}", error=str(exc))
            elif self.cache.get(CachedKind.POD, uid) is not None:
                # pods always serve /status: the pod was deleted and its event is late, or
                # it was not; either way the next session writes it again (not memoised)
                log.warning("condition not written: 404 though the cache holds the pod",
                            pod=f"{namespace}/{name}", error=str(exc))
            return False
        self._written[uid] = message
        if self.causes.fresh(uid, names.REASON_FAILED_SCHEDULING, message):
            self.events.record(pod, names.EVENT_WARNING, names.REASON_FAILED_SCHEDULING, message)
        return True

    def _write_group_status(self, write: StatusWrite) -> bool:
        held = self.cache.get(CachedKind.POD_GROUP, write.key) is not None
        written = self.podgroups.write(write, still_cached=held)
        condition = write.status.condition
        if written and condition is not None:
            reason = names.REASON_UNSCHEDULABLE
            if condition.type != names.CONDITION_UNSCHEDULABLE:
                self.causes.forget(write.key, reason)
            elif self.causes.fresh(write.key, reason, condition.message):
                self.events.record(write.group, names.EVENT_WARNING, reason, condition.message)
        return written


def binding(bind: Bind) -> dict[str, Any]:
    """The pods/binding body of a bind."""
    return {
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": bind.name, "namespace": bind.namespace, "uid": bind.task},
        "target": {"apiVersion": "v1", "kind": "Node", "name": bind.node},
    }


def bind_batches(
    binds: tuple[Bind, ...] | list[Bind], workers: int, size: int = BIND_BATCH
) -> list[list[Bind]]:
    """The binds in order, split into ceil(n / `size`) batches of near-equal size (at most
    `size` each), or into `workers` batches when that is fewer; consecutive binds share a
    batch, so the first placed is the first sent."""
    if not binds:
        return []
    count = max(1, min(workers, -(-len(binds) // size)))
    size = -(-len(binds) // count)
    return [list(binds[i:i + size]) for i in range(0, len(binds), size)]


def snapshot_jobs(built: Built) -> Mapping[str, JobInfo]:
    """Job uid -> the session's input job: the index's own mapping when the snapshot has one
    (no copy per session), else one made from the job list."""
    index = getattr(built.snapshot, "index", None)
    if index is not None:
        return cast("Mapping[str, JobInfo]", index.jobs)
    return {job.uid: job for job in built.snapshot.jobs}


OPTIONAL_KINDS = frozenset({
    CachedKind.PDB, CachedKind.PRIORITY_CLASS, CachedKind.HYPER_NODE, CachedKind.RESOURCE_QUOTA,
    CachedKind.NUMATOPOLOGY,
})
"""Kinds a forbidden listing (403: an older ClusterRole) leaves empty instead of failing
(HyperNodes feed only network-topology-aware; a cluster without Volcano's CRD serves none;
ResourceQuotas feed only resourcequota)."""


def convert_kind(kind: CachedKind) -> Kind:
    """The REST kind of a cache kind."""
    return {CachedKind.POD: POD, CachedKind.NODE: NODE, CachedKind.POD_GROUP: POD_GROUP,
            CachedKind.QUEUE: VOLCANO_QUEUE, CachedKind.NAMESPACE: NAMESPACE,
            CachedKind.PDB: POD_DISRUPTION_BUDGET,
            CachedKind.PRIORITY_CLASS: PRIORITY_CLASS, CachedKind.HYPER_NODE: HYPER_NODE,
            CachedKind.RESOURCE_QUOTA: RESOURCE_QUOTA, CachedKind.NUMATOPOLOGY: NUMATOPOLOGY}[kind]
