"""Run the scheduler (kopf operator) in a background thread: for embedding and for e2e tests."""

from __future__ import annotations

from collections.abc import Callable

import kopf

from koordqueue.kube import kopf_support
from koordqueue.kube.api import KubeApi, load_api_client
from koordqueue.kube.leader import SCHEDULER_LEASE, leadership_for
from koordqueue.kube.scheduler.operator import register_scheduler
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.settings import ControllerSettings


def build_scheduler_operator(
    settings: ControllerSettings,
    on_lost: Callable[[], None] | None = None,
    *,
    gc_freeze: bool = True,
) -> tuple[Scheduler, kopf.OperatorRegistry]:
    """A Scheduler and a kopf registry holding its handlers (and the webhook, when enabled).

    `gc_freeze`: the process is the scheduler's (`koordqueue schedule`), so its cache is frozen
    out of the collector's full passes (kube/scheduler/gcfreeze.py); embedders turn it off.
    """
    api_client = load_api_client(settings.kubeconfig, settings.context)
    leadership = leadership_for(
        api_client, settings, SCHEDULER_LEASE, on_lost, runs_scheduler=True
    )
    api = KubeApi(api_client, fence=leadership.may_write)
    scheduler = Scheduler(api, settings, gc_freeze=gc_freeze)
    registry = kopf.OperatorRegistry()
    if settings.webhook_port:  # first: serving before the scheduler reports ready
        from koordqueue.kube.webhooks.routes import webhook_routes
        from koordqueue.kube.webhooks.server import register_webhooks

        register_webhooks(registry, settings, webhook_routes(settings, scheduler=True))
    register_scheduler(registry, scheduler, leadership)
    kopf_support.log_in_with(registry, api)
    return scheduler, registry


class SchedulerRunner:
    """`with SchedulerRunner(settings) as runner:` — started, cache filled, scheduling."""

    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings
        self.scheduler: Scheduler | None = None
        self._thread: kopf_support.OperatorThread | None = None

    def start(self, timeout: float = 60.0) -> SchedulerRunner:
        # in-process (tests, embedding): the host's objects are not the scheduler's to freeze
        scheduler, registry = build_scheduler_operator(self.settings, gc_freeze=False)
        self.scheduler = scheduler
        self._thread = kopf_support.OperatorThread(
            registry, scheduler.ready.is_set, "koordqueue-scheduler"
        )
        self._thread.start(timeout)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread is not None:
            self._thread.stop(timeout)

    def __enter__(self) -> SchedulerRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
