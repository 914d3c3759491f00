"""kopf wiring of the scheduler: raw watch events into the cache, the session loop, probes.

Only `@kopf.on.event` (level-triggered, no progress annotations or finalizers on pods), for
PodGroups and Queues; pods and nodes, which change by the thousand, come through informers
(koordqueue/kube/informer.py). The cache is also relisted every `resync_period`, so a missed
event is repaired.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Final, TypeVar

import kopf
import structlog

from koordqueue.domain import backoff
from koordqueue.domain import names as domain_names
from koordqueue.domain.backoff import Backoff
from koordqueue.kube import kopf_support
from koordqueue.kube.api import (
    HYPER_NODE,
    NAMESPACE,
    NODE,
    NUMATOPOLOGY,
    POD,
    POD_DISRUPTION_BUDGET,
    PRIORITY_CLASS,
    RESOURCE_QUOTA,
    retry_transient,
)
from koordqueue.kube.informer import Informer
from koordqueue.kube.leader import Leadership, start_when_leading
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.scheduler.store import CachedKind

log = structlog.get_logger(__name__)

T = TypeVar("T")

STARTUP_RETRY: Final[Backoff] = backoff.STARTUP
"""After a transient failure of a start-up call (the standby's or the leader's first listings,
the default queue's get/create) — 429, 5xx, a lost connection — when to try again: 0.5 s
doubling to 30 s, as client-go's reflector retries its list (and as the controller's start-up
resync does). Before, the error went up to kopf, which retries a failed start-up activity
only after 60 s, so one injected 500 held every decision for a minute."""


async def retry_startup(call: Callable[[], T], stopping: threading.Event) -> T:
    """`call()` in a worker thread, retrying transient ApiErrors; others fail the start-up.

    Cancelling (kopf's shutdown cancels the start-up activity and the background tasks)
    sets `stopping`, which ends a back-off wait at once; the thread then exits.
    """

    def attempt() -> T:
        return retry_transient(
            call, STARTUP_RETRY, stopping.wait,
            lambda exc, delay: log.warning("start-up failed; retrying", error=str(exc), in_s=delay),
        )

    try:  # (a daemon thread: a request hung at shutdown must not hold the exit)
        return await kopf_support.in_daemon_thread(attempt, "kq-startup")
    except asyncio.CancelledError:
        stopping.set()
        raise


def register_scheduler(
    registry: kopf.OperatorRegistry, scheduler: Scheduler, leadership: Leadership | None = None
) -> None:
    """Add the scheduler's handlers to `registry` (alone, or next to the quota controller's).

    With leader election, the scheduler decides and binds once this process holds the Lease
    (see kube/operator.py). A standby is warm: it lists and watches pods, nodes, namespaces,
    PodGroups and Queues into its cache from start-up (the cache never writes), so taking
    over starts sessions at once instead of listing the cluster first.
    """
    leadership = leadership or Leadership()
    cache = scheduler.cache
    state: dict[str, asyncio.Task[None]] = {}
    stopping = threading.Event()  # shutdown: ends the start-up's retry waits
    warm = threading.Event()  # a standby's cache is filled and watched
    vg, vv = domain_names.VOLCANO_GROUP, domain_names.VOLCANO_VERSION

    # pods (and nodes, which carry heartbeats) are the high-volume kinds: informers, not kopf;
    # the cache's handler only folds the object in under its lock, never blocking on the API,
    # so each watch thread hands its events to it itself (workers=0): a queue put, a worker
    # wake and a GIL hand-off per event were the informers' largest cost after decoding
    informers = [
        Informer(scheduler.api, POD, partial(cache.on_event, CachedKind.POD), workers=0),
        Informer(scheduler.api, NODE, partial(cache.on_event, CachedKind.NODE), workers=0),
        Informer(
            scheduler.api, NAMESPACE, partial(cache.on_event, CachedKind.NAMESPACE), workers=0
        ),
    ]

    @kopf.on.event(vg, vv, domain_names.POD_GROUP_PLURAL, registry=registry)
    async def group_event(event: kopf.RawEvent, **_: Any) -> None:
        cache.on_event(
            CachedKind.POD_GROUP, kopf_support.event_type(event), kopf_support.event_object(event)
        )

    @kopf.on.event(vg, vv, domain_names.VOLCANO_QUEUE_PLURAL, registry=registry)
    async def queue_event(event: kopf.RawEvent, **_: Any) -> None:
        cache.on_event(
            CachedKind.QUEUE, kopf_support.event_type(event), kopf_support.event_object(event)
        )

    @kopf.on.event(
        POD_DISRUPTION_BUDGET.group, POD_DISRUPTION_BUDGET.version,
        POD_DISRUPTION_BUDGET.plural, registry=registry,
    )
    async def pdb_event(event: kopf.RawEvent, **_: Any) -> None:
        cache.on_event(
            CachedKind.PDB, kopf_support.event_type(event), kopf_support.event_object(event)
        )

    @kopf.on.event(
        PRIORITY_CLASS.group, PRIORITY_CLASS.version, PRIORITY_CLASS.plural, registry=registry,
    )
    async def priority_class_event(event: kopf.RawEvent, **_: Any) -> None:
        cache.on_event(
            CachedKind.PRIORITY_CLASS, kopf_support.event_type(event),
            kopf_support.event_object(event),
        )

    @kopf.on.event(
        NUMATOPOLOGY.group, NUMATOPOLOGY.version, NUMATOPOLOGY.plural, registry=registry
    )
    async def numatopology_event(event: kopf.RawEvent, **_: Any) -> None:
        cache.on_event(
            CachedKind.NUMATOPOLOGY, kopf_support.event_type(event),
            kopf_support.event_object(event),
        )

    @kopf.on.event(HYPER_NODE.group, HYPER_NODE.version, HYPER_NODE.plural, registry=registry)
    async def hyper_node_event(event: kopf.RawEvent, **_: Any) -> None:
        cache.on_event(
            CachedKind.HYPER_NODE, kopf_support.event_type(event),
            kopf_support.event_object(event),
        )

    @kopf.on.event(
        RESOURCE_QUOTA.group, RESOURCE_QUOTA.version, RESOURCE_QUOTA.plural, registry=registry,
    )
    async def resource_quota_event(event: kopf.RawEvent, **_: Any) -> None:
        cache.on_event(
            CachedKind.RESOURCE_QUOTA, kopf_support.event_type(event),
            kopf_support.event_object(event),
        )

    async def observe() -> None:
        """Fill the cache and keep it current without deciding (a warm standby)."""
        listings = await retry_startup(scheduler.relist, stopping)
        for informer in informers:  # the watches continue from the cache's first listings
            informer.start(listings.get(informer.kind))
        warm.set()
        log.info("scheduler standby: watching, not deciding")

    async def start() -> None:
        if warm.is_set():
            await retry_startup(scheduler.take_over, stopping)
        else:
            listings = await retry_startup(scheduler.start, stopping)
            for informer in informers:
                informer.start(listings.get(informer.kind))
        state["loop"] = asyncio.create_task(scheduling_loop(scheduler))
        log.info(
            "scheduler ready",
            scheduler_name=scheduler.settings.scheduler_name,
            gates=scheduler.gates_enabled,
        )

    @kopf.on.startup(registry=registry)
    async def start_scheduler(settings: kopf.OperatorSettings, **_: Any) -> None:
        kopf_support.configure(settings)
        if not leadership.leading.is_set() and not warm.is_set():
            # a standby's first listing runs in the start-up itself, like a leader's, so a
            # refusal that retrying cannot fix (403) fails the start-up to kopf, which logs
            # it and retries; in a background task it went unseen but for the probe
            await observe()
        await start_when_leading(leadership, start, state)

    def close() -> None:
        for informer in informers:
            informer.stop()
        scheduler.cache.work.set()  # the loop's wait returns at once
        scheduler.close()
        leadership.stop(release=True)

    async def stop_scheduler() -> None:
        stopping.set()
        await kopf_support.stop_background(state, "lead", lambda: None)
        await kopf_support.stop_background(state, "loop", close)

    kopf_support.on_shutdown(registry, stop_scheduler)  # even if stopped during start-up

    # Not ready is a PermanentError: /healthz answers 500 at once and the next request asks
    # again. A TemporaryError made kopf retry the probe inside that request after 60 s, so
    # every /healthz hung for a minute behind a first one that came before readiness
    # (tests/e2e/test_deploy.py saw it; a kubelet's 1 s probes all timed out).
    @kopf.on.probe(id="scheduler", registry=registry)
    def scheduler_ready(**_: Any) -> bool | str:
        if not leadership.leading.is_set():
            if not all(informer.synced.is_set() for informer in informers):
                raise kopf.PermanentError("standby: pod/node watches not listed yet")
            return "standby"
        if not scheduler.ready.is_set():
            raise kopf.PermanentError("scheduler not started")
        if not all(informer.synced.is_set() for informer in informers):
            raise kopf.PermanentError("pod/node watches not listed yet")
        return True


async def scheduling_loop(scheduler: Scheduler) -> None:
    """Sessions on pending work and at least every `schedule_period`; never dies.

    The loop runs in one worker thread for its whole life (`run_sessions`); cancelling this
    coroutine stops it after the session in progress. Two event-loop hops per session (a
    thread for the wait, one for the session, their futures chained back) were ~5 % of the
    scheduler's GIL time in a 5,000-pod burst.
    """
    stop = threading.Event()
    try:
        await asyncio.to_thread(run_sessions, scheduler, stop)
    finally:
        stop.set()
        scheduler.cache.work.set()  # a wait in progress returns at once


def run_sessions(scheduler: Scheduler, stop: threading.Event) -> None:
    """The session loop's body, until `stop` is set.

    A session starts `schedule_batch_gap` after the cache signals work (so a burst of pods
    shares one session), and otherwise when `schedule_period` has passed since the last one,
    for the periodic actions (reclaim, preempt, backfill). The gap is at least as long as the
    last session took, so under a sustained burst sessions take at most about half the CPU
    and the rest goes to binding and watching (a session's cost still grows with the cluster).
    The signal is cleared before the snapshot is taken, so work arriving during a session
    starts the next one. A relist runs every `resync_period`.
    """
    settings = scheduler.settings
    work = scheduler.cache.work
    last_relist = last_session = time.monotonic()
    took = 0.0
    while not stop.is_set():
        remaining = settings.schedule_period - (time.monotonic() - last_session)
        if remaining > 0 and work.wait(remaining):
            gap = max(settings.schedule_batch_gap, took)
            if stop.wait(min(gap, settings.schedule_period)):
                break
        if stop.is_set():
            break
        work.clear()
        last_session = time.monotonic()
        try:
            scheduler.run_once()
            took = time.monotonic() - last_session
            if time.monotonic() - last_relist >= settings.resync_period:
                last_relist = time.monotonic()
                scheduler.relist()
        except Exception:
            log.exception("scheduling round failed; continuing")
            stop.wait(min(settings.schedule_period, 1.0))  # no hot loop on a bug
