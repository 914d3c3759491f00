"""Run the scheduler (kopf operator) in a background thread: for embedding and for e2e tests."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import kopf

from koordqueue.kube.api import KubeApi, load_api_client
from koordqueue.kube.scheduler.operator import connection_info, register_scheduler
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.settings import ControllerSettings


def build_scheduler_operator(
    settings: ControllerSettings,
) -> tuple[Scheduler, kopf.OperatorRegistry]:
    """A Scheduler and a kopf registry holding its handlers (and the webhook, when enabled)."""
    api = KubeApi(load_api_client(settings.kubeconfig, settings.context))
    scheduler = Scheduler(api, settings)
    registry = kopf.OperatorRegistry()
    if settings.webhook_port:  # first: serving before the scheduler reports ready
        from koordqueue.kube.gates.webhook import register_webhook

        register_webhook(registry, settings)
    register_scheduler(registry, scheduler)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(api)

    return scheduler, registry


class SchedulerRunner:
    """`with SchedulerRunner(settings) as runner:` — started, cache filled, scheduling."""

    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings
        self.scheduler: Scheduler | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, timeout: float = 60.0) -> SchedulerRunner:
        scheduler, registry = build_scheduler_operator(self.settings)
        self.scheduler = scheduler

        def run() -> None:
            try:
                asyncio.run(kopf.operator(
                    registry=registry, clusterwide=True, standalone=True, stop_flag=self._stop,
                ))
            except BaseException as exc:  # surfaced by start()
                self._error = exc

        self._thread = threading.Thread(target=run, name="koordqueue-scheduler", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not scheduler.ready.is_set():
            if self._error is not None:
                raise RuntimeError(f"scheduler failed to start: {self._error!r}") from self._error
            if time.monotonic() > deadline:
                raise TimeoutError("scheduler did not start")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> SchedulerRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
