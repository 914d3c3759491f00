"""Run the scheduler (kopf operator) in a background thread: for embedding and for e2e tests."""

from __future__ import annotations

from koordqueue.kube import kopf_support
from koordqueue.kube.process import build_operator
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.settings import SchedulerSettings


class SchedulerRunner:
    """`with SchedulerRunner(settings) as runner:` — started, cache filled, scheduling."""

    def __init__(self, settings: SchedulerSettings) -> None:
        self.settings = settings
        self.scheduler: Scheduler | None = None
        self._thread: kopf_support.OperatorThread | None = None

    def start(self, timeout: float = 60.0) -> SchedulerRunner:
        # in-process (tests, embedding): the host's objects are not the scheduler's to freeze
        operator = build_operator(self.settings, controller=False, scheduler=True)
        assert operator.scheduler is not None
        self.scheduler = scheduler = operator.scheduler
        self._thread = kopf_support.OperatorThread(
            operator.registry, scheduler.ready.is_set, "koordqueue-scheduler"
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
