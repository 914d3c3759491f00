"""Operator wiring: watch events onto the controller's owner loop, start-up resync, probes.

kopf runs the process (start-up, clean-up, probes); every watched kind (Jobs, QueueUnits,
workloads, ElasticQuotas, Queues) comes through an informer (informer.py), which stores no
progress annotations or finalizers on users' objects and costs a fraction of kopf's
per-event machinery. No watch handles an event: each is posted onto the owner loop
(controller/loop.py), the one thread that owns the admission engine.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, Final

import kopf
import structlog

from koordqueue.domain import names
from koordqueue.domain.quota_debug import quota_view
from koordqueue.kube import kopf_support
from koordqueue.kube.api import (
    ADMISSION_CHECKS,
    ELASTIC_QUOTA,
    JOB,
    QUEUE,
    QUEUE_UNIT,
    Kind,
    KubeApi,
    Listing,
)
from koordqueue.kube.controller import Controller, OwnerLoop
from koordqueue.kube.controller.base import DELETED, meta, object_key
from koordqueue.kube.controller.integrations import crd_installed, register_integrations
from koordqueue.kube.debug_api import DebugApi, on_owner
from koordqueue.kube.informer import Informer
from koordqueue.kube.leader import Leadership, start_when_leading

log = structlog.get_logger(__name__)

INFORMER_WORKERS: Final = 0
"""The informers' handlers only post each event onto the owner loop: on the watch thread,
no worker (informer.py)."""
RESYNC_KINDS: Final = (QUEUE_UNIT, JOB)
"""Kinds the start-up resync folds as listings (the others arrive as listing events)."""

Handler = Callable[[str | None, dict[str, Any]], None]


class WarmStandby:
    """A standby's watches: the latest object of each key kept, until it takes over.

    With leader election every informer runs from start-up whether or not this process
    leads; a standby's events only update these caches (nothing is planned or written).
    `take_over()` switches every informer to the owner loop at once and hands back the
    caches as listings, so the new leader folds them instead of listing everything again:
    failover costs the lease expiry and a fold, not a re-list of every Job and QueueUnit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._caches: dict[Kind, dict[str, dict[str, Any]]] = {}
        self._targets: dict[Kind, Handler] = {}
        self.leading = False

    def route(self, kind: Kind, target: Handler, keep: bool = True) -> Handler:
        """An informer handler: into the cache while standing by, to `target` once leading.

        `keep=False`: dropped while standing by (a kind the takeover resync lists anyway)."""
        cache = self._caches.setdefault(kind, {}) if keep else None
        if keep:
            self._targets[kind] = target

        def on_event(event_type: str | None, obj: dict[str, Any]) -> None:
            with self._lock:  # the switch in take_over() is atomic for every event
                if self.leading:
                    target(event_type, obj)
                    return
                if cache is None:
                    return
                key = object_key(obj)
                if event_type != DELETED:
                    cache[key] = obj
                elif meta(cache.get(key) or {}).get("uid") == meta(obj).get("uid"):
                    del cache[key]

        return on_event

    def take_over(self) -> dict[Kind, Listing]:
        """From now on events go to the owner; the resync kinds' caches as listings (the
        other kinds' cached objects are handed to the owner now, as a listing's events)."""
        with self._lock:
            self.leading = True
            listings: dict[Kind, Listing] = {}
            for kind, cache in self._caches.items():
                if kind in RESYNC_KINDS:
                    listings[kind] = (list(cache.values()), "")
                else:
                    for obj in cache.values():
                        self._targets[kind](None, obj)
            self._caches.clear()
            return listings


