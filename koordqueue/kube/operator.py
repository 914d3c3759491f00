"""kopf wiring: watch events onto the controller's owner loop, start-up resync, probes.

Only `@kopf.on.event` is used: it is level-triggered and stores no progress annotations or
finalizers on users' objects, which a queueing controller has no business adding. Jobs and
QueueUnits, the kinds that arrive by the thousand, come through informers instead (informer.py).
Neither handles an event: each is posted onto the owner loop (controller/loop.py), the one
thread that owns the admission engine.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import kopf
import structlog

from koordqueue.domain import names
from koordqueue.kube import kopf_support
from koordqueue.kube.api import QUEUE_UNIT, KubeApi
from koordqueue.kube.controller import Controller, OwnerLoop
from koordqueue.kube.controller.integrations import register_integrations
from koordqueue.kube.informer import Informer
from koordqueue.kube.leader import Leadership, start_when_leading

log = structlog.get_logger(__name__)

INFORMER_WORKERS: Final = 1
"""An informer's worker only posts each event onto the owner loop: one is enough."""


def build_registry(
    controller: Controller, api: KubeApi, leadership: Leadership | None = None
) -> kopf.OperatorRegistry:
    """A kopf registry bound to one Controller (so tests can run several side by side).

    With leader election, the controller starts once this process holds the Lease: a
    standby serves its probes, ignores quota and queue events, starts no informer and writes
    nothing; it takes over with the same start-up resync a restart does. (kopf's start-up
    must not block: its liveness endpoint starts only after it.) `api` is the controller's
    client as a KubeApi: the informers watch, which the controller's ObjectApi does not offer.
    """
    registry = kopf.OperatorRegistry()
    leadership = leadership or Leadership()
    settings = controller.settings
    owner = OwnerLoop(controller, controller.writers)
    state: dict[str, asyncio.Task[None]] = {}
    # the high-volume kinds bypass kopf's per-event machinery (see informer.py)
    unit_events = owner.handler(QUEUE_UNIT.plural, controller.on_unit)
    informers = [Informer(api, QUEUE_UNIT, unit_events, workers=INFORMER_WORKERS)]
    if settings.manage_jobs:
        register_integrations(controller)  # --integrations (a missing CRD: one log line)
        for consumer in controller.consumers.values():
            events = owner.handler(consumer.watched.plural, consumer.on_event)
            informers.append(Informer(api, consumer.watched, events, workers=INFORMER_WORKERS))
    quota_events = owner.handler(names.ELASTIC_QUOTA_PLURAL, controller.on_quota)
    queue_events = owner.handler(names.QUEUE_PLURAL, controller.on_queue)

    @kopf.on.event(
        names.ELASTIC_QUOTA_GROUP,
        names.ELASTIC_QUOTA_VERSION,
        names.ELASTIC_QUOTA_PLURAL,
        registry=registry,
    )
    async def quota_event(event: kopf.RawEvent, **_: Any) -> None:
        if not leadership.leading.is_set():
            return  # a standby: the resync on takeover reads every quota
        quota_events(kopf_support.event_type(event), kopf_support.event_object(event))

    @kopf.on.event(
        names.KOORD_QUEUE_GROUP, names.KOORD_QUEUE_VERSION, names.QUEUE_PLURAL, registry=registry
    )
    async def queue_event(event: kopf.RawEvent, **_: Any) -> None:
        if not leadership.leading.is_set():
            return
        queue_events(kopf_support.event_type(event), kopf_support.event_object(event))

    async def start_controller() -> None:
        listings = await asyncio.wrap_future(owner.start())  # the start-up resync
        for informer in informers:  # the watches continue from the resync's listings
            informer.start(listings.get(informer.kind))
        log.info("controller ready", namespace=controller.settings.namespace)

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        kopf_support.configure(settings)
        await start_when_leading(leadership, start_controller, state)

    def close() -> None:
        for informer in informers:
            informer.stop()
        owner.stop()
        controller.close()
        leadership.stop(release=True)  # a standby takes over at once, not after the lease

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        await kopf_support.stop_background(state, "lead", close)

    @kopf.on.probe(id="ready", registry=registry)
    def ready(**_: Any) -> bool | str:
        if not leadership.leading.is_set():
            return "standby"  # alive and ready to take over: not a failure
        if not controller.ready.is_set():
            raise kopf.TemporaryError("initial resync not finished")
        if not all(informer.synced.is_set() for informer in informers):
            raise kopf.TemporaryError("Job/QueueUnit watches not listed yet")
        return True

    return registry
