"""kopf wiring: raw watch events to the Controller, start-up resync, the admission loop, probes.

Only `@kopf.on.event` is used: it is level-triggered and stores no progress annotations or
finalizers on users' objects, which a queueing controller has no business adding. Jobs and
QueueUnits, the kinds that arrive by the thousand, come through informers instead (informer.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
import structlog

from koordqueue.domain import names
from koordqueue.kube import kopf_support
from koordqueue.kube.api import JOB, QUEUE_UNIT, KubeApi
from koordqueue.kube.controller import Controller
from koordqueue.kube.informer import Informer
from koordqueue.kube.leader import Leadership, start_when_leading

log = structlog.get_logger(__name__)


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
    state: dict[str, asyncio.Task[None]] = {}
    # the high-volume kinds bypass kopf's per-event machinery (see informer.py)
    # (a new Job's handler annotates the Job, creates its unit and, on the fast path, admits it
    # and resumes the Job: four blocking writes, hence many workers for Jobs, --job-workers)
    informers = [Informer(api, QUEUE_UNIT, controller.on_unit, workers=8)]
    if settings.manage_jobs:
        workers = settings.job_workers
        informers.append(Informer(api, JOB, controller.on_job, workers=workers))

    @kopf.on.event(
        names.ELASTIC_QUOTA_GROUP,
        names.ELASTIC_QUOTA_VERSION,
        names.ELASTIC_QUOTA_PLURAL,
        registry=registry,
    )
    async def quota_event(event: kopf.RawEvent, **_: Any) -> None:
        if not leadership.leading.is_set():
            return  # a standby: the resync on takeover reads every quota
        await asyncio.to_thread(
            controller.on_quota, kopf_support.event_type(event), kopf_support.event_object(event)
        )

    @kopf.on.event(
        names.KOORD_QUEUE_GROUP, names.KOORD_QUEUE_VERSION, names.QUEUE_PLURAL, registry=registry
    )
    async def queue_event(event: kopf.RawEvent, **_: Any) -> None:
        if not leadership.leading.is_set():
            return
        await asyncio.to_thread(
            controller.on_queue, kopf_support.event_type(event), kopf_support.event_object(event)
        )

    async def start_controller() -> None:
        listings = await asyncio.to_thread(controller.resync)
        for informer in informers:  # the watches continue from the resync's listings
            informer.start(listings.get(informer.kind))
        state["loop"] = asyncio.create_task(admission_loop(controller))
        log.info("controller ready", namespace=controller.settings.namespace)

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        kopf_support.configure(settings)
        await start_when_leading(leadership, start_controller, state)

    def close() -> None:
        for informer in informers:
            informer.stop()
        controller.close()
        leadership.stop(release=True)  # a standby takes over at once, not after the lease

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        await kopf_support.stop_background(state, "lead", lambda: None)
        await kopf_support.stop_background(state, "loop", close)

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


MIN_ROUND_INTERVAL = 0.05
"""Rounds woken by changes are at least this far apart, so a burst is batched into one round."""


async def admission_loop(controller: Controller) -> None:
    """A round every `admission_period`, or sooner when something changed; never dies.

    Waking on change (a new unit, a release, a quota edit) is what keeps admission latency
    well under the period; the period bounds how long a unit waits when nothing changes.
    """
    period = controller.settings.admission_period
    loop = asyncio.get_running_loop()
    last_resync = loop.time()
    while True:
        started = loop.time()
        controller.wake.clear()
        try:
            await asyncio.to_thread(controller.admission_round)
            if loop.time() - last_resync >= controller.settings.resync_period:
                last_resync = loop.time()
                await asyncio.to_thread(controller.resync)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("admission round failed; continuing")
        await asyncio.sleep(MIN_ROUND_INTERVAL)
        remaining = period - (loop.time() - started)
        if remaining > 0:
            await asyncio.to_thread(controller.wake.wait, remaining)