def build_registry(
    controller: Controller,
    api: KubeApi,
    leadership: Leadership | None = None,
    registry: kopf.OperatorRegistry | None = None,
) -> kopf.OperatorRegistry:
    """A kopf registry bound to one Controller (so tests can run several side by side);
    `registry`: add to this one (the process's, kube/process.py), else a new one.

    With leader election, a standby is warm (WarmStandby): its informers run from start-up
    and keep the latest QueueUnits, Jobs and workloads, but it plans and writes nothing and
    drops quota and Queue events (a few objects, listed on takeover). Once this process
    holds the Lease, the controller starts with the start-up resync folding those caches
    instead of listing them again. Writes are fenced; the owner loop pauses rounds while
    the fence is shut (loop.py). (kopf's start-up must not block: its liveness endpoint
    starts only after it.) `api` is the controller's client as a KubeApi: the informers
    watch, which the controller's ObjectApi does not offer.
    """
    if registry is None:
        registry = kopf.OperatorRegistry()
    leadership = leadership or Leadership()
    elected = leadership.elector is not None
    settings = controller.settings
    owner = OwnerLoop(
        controller, controller.writers, leadership.may_write if elected else None
    )
    standby = WarmStandby() if elected else None
    state: dict[str, asyncio.Task[None]] = {}

    def route(kind: Kind, events: Handler, keep: bool = True) -> Handler:
        return events if standby is None else standby.route(kind, events, keep)

    # the high-volume kinds bypass kopf's per-event machinery (see informer.py)
    unit_events = route(QUEUE_UNIT, owner.handler(QUEUE_UNIT.plural, controller.on_unit))
    informers = [Informer(api, QUEUE_UNIT, unit_events, workers=INFORMER_WORKERS)]
    if settings.manage_jobs:
        register_integrations(controller)  # --integrations (a missing CRD: one log line)
        for consumer in controller.consumers.values():
            events = route(
                consumer.watched, owner.handler(consumer.watched.plural, consumer.on_event)
            )
            informers.append(Informer(api, consumer.watched, events, workers=INFORMER_WORKERS))
    # ElasticQuotas and Queues too: few objects, but the controller's own usage annotations
    # come back as a Queue event per quota every usage period during a burst, and kopf's
    # per-event machinery was 19-39 % of the controller's samples (bench/HISTORY.md)
    # (a standby drops their events: the takeover resync lists both, as it did under kopf)
    quota_events = route(
        ELASTIC_QUOTA, owner.handler(names.ELASTIC_QUOTA_PLURAL, controller.on_quota), False
    )
    informers.append(Informer(api, ELASTIC_QUOTA, quota_events, workers=INFORMER_WORKERS))
    queue_events = route(QUEUE, owner.handler(names.QUEUE_PLURAL, controller.on_queue), False)
    informers.append(Informer(api, QUEUE, queue_events, workers=INFORMER_WORKERS))
    # Kueue's AdmissionCheck objects, if its CRD is installed: a reservation names each
    # check's controller. Not through the owner loop (the handler only fills a catalogue),
    # and watched by a standby too, so a takeover has them at once.
    checks = next((k for k in ADMISSION_CHECKS if crd_installed(controller.api, k)), None)
    if checks is not None:
        informers.append(Informer(api, checks, controller.on_admission_check, workers=1))

    debug_api: list[DebugApi] = []

    def serve_debug_api() -> None:
        """--enableApiHandler: once leading, as Koord-Queue starts its handler."""
        if settings.enable_api_handler and not debug_api:
            try:
                server = DebugApi(
                    settings.api_handler_port,
                    lambda: on_owner(owner.post, lambda: quota_view(controller.engine)),
                )
            except OSError as exc:  # a diagnosis aid: its port taken must not stop admission
                log.error("debug api not served", port=settings.api_handler_port, error=str(exc))
                return
            server.start()
            debug_api.append(server)

    async def start_controller() -> None:
        serve_debug_api()
        if standby is not None:  # warm: the watches run already; fold what they hold
            for informer in informers:
                await kopf_support.wait_set(informer.synced)
            await asyncio.wrap_future(owner.start(standby.take_over()))
            log.info("controller ready (took over)", namespace=controller.settings.namespace)
            return
        listings = await asyncio.wrap_future(owner.start())  # the start-up resync
        for informer in informers:  # the watches continue from the resync's listings
            informer.start(listings.get(informer.kind))
        log.info("controller ready", namespace=controller.settings.namespace)

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        kopf_support.configure(settings)
        if standby is not None:
            for informer in informers:  # warm from the start, leader or not
                informer.start()
        await start_when_leading(leadership, start_controller, state)

    def close() -> None:
        for server in debug_api:
            server.stop()
        for informer in informers:
            informer.stop()
        owner.stop()
        controller.close()
        leadership.stop(release=True)  # a standby takes over at once, not after the lease

    async def stop_controller() -> None:
        await kopf_support.stop_background(state, "lead", close)

    kopf_support.on_shutdown(registry, stop_controller)  # even if stopped during start-up

    # Not ready is a PermanentError: /healthz answers 500 at once and the next request asks
    # again. A TemporaryError made kopf retry the probe inside that request after 60 s, so
    # every /healthz hung for a minute behind a first one that came before readiness
    # (tests/e2e/test_deploy.py saw it; a kubelet's 1 s probes all timed out).
    @kopf.on.probe(id="ready", registry=registry)
    def ready(**_: Any) -> bool | str:
        if not leadership.leading.is_set() or (standby is not None and not standby.leading):
            if not all(informer.synced.is_set() for informer in informers):
                raise kopf.PermanentError("standby: watches not listed yet")
            return "standby"  # alive, warm and ready to take over: not a failure
        if not controller.ready.is_set():
            raise kopf.PermanentError("initial resync not finished")
        if not all(informer.synced.is_set() for informer in informers):
            raise kopf.PermanentError("watches not listed yet")
        return True

    return registry
